"""The invariants the suite checks after every fault, read from the farm's own files (results DB, site, reconcile
report) and from the suite's ground truth and webhook receiver.

- every commit on master's first-parent history has exactly one stored run from an automatic source (`poll`,
  `requeue`; forced and bisection runs are extra), stored as measured (status ok); none is lost or given up;
- no run's samples are another commit's value (misattributed);
- no change is alerted twice (two change points or alerts for one change, an idempotency key delivered twice);
- the published site is a complete render: the `site` symlink points at a finished version, every commit with
  runs has its data file listing those runs, every JSON file parses, no temp version is left behind;
- no hostile ref or form field ran anything (its marker file does not exist), and none was built;
- every job the suite queued ended (none lost: queued or submitted but never ended), none was measured again after
  it ended or had its stored result replaced (duplicated), none is running with no build (hung), none failed
  because of a fault (a job whose build request the suite cancelled must fail), and every side's samples are its
  own program's (tests/chaos/jobs.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.chaos.jobs import ExpectedJob, JobRow
from tests.chaos.truth import Truth, marker_paths

AUTOMATIC = ("poll", "requeue")
WATCHED = "master"
WORKLOAD = ("loop", "throughput")


@dataclass(frozen=True)
class Run:
    id: int
    sha: str
    revision: str
    ref: str
    builder: str
    source: str
    status: str
    build_id: int | None
    build_url: str
    request_key: str
    samples: tuple[float, ...]

    def show(self) -> str:
        return (
            f"run {self.id} ({self.source}, {self.status}, ref {self.ref!r}, build {self.build_id}, "
            f"request {self.request_key}, {self.build_url})"
        )


@dataclass(frozen=True)
class Violation:
    """One broken invariant; `key` identifies it across checks (to tell new violations from old ones)."""

    kind: str  # lost, gave-up, duplicate, misattributed, failed-run, alert-duplicate, site, hostile-ran, job-*
    key: str
    detail: str
    count: int = 1  # how many the figures count (an idempotency key delivered 3 times: 2 duplicates)


@dataclass(frozen=True)
class Figures:
    pushed: int
    exactly_one: int
    lost: int  # no automatic run at all (given up or silently missing)
    gave_up: int  # of those, recorded as given up by the reconciler (`perffarm status`)
    duplicate_runs: int  # automatic runs beyond the first of a commit x builder
    misattributed: int  # runs whose samples are not their commit's value
    failed_runs: int  # automatic runs stored with a failed status (the fixture never fails by itself)
    alerts_duplicated: int
    site_problems: int
    hostile_ran: int
    jobs: int = 0  # jobs the suite queued
    jobs_ended_right: int = 0  # done with every side's own numbers, or failed after the suite cancelled its request
    jobs_lost: int = 0  # queued or submitted but never ended
    jobs_duplicated: int = 0  # measured again after it ended, or its stored result replaced
    jobs_hung: int = 0  # running with no build request after the farm settled
    jobs_failed: int = 0  # failed because of a fault (not cancelled by the suite)
    jobs_misattributed: int = 0  # a side's samples are not its own program's


@dataclass(frozen=True)
class Check:
    figures: Figures
    violations: tuple[Violation, ...]


def read_runs(db: Path) -> list[Run]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
    try:
        rows = conn.execute(
            "SELECT r.id, r.sha, r.revision, r.ref, r.builder, r.source, r.status, r.build_id, "
            "COALESCE(r.build_url, ''), COALESCE(r.request_key, ''), m.samples FROM runs r "
            "LEFT JOIN measurements m ON m.run_id = r.id AND m.workload = ? AND m.metric = ? ORDER BY r.id",
            WORKLOAD,
        ).fetchall()
    finally:
        conn.close()
    return [Run(*row[:10], tuple(json.loads(row[10])) if row[10] else ()) for row in rows]


def check(
    data_dir: Path,
    site: Path,
    truth: Truth,
    builders: list[str],
    markers_dir: Path,
    receiver: Any | None = None,
    known_change: Callable[[str], bool] | None = None,
    jobs: JobsView | None = None,
) -> Check:
    """All invariants now; call it only once the farm has settled. `known_change(sha)` tells whether Buildbot has a
    change for a commit (evidence for a lost one: without a change the reconciler cannot re-queue it)."""
    runs = read_runs(data_dir / "results.sqlite")
    report = _read_json(data_dir / "reconcile.json") or {}
    gave_up = {(g["builder"], g["revision"]) for g in report.get("gave_up", [])}
    out: list[Violation] = []

    chain = set(truth.first_parent_chain())
    commits = [c for c in truth.master_commits() if c.sha in chain]
    by_key: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for r in runs:
        if r.source in AUTOMATIC and r.ref == WATCHED:
            by_key[(r.sha, r.builder)].append(r)
    exactly_one = lost = n_gave_up = dup = failed = 0
    for c in commits:
        for b in builders:
            auto = by_key.get((c.sha, b), [])
            what = f"commit {c.sha[:12]} ({_short(c.subject)}) on {b}"
            if not auto:
                lost += 1
                if (b, c.sha) in gave_up:
                    n_gave_up += 1
                    out.append(
                        Violation(
                            "gave-up",
                            f"lost:{c.sha}:{b}",
                            f"{what}: no run; the reconciler gave up on it (perffarm status)",
                        )
                    )
                else:
                    why = ""
                    if known_change is not None:
                        why = (
                            "; Buildbot has a change for it"
                            if known_change(c.sha)
                            else "; Buildbot has NO change for it (the poller never reported it: the reconciler, "
                            "which works from changes, cannot re-queue it)"
                        )
                    out.append(Violation("lost", f"lost:{c.sha}:{b}", f"{what}: no run and not given up{why}"))
                continue
            if len(auto) == 1:
                exactly_one += 1
            else:
                dup += len(auto) - 1
                out.append(
                    Violation(
                        "duplicate",
                        f"dup:{c.sha}:{b}:{len(auto)}",
                        f"{what}: {len(auto)} automatic runs: " + "; ".join(r.show() for r in auto),
                    )
                )
            for r in auto:
                if r.status != "ok":
                    failed += 1
                    out.append(
                        Violation(
                            "failed-run",
                            f"failed:{r.id}",
                            f"{what}: stored as {r.status} although its program is fine: {r.show()}",
                        )
                    )

    mis = 0
    for r in runs:
        want = truth.value_of(r.sha)
        if r.status != "ok" or not r.samples:
            continue
        if want is None or any(abs(s - want) > 1e-9 for s in r.samples):
            mis += 1
            ran = sorted({truth_sha[:12] for s in set(r.samples) for truth_sha in _shas_with_value(truth, s)})
            out.append(
                Violation(
                    "misattributed",
                    f"mis:{r.id}",
                    f"{r.show()} is stored under {r.sha[:12]} (value {want}) but its samples are "
                    f"{sorted(set(r.samples))}, the program of {', '.join(ran) or 'no known commit'}",
                )
            )

    alert_violations = alert_duplicates(data_dir / "results.sqlite", receiver)
    out.extend(alert_violations)
    site_violations = [Violation("site", f"site:{p}", p) for p in site_problems(site, runs)]
    out.extend(site_violations)

    hostile = [
        Violation("hostile-ran", f"marker:{m.name}", f"{m} exists: a hostile ref or field ran a command")
        for m in marker_paths(markers_dir)
    ]
    for r in runs:
        if r.ref.startswith("-") or "upload-pack" in r.ref:
            hostile.append(Violation("hostile-ran", f"hostile-run:{r.id}", f"a hostile ref was built: {r.show()}"))
    out.extend(hostile)

    job_figures: dict[str, int] = {}
    if jobs is not None:
        job_violations, job_figures = check_jobs(jobs)
        out.extend(job_violations)

    figures = Figures(
        **job_figures,
        pushed=len(commits),
        exactly_one=exactly_one,
        lost=lost,
        gave_up=n_gave_up,
        duplicate_runs=dup,
        misattributed=mis,
        failed_runs=failed,
        alerts_duplicated=sum(v.count for v in alert_violations),
        site_problems=len(site_violations),
        hostile_ran=len(hostile),
    )
    return Check(figures, tuple(out))


@dataclass(frozen=True)
class JobsView:
    """What check_jobs reads: the jobs the suite queued, their rows, which have a build request not finished, and
    each job's builds whose job-bench step succeeded (build id, when the step started)."""

    expected: dict[int, ExpectedJob]
    rows: dict[int, JobRow]
    live: set[int]
    benches: dict[int, list[tuple[int, float]]]


