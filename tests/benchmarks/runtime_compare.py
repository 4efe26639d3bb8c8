"""Before/after runtimes of our detector in one run, the evaluation's way (adapters.ours, wall time).

    git archive <old-commit> master tests/benchmarks | tar -x -C /tmp/before
    .venv-eval/bin/python tests/benchmarks/runtime_compare.py /tmp/before . --rounds 7

Each round times both code trees in fresh processes (order alternating): the 10,000-commit series of
the dev and held-out seeds with 1 and 5 samples per commit (median of 3 runs, as evaluate.py), and the
median and maximum over the 400 dev 300-commit series. Prints medians over rounds and the 1-minute
load average seen, since the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time
root = sys.argv[1]
sys.path[:0] = [root + "/tests/benchmarks", root]
import numpy as np
import adapters
from generator import build_suite, make_series
out = {}
for label, seed in (("dev", 20261122), ("heldout", 4242)):
    rng = np.random.default_rng(seed + 1)
    long1 = make_series(rng, "long-1", n=10_000, k=1, n_changes=(20, 30))
    long5 = make_series(rng, "long-5", n=10_000, k=5, n_changes=(20, 30))
    for name, series in (("10k x1", long1), ("10k x5", long5)):
        times = []
        for _ in range(3):
            t = time.perf_counter()
            adapters.ours(series.samples)
            times.append(time.perf_counter() - t)
        out[f"{label} {name}"] = statistics.median(times) * 1000
times = []
for group in ("hard-1", "easy-1", "mixed-1", "mixed-5", "null"):
    for series in build_suite(20261122).groups[group]:
        t = time.perf_counter()
        adapters.ours(series.samples)
        times.append(time.perf_counter() - t)
out["dev 300 median"] = statistics.median(times) * 1000
out["dev 300 max"] = max(times) * 1000
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="code tree before (holds master/ and tests/benchmarks/)")
    parser.add_argument("after", help="code tree after")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {args.before: [], args.after: []}
    loads = []
    for r in range(args.rounds):
        for root in (args.before, args.after) if r % 2 == 0 else (args.after, args.before):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, os.path.abspath(root)], capture_output=True, text=True, check=True
            )
            results[root].append(json.loads(done.stdout))
            loads.append(os.getloadavg()[0])
    print(f"{args.rounds} rounds; load average (1 min) {min(loads):.2f}-{max(loads):.2f}")
    print(f"{'series':16s} {'before ms':>10s} {'after ms':>10s}")
    for key in results[args.before][0]:
        before = statistics.median(x[key] for x in results[args.before])
        after = statistics.median(x[key] for x in results[args.after])
        print(f"{key:16s} {before:10.1f} {after:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
