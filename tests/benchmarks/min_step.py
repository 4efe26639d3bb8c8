"""Minimum detectable throughput step, unpaired vs paired, with the farm's own detector (issue #14).

    .venv/bin/python -m tests.benchmarks.min_step collect --repo R --runs 16 --json runs.json   # real runs
    .venv/bin/python -m tests.benchmarks.min_step analyse runs.json [--histories 300] [--seed 1]

**collect** measures the same commit as K separate farm bench phases of each kind, alternating unpaired (the
commit alone, as the farm measures without a reference) and paired (`reference=SHA`, interleaved with the
reference build), exactly as `tests.benchmarks.throughput_spread` does, and keeps every round's raw samples: the
commit's tps per round (unpaired) and the per-round rQPS (paired). R is a repository made by
scripts/pg-source-repo.sh (its head and the release tag two commits back differ by comments only, so A = B).

**analyse** builds histories of `--length` (default 40) measured commits. Each commit is one real run, drawn at
random from the K measured runs of its kind (so a commit's samples and its run-to-run spread are real; what is
not real is the order: runs are drawn independently, so slow drift over hours is not in the histories). A step
of s (1, 2, 3, 5%) is injected at a random commit between `--first` (default 20: the online gate judges new
commits against a baseline of at least 20, as on a farm whose series has a history) and length - 5, by
multiplying the samples of that commit and every later one by (1 - s): the code got s slower, and for paired
runs only the commit side moved, so the ratio moves by the same factor. Histories without a step (A vs A)
count false alerts.

Each history is fed to the farm's detector commit by commit (`Tracker.configured` with the default
`[detection]` settings: the retrospective detector plus the online gate, `Tracker.observe` after each new commit,
as the service runs it). A step is **detected within 3 commits** when a regression change point at the step's
commit (±1) has been reported by the time the third commit at or after the step has been measured; the delay is
how many commits at or after the step it took. A **false alert** is a reported change point whose size passes
the alert threshold of its kind (`alerts.warn` 3% unpaired, `alerts.paired_warn` 2% paired) and that never
reported the step (a report of the step may move as data arrives); false change points (any size) are printed
too. Rates are per
1000 measured commits.

The paired kinds run twice: with the rank gate every series had before (`online`, "rank gate") and with the paired
gate the farm now uses on `.rqps` series (`master/detect/paired.py`). The **previous-commit reference** (rQPS_i =
commit_i / commit_{i-1}, the other way to pair) is analysed from the same paired runs: its series is A-vs-A ratios
everywhere except one commit, the first after the step, where the ratio moves by the step; the same detector runs on
it, to compare with a pinned reference per branch.
"""

from __future__ import annotations

import argparse
import json
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

STEPS = (0.01, 0.02, 0.03, 0.05)
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
    history: Sequence[Sequence[float]], at: int | None, threshold: float, start: int = 8, ratio: bool = False
) -> Outcome:
    """Run the farm's detector over the history commit by commit and score it against the injected step (`ratio`:
    as the farm runs it on a paired rQPS series, with the paired gate)."""
    tracker = Tracker.configured("h", Direction.HIGHER, DetectionSettings(), ratio=ratio)
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


def histories(runs: Sequence[Sequence[float]], n: int, length: int, rng: random.Random) -> list[list[list[float]]]:
    return [[list(rng.choice(runs)) for _ in range(length)] for _ in range(n)]


def previous_commit_series(history: Sequence[Sequence[float]], at: int | None, step: float) -> list[list[float]]:
    """rQPS against the previous measured commit: the paired runs' A-vs-A ratios, and at the step's commit the
    ratio moved by the step (that commit measured against its parent); every later commit is level again."""
    return [[x * (1 - step) for x in r] if at is not None and i == at else list(r) for i, r in enumerate(history)]


def analyse(doc: dict, n_hist: int, length: int, seed: int, first: int = 20) -> dict:
    alerts = AlertSettings()
    # kind -> (runs, alert threshold, paired gate?)
    kinds = {
        "unpaired": (doc["unpaired"], alerts.thresholds.warn, False),
        "paired, pinned, rank gate": (doc["paired"], alerts.paired_thresholds.warn, False),
        "paired, pinned": (doc["paired"], alerts.paired_thresholds.warn, True),
        "paired, previous commit": (doc["paired"], alerts.paired_thresholds.warn, True),
    }
    rng = random.Random(seed)
    table: dict[str, dict[str, dict[str, float | None]]] = {}
    for kind, (runs, threshold, ratio) in kinds.items():
        table[kind] = {}
        for step in (0.0, *STEPS):
            outcomes = []
            for h in histories(runs, n_hist, length, rng):
                at = rng.randrange(first, length - 5) if step else None
                series = previous_commit_series(h, at, step) if "previous" in kind else inject(h, at, step)
                outcomes.append(score(series, at, threshold, ratio=ratio))
            commits = sum(o.commits for o in outcomes)
            delays = [o.delay for o in outcomes if o.detected and o.delay is not None]
            table[kind][f"{step:.0%}"] = {
                "detected": sum(o.detected for o in outcomes) / len(outcomes) if step else None,
                "median_delay": statistics.median(delays) if delays else None,
                "false_alerts_per_1000": 1000 * sum(o.false_alerts for o in outcomes) / commits,
                "false_points_per_1000": 1000 * sum(o.false_points for o in outcomes) / commits,
                "histories": len(outcomes),
            }
            print(f"  {kind:26s} step {step:4.0%}: {table[kind][f'{step:.0%}']}", flush=True)
    return table


