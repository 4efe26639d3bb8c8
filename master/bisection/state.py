"""Bisections in the results database: create one, read what is measured, advance it, record the outcome.

Pure (no Buildbot): the master's bisection service and `perffarm bisect --local` both drive a bisection
through `advance()`, which returns either the next commit to measure or the finished outcome. Every probe is a
stored run (source `bisect`, linked in `bisection_runs`), so the state survives restarts and later bisections
and the history reuse the samples. On the master, the culprit's confirmation rounds are jobs (kind `bisect`, the
parent and the culprit as sides, linked in `bisection_jobs`): `advance()` queues one for the job service to run
and reads the ones that ended.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Protocol, TypeVar

from master import refnames, store
from master.alerts import sync as alerting
from master.bisection.core import (
    Ambiguous,
    ConfirmPair,
    Culprit,
    Decision,
    Measure,
    NotReproducible,
    Observations,
    PairRun,
    Policy,
    decide,
    pair_ratio,
    with_pair_runs,
)
from master.detect import rqps
from master.store.bisections import Bisection
from master.store.jobs import Job, JobSide
from recipes.paired import RATIO_SUFFIX
from recipes.result import NAME_RE
from recipes.stats import PairedRatio


class _Event(Protocol):
    metric: str


E = TypeVar("E", bound=_Event)

MAX_LOST_ATTEMPTS = 3  # builds of one probe that ended with no result before the commit counts as broken


class BisectionError(ValueError):
    """A bisection cannot be created as asked; the message says why and what to do."""


def get(conn: sqlite3.Connection, bisection_id: int) -> Bisection:
    b = store.bisections.get(conn, bisection_id)
    if b is None:
        raise BisectionError(f"no bisection with id {bisection_id}")
    return b


def resolve_commit(conn: sqlite3.Connection, ref: str) -> str:
    """A full sha from a sha, a unique sha prefix, or a tag name the farm knows."""
    problem = refnames.revision_problem(ref)
    if problem is not None:
        raise BisectionError(f"{refnames.show(ref)} {problem}; give a commit sha (or unique prefix) or a tag")
    tag = store.commits.tag_sha(conn, ref)
    if tag:
        return tag
    if not refnames.is_sha(ref):
        raise BisectionError(f"{ref!r} is not a commit or tag the farm knows (has any result been stored for it?)")
    # a validated hex prefix: no LIKE wildcards in it
    rows = store.commits.shas_with_prefix(conn, ref, limit=2)
    if len(rows) == 1 and len(ref) >= 4:
        return rows[0]
    if len(rows) > 1:
        raise BisectionError(f"{ref!r} is ambiguous: more than one known commit starts with it")
    raise BisectionError(f"{ref!r} is not a commit or tag the farm knows (has any result been stored for it?)")


def create(
    conn: sqlite3.Connection,
    *,
    good: str,
    bad: str,
    workload: str,
    branch: str = "master",
    metric: str | None = None,
    builder: str | None = None,
    change_point_id: int | None = None,
    requested_by: str = "detector",
) -> int:
    """Start a bisection of (good, bad] on a branch's first-parent order; returns its id."""
    problem = refnames.ref_problem(branch)
    if problem is not None:
        raise BisectionError(f"branch {refnames.show(branch)} {problem}")
    for name, value in (("workload", workload), ("metric", metric)):
        if value is not None and not NAME_RE.match(value):
            raise BisectionError(
                f"{name} {refnames.show(value)} is not a workload or metric name (letters, digits, '_', '.', '+', '-')"
            )
    good_sha, bad_sha = resolve_commit(conn, good), resolve_commit(conn, bad)
    pos = store.commits.positions_on(conn, branch, (good_sha, bad_sha))
    for name, sha in (("good", good_sha), ("bad", bad_sha)):
        if sha not in pos:
            raise BisectionError(f"--{name} {sha[:12]} is not on the first-parent history of branch {branch!r}")
    if pos[good_sha] >= pos[bad_sha]:
        raise BisectionError(f"--good {good_sha[:12]} must come before --bad {bad_sha[:12]} on {branch}")
    commits = [sha for _, sha in store.commits.branch_order(conn, branch, pos[good_sha], pos[bad_sha])]
    found = store.bisections.newest_workload_run(conn, workload, (good_sha, bad_sha), builder, metric)
    if found is None:
        raise BisectionError(
            f"no stored result of workload {workload!r}"
            + (f" metric {metric!r}" if metric else "")
            + (f" on builder {builder!r}" if builder else "")
            + " for either end; measure the ends first (or check the names with `perffarm results export`)"
        )
    now = time.time()
    bisection_id = store.bisections.insert(
        conn,
        change_point_id=change_point_id,
        measured=found,
        workload=workload,
        branch=branch,
        good=good_sha,
        bad=bad_sha,
        commits=commits,
        requested_by=requested_by,
        now=now,
    )
    _log(
        conn,
        bisection_id,
        f"bisecting {len(commits) - 1} commits ({good_sha[:12]}..{bad_sha[:12]}] on {branch}, "
        f"{workload}/{found.metric} on {found.builder}",
    )
    return bisection_id


