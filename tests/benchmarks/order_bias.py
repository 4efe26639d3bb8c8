"""The order bias of paired throughput, measured A vs A, with and without the fix (issue #28).

    .venv/bin/python -m tests.benchmarks.order_bias collect --repo R --runs K --json runs.json \\
        [--workloads pgbench-ro-prepared-c1,pgbench-ro-prepared-c2] [--samples 6] \\
        [--variants ab_rewarm=0,ab_rewarm=1]
    .venv/bin/python -m tests.benchmarks.order_bias report runs.json

R is the repository scripts/pg-source-repo.sh makes: its head and the release tag two commits back differ by
comments only, so the true ratio is 1 and any departure is the method's. **collect** builds both once, then runs
the farm's paired bench phase (`python -m recipes bench ... --option reference=TAG`, what a worker runs) K times
per variant, the variants interleaved in one session (a variant is a set of profile options joined by `+`, e.g.
`ab_rewarm=1` (every side warmed up again after each round's restart) or `ab_warmup=1` (one discarded slice per
side before every sample); `ab_rewarm=0` is the design before the fix). Every run keeps, per workload and round, both
sides' tps, which side took the round's first slice and every slice's tps (the round's log line), and the load
average. It appends to `--json`, so an interrupted collection keeps its runs.

**report** prints, per variant and workload, the issue's table (per-round rQPS by which side took the round's
first slice; the per-commit rQPS stored before the fix, the median of the first 5 per-round ratios, as mean and
CV across runs; the order-balanced estimate of the fix, `recipes.stats.balanced_ratio`, over 4 and 6 rounds,
as mean, CV and the median 95 % CI half-width of one run), and each slice position's tps relative to its side's
median slice in the round (first side vs later side), which shows where the order effect sits.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from recipes import stats  # noqa: E402
from recipes.api import checkout_layout  # noqa: E402
from recipes.record import run_record  # noqa: E402

DEFAULT_WORK = Path(os.environ.get("PF_TEST_PG_WORK") or Path.home() / ".cache" / "perffarm" / "test-pg")
ROUND_RE = re.compile(
    r"\[(?P<side>reference|run)\] round (?P<r>\d+)/\d+ (?P<w>\S+): .*?; (?P<pos>first|later); slices (?P<slices>.*)$"
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def phase(name: str, src: Path, work: Path, state: Path, sha: str, options: list[str], result: Path) -> str:
    """One runner phase as a worker runs it; its log (stdout). Raises with the log's tail on failure."""
    argv = [sys.executable, "-m", "recipes", name, "--recipe", "pg-quick", "--src", str(src)]
    argv += ["--work", str(checkout_layout(work)[1]), "--state", str(state), "--sha", sha, "--ref", "compare"]
    argv += ["--result", str(result), *[f"--option={o}" for o in options]]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout


def parse_run(log: str, result: Path, workloads: list[str]) -> dict[str, list[dict]]:
    """Per workload, per round: both sides' tps, the side that went first, and each side's slices."""
    doc = run_record(json.loads(result.read_text()))  # as the master stores it
    tps = {w["name"]: {m["name"]: m["samples"] for m in w["metrics"]} for w in doc["workloads"]}
    slices: dict[tuple[str, int, str], list[float]] = {}
    first: dict[tuple[str, int], str] = {}
    for line in log.splitlines():
        m = ROUND_RE.search(line)
        if not m:
            continue
        key = (m["w"], int(m["r"]) - 1)
        slices[(*key, m["side"])] = [float(x) for x in m["slices"].split()]
        if m["pos"] == "first":
            first[key] = m["side"]
    out: dict[str, list[dict]] = {}
    for w in workloads:
        run, ref = tps[w]["tps"], tps[w]["tps.reference"]
        out[w] = [
            {
                "reference": ref[r],
                "run": run[r],
                "first": first[(w, r)],
                "reference_slices": slices[(w, r, "reference")],
                "run_slices": slices[(w, r, "run")],
            }
            for r in range(min(len(run), len(ref)))
        ]
    return out


def collect(args: argparse.Namespace) -> int:
    from master import compare

    repo, work = args.repo, args.work
    sha, reference = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", f"{args.reference}^{{commit}}")
    src = compare._clone(str(repo), work)
    compare._checkout(src, sha, None)
    tmp = work / "order-bias"
    (tmp / "state").mkdir(parents=True, exist_ok=True)
    workloads = args.workloads.split(",")
    variants = args.variants.split(",")
    doc = json.loads(args.json.read_text()) if args.json.exists() else {}
    doc = doc or {"commit": sha, "reference": reference, "samples": args.samples, "workloads": workloads, "runs": []}
    if (doc["commit"], doc["workloads"], doc["samples"]) != (sha, workloads, args.samples):
        raise SystemExit(f"{args.json} holds runs of another commit, workloads or rounds: use another --json")
    ref_opt = f"reference={reference}"
    print(f"commit {sha[:12]}, reference {reference[:12]}: building both (cached after the first time)", flush=True)
    phase("build", src, work, tmp / "state", sha, [ref_opt], tmp / "build.json")
    common = [f"workloads={args.workloads}", f"samples={args.samples}", ref_opt]
    for k in range(args.runs):
        done = len(doc["runs"])
        order = variants[done % len(variants) :] + variants[: done % len(variants)]
        for v in order:
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            log = phase("bench", src, work, tmp / "state", sha, [*common, *v.split("+")], tmp / "bench.json")
            doc["runs"].append(
                {
                    "variant": v,
                    "load": [load, os.getloadavg()[0]],
                    "seconds": time.monotonic() - t0,
                    "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "workloads": parse_run(log, tmp / "bench.json", workloads),
                }
            )
            args.json.write_text(json.dumps(doc, indent=1))
        print(f"  {k + 1}/{args.runs}: {len(doc['runs'])} runs (load {os.getloadavg()[0]:.2f})", flush=True)
    return 0


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else math.nan