def run_medians(runs: Sequence[Sequence[float]]) -> list[float]:
    return [statistics.median(r) for r in runs]


def cv(values: Sequence[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else float("nan")


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
    if doc and (doc.get("commit"), doc.get("workload")) != (sha, w):
        raise SystemExit(f"{args.json} holds runs of another commit or workload: use another --json")
    doc = doc or {
        "commit": sha,
        "reference": reference,
        "workload": w,
        "samples": args.samples,
        "unpaired": [],
        "paired": [],
        "seconds": {"unpaired": [], "paired": []},
        "load": [],
    }
    print(f"commit {sha[:12]}, reference {reference[:12]}: building both (cached after the first time)", flush=True)
    phase("build", src, work, tmp / "state", sha, [ref_opt], tmp / "build.json")
    common = [f"workloads={w}", f"samples={args.samples}"]
    for k in range(args.runs):
        order = [("unpaired", common), ("paired", [*common, ref_opt])]
        for kind, opts in order if (len(doc["unpaired"]) + k) % 2 == 0 else reversed(order):
            out = tmp / f"{kind}.json"
            doc["seconds"][kind].append(phase("bench", src, work, tmp / "state", sha, opts, out))
            got = metrics(out)[w]
            doc[kind].append(got["tps"] if kind == "unpaired" else got["tps.rqps"])
        doc["load"].append(os.getloadavg()[0])
        args.json.write_text(json.dumps(doc, indent=1))  # after every pair: an interrupted collection keeps its runs
        print(
            f"  pair {k + 1}/{args.runs}: {len(doc['paired'])} runs of each kind so far (load {doc['load'][-1]:.2f})",
            flush=True,
        )
    return 0


def report(args: argparse.Namespace) -> int:
    doc = json.loads(args.file.read_text())
    un, pa = run_medians(doc["unpaired"]), run_medians(doc["paired"])
    print(
        f"{doc['workload']}: K = {len(un)} unpaired and {len(pa)} paired runs of {doc['samples']} rounds "
        f"(commit {doc['commit'][:12]}, reference {doc['reference'][:12]})"
    )
    print(
        f"per-run estimate CV: unpaired tps {cv(un):.2%}, paired rQPS {cv(pa):.2%} (mean rQPS "
        f"{statistics.mean(pa):.4f})"
    )
    t0 = time.monotonic()
    table = analyse(doc, args.histories, args.length, args.seed, args.first)
    print(
        f"\n{args.histories} histories of {args.length} commits per cell, seed {args.seed}, "
        f"{time.monotonic() - t0:.0f} s"
    )
    print(
        f"{'kind':28s} {'step':>5s} {'detected <=3':>13s} {'median delay':>13s} {'false alerts/1000':>18s} "
        f"{'false points/1000':>18s}"
    )
    for kind, rows in table.items():
        for step, row in rows.items():
            det = "-" if row["detected"] is None else f"{row['detected']:.0%}"
            delay = "-" if row["median_delay"] is None else f"{row['median_delay']:.0f}"
            print(
                f"RESULT {kind:21s} {step:>5s} {det:>13s} {delay:>13s} {row['false_alerts_per_1000']:18.1f} "
                f"{row['false_points_per_1000']:18.1f}"
            )
    if args.out:
        args.out.write_text(json.dumps({"cv_unpaired": cv(un), "cv_paired": cv(pa), "table": table}, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="measure K unpaired and K paired farm bench phases of one commit")
    c.add_argument("--repo", type=Path, required=True)
    c.add_argument("--work", type=Path, default=Path.home() / ".cache" / "perffarm" / "test-pg")
    c.add_argument("--reference", default="HEAD~2")
    c.add_argument("--workload", default="pgbench-ro-prepared-c1")
    c.add_argument("--runs", type=int, default=16, help="pairs of runs to add (default 16)")
    c.add_argument("--samples", type=int, default=5, help="rounds per run (quick's default: 5)")
    c.add_argument("--json", type=Path, required=True, help="raw runs; appended to when it exists")
    a = sub.add_parser("analyse", help="detection rates on histories drawn from the collected runs")
    a.add_argument("file", type=Path)
    a.add_argument("--histories", type=int, default=300)
    a.add_argument("--length", type=int, default=40)
    a.add_argument("--first", type=int, default=20, help="earliest commit of an injected step (default 20)")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--out", type=Path, help="also write the table as JSON")
    args = ap.parse_args()
    return collect(args) if args.cmd == "collect" else report(args)


if __name__ == "__main__":
    raise SystemExit(main())
