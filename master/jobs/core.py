"""Creating jobs and reading their outcome (pure: the results store and the master's git mirror, no Buildbot)."""

from __future__ import annotations

import fnmatch
import re
import sqlite3
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from master import refnames, store
from master.config_values import OPTION_RE
from master.store.jobs import Job, JobSide
from master.store.series import MeasureKey
from recipes import ab
from recipes.api import Metric, WorkloadResult
from recipes.paired import OPTION as REFERENCE_OPTION
from recipes.sides import LABELS, MAX_SIDES
from recipes.stats import NoRatio, paired_estimate

RELEASES, TRY, BISECT = "releases", "try", "bisect"  # BISECT: a bisection's culprit confirmation (master/bisection)
AGAIN = {  # how a job of a kind is measured again after its request was cancelled
    RELEASES: "To measure it, queue a new job: perffarm releases --tags ...",
    TRY: "To measure it, queue a new job: perffarm try --patch ...",
    BISECT: "Its bisection queues another by itself (perffarm bisect --status shows it)",
}


class JobError(ValueError):
    """A job that cannot be created: the message says what was wrong and what to do; nothing was queued."""


def match_tags(tags: Mapping[str, str], patterns: Sequence[str]) -> list[str]:
    """The tags matching any of the shell-style patterns (`REL_1[3-8]_*`), in version order."""
    return refnames.release_order([t for t in tags if any(fnmatch.fnmatchcase(t, p) for p in patterns)])


def check_options(options: Sequence[str]) -> tuple[str, ...]:
    bad = [o for o in options if not OPTION_RE.match(o)]
    if bad:
        raise JobError(f"options {bad!r} are not KEY=VALUE (e.g. samples=7, workloads=pgbench-ro-prepared-c1)")
    if any(o.startswith(f"{REFERENCE_OPTION}=") for o in options):
        raise JobError(f"{REFERENCE_OPTION}= pairs a commit's run with a reference; a job's sides are already paired")
    return tuple(options)


def check_builder(builder: str, builders: Sequence[str]) -> str:
    if builder not in builders:
        raise JobError(f"no builder {builder!r} measures jobs here (known: {', '.join(builders) or 'none'})")
    return builder


def create_releases(
    conn: sqlite3.Connection,
    tags: Mapping[str, str],
    patterns: Sequence[str],
    builder: str,
    builders: Sequence[str],
    options: Sequence[str] = (),
    requested_by: str = "cli",
) -> int:
    """Queue release archaeology of the tags matching `patterns` (`tags`: name -> commit, from the master's
    mirror); the oldest release is side A, every other release's ratio is to it."""
    names = match_tags(tags, patterns)
    if len(names) < 2:
        raise JobError(
            f"{', '.join(repr(p) for p in patterns)} matched {len(names)} tag(s) ({', '.join(names) or 'none'}): "
            "a release comparison needs 2 to 8; check the pattern against `git tag` (the farm knows the tags its "
            "mirror fetched)"
        )
    if len(names) > MAX_SIDES:
        raise JobError(
            f"{len(names)} tags match ({', '.join(names)}): at most {MAX_SIDES} in one job (each side is a running "
            "server); narrow the pattern"
        )
    for name in names:
        problem = refnames.ref_problem(name)
        if problem:
            raise JobError(f"tag {refnames.show(name)} {problem}")
    sides = tuple(JobSide(label, name, tags[name]) for label, name in zip(LABELS, names))
    with store.transaction(conn):
        return store.jobs.insert(
            conn,
            kind=RELEASES,
            builder=check_builder(builder, builders),
            branch=names[0],
            sides=sides,
            options=check_options(options),
            patch=None,
            requested_by=requested_by,
            now=time.time(),
        )


@dataclass(frozen=True)
class SideComparison:
    """One side's numbers against side A: per (workload, metric), A's and this side's samples and the ratio."""

    side: JobSide
    comparisons: tuple[ab.Comparison, ...]


def results_of(job: Job) -> dict[str, list[WorkloadResult]]:
    """Each side's workload results from a finished job's stored result (label -> results)."""
    out: dict[str, list[WorkloadResult]] = {}
    for side in (job.result or {}).get("sides", []):
        out[side["label"]] = [
            WorkloadResult(
                w["name"],
                tuple(Metric(m["name"], m["unit"], m["direction"], tuple(m["samples"])) for m in w["metrics"]),
                tuple(w.get("flags", ())),
            )
            for w in side["workloads"]
        ]
    return out