def slice_profile(rounds: list[dict], side_first: bool) -> list[float]:
    """Mean over rounds of each recorded slice's tps / that side's median slice tps in its round."""
    rows = []
    for rd in rounds:
        for side in ("reference", "run"):
            if (rd["first"] == side) != side_first:
                continue
            xs = rd[f"{side}_slices"]
            med = statistics.median(xs)
            rows.append([x / med for x in xs])
    width = min((len(r) for r in rows), default=0)
    return [statistics.mean(r[i] for r in rows) for i in range(width)]


def report(args: argparse.Namespace) -> int:
    doc = json.loads(args.file.read_text())
    loads = [x for r in doc["runs"] for x in r["load"]]
    print(
        f"commit {doc['commit'][:12]} vs reference {doc['reference'][:12]} (A vs A: comments only), "
        f"{doc['samples']} rounds per run, load average {min(loads):.1f}-{max(loads):.1f} "
        f"(median {statistics.median(loads):.1f}), {doc['runs'][0]['at']} .. {doc['runs'][-1]['at']}"
    )
    out: dict = {}
    for v in sorted({str(r["variant"]) for r in doc["runs"]}):
        runs = [r for r in doc["runs"] if str(r["variant"]) == v]
        for w in doc["workloads"]:
            per = [r["workloads"][w] for r in runs]
            ratios = [[rd["run"] / rd["reference"] for rd in rounds] for rounds in per]
            ref_first = [
                x
                for rounds in per
                for rd in rounds
                if rd["first"] == "reference"
                for x in [rd["run"] / rd["reference"]]
            ]
            run_first = [
                x for rounds in per for rd in rounds if rd["first"] == "run" for x in [rd["run"] / rd["reference"]]
            ]
            old = [statistics.median(rs[:5]) for rs in ratios]
            row = {
                "runs": len(runs),
                "seconds_median": statistics.median(r["seconds"] for r in runs),
                "per_round_reference_first": statistics.mean(ref_first),
                "per_round_run_first": statistics.mean(run_first),
                "stored_before_mean": statistics.mean(old),
                "stored_before_cv": cv(old),
            }
            for n in (4, 6):
                if min(len(rs) for rs in ratios) < n:
                    continue
                ests = [stats.balanced_ratio([1.0] * n, rs[:n]) for rs in ratios]
                blocks = [statistics.median(stats.block_ratios([1.0] * n, rs[:n])) for rs in ratios]
                row[f"balanced_{n}_mean"] = statistics.mean(e.ratio for e in ests)
                row[f"balanced_{n}_cv"] = cv([e.ratio for e in ests])
                row[f"balanced_{n}_ci_half_width_median"] = statistics.median(e.half_width for e in ests)
                row[f"block_median_{n}_cv"] = cv(blocks)
            row["slices_first_side"] = slice_profile([rd for rounds in per for rd in rounds], True)
            row["slices_later_side"] = slice_profile([rd for rounds in per for rd in rounds], False)
            out.setdefault(str(v), {})[w] = row
            print(f"\n{v}  {w}  ({len(runs)} runs, median {row['seconds_median']:.0f} s a bench phase)")
            print(
                f"RESULT   per-round rQPS, reference took the first slice: mean {row['per_round_reference_first']:.4f}"
            )
            print(f"RESULT   per-round rQPS, commit took the first slice:    mean {row['per_round_run_first']:.4f}")
            print(
                f"RESULT   stored per-commit rQPS before the fix (median of 5 rounds): mean "
                f"{row['stored_before_mean']:.4f}, CV {row['stored_before_cv']:.2%}"
            )
            for n in (4, 6):
                if f"balanced_{n}_mean" in row:
                    print(
                        f"RESULT   balanced estimate over {n} rounds: mean {row[f'balanced_{n}_mean']:.4f}, CV "
                        f"{row[f'balanced_{n}_cv']:.2%}, median 95% CI "
                        f"+-{row[f'balanced_{n}_ci_half_width_median']:.2%}"
                        f"; median of its blocks: CV {row[f'block_median_{n}_cv']:.2%}"
                    )
            print(
                "  slice tps / side's median slice, first side: "
                + " ".join(f"{x:.3f}" for x in row["slices_first_side"])
            )
            print(
                "  slice tps / side's median slice, later side: "
                + " ".join(f"{x:.3f}" for x in row["slices_later_side"])
            )
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="K paired bench phases per variant, interleaved")
    c.add_argument("--repo", type=Path, required=True)
    c.add_argument("--work", type=Path, default=DEFAULT_WORK)
    c.add_argument("--reference", default="HEAD~2")
    c.add_argument("--workloads", default="pgbench-ro-prepared-c1,pgbench-ro-prepared-c2")
    c.add_argument("--samples", type=int, default=6, help="rounds per run (default 6)")
    c.add_argument(
        "--variants", default="ab_rewarm=0,ab_rewarm=1", help="option sets to interleave, KEY=VALUE joined by +"
    )
    c.add_argument("--runs", type=int, default=8, help="runs per variant to add (default 8)")
    c.add_argument("--json", type=Path, required=True)
    r = sub.add_parser("report", help="the table from collected runs")
    r.add_argument("file", type=Path)
    r.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = ap.parse_args()
    return collect(args) if args.cmd == "collect" else report(args)


if __name__ == "__main__":
    raise SystemExit(main())
