"""Minimum detectable throughput step and false alerts, unpaired vs paired before and after issue #28, with the
farm's own detector.

    .venv/bin/python -m tests.benchmarks.min_step collect --repo R --runs 16 --json runs.json   # real runs
    .venv/bin/python -m tests.benchmarks.min_step analyse runs.json [--histories 300] [--seed 1]

**collect** measures the same commit as K separate farm bench phases of each kind, interleaved in one session:
unpaired (the commit alone, as the farm measures without a reference) and paired (`reference=SHA`, interleaved
with the reference build; `--before-options` and `--after-options` give the paired design of each method: when
they are the same, one paired run serves both). It keeps every metric of every run of the workload. R is a
repository made by scripts/pg-source-repo.sh (its head and the release tag two commits back differ by comments
only, so A = B and the true ratio is 1).

Each paired run is read two ways, the series each method stores and searches:

* **before** the fix: one rQPS per round (`tps / tps.reference` of the first 5 rounds, the farm's 5 rounds; a
  commit's value is their median) and the run's absolute latency, CPU and context switches per transaction, which
  the farm searched too (unpaired rank gate);
* **after** it: `tps.rqps`, one ratio per order-balanced block (recipes/paired.py), and the `.ratio` of every
  other wall-clock metric (rank gate: the paired gate is for rQPS only); the absolute values are not searched.

**analyse** prints each method's per-run estimate (mean: the bias against the known 1; CV across runs) and builds
histories of `--length` (default 40) measured commits. Each commit is one real run, drawn at random from the K
measured runs of its kind (so a commit's samples and its run-to-run spread are real; what is not real is the
order: runs are drawn independently, so slow drift over hours is not in the histories). A step of s (1, 2, 3, 5%)
is injected at a random commit between `--first` (default 20: the online gate judges new commits against a
baseline of at least 20, as on a farm whose series has a history) and length - 5, by multiplying the throughput
samples of that commit and every later one by (1 - s): the code got s slower, and for paired runs only the
commit side moved, so the ratio moves by the same factor. Histories without a step (A vs A) count false alerts.

Each history is fed to the farm's detector commit by commit (`Tracker.configured` with the default
`[detection]` settings: the retrospective detector plus the online gate, `Tracker.observe` after each new commit,
as the service runs it). A step is **detected within 3 commits** when a regression change point at the step's
commit (±1) has been reported by the time the third commit at or after the step has been measured; the delay is
how many commits at or after the step it took. A **false alert** is a reported change point whose size passes
the alert threshold of its kind (`alerts.warn` 3% unpaired, `alerts.paired_warn` 2% paired) and that never
reported the step (a report of the step may move as data arrives); false change points (any size) are printed
too. Rates are per 1000 measured commits; the A-vs-A rates of a method add up every series it searches (its rQPS
and, before, the absolute wall-clock metrics; after, their ratios). In A-vs-A histories `--probes` (default 6)
commits of the second half are measured again by another drawn run, as issue #28's bisection probes re-measured
baseline commits later: before the fix every series added those samples, after it only the ratio series do
(against the same reference); an absolute series counts a commit's first run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from master.alerts.config import AlertSettings  # noqa: E402
from master.detect.config import DetectionSettings  # noqa: E402
from master.detect.model import Direction, Kind, Series  # noqa: E402
from master.detect.tracker import Tracker  # noqa: E402

STEPS = (0.01, 0.015, 0.02, 0.03, 0.05)
# the other wall-clock metrics of a pgbench workload (recipes/pg/profile.py _record): searched absolute before
# issue #28, by their ratio to the reference after it
WALL = ("latency_avg", "latency_p95", "latency_p99", "cpu_per_tx", "server_cpu_per_tx", "ctx_switches_per_tx")
BEFORE_ROUNDS = 5  # the farm's rounds before the fix
WITHIN = 3  # measured commits at or after the step by which it must be reported


@dataclass(frozen=True)
class Outcome:
    detected: bool
    delay: int | None  # commits at or after the step when first reported (1 = the step's own commit)
    false_alerts: int  # change points past the alert threshold away from the step
    false_points: int  # change points of any size away from the step
    commits: int


def inject(runs: Sequence[Sequence[float]], at: int | None, step: float) -> list[list[float]]:
    """The history's samples with every commit from `at` on made `step` slower (none when `at` is None)."""
    return [[x * (1 - step) for x in r] if at is not None and i >= at else list(r) for i, r in enumerate(runs)]


