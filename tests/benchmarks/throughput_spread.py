"""Run-to-run spread of one commit's throughput, unpaired vs paired against a reference (issue #14).

    .venv/bin/python -m tests.benchmarks.throughput_spread --repo R [--runs 10] [--workloads W,W] [--samples 5]
    .venv/bin/python -m tests.benchmarks.throughput_spread --repo R --cost        # whole quick profile, once each

R is a PostgreSQL repository with at least three commits, e.g. the one scripts/pg-source-repo.sh makes (the
tests' `~/.cache/perffarm/test-pg` work directory then holds warm builds). The commit is R's head and the
reference `--reference` (default HEAD~2, the release tag there).

Each of the K rounds runs the farm's bench phase (`python -m recipes bench`, what a worker runs after the build)
twice, in alternating order: once unpaired (the commit alone, as the farm measures today) and once paired
(`reference=SHA`: the commit interleaved with the reference). Per workload it prints the CV across the K runs of
the per-run estimate: the median tps unpaired, the median per-round rQPS paired; and the median of the per-run
95% CI half-widths of the rQPS. Both kinds of run see the same machine, minutes apart, alternating, so the
comparison is side by side. `--cost` times one whole quick-profile bench phase each way (the 6-minute target).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from master import compare  # noqa: E402
from recipes.api import checkout_layout  # noqa: E402
from recipes.record import run_record  # noqa: E402
from recipes.stats import bootstrap_median_ratio  # noqa: E402

DEFAULT_WORK = Path(os.environ.get("PF_TEST_PG_WORK") or Path.home() / ".cache" / "perffarm" / "test-pg")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def phase(name: str, src: Path, work: Path, state: Path, sha: str, options: list[str], result: Path) -> float:
    """One runner phase, as a worker runs it; returns its wall seconds (raises with the log tail on failure)."""
    argv = [
        sys.executable,
        "-m",
        "recipes",
        name,
        "--recipe",
        "pg-quick",
        "--src",
        str(src),
        "--work",
        str(checkout_layout(work)[1]),
        "--state",
        str(state),
        "--sha",
        sha,
        "--ref",
        "compare",
        "--result",
        str(result),
        *[f"--option={o}" for o in options],
    ]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return time.monotonic() - t0


def metrics(result: Path) -> dict[str, dict[str, list[float]]]:
    doc = run_record(json.loads(result.read_text()))  # as the master stores it: ratios computed from the sides
    return {w["name"]: {m["name"]: m["samples"] for m in w["metrics"]} for w in doc["workloads"]}


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, required=True, help="PostgreSQL repository (>= 3 commits)")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"builds and caches (default {DEFAULT_WORK})")
    ap.add_argument("--reference", default="HEAD~2", help="the reference revision (default HEAD~2)")
    ap.add_argument("--runs", type=int, default=10, help="K: runs of each kind (default 10)")
    ap.add_argument("--workloads", default="pgbench-ro-prepared-c1", help="comma-separated quick workloads")
    ap.add_argument("--samples", type=int, default=5, help="rounds per run (quick's default: 5)")
    ap.add_argument("--cost", action="store_true", help="time one whole quick bench phase unpaired and paired")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    sha, reference = git(args.repo, "rev-parse", "HEAD"), git(args.repo, "rev-parse", f"{args.reference}^{{commit}}")
    src = compare._clone(str(args.repo), args.work)
    compare._checkout(src, sha, None)
    tmp = args.work / "spread"
    (tmp / "state").mkdir(parents=True, exist_ok=True)
    ref_opt = f"reference={reference}"
    print(f"commit {sha[:12]}, reference {reference[:12]}; building both (cached after the first time)", flush=True)
    build_s = phase("build", src, args.work, tmp / "state", sha, [ref_opt], tmp / "build.json")
    print(f"build phase {build_s:.0f} s", flush=True)
    load = os.getloadavg()
    if args.cost:
        figures = {}
        for kind, opts in (("unpaired", []), ("paired", [ref_opt])):
            s = phase("bench", src, args.work, tmp / "state", sha, opts, tmp / f"cost-{kind}.json")
            figures[kind] = s
            print(f"RESULT quick bench phase, {kind}: {s:.0f} s ({s / 60:.1f} min)", flush=True)
        print(f"load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}")
        if args.json:
            args.json.write_text(json.dumps({"cost_seconds": figures}, indent=1))
        return 0

    common = [f"workloads={args.workloads}", f"samples={args.samples}"]
    runs: dict[str, list[dict[str, dict[str, list[float]]]]] = {"unpaired": [], "paired": []}
    seconds: dict[str, list[float]] = {"unpaired": [], "paired": []}
    for k in range(args.runs):
        order = [("unpaired", common), ("paired", [*common, ref_opt])]
        for kind, opts in order if k % 2 == 0 else reversed(order):
            out = tmp / f"{kind}-{k}.json"
            seconds[kind].append(phase("bench", src, args.work, tmp / "state", sha, opts, out))
            runs[kind].append(metrics(out))
        print(
            f"  run {k + 1}/{args.runs}: unpaired {seconds['unpaired'][-1]:.0f} s, paired "
            f"{seconds['paired'][-1]:.0f} s (load {os.getloadavg()[0]:.2f})",
            flush=True,
        )

    print(
        f"\nK = {args.runs} runs of each kind, {args.samples} rounds per run, load average before "
        f"{load[0]:.2f}, after {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'workload':26s} {'unpaired tps':>14s} {'CV':>7s} {'paired tps':>12s} {'CV':>7s} {'rQPS':>8s} "
        f"{'CV':>7s} {'CI +- (median)':>15s}"
    )
    table = {}
    for w in args.workloads.split(","):
        alone = [statistics.median(r[w]["tps"]) for r in runs["unpaired"]]
        own = [statistics.median(r[w]["tps"]) for r in runs["paired"]]
        rqps = [statistics.median(r[w]["tps.rqps"]) for r in runs["paired"]]
        widths = [bootstrap_median_ratio(r[w]["tps.reference"], r[w]["tps"]).half_width for r in runs["paired"]]
        row = {
            "unpaired_tps": alone,
            "paired_tps": own,
            "rqps": rqps,
            "ci_half_widths": widths,
            "cv_unpaired": cv(alone),
            "cv_paired_tps": cv(own),
            "cv_rqps": cv(rqps),
        }
        table[w] = row
        print(
            f"RESULT {w:19s} {statistics.mean(alone):14,.0f} {row['cv_unpaired']:7.2%} "
            f"{statistics.mean(own):12,.0f} {row['cv_paired_tps']:7.2%} {statistics.mean(rqps):8.4f} "
            f"{row['cv_rqps']:7.2%} {statistics.median(widths):15.2%}"
        )
    print(
        f"bench seconds per run, median: unpaired {statistics.median(seconds['unpaired']):.0f}, "
        f"paired {statistics.median(seconds['paired']):.0f}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "commit": sha,
                    "reference": reference,
                    "runs": args.runs,
                    "samples": args.samples,
                    "workloads": table,
                    "seconds": seconds,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