def observations(conn: sqlite3.Connection, b: Bisection, pair_jobs: bool = False) -> Observations:
    """Everything measured for the bisection's commits on its machine and recipe config (any source: history,
    forced runs, other bisections), the rounds this bisection ran itself, and the confirmation jobs it queued that
    ended (`pair_jobs`: it may queue them, the master runs jobs of its recipe)."""
    samples, fresh = store.bisections.samples_and_rounds(conn, b)
    broken = store.bisections.failed_commits(conn, b)
    # builds of a probe that ended with no result at all (crashes): after a few, treat it as broken
    broken |= {sha for sha, lost in store.bisections.lost_builds(conn, b).items() if lost >= MAX_LOST_ATTEMPTS}
    runs, _ = pair_runs(conn, b)
    return Observations(samples, fresh, frozenset(broken), store.bisections.levels(conn, b), pair_jobs, runs)


def pair_runs(conn: sqlite3.Connection, b: Bisection) -> tuple[tuple[PairRun, ...], Job | None]:
    """The bisection's confirmation jobs that ended, as rounds of their two sides, and the one not ended yet (if
    any). A job whose build or bench failed is a failed round (its commits count as broken, core.PairRun); one that
    ended with nothing to judge (its build request cancelled, lost, its result on another machine or without the
    bisected metric) is queued again, up to MAX_LOST_ATTEMPTS such jobs for one pair, which then fail as a broken
    build would."""
    runs: list[PairRun] = []
    lost: dict[tuple[str, str], list[str]] = {}
    waiting = None
    for job_id in store.bisections.jobs_of(conn, b.id):
        job = store.jobs.get(conn, job_id)
        if job is None or len(job.sides) != 2:
            continue
        if job.state not in store.jobs.ENDED:
            waiting = job
            continue
        pair = (job.sides[0].sha, job.sides[1].sha)
        status = (job.result or {}).get("status")
        if job.state == "failed" and status in ("build-failed", "bench-failed"):
            runs.append(PairRun(*pair, failed=job.error or status))
            continue
        sides = _side_samples(b, job)
        if job.state == "done" and sides is not None:
            runs.append(PairRun(*pair, *sides))
            continue
        lost.setdefault(pair, []).append(
            job.error or f"job {job.id} measured no {b.workload}/{b.metric} on {b.machine_id}"
        )
        if len(lost[pair]) == MAX_LOST_ATTEMPTS:
            runs.append(
                PairRun(*pair, failed=f"{MAX_LOST_ATTEMPTS} confirmation jobs measured nothing: {lost[pair][-1]}")
            )
    return tuple(runs), waiting