def check_jobs(view: JobsView) -> tuple[list[Violation], dict[str, int]]:
    out: list[Violation] = []
    counts = dict.fromkeys(("ended_right", "lost", "duplicated", "hung", "failed", "misattributed"), 0)
    for job in sorted(view.expected.values(), key=lambda j: j.id):
        row = view.rows.get(job.id)
        what = f"{job.kind} job {job.id} (queued by {job.fault})"
        if row is None:
            counts["lost"] += 1
            out.append(Violation("job-lost", f"job-lost:{job.id}", f"{what}: not in the results DB"))
            continue
        if row.state == "queued" or (row.state == "running" and job.id in view.live):
            counts["lost"] += 1
            out.append(Violation("job-lost", f"job-lost:{job.id}", f"{what}: still {row.state} after the farm settled"))
        elif row.state == "running":
            counts["hung"] += 1
            out.append(Violation("job-hung", f"job-hung:{job.id}", f"{what}: running with no build request"))
        duplicated = []
        if job.first_end is not None and row.end() != job.first_end:
            duplicated.append(f"its stored result was replaced: first {job.first_end}, now {row.end()}")
        if row.finished_at is not None:
            first = job.first_end[2] if job.first_end and job.first_end[2] is not None else row.finished_at
            again = [b for b, started in view.benches.get(job.id, []) if started > first]
            if again:
                duplicated.append(f"measured again after it ended, by build(s) {again}")
        if duplicated:
            counts["duplicated"] += 1
            out.append(Violation("job-duplicate", f"job-dup:{job.id}", f"{what}: " + "; ".join(duplicated)))
        if row.state == "failed" and not job.cancelled:
            counts["failed"] += 1
            out.append(Violation("job-failed", f"job-failed:{job.id}", f"{what}: failed: {row.error}"))
        wrong = _job_sides_wrong(job, row) if row.state == "done" else []
        if wrong:
            counts["misattributed"] += 1
            out.append(Violation("job-misattributed", f"job-mis:{job.id}", f"{what}: " + "; ".join(wrong)))
        if not duplicated and not wrong and (row.state == "done" or (row.state == "failed" and job.cancelled)):
            counts["ended_right"] += 1
    return out, {"jobs": len(view.expected), **{f"jobs_{k}": n for k, n in counts.items()}}


