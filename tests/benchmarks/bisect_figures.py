"""Bisection search figures on simulated machines (the pure search; the integration tests run it for real).

Usage: .venv/bin/python -m tests.benchmarks.bisect_figures [--seeds 30] [--jobs]
Prints, per scenario: exact / ambiguous / wrong / not-reproducible counts, and median and max probes (distinct
commits measured by the bisection, ends included) and rounds (runs of 5 samples). --jobs: the culprit's
confirmation rounds run as jobs with the parent and the culprit as sides (the farm's way where its recipe measures
jobs), a job counted as one round of each side; without it, as separate builds (`perffarm bisect --local`).
"""

from __future__ import annotations

import argparse
import statistics
import time

from master.bisection.core import Ambiguous, Culprit, NotReproducible
from tests.unit.test_bisection_core import simulate


def _scenario(name, runs, pair_jobs=False):
    t0 = time.perf_counter()
    outcomes = {"exact": 0, "ambiguous": 0, "wrong": 0, "not-reproducible": 0}
    probes, rounds = [], []
    for kwargs, truth in runs:
        d, p, r = simulate(**kwargs, pair_jobs=pair_jobs)
        if isinstance(d, Culprit):
            outcomes["exact" if d.commit == truth else "wrong"] += 1
        elif isinstance(d, Ambiguous):
            outcomes["ambiguous"] += 1
        elif isinstance(d, NotReproducible):
            outcomes["not-reproducible"] += 1
        probes.append(p)
        rounds.append(r)
    print(
        f"{name:<51} n={len(runs):>3}  "
        + "  ".join(f"{k}={v}" for k, v in outcomes.items())
        + f"  probes median {statistics.median(probes):.0f} max {max(probes)}"
        + f"  rounds median {statistics.median(rounds):.0f} max {max(rounds)}"
        + f"  ({(time.perf_counter() - t0) / len(runs):.2f} s/bisection)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--jobs", action="store_true", help="confirm the culprit with jobs of two sides")
    args = ap.parse_args()
    n = args.seeds

    def scenario(name, runs):
        _scenario(name + (" (jobs)" if args.jobs else ""), runs, args.jobs)

    scenario("64 commits, deterministic, every culprit", [({"culprit": c}, f"c{c:03d}") for c in range(1, 65)])
    scenario("64 commits, CV 1%, 3% step", [({"cv": 0.01, "step": 0.03, "seed": s}, "c037") for s in range(n)])
    scenario("64 commits, CV 5%, 5% step", [({"cv": 0.05, "step": 0.05, "seed": s}, "c037") for s in range(n)])
    scenario("64 commits, CV 5%, 10% step", [({"cv": 0.05, "step": 0.10, "seed": s}, "c037") for s in range(n)])
    scenario("64 commits, CV 2%, no change", [({"cv": 0.02, "step": 0.0, "seed": s}, None) for s in range(n)])
    scenario("64 commits, deterministic, 3 broken", [({"culprit": 37, "broken": (20, 30, 50)}, "c037")])


if __name__ == "__main__":
    main()