def _side_samples(b: Bisection, job: Job) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The bisected metric's samples of the job's two sides, when the job measured it on the bisection's machine,
    recipe and workload config (else the rounds would not compare with the probes)."""
    doc = job.result or {}
    if doc.get("machine", {}).get("id") != b.machine_id or doc.get("recipe", {}).get("name") != b.recipe:
        return None
    out = []
    for side in doc.get("sides", [])[:2]:
        found = [
            tuple(float(x) for x in m["samples"])
            for w in side.get("workloads", [])
            if w.get("name") == b.workload and w.get("config_hash", doc["recipe"].get("config_hash")) == b.config_hash
            for m in w.get("metrics", [])
            if m.get("name") == b.metric
        ]
        if not found or not found[0]:
            return None
        out.append(found[0])
    return (out[0], out[1]) if len(out) == 2 else None


def _log(conn: sqlite3.Connection, bisection_id: int, line: str) -> None:
    log = store.bisections.log_lines(conn, bisection_id)
    stamped = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}Z {line}"
    if log and log[-1].split("Z ", 1)[-1] == line:
        return  # re-evaluating the same state: say it once
    log.append(stamped)
    store.bisections.set_log(conn, bisection_id, log, time.time())


def advance(
    conn: sqlite3.Connection, bisection_id: int, policy: Policy = Policy(), job_builder: str | None = None
) -> Decision:
    """Decide the next step from what is stored; when the search is over, record its outcome (one transaction).
    `job_builder`: the builder that runs jobs on the bisection's worker (the master's), so that the culprit's
    confirmation rounds are jobs of two sides (queued here; ConfirmPair is returned while one is queued or
    running); None where no job runs (`perffarm bisect --local`): they are single builds (Measure)."""
    with store.transaction(conn):
        b = get(conn, bisection_id)
        obs = observations(conn, b, pair_jobs=job_builder is not None)
        if b.state != "running":
            return _finished(b)
        decision = decide(b.commits, obs, policy)
        seen = with_pair_runs(obs)  # the confirmation jobs' rounds count as the commits' rounds
        probes = sum(1 for c in b.commits if seen.rounds(c) > 0)
        rounds = sum(seen.fresh_rounds.values())
        n_samples = sum(len(seen.samples.get(c, ())) for c in b.commits if seen.rounds(c) > 0)
        store.bisections.set_counts(conn, bisection_id, probes, rounds, n_samples)
        if isinstance(decision, ConfirmPair):
            assert job_builder is not None  # decide asks for a job only when obs.pair_jobs
            _, waiting = pair_runs(conn, b)
            job_id = waiting.id if waiting is not None else _queue_confirmation(conn, b, decision, job_builder)
            _log(
                conn,
                bisection_id,
                f"confirm {decision.culprit[:12]} against its parent {decision.parent[:12]} in job {job_id} "
                f"(round {seen.rounds(decision.culprit) + 1}, the two measured interleaved): {decision.reason}",
            )
            return decision
        if isinstance(decision, Measure):
            i = b.commits.index(decision.commit)
            _log(
                conn,
                bisection_id,
                f"measure {decision.commit[:12]} (commit {i} of {len(b.commits) - 1}, "
                f"round {obs.rounds(decision.commit) + 1}): {decision.reason}",
            )
            return decision
        now = time.time()
        if isinstance(decision, Culprit):
            paired = pair_ratio(obs, decision.parent, decision.commit)
            if paired is not None:  # the confirmation jobs' rounds: paired, drift cancels
                est: rqps.MedianRatio | PairedRatio = paired
                against = f"{decision.parent[:12]} (paired rounds of its confirmation jobs: {paired.n})"
            else:
                before, after, against = _culprit_sides(obs, decision)
                est = rqps.median_ratio(before, after)
            subject = store.commits.commit(conn, decision.commit)
            store.bisections.record_culprit(
                conn, bisection_id, decision.commit, decision.parent, est.ratio, est.low, est.high, now
            )
            _log(
                conn,
                bisection_id,
                f"culprit {decision.commit[:12]} "
                f"{(subject.subject if subject else '')!r}: ratio {est.ratio:.4f} "
                f"[{est.low:.4f}, {est.high:.4f}] against {against}; "
                f"{probes} probes, {rounds} rounds, {n_samples} samples",
            )
        elif isinstance(decision, Ambiguous):
            store.bisections.record_ambiguous(conn, bisection_id, decision.reason, decision.good, decision.bad, now)
            _log(
                conn,
                bisection_id,
                f"ambiguous: the change is in ({decision.good[:12]}, {decision.bad[:12]}]: {decision.reason}",
            )
        elif isinstance(decision, NotReproducible):
            store.bisections.record_not_reproducible(conn, bisection_id, decision.reason, now)
            _log(conn, bisection_id, f"not reproducible: {decision.reason}")
        return decision


def _queue_confirmation(conn: sqlite3.Connection, b: Bisection, pair: ConfirmPair, builder: str) -> int:
    """Queue a job measuring the parent (side A) and the culprit (side B) interleaved, the bisected workload only
    (as its probes), on the bisection's worker; the job service runs it like any job."""
    job_id = store.jobs.insert(
        conn,
        kind="bisect",
        builder=builder,
        branch=b.branch,
        sides=(JobSide("A", pair.parent, pair.parent), JobSide("B", pair.culprit, pair.culprit)),
        options=(f"workloads={b.workload}",),
        patch=None,
        requested_by=f"bisection {b.id}",
        now=time.time(),
    )
    store.bisections.link_job(conn, b.id, job_id)
    return job_id