def _job_sides_wrong(job: ExpectedJob, row: JobRow) -> list[str]:
    doc = json.loads(row.result or "{}")
    wrong = []
    for side in doc.get("sides", []):
        want = job.values.get(side["label"])
        samples = [
            s
            for w in side["workloads"]
            if w["name"] == WORKLOAD[0]
            for m in w["metrics"]
            if m["name"] == WORKLOAD[1]
            for s in m["samples"]
        ]
        if want is None or not samples or any(abs(s - want) > 1e-9 for s in samples):
            wrong.append(f"side {side['label']} measured {sorted(set(samples))}, its program prints {want}")
    return wrong


def _shas_with_value(truth: Truth, value: float) -> list[str]:
    return [c.sha for c in truth.commits.values() if abs(c.value - value) <= 1e-9]


def _short(text: str, n: int = 40) -> str:
    shown = text.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= n else shown[: n - 1] + "…"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# -------------------------------------------------------------------------------------------- alerts
def alert_duplicates(db: Path, receiver: Any | None) -> list[Violation]:
    """Changes alerted twice: two active change points for one change in one series (counted as one duplicate,
    or as many as the extra alerts they made), an idempotency key delivered more than once, an alert opened twice
    at the webhook."""
    out: list[Violation] = []
    if db.exists():
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        try:
            rows = conn.execute(
                "SELECT cp.series_id, cp.sha, cp.id, al.alert_id FROM change_points cp "
                "LEFT JOIN alert_lines al ON al.change_point_id = cp.id WHERE cp.state = 'active'"
            ).fetchall()
        except sqlite3.OperationalError:  # an old schema without alerts: nothing to check
            rows = []
        finally:
            conn.close()
        by_change: dict[tuple[int, str], list[tuple[int, str | None]]] = defaultdict(list)
        for series_id, sha, cp_id, alert_id in rows:
            by_change[(series_id, sha)].append((cp_id, alert_id))
        for (series_id, sha), cps in sorted(by_change.items()):
            alerts = {a for _, a in cps if a}
            if len(cps) > 1:
                out.append(
                    Violation(
                        "alert-duplicate",
                        f"alert-cp:{series_id}:{sha}",
                        f"series {series_id} has {len(cps)} active change points at commit {sha[:12]} "
                        f"(change points {[c for c, _ in cps]}, alerts {sorted(alerts)})",
                        max(1, len(alerts) - 1),
                    )
                )
    if receiver is not None:
        seen: dict[str, int] = defaultdict(int)
        opened: dict[str, int] = defaultdict(int)
        for req in list(receiver.requests):
            if req.key:
                seen[req.key] += 1
            try:
                body = req.json
            except ValueError:
                continue
            alert = body.get("alert") if isinstance(body.get("alert"), dict) else {}
            if body.get("event") == "opened" and alert.get("id"):
                opened[alert["id"]] += 1
        for key, n in sorted(seen.items()):
            if n > 1:
                out.append(
                    Violation(
                        "alert-duplicate",
                        f"alert-key:{key}:{n}",
                        f"idempotency key {key} was delivered {n} times to the webhook",
                        n - 1,
                    )
                )
        for alert_id, n in sorted(opened.items()):
            if n > 1:
                out.append(
                    Violation(
                        "alert-duplicate",
                        f"alert-opened:{alert_id}:{n}",
                        f"alert {alert_id} was opened {n} times at the webhook",
                        n - 1,
                    )
                )
    return out