def comparisons(job: Job, keep: Callable[[str], bool] | None = None) -> list[SideComparison]:
    """Every side after A against A: the order-balanced ratio of the rounds (sample i of both sides ran in round i,
    A first when i is even) with its 95% CI (recipes/ab.py, as `perffarm compare` prints them), or what keeps the
    samples from forming one (Comparison.problem). `keep(metric)` selects metrics (default all)."""
    results = results_of(job)
    base = results.get(job.sides[0].label, [])
    out = []
    for side in job.sides[1:]:
        cs = [
            c
            for c in ab.compare(base, results.get(side.label, []), labels=(job.sides[0].label, side.label))
            if keep is None or keep(c.metric)
        ]
        out.append(SideComparison(side, tuple(cs)))
    return out


def get(conn: sqlite3.Connection, job_id: int) -> Job:
    job = store.jobs.get(conn, job_id)
    if job is None:
        raise JobError(f"no job with id {job_id} (`perffarm jobs` lists them)")
    return job


@dataclass(frozen=True)
class ReleaseRatio:
    """A release's ratio to a base release measured in the same job: the order-balanced ratio of the rounds (each
    pair of sides swaps order from one round to the next), 95% CI."""

    ratio: float
    low: float
    high: float
    job: int


@dataclass(frozen=True)
class ReleaseNumbers:
    """What done release jobs say, newest job first wins: per measure key, each (tag, base tag) pair's paired
    ratio and each tag's median (unit, direction) with the job that measured it; the tags they measured, name ->
    commit; per measure key, the pairs whose samples form no ratio, with why and the job (a throughput of 0
    stored before the validator refused it); and the plan each tag ran an analytic query with."""

    ratios: dict[MeasureKey, dict[tuple[str, str], ReleaseRatio]]
    medians: dict[MeasureKey, dict[str, float]]
    units: dict[MeasureKey, tuple[str, str]]
    tags: dict[str, str]
    measured_by: dict[MeasureKey, dict[str, int]]
    problems: dict[MeasureKey, dict[tuple[str, str], tuple[str, int]]] = field(default_factory=dict)
    # per measure key of an analytic query, the shape of the plan each tag ran it with, from the job whose
    # median the tag's number is (the result's `sides[].plans`, recipes/pg/plans.py)
    plans: dict[MeasureKey, dict[str, str]] = field(default_factory=dict)


def release_numbers(jobs: Sequence[Job]) -> ReleaseNumbers:
    """Paired numbers for the release tables from done release jobs (`jobs` newest first). Any two sides of one
    job pair round by round (sample i of every side ran in round i), so every pair of its releases has a paired
    ratio, not only each against side A."""
    ratios: dict[MeasureKey, dict[tuple[str, str], ReleaseRatio]] = {}
    medians: dict[MeasureKey, dict[str, float]] = {}
    units: dict[MeasureKey, tuple[str, str]] = {}
    tags: dict[str, str] = {}
    measured_by: dict[MeasureKey, dict[str, int]] = {}
    problems: dict[MeasureKey, dict[tuple[str, str], tuple[str, int]]] = {}
    plans: dict[MeasureKey, dict[str, str]] = {}
    for job in jobs:
        if job.kind != RELEASES or job.state != "done" or not job.result:
            continue
        doc = job.result
        recipe = doc["recipe"]
        samples: dict[MeasureKey, dict[str, tuple[float, ...]]] = {}
        shapes: dict[MeasureKey, dict[str, str]] = {}
        for side, stored in zip(job.sides, doc["sides"]):
            tags.setdefault(side.revision, side.sha)
            side_plans = stored.get("plans") or {}
            for w in stored["workloads"]:
                for m in w["metrics"]:
                    key = MeasureKey(
                        doc["machine"]["id"],
                        recipe["name"],
                        int(recipe["version"]),
                        w.get("config_hash", recipe["config_hash"]),
                        w["name"],
                        m["name"],
                    )
                    samples.setdefault(key, {})[side.revision] = tuple(m["samples"])
                    units.setdefault(key, (m["unit"], m["direction"]))
                    if isinstance(side_plans.get(w["name"]), str):
                        shapes.setdefault(key, {})[side.revision] = side_plans[w["name"]]
        for key, per in samples.items():
            for tag, xs in per.items():
                if tag not in medians.setdefault(key, {}):
                    medians[key][tag] = statistics.median(xs)
                    measured_by.setdefault(key, {})[tag] = job.id
                    if tag in shapes.get(key, {}):
                        plans.setdefault(key, {})[tag] = shapes[key][tag]
                for base, bs in per.items():
                    pair = (tag, base)
                    if pair in ratios.get(key, {}) or pair in problems.get(key, {}):
                        continue  # a newer job measured this pair
                    n = min(len(xs), len(bs))
                    if n == 0:
                        continue
                    try:
                        e = paired_estimate(bs[:n], xs[:n])
                    except NoRatio as no:
                        problems.setdefault(key, {})[pair] = (no.describe(base, tag, key.metric), job.id)
                        continue
                    ratios.setdefault(key, {})[pair] = ReleaseRatio(e.ratio, e.low, e.high, job.id)
    return ReleaseNumbers(ratios, medians, units, tags, measured_by, problems, plans)