def _culprit_sides(obs: Observations, culprit: Culprit) -> tuple[list[float], list[float], str]:
    """The samples the culprit's ratio is formed of: its parent's and its own, each replaced by the series' level
    on its side when a paired series was bisected on its levels and the commit has fewer than two samples (a
    probe is one block: one sample, no interval), and what the ratio is against, said in the log."""
    before, after = list(obs.of(culprit.parent)), list(obs.of(culprit.commit))
    against = culprit.parent[:12]
    if obs.levels is not None and min(len(before), len(after)) < 2:
        before, after = list(obs.levels[0]), list(obs.levels[1])
        against += f" (the series' levels around the change: {len(before)} and {len(after)} samples)"
    return before, after, against


def _finished(b: Bisection) -> Decision:
    if b.state == "culprit":
        assert b.culprit is not None and b.parent is not None  # set with the state
        return Culprit(b.culprit, b.parent)
    if b.state == "ambiguous":
        return Ambiguous(b.good, b.bad, b.reason)
    return NotReproducible(b.reason)


def running(conn: sqlite3.Connection) -> list[int]:
    return store.bisections.running(conn)


def auto_create(conn: sqlite3.Connection, change_point_id: int) -> int | None:
    """A bisection for a change point whose range holds untested commits (None if nothing new to bisect).

    Called when a change point is new and when it moves: a change point placed by the newest commits may move as
    more commits are measured, and a bisection of its old range would search commits the change is not in (and
    end "not reproducible"). A range that an earlier bisection of the change point already covers starts none.
    Nor does a range another change point's bisection on the same builder and branch answers for (a running one
    whose range holds it, a finished one whose culprit is in it): the change point shares that bisection
    (``sharing``), so the lines of one regression (rQPS, latency, CPU per transaction of one or more workloads)
    start one bisection, not one each (issue #28)."""
    cp = store.changes.change_point(conn, change_point_id)
    if cp is None or cp.prev_sha is None or cp.prev_position is None or cp.position - cp.prev_position <= 1:
        return None
    if any(cp.prev_sha in b.commits and cp.sha in b.commits for b in store.bisections.of_change_point(conn, cp.id)):
        return None
    k = cp.key
    builder = store.bisections.newest_builder(conn, k.machine_id, k.recipe, k.config_hash, k.workload, cp.sha)
    if builder is None:
        return None
    other = store.bisections.covering(conn, builder, k.branch, cp.prev_sha, cp.sha)
    if other is not None:
        store.bisections.share(conn, change_point_id, other.id, time.time())
        _log(conn, other.id, f"answers for change point {change_point_id} too ({k.workload}/{k.metric})")
        return None
    return create(
        conn,
        good=cp.prev_sha,
        bad=cp.sha,
        workload=k.workload,
        metric=k.metric,
        branch=k.branch,
        builder=builder,
        change_point_id=change_point_id,
    )


def bisect_rank(metric: str) -> int:
    """Which line of one regression its shared bisection should follow (lower first): a throughput's ratio to
    the reference (``.rqps``) or any series of its own before the ratios of latency percentiles, CPU and context
    switches per transaction (``.ratio``), whose blocks are noisier, so a probe of them takes more rounds to clear
    the midpoint (issue #28: a bisection that followed ``latency_avg.ratio`` needed 7-10 rounds for 3 of its 4
    probes)."""
    return 1 if metric.endswith(RATIO_SUFFIX) else 0


def in_bisect_order(events: Sequence[E]) -> list[E]:
    """Change events in the order their change points may start a bisection (``bisect_rank`` of their series'
    metric, then as given): the first of the lines of one regression starts it and the others share it
    (``auto_create``)."""
    return sorted(events, key=lambda e: bisect_rank(e.metric))


def sharing(conn: sqlite3.Connection, change_point_id: int) -> int | None:
    """The bisection of another change point that a change point shares (``auto_create``), if any."""
    return store.bisections.shared_by(conn, change_point_id)


def report_to_alert(conn: sqlite3.Connection, bisection_id: int, alert_settings) -> str | None:
    """Tell the alerts of the change points the bisection answers for (the one it was started for and those that
    share it) where it stands, and its culprit; each alert's message is then updated, not re-sent as new. A change
    point that moved on to a newer bisection hears from that one only. Returns the first alert id told, if any."""
    b = get(conn, bisection_id)
    told: list[str] = []
    for cp_id in store.bisections.sharing(conn, b.id):
        if store.bisections.of_change_point(conn, cp_id)[-1].id != b.id:
            continue  # the change point moved and a newer bisection searches its range: that one speaks for it
        alert_id = store.alerts.alert_for_change_point(conn, cp_id)
        if alert_id is None or alert_id in told:
            continue
        alerting.record_bisection(conn, alert_id, b.state, b.culprit)
        told.append(alert_id)
    if told:
        alerting.sync(conn, alert_settings)
    return told[0] if told else None