# -------------------------------------------------------------------------------------------- site
def site_problems(site: Path, runs: list[Run]) -> list[str]:
    """What is wrong with the published site (docs/site.md): an empty list when it is a complete render."""
    if not runs:
        return []
    if not site.is_symlink():
        return [f"{site} is not a symlink to a published version"]
    target = Path(os.path.realpath(site))
    problems = []
    if not target.is_dir():
        return [f"{site} points at {target}, which does not exist"]
    if target.name.endswith(".tmp"):
        problems.append(f"{site} points at an unfinished version {target.name}")
    if not (target / "manifest.json").is_file():
        problems.append(f"{target.name} has no manifest.json")
    versions = site.parent / f".{site.name}.versions"
    for leftover in sorted(versions.glob("*.tmp")) if versions.is_dir() else []:
        problems.append(f"temp version {leftover.name} left behind in {versions.name}/")
    for path in sorted(target.rglob("*.json")):
        try:
            json.loads(path.read_bytes())
        except (ValueError, OSError) as e:
            problems.append(f"{path.relative_to(target)} does not parse: {e}")
    by_sha: dict[str, set[int]] = defaultdict(set)
    for r in runs:
        by_sha[r.sha].add(r.id)
    for sha, ids in sorted(by_sha.items()):
        data = target / "data" / "commits" / f"{sha}.js"
        if not data.is_file():
            problems.append(f"commit {sha[:12]} has runs {sorted(ids)} but no data/commits/{sha[:12]}….js")
            continue
        shown = _commit_runs(data)
        if shown is None:
            problems.append(f"data/commits/{sha[:12]}….js does not parse")
        elif not ids <= shown:
            problems.append(f"data/commits/{sha[:12]}….js lists runs {sorted(shown)}, the DB has {sorted(ids)}")
    return problems


def _commit_runs(path: Path) -> set[int] | None:
    """The run ids a commit's data file lists (`perffarm.commit("<sha>",{...});`), or None if it does not parse."""
    text = path.read_text(errors="replace").strip()
    head = "perffarm.commit("
    if not text.startswith(head) or not text.endswith(");"):
        return None
    try:
        name_end = text.index('",', len(head)) + 2
        doc = json.loads(text[name_end:-2])
        return {int(r[0]) for r in doc["runs"]}
    except (ValueError, KeyError, TypeError, IndexError):
        return None