MAX_PATCH_BYTES = 1 << 20  # recipes/sides.py PATCH_LIMIT: the worker refuses larger ones too


def check_patch(patch: bytes) -> str:
    """The patch as text, or JobError saying what is wrong with it (size, encoding, not a unified diff)."""
    if not patch.strip():
        raise JobError("the patch is empty")
    if len(patch) > MAX_PATCH_BYTES:
        raise JobError(f"the patch is {len(patch)} bytes, over the {MAX_PATCH_BYTES}-byte limit")
    try:
        text = patch.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JobError(
            f"the patch is not UTF-8 text (byte {e.start}); give a unified diff (git diff, git format-patch)"
        ) from None
    if "\0" in text:
        raise JobError("the patch holds a NUL byte; binary patches are not taken")
    if not re.search(r"^(diff --git |--- )", text, re.M) or not re.search(r"^\+\+\+ ", text, re.M):
        raise JobError("this is not a unified diff (no '--- a/...' / '+++ b/...' lines); make it with git diff")
    return text if text.endswith("\n") else text + "\n"  # a form or an editor may drop the last newline


def create_try(
    conn: sqlite3.Connection,
    base: str,
    base_sha: str,
    patch: str,
    applies: Callable[[str, str], str | None],
    builder: str,
    builders: Sequence[str],
    options: Sequence[str] = (),
    requested_by: str = "cli",
    also: Callable[[sqlite3.Connection, int], None] | None = None,
) -> int:
    """Queue a try-job: side A the base commit, side B the base with the patch, measured interleaved in one build.
    `applies(base_sha, patch)` says why the patch does not apply to the base (None: it applies); `also(conn, id)`
    stores what else belongs to the job in the same transaction (a cfbot job's branch head)."""
    problem = applies(base_sha, patch)
    if problem:
        raise JobError(f"the patch does not apply to {base} ({base_sha[:12]}): {problem}")
    sides = (JobSide("A", base, base_sha), JobSide("B", base, base_sha, patched=True))
    with store.transaction(conn):
        job_id = store.jobs.insert(
            conn,
            kind=TRY,
            builder=check_builder(builder, builders),
            branch=base,
            sides=sides,
            options=check_options(options),
            patch=patch,
            requested_by=requested_by,
            now=time.time(),
        )
        if also is not None:
            also(conn, job_id)
        return job_id


# ------------------------------------------------------------------------------------------ jobs left running
@dataclass(frozen=True)
class Stalled:
    """A job left running with no build alive, and what the job service does with it: fail it, or queue it again
    (`requeue`), with the reason shown by `perffarm jobs` and on the job's page."""

    job_id: int
    requeue: bool
    reason: str


def stalled_jobs(
    running: Sequence[int], alive: set[int], seen: Mapping[int, float], now: float, grace: float
) -> tuple[list[int], dict[int, float]]:
    """Which running jobs to act on: those with no unfinished build request (`alive`: jobs that have one) on this
    pass and the previous one, first seen so at least `grace` seconds before `now` (master.reconcile_grace, the
    reconciler's rule: a job whose build is just being submitted is never touched). `seen` maps each job seen
    without a request on the previous pass to when it was first seen; the second result is the same for this
    pass."""
    act: list[int] = []
    seen_now: dict[int, float] = {}
    for job_id in running:
        if job_id in alive:
            continue
        first = seen.get(job_id, now)
        seen_now[job_id] = first
        if job_id in seen and now - first >= grace:
            act.append(job_id)
    return act, seen_now


def why_stalled(job: Job, request: int | None, builds: Sequence[tuple[int, str]], max_attempts: int) -> Stalled:
    """What to do with a job that stayed running with no build request alive. `request`: its newest build request
    if Buildbot still has it (finished: cancelled or its build ended), None if it was never submitted; `builds`:
    that request's builds as (number, result). A request cancelled before any build started was cancelled on
    purpose: the job fails. A job whose build was lost (never submitted: the master stopped between taking the job
    and submitting it) or ended without ending the job is queued again, at most `max_attempts` times."""
    if request is not None and not builds:
        return Stalled(
            job.id,
            False,
            f"its build request {request} was cancelled before a build started (in Buildbot's web UI or API); "
            f"nothing was measured. {AGAIN.get(job.kind, AGAIN[RELEASES])}",
        )
    if request is None:
        why = "its build was never submitted (the master stopped between taking the job and submitting its build)"
    else:
        number, result = builds[-1]
        why = f"its build {number} ended ({result}) without storing the job's result"
    if job.attempts > max_attempts:
        return Stalled(job.id, False, f"{why}; given up after {job.attempts} builds (master.max_attempts)")
    return Stalled(job.id, True, f"queued again by the farm: {why}")