def score(
    history: Sequence[Sequence[float]],
    at: int | None,
    threshold: float,
    start: int = 8,
    ratio: bool = False,
    direction: Direction = Direction.HIGHER,
) -> Outcome:
    """Run the farm's detector over the history commit by commit and score it against the injected step (`ratio`:
    as the farm runs it on a paired rQPS series, with the paired gate)."""
    tracker = Tracker.configured("h", direction, DetectionSettings(), ratio=ratio)
    first_seen: int | None = None
    flagged: dict[tuple[str, str], float] = {}  # a report's identity -> its ratio when last seen
    the_step: set[tuple[str, str]] = set()  # identities that reported the step (they may move as data arrives)
    for n in range(start, len(history) + 1):
        result = tracker.observe(Series.from_samples(history[:n]))
        for r in result.all:
            if not r.active:
                continue
            cp = r.current
            identity = (r.first_commit, cp.kind.value)
            if at is not None and abs(cp.index - at) <= 1 and cp.kind is Kind.REGRESSION:
                the_step.add(identity)
                if first_seen is None:
                    first_seen = n - at
            if identity not in the_step:
                flagged[identity] = cp.ratio
    for identity in the_step:
        flagged.pop(identity, None)
    detected = first_seen is not None and first_seen <= WITHIN
    false_alerts = sum(1 for ratio in flagged.values() if abs(1 - ratio) >= threshold)
    return Outcome(detected, first_seen, false_alerts, len(flagged), len(history) - start + 1)


def histories(runs: Sequence[dict], n: int, length: int, rng: random.Random) -> list[list[dict]]:
    """`n` histories of `length` commits, each commit one of the measured runs drawn at random."""
    return [[rng.choice(runs) for _ in range(length)] for _ in range(n)]


def previous_commit_series(history: Sequence[Sequence[float]], at: int | None, step: float) -> list[list[float]]:
    """rQPS against the previous measured commit: the paired runs' A-vs-A ratios, and at the step's commit the
    ratio moved by the step (that commit measured against its parent); every later commit is level again."""
    return [[x * (1 - step) for x in r] if at is not None and i == at else list(r) for i, r in enumerate(history)]


def series_of(run: dict, method: str, metric: str = "tps") -> list[float] | None:
    """A run's samples of one series as a method stores it (None: the run has no such series)."""
    m = run["metrics"]
    if method == "unpaired":
        return m.get(metric)
    if method == "before":
        if metric == "tps":
            n = min(BEFORE_ROUNDS, len(m["tps"]), len(m["tps.reference"]))
            return [m["tps"][i] / m["tps.reference"][i] for i in range(n)]
        return m.get(metric, [])[:BEFORE_ROUNDS] or None
    return m.get("tps.rqps") if metric == "tps" else m.get(metric + ".ratio")


def runs_of(doc: dict, method: str) -> list[dict]:
    kind = "unpaired" if method == "unpaired" else "paired"
    return [r for r in doc["runs"] if r["kind"] == kind and r.get("method", method) in (method, "both")]


