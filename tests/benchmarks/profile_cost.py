"""What keeping a callgrind profile costs per side (issue #16: at most 30 s per side on the quick profile).

    .venv/bin/python -m tests.benchmarks.profile_cost [--repeat 5] FILE.out [FILE.out ...]
    .venv/bin/python -m tests.benchmarks.profile_cost --work ~/.cache/perffarm/compare

The instruction workloads already run callgrind to count instructions, and the profile is the output file of that
same run (recipes/pg/instructions.py `keep_profile`): no extra valgrind run. What a kept profile adds is work on
files that exist anyway:

* on the worker: parse the callgrind file and turn it into the result's bounded JSON (recipes/runner.py
  `callgrind_profiles`), plus the bytes it adds to the uploaded result;
* on the master: the per-function diff against the other side and the differential flame graph (master/profiles).

This script times those steps on real callgrind files, by default the ones `perffarm compare` kept under
WORK/state/callgrind (A--<workload>.out, B--<workload>.out, ...). Each figure is the median of `--repeat` runs in
this process; the file list and sizes are printed with them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from master.profiles.diff import diff  # noqa: E402
from master.profiles.flame import differential_svg  # noqa: E402
from recipes.callgrind import Profile, parse  # noqa: E402

QUERIES = 1000  # both sides' query count: the diff divides by it, its time does not depend on it


def timed(fn, repeat: int) -> tuple[float, object]:  # noqa: ANN001 - any callable
    times, value = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*", type=Path, help="callgrind output files")
    p.add_argument(
        "--work",
        type=Path,
        action="append",
        default=[],
        help="a perffarm compare --work directory: take WORK/state/callgrind/*.out (repeatable)",
    )
    p.add_argument("--repeat", type=int, default=5, help="runs per figure; the median is printed (default 5)")
    args = p.parse_args(argv)
    files = list(args.files)
    for work in args.work:
        files += sorted((work / "state" / "callgrind").glob("*.out"))
    if not files:
        p.error("no callgrind files: give FILE.out arguments or --work DIR (where perffarm compare kept them)")
    parsed: dict[Path, Profile] = {}
    print(f"{'file':<48} {'bytes':>12} {'functions':>10} {'parse s':>8} {'to JSON s':>9} {'JSON bytes':>11}")
    worst = 0.0
    for f in files:
        t_parse, prof = timed(lambda f=f: parse(f), args.repeat)
        assert isinstance(prof, Profile)
        t_json, doc = timed(lambda prof=prof: json.dumps(prof.to_json()), args.repeat)
        parsed[f] = prof
        worst = max(worst, t_parse + t_json)
        name = str(f)
        print(
            f"{name[-48:]:<48} {f.stat().st_size:>12,} {len(prof.functions):>10,} {t_parse:>8.2f} {t_json:>9.2f} "
            f"{len(str(doc)):>11,}"
        )
    print(f"worker side, the slowest file: {worst:.2f} s (parse + JSON), the target is <= 30 s per side")
    # the master's half: each workload's B (C, ...) against A, as perffarm compare and the site do it
    by_workload: dict[str, dict[str, Profile]] = {}
    for f, prof in parsed.items():
        label, sep, workload = f.stem.partition("--")
        if sep:
            by_workload.setdefault(workload, {})[label] = prof
    for workload, sides in sorted(by_workload.items()):
        if "A" not in sides:
            continue
        for label, prof in sorted(sides.items()):
            if label == "A":
                continue
            t_diff, _ = timed(lambda a=sides["A"], b=prof: diff(a, b, QUERIES, QUERIES), args.repeat)
            t_svg, svg = timed(
                lambda a=sides["A"], b=prof, w=workload: differential_svg(a, b, QUERIES, QUERIES, w), args.repeat
            )
            print(
                f"master side, {workload} {label} vs A: diff {t_diff:.2f} s, flame graph {t_svg:.2f} s "
                f"({len(str(svg)):,} bytes of SVG)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