def analyse(doc: dict, n_hist: int, length: int, seed: int, first: int = 20, probes: int = 6) -> dict:
    alerts = AlertSettings()
    unpaired_t, paired_t = alerts.thresholds.warn, alerts.paired_thresholds.warn
    # method -> the series it searches: (metric, alert threshold, paired gate?, direction)
    searched = {
        "unpaired": [("tps", unpaired_t, False, Direction.HIGHER)],
        "before": [("tps", paired_t, True, Direction.HIGHER)] + [(m, unpaired_t, False, Direction.LOWER) for m in WALL],
        # the farm's gates: the paired gate on rQPS only, the rank gate on the other `.ratio` series
        # (recipes.paired.is_paired_throughput, AlertSettings.metric_kind)
        "after": [("tps", paired_t, True, Direction.HIGHER)] + [(m, unpaired_t, False, Direction.LOWER) for m in WALL],
    }
    rng = random.Random(seed)
    table: dict[str, dict[str, dict[str, float | None]]] = {}
    for method, series in searched.items():
        runs = runs_of(doc, method)
        if not runs:
            continue
        table[method] = {}
        for step in (0.0, *STEPS):
            outcomes = []
            false_all = 0
            for h in histories(runs, n_hist, length, rng):
                at = rng.randrange(first, length - 5) if step else None
                # A vs A: `probes` commits of the second half measured once more later, as the bisection
                # probes were: another real run (another moment of the machine) joins a series wherever the
                # method counts a commit's later runs (before: every series; after: the ratio series)
                again = (
                    {i: rng.choice(runs) for i in rng.sample(range(length // 2, length), probes)} if not step else {}
                )
                for metric, threshold, ratio, direction in series if not step else series[:1]:
                    values = [series_of(r, method, metric) for r in h]
                    if any(v is None or not v for v in values):
                        continue
                    for i, later in again.items():
                        values[i] = [*values[i], *(series_of(later, method, metric) or [])]
                    o = score(inject(values, at, step), at, threshold, ratio=ratio, direction=direction)
                    if metric == "tps":
                        outcomes.append(o)
                    false_all += o.false_alerts
            commits = sum(o.commits for o in outcomes)
            delays = [o.delay for o in outcomes if o.detected and o.delay is not None]
            table[method][f"{step:.1%}"] = {
                "detected": sum(o.detected for o in outcomes) / len(outcomes) if step else None,
                "median_delay": statistics.median(delays) if delays else None,
                "false_alerts_per_1000": 1000 * sum(o.false_alerts for o in outcomes) / commits,
                "false_points_per_1000": 1000 * sum(o.false_points for o in outcomes) / commits,
                "false_alerts_all_series_per_1000": None if step else 1000 * false_all / commits,
                "histories": len(outcomes),
            }
            print(f"  {method:9s} step {step:5.1%}: {table[method][f'{step:.1%}']}", flush=True)
    return table


def cv(values: Sequence[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else float("nan")


def per_run(doc: dict) -> dict[str, list[float]]:
    """Each method's per-run estimate of the workload's throughput or rQPS, as the farm stores a commit's value:
    the median of its samples (before: 5 per-round ratios; after: the blocks), and after also their geometric
    mean."""
    out = {m: [statistics.median(series_of(r, m)) for r in runs_of(doc, m)] for m in ("unpaired", "before", "after")}
    out["after, geometric mean"] = [
        math.exp(statistics.fmean(math.log(x) for x in series_of(r, "after"))) for r in runs_of(doc, "after")
    ]
    return {k: v for k, v in out.items() if v}


def collect(args: argparse.Namespace) -> int:
    from master import compare
    from tests.benchmarks.throughput_spread import git, metrics, phase

    repo, work, w = args.repo, args.work, args.workload
    sha, reference = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", f"{args.reference}^{{commit}}")
    src = compare._clone(str(repo), work)
    compare._checkout(src, sha, None)
    tmp = work / "min-step"
    (tmp / "state").mkdir(parents=True, exist_ok=True)
    ref_opt = f"reference={reference}"
    doc = json.loads(args.json.read_text()) if args.json.exists() else {}
    if doc and (doc.get("commit"), doc.get("workload"), doc.get("format")) != (sha, w, 2):
        raise SystemExit(f"{args.json} holds runs of another commit, workload or format: use another --json")
    doc = doc or {"format": 2, "commit": sha, "reference": reference, "workload": w, "runs": []}
    print(f"commit {sha[:12]}, reference {reference[:12]}: building both (cached after the first time)", flush=True)
    phase("build", src, work, tmp / "state", sha, [ref_opt], tmp / "build.json")
    common = [f"workloads={w}", *(f"samples={args.samples}" for _ in [0] if args.samples)]
    before, after = [o for o in args.before_options.split("+") if o], [o for o in args.after_options.split("+") if o]
    kinds: list[tuple[str, str, list[str]]] = [("unpaired", "unpaired", common)]
    if before == after:
        kinds.append(("paired", "both", [*common, ref_opt, *after]))
    else:
        kinds += [("paired", "before", [*common, ref_opt, *before]), ("paired", "after", [*common, ref_opt, *after])]
    for k in range(args.runs):
        done = len(doc["runs"]) // len(kinds)
        order = kinds[done % len(kinds) :] + kinds[: done % len(kinds)]
        for kind, method, opts in order:
            out = tmp / f"{method}.json"
            load = os.getloadavg()[0]
            seconds = phase("bench", src, work, tmp / "state", sha, opts, out)
            doc["runs"].append(
                {
                    "kind": kind,
                    "method": method,
                    "options": opts,
                    "seconds": seconds,
                    "load": load,
                    "metrics": metrics(out)[w],
                }
            )
        args.json.write_text(json.dumps(doc, indent=1))  # after every set: an interrupted collection keeps its runs
        print(f"  set {k + 1}/{args.runs}: {len(doc['runs'])} runs so far (load {os.getloadavg()[0]:.2f})", flush=True)
    return 0


def report(args: argparse.Namespace) -> int:
    doc = json.loads(args.file.read_text())
    loads = [r["load"] for r in doc["runs"]]
    print(
        f"{doc['workload']}: {len(doc['runs'])} runs (commit {doc['commit'][:12]}, reference "
        f"{doc['reference'][:12]}), load average {min(loads):.1f}-{max(loads):.1f} "
        f"(median {statistics.median(loads):.1f})"
    )
    estimates = per_run(doc)
    for method, values in estimates.items():
        print(
            f"RESULT per-run estimate, {method:22s}: K = {len(values)}, mean {statistics.mean(values):.4f}, "
            f"CV {cv(values):.2%}"
        )
    t0 = time.monotonic()
    table = analyse(doc, args.histories, args.length, args.seed, args.first, args.probes)
    print(
        f"\n{args.histories} histories of {args.length} commits per cell, seed {args.seed}, "
        f"{time.monotonic() - t0:.0f} s"
    )
    print(
        f"{'method':10s} {'step':>6s} {'detected <=3':>13s} {'median delay':>13s} {'false alerts/1000':>18s} "
        f"{'false points/1000':>18s} {'all series':>11s}"
    )
    for method, rows in table.items():
        for step, row in rows.items():
            det = "-" if row["detected"] is None else f"{row['detected']:.0%}"
            delay = "-" if row["median_delay"] is None else f"{row['median_delay']:.0f}"
            every = (
                ""
                if row["false_alerts_all_series_per_1000"] is None
                else f"{row['false_alerts_all_series_per_1000']:.1f}"
            )
            print(
                f"RESULT {method:9s} {step:>6s} {det:>13s} {delay:>13s} {row['false_alerts_per_1000']:18.1f} "
                f"{row['false_points_per_1000']:18.1f} {every:>11s}"
            )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "per_run": {k: {"mean": statistics.mean(v), "cv": cv(v)} for k, v in estimates.items()},
                    "table": table,
                },
                indent=1,
            )
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="measure K unpaired and K paired farm bench phases of one commit")
    c.add_argument("--repo", type=Path, required=True)
    c.add_argument("--work", type=Path, default=Path.home() / ".cache" / "perffarm" / "test-pg")
    c.add_argument("--reference", default="HEAD~2")
    c.add_argument("--workload", default="pgbench-ro-prepared-c1")
    c.add_argument("--runs", type=int, default=16, help="sets of runs (one of each kind) to add (default 16)")
    c.add_argument("--samples", type=int, default=0, help="rounds per run (default: the profile's)")
    c.add_argument("--before-options", default="ab_rewarm=0", help="the paired design before the fix (KEY=V+...)")
    c.add_argument("--after-options", default="", help="the paired design after it (default: the profile's)")
    c.add_argument("--json", type=Path, required=True, help="raw runs; appended to when it exists")
    a = sub.add_parser("analyse", help="detection rates on histories drawn from the collected runs")
    a.add_argument("file", type=Path)
    a.add_argument("--histories", type=int, default=300)
    a.add_argument("--length", type=int, default=40)
    a.add_argument("--first", type=int, default=20, help="earliest commit of an injected step (default 20)")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--probes", type=int, default=6, help="A-vs-A commits measured again later (default 6)")
    a.add_argument("--out", type=Path, help="also write the table as JSON")
    args = ap.parse_args()
    return collect(args) if args.cmd == "collect" else report(args)


if __name__ == "__main__":
    raise SystemExit(main())
