"""Runs and their measurements, build attempts and rejected results (tables runs, measurements, machines,
attempts, rejections, and the probe link bisection_runs)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from master.store.commits import branch_heads
from master.store.connection import StoreError, _chunked


class AlreadyStored(StoreError):
    """This measurement's result is in the database already (ingest is idempotent per build request)."""

    def __init__(self, message: str, run_id: int | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclass(frozen=True)
class RunContext:
    """What the master knows about the build that produced a result (not taken from the worker)."""

    builder: str
    worker: str
    source: str  # poll, force, requeue, bisect, cli
    build_id: int | None = None
    build_url: str | None = None
    got_revision: str | None = None
    revision: str | None = None  # what was asked for (a tag object for annotated tags); defaults to the sha
    bisection_id: int | None = None  # set for bisection probes: the run counts as a fresh round of it
    request_key: str | None = None  # "<master instance>/<build request id>": the measurement's idempotency key
    ref: str | None = None  # the branch or tag the master asked for (validated); the worker's word is not used
    expected_sha: str | None = None  # the commit the master resolved the requested revision to in its mirror
    reference: str | None = None  # the reference commit the master asked the worker to pair with (None: unpaired)


def insert_run(conn: sqlite3.Connection, doc: dict[str, Any], run: RunContext) -> int:
    """Store one validated result (machine, run, every sample); the caller holds the transaction.

    Idempotent per build request: a retried build (the master was killed after storing its result) raises
    AlreadyStored carrying the stored run's id instead of storing the measurement twice. Runs from outside
    Buildbot (no request key) are idempotent per build id.
    """
    if run.request_key is not None:
        stored = run_for_request(conn, run.request_key)
        if stored is not None:
            raise AlreadyStored(f"build request {run.request_key} already has a stored result (run {stored})", stored)
    elif run.build_id is not None:
        row = conn.execute("SELECT id FROM runs WHERE build_id = ?", (run.build_id,)).fetchone()
        if row:
            raise AlreadyStored(f"build {run.build_id} already has a stored result (run {row[0]})", row[0])
    machine = doc["machine"]
    conn.execute(
        "INSERT INTO machines (id, fingerprint, first_seen) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING",
        (machine["id"], json.dumps(machine["fingerprint"], sort_keys=True), time.time()),
    )
    checks = doc.get("host_checks", {})
    cur = conn.execute(
        "INSERT INTO runs (sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, config_hash, "
        "status, source, build_id, build_url, log_excerpt, host_checks, noisy, started_at, finished_at, "
        "ingested_at, result, request_key, reference) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            doc["commit"]["sha"],
            run.revision or doc["commit"]["sha"],
            short_ref(run.ref or doc["commit"]["ref"]),
            run.builder,
            run.worker,
            machine["id"],
            doc["recipe"]["name"],
            doc["recipe"]["version"],
            doc["recipe"]["config_hash"],
            doc["status"],
            run.source,
            run.build_id,
            run.build_url,
            doc.get("log_excerpt", ""),
            json.dumps(checks, sort_keys=True),
            1 if checks.get("noisy") else 0,
            doc.get("started_at"),
            doc.get("finished_at"),
            time.time(),
            json.dumps(doc, sort_keys=True),
            run.request_key,
            run.reference,
        ),
    )
    run_id = cur.lastrowid
    assert run_id is not None  # set by every INSERT
    rows = []
    for w in doc["workloads"]:
        flags = json.dumps(w.get("flags", []))
        config_hash = workload_config_hash(doc, w)
        for m in w["metrics"]:
            rows.append(
                (run_id, w["name"], m["name"], m["unit"], m["direction"], json.dumps(m["samples"]), flags, config_hash)
            )
    conn.executemany(
        "INSERT INTO measurements (run_id, workload, metric, unit, direction, samples, flags, config_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    adopt_workload_hashes(conn, doc, run_id)
    conn.executemany(
        "INSERT INTO profiles (run_id, workload, queries, profile) VALUES (?, ?, ?, ?)",
        [
            (run_id, workload, p["queries"], json.dumps(p["profile"], sort_keys=True))
            for workload, p in sorted(doc.get("callgrind", {}).items())
        ],
    )
    conn.executemany(
        "INSERT INTO plans (run_id, workload, shape) VALUES (?, ?, ?)",
        [(run_id, workload, shape) for workload, shape in sorted(doc.get("plans", {}).items())],
    )
    conn.executemany(
        "INSERT INTO waits (run_id, side, workload, samples) VALUES (?, ?, ?, ?)",
        [
            (run_id, side, workload, json.dumps(samples, sort_keys=True))
            for side, key in WAIT_SIDES
            for workload, samples in sorted(doc.get(key, {}).items())
        ],
    )
    if run.bisection_id is not None:
        conn.execute(  # a probe of a bisection that no longer exists is still a stored run
            "INSERT INTO bisection_runs (bisection_id, run_id) SELECT ?, ? "
            "WHERE EXISTS (SELECT 1 FROM bisections WHERE id = ?)",
            (run.bisection_id, run_id, run.bisection_id),
        )
    return run_id


# (side, result member) of the waits a run result carries: the commit's own and a paired run's reference's
WAIT_SIDES = (("run", "waits"), ("reference", "waits_reference"))


def workload_config_hash(doc: dict[str, Any], workload: dict[str, Any]) -> str:
    """The series identity of one workload of a result: its own config hash, or the recipe's for results of
    recipes that do not give one per workload (those compare only within one whole recipe config, as before)."""
    return workload.get("config_hash") or doc["recipe"]["config_hash"]


def adopt_workload_hashes(conn: sqlite3.Connection, doc: dict[str, Any], run_id: int) -> int:
    """Move measurements still keyed by their run's hash into the series of their workload's own hash.

    Rows stored before results carried per-workload hashes (migration 6 keyed them by their run's hash) that were
    measured under the very recipe config of this result (same recipe, version and whole-recipe hash) measured
    what this result's workloads measure: they take this result's workload hashes, and so do their series (change
    points and alerts stay attached) and bisections. Without this, the first result of a recipe that gives
    per-workload hashes would start a new series for every workload. Returns how many rows moved; the caller holds
    the transaction.
    """
    recipe = doc["recipe"]
    old = recipe["config_hash"]
    new = {w["name"]: w["config_hash"] for w in doc["workloads"] if w.get("config_hash", old) != old}
    if not new:
        return 0
    rows = conn.execute(
        "SELECT m.rowid, m.workload FROM measurements m JOIN runs r ON r.id = m.run_id WHERE m.config_hash = ? "
        "AND r.config_hash = ? AND r.recipe = ? AND r.recipe_version = ? AND r.id != ?",
        (old, old, recipe["name"], recipe["version"], run_id),
    ).fetchall()
    moved = [(new[w], rowid) for rowid, w in rows if w in new]
    if not moved:
        return 0
    conn.executemany("UPDATE measurements SET config_hash = ? WHERE rowid = ?", moved)
    for workload in sorted({w for _, w in rows if w in new}):
        # every series of these rows (any machine, branch, metric): a series with the new hash cannot exist yet,
        # as no row had it before this result (whose series analysis creates after this)
        conn.execute(
            "UPDATE OR IGNORE series SET config_hash = ? WHERE recipe = ? AND recipe_version = ? AND config_hash = ? "
            "AND workload = ?",
            (new[workload], recipe["name"], recipe["version"], old, workload),
        )
        conn.execute(
            "UPDATE bisections SET config_hash = ? WHERE recipe = ? AND config_hash = ? AND workload = ?",
            (new[workload], recipe["name"], old, workload),
        )
    return len(moved)


def run_for_request(conn: sqlite3.Connection, request_key: str | None) -> int | None:
    """The id of the run stored for a build request, or None (also for None: runs from outside Buildbot)."""
    if request_key is None:
        return None
    row = conn.execute("SELECT id FROM runs WHERE request_key = ?", (request_key,)).fetchone()
    return int(row[0]) if row else None


AUTOMATIC_SOURCES = ("poll", "requeue")  # runs the farm makes by itself: one per commit and builder


def automatic_run_for(conn: sqlite3.Connection, revision: str, builder: str) -> int | None:
    """The run an automatic build (poll or requeue) of `revision` on `builder` stored already, or None."""
    marks = ",".join("?" * len(AUTOMATIC_SOURCES))
    row = conn.execute(
        f"SELECT MIN(id) FROM runs WHERE builder = ? AND revision = ? AND source IN ({marks})",
        (builder, revision, *AUTOMATIC_SOURCES),
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def short_ref(ref: str) -> str:
    """`refs/heads/X` and `refs/tags/X` to `X` (Buildbot names tag changes by their full ref)."""
    for prefix in ("refs/heads/", "refs/tags/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


def record_attempt(conn: sqlite3.Connection, build_id: int, sha: str, builder: str) -> None:
    """Note that a build of `sha` started (the reconciler caps re-queues by counting these)."""
    conn.execute(
        "INSERT INTO attempts (build_id, sha, builder, started_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(build_id) DO NOTHING",
        (build_id, sha, builder, time.time()),
    )


def record_rejection(conn: sqlite3.Connection, run: RunContext, revision: str, reason: str, file: str) -> None:
    """Remember a rejected result: the commit was measured, its result was unusable; not re-queued."""
    conn.execute(
        "INSERT INTO rejections (build_id, revision, builder, reason, file, rejected_at) VALUES (?, ?, ?, ?, ?, ?)",
        (run.build_id, revision, run.builder, reason, file, time.time()),
    )


def results_for(conn: sqlite3.Connection, shas: Sequence[str], builder: str) -> set[str]:
    """Which requested revisions already have an outcome from `builder`: a stored result (any status)
    or a rejected one (re-running a recipe that wrote a malformed result would only repeat it)."""
    found: set[str] = set()
    for i in range(0, len(shas), 500):
        chunk = list(shas[i : i + 500])
        marks = ",".join("?" * len(chunk))
        for table in ("runs", "rejections"):
            found.update(
                r[0]
                for r in conn.execute(
                    f"SELECT DISTINCT revision FROM {table} WHERE builder = ? AND revision IN ({marks})",
                    (builder, *chunk),
                )
            )
    return found


def attempt_counts(conn: sqlite3.Connection, shas: Sequence[str], builder: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(0, len(shas), 500):
        chunk = list(shas[i : i + 500])
        marks = ",".join("?" * len(chunk))
        for sha, n in conn.execute(
            f"SELECT sha, COUNT(*) FROM attempts WHERE builder = ? AND sha IN ({marks}) GROUP BY sha",
            (builder, *chunk),
        ):
            counts[sha] = n
    return counts


@dataclass(frozen=True)
class Run:
    """A stored run: its row of `runs` without the log (text as stored: whoever shows it makes it visible)."""

    id: int
    sha: str
    ref: str
    builder: str
    worker: str
    machine_id: str
    recipe: str
    recipe_version: int
    config_hash: str
    status: str
    source: str
    build_id: int | None
    build_url: str | None
    noisy: int  # 1: the host checks flagged the machine noisy during the run
    started_at: str | None
    finished_at: str | None
    ingested_at: float


_RUN_COLUMNS = [f.name for f in dataclasses.fields(Run)]


@dataclass(frozen=True)
class ListedRun(Run):
    """A run as `perffarm results` lists it, with its commit's subject and author when known."""

    subject: str | None
    author: str | None


@dataclass(frozen=True)
class RunWithLog(Run):
    """A run with the end of its log, as a commit's page lists it."""

    log_excerpt: str


@dataclass(frozen=True)
class Measurement:
    """One (run, workload, metric) with every raw sample, as stored."""

    run_id: int
    workload: str
    metric: str
    unit: str
    direction: str
    samples: str  # JSON array
    flags: str  # JSON array


@dataclass(frozen=True)
class LatestRun:
    """The newest stored run of one (ref, builder)."""

    ref: str
    builder: str
    sha: str
    status: str
    finished_at: str | None
    ingested_at: float
    subject: str | None


def list_runs(
    conn: sqlite3.Connection,
    *,
    ref: str | None = None,
    builder: str | None = None,
    sha_prefix: str | None = None,
    limit: int | None = 50,
) -> list[ListedRun]:
    """Runs, newest first, with their commit's subject and author when known."""
    where, params = [], []
    if ref:
        where.append("r.ref = ?")
        params.append(ref)
    if builder:
        where.append("r.builder = ?")
        params.append(builder)
    if sha_prefix:
        where.append("r.sha LIKE ?")
        params.append(sha_prefix.lower() + "%")
    sql = (
        f"SELECT {', '.join('r.' + c for c in _RUN_COLUMNS)}, c.subject, c.author "
        "FROM runs r LEFT JOIN commits c ON c.sha = r.sha"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r.id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [ListedRun(*r) for r in conn.execute(sql, params)]


def measurements_for(conn: sqlite3.Connection, run_ids: Sequence[int]) -> list[Measurement]:
    if not run_ids:
        return []
    marks = ",".join("?" * len(run_ids))
    return [
        Measurement(*r)
        for r in conn.execute(
            f"SELECT run_id, workload, metric, unit, direction, samples, flags FROM measurements "
            f"WHERE run_id IN ({marks}) ORDER BY run_id, workload, metric",
            list(run_ids),
        )
    ]


def latest_per_ref(conn: sqlite3.Connection) -> list[LatestRun]:
    """The newest stored run of every (ref, builder).

    A skip scan over the index runs_latest: one probe for the next (ref, builder) pair and one for its newest run,
    so `perffarm status` costs the same after ten years of runs (docs/scale.md). `GROUP BY ref, builder` read
    every run's row instead, which grew with the history."""
    ids = []
    pair = conn.execute("SELECT ref, builder FROM runs ORDER BY ref, builder LIMIT 1").fetchone()
    while pair is not None:
        ref, builder = pair
        ids.append(conn.execute("SELECT MAX(id) FROM runs WHERE ref = ? AND builder = ?", (ref, builder)).fetchone()[0])
        # two seeks, not `(ref, builder) > (?, ?)`: SQLite seeks that one on `ref` alone and reads the ref's runs
        nxt = conn.execute(
            "SELECT builder FROM runs WHERE ref = ? AND builder > ? ORDER BY builder LIMIT 1", (ref, builder)
        ).fetchone()
        pair = (
            (ref, nxt[0])
            if nxt is not None
            else conn.execute(
                "SELECT ref, builder FROM runs WHERE ref > ? ORDER BY ref, builder LIMIT 1", (ref,)
            ).fetchone()
        )
    sql = (
        "SELECT r.ref, r.builder, r.sha, r.status, r.finished_at, r.ingested_at, c.subject "
        "FROM runs r LEFT JOIN commits c ON c.sha = r.sha"
    )
    return sorted((LatestRun(*r) for r in _chunked(conn, sql, "r.id", ids)), key=lambda r: (r.ref, r.builder))


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows per table, for `perffarm status`. The tables that grow with the history (after ten years of a
    20-machine fleet: a million runs, a hundred million measurements) are counted by triggers (migration 14), not
    scanned."""
    out = {name: int(n) for name, n in conn.execute("SELECT name, n FROM row_counts")}
    for table in ("tags", "machines", "rejections"):
        out[table] = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return out


def ok_run_ids(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM runs WHERE status = 'ok'")]


# ---------------------------------------------------------------------------------------------- what the site reads


@dataclass(frozen=True)
class Machine:
    id: str
    fingerprint: dict[str, Any]  # {} when the stored JSON is not an object
    first_seen: float


@dataclass(frozen=True)
class NoisyRun:
    """The newest run of a machine its host checks flagged noisy."""

    host_checks: str  # JSON
    ingested_at: float


@dataclass(frozen=True)
class WorkerHealth:
    """Per (worker, builder, machine): runs, failures, noisy runs, newest ingest."""

    worker: str
    builder: str
    machine_id: str
    runs: int
    failed: int
    noisy: int
    last: float


def runs(
    conn: sqlite3.Connection, ids: Iterable[int] | None = None, shas: Iterable[str] | None = None
) -> dict[int, RunWithLog]:
    """Runs by id: these ids, else the runs at these commits, else every run."""
    sql = f"SELECT {', '.join(_RUN_COLUMNS)}, log_excerpt FROM runs"
    rows = _chunked(conn, sql, "id", ids) if ids is not None else _chunked(conn, sql, "sha", shas)
    return {r[0]: RunWithLog(*r) for r in rows}


def measured_configs(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
    """Every (machine, recipe, recipe version) with an ok run, sorted: what a full publish loads one machine at a
    time (from the runs_series index, without reading a run)."""
    return [
        (m, r, int(v))
        for m, r, v in conn.execute(
            "SELECT DISTINCT machine_id, recipe, recipe_version FROM runs WHERE status = 'ok' "
            "ORDER BY machine_id, recipe, recipe_version"
        )
    ]


def run_shas(conn: sqlite3.Connection) -> set[str]:
    """The commits with at least one stored run (any status), from the runs_sha index."""
    return {sha for (sha,) in conn.execute("SELECT DISTINCT sha FROM runs")}


def run_of(conn: sqlite3.Connection, run_id: int) -> Run | None:
    return runs(conn, ids=[run_id]).get(run_id)


def last_run_id(conn: sqlite3.Connection) -> int:
    """The highest stored run id (0 without runs)."""
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM runs").fetchone()[0])


def run_ids_above(conn: sqlite3.Connection, run_id: int) -> list[int]:
    """Stored runs newer than `run_id`, in id order."""
    return [r[0] for r in conn.execute("SELECT id FROM runs WHERE id > ? ORDER BY id", (run_id,))]


def machines(conn: sqlite3.Connection) -> dict[str, Machine]:
    out = {}
    for r in conn.execute("SELECT id, fingerprint, first_seen FROM machines ORDER BY id"):
        try:
            fp = json.loads(r[1])
        except ValueError:
            fp = {}
        out[r[0]] = Machine(r[0], fp if isinstance(fp, dict) else {}, r[2])
    return out


def last_noisy_run(conn: sqlite3.Connection, machine_id: str) -> NoisyRun | None:
    row = conn.execute(
        "SELECT host_checks, ingested_at FROM runs WHERE machine_id = ? AND noisy = 1 ORDER BY id DESC LIMIT 1",
        (machine_id,),
    ).fetchone()
    return NoisyRun(*row) if row else None


def run_health(conn: sqlite3.Connection) -> list[WorkerHealth]:
    """Per (worker, builder, machine): runs, failures, noisy runs, newest ingest."""
    return [
        WorkerHealth(*r)
        for r in conn.execute(
            "SELECT worker, builder, machine_id, COUNT(*) AS runs, SUM(status != 'ok') AS failed, SUM(noisy) AS noisy, "
            "MAX(ingested_at) AS last FROM runs GROUP BY worker, builder, machine_id ORDER BY worker, builder"
        )
    ]


def last_result_per_branch(conn: sqlite3.Connection) -> dict[str, tuple[float, int, int]]:
    """branch -> (newest ingest time of a run on it, head position, position of the newest tested commit)."""
    out = {}
    # From the measured commits to their positions (CROSS JOIN fixes that order in SQLite): the planner otherwise
    # read every stored position, 0.25 s at postgres.git's size with every branch watched (docs/scale.md).
    for r in conn.execute(
        "SELECT bc.branch, MAX(r.at), MAX(bc.position) "
        "FROM (SELECT sha, MAX(ingested_at) AS at FROM runs GROUP BY sha) r "
        "CROSS JOIN branch_commits bc ON bc.sha = r.sha GROUP BY bc.branch"
    ):
        out[r[0]] = (float(r[1]), -1, int(r[2]))
    heads = branch_heads(conn)
    return {b: (out.get(b, (0.0, 0, -1))[0], heads[b], out.get(b, (0.0, 0, -1))[2]) for b in heads}


def untested_counts(conn: sqlite3.Connection, window: int = 100) -> dict[str, int]:
    """branch -> commits among its newest `window` that have no run at all (missing results)."""
    out = {}
    for branch, head in branch_heads(conn).items():
        out[branch] = conn.execute(
            "SELECT COUNT(*) FROM branch_commits bc WHERE bc.branch = ? AND bc.position > ? "
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.sha = bc.sha)",
            (branch, head - window),
        ).fetchone()[0]
    return out


@dataclass(frozen=True)
class StoredProfile:
    """A run's callgrind profile of one instruction workload (recipes/callgrind.py JSON) and its query count."""

    run_id: int
    workload: str
    queries: int
    profile: dict[str, Any]


def profile_of(conn: sqlite3.Connection, sha: str, workload: str, machine_id: str, recipe: str) -> StoredProfile | None:
    """The newest stored profile of a commit's workload on one machine and recipe (None when no run kept one)."""
    row = conn.execute(
        "SELECT p.run_id, p.workload, p.queries, p.profile FROM profiles p JOIN runs r ON r.id = p.run_id "
        "WHERE r.sha = ? AND p.workload = ? AND r.machine_id = ? AND r.recipe = ? AND r.status = 'ok' "
        "ORDER BY r.id DESC LIMIT 1",
        (sha, workload, machine_id, recipe),
    ).fetchone()
    return StoredProfile(row[0], row[1], row[2], json.loads(row[3])) if row else None


@dataclass(frozen=True)
class StoredCoverage:
    """The coverage figure a run reported (result member `coverage`, recipes/pg/coverage.py)."""

    run_id: int
    machine_id: str
    recipe: str
    recipe_version: int
    ref: str
    sha: str
    finished_at: str | None
    doc: dict[str, Any]


def newest_coverage(conn: sqlite3.Connection, look: int = 20) -> list[StoredCoverage]:
    """Per (machine, recipe, version), the newest ok run's coverage figure, looked for among its newest `look` runs
    (every pg run carries one: a bisection probe or a run that left coverage out is the exception)."""
    combos = conn.execute(
        "SELECT machine_id, recipe, recipe_version FROM runs WHERE status = 'ok' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 DESC"
    ).fetchall()
    out = []
    for machine, recipe, version in combos:
        rows = conn.execute(
            "SELECT id, ref, sha, finished_at, json_extract(result, '$.coverage') FROM runs "
            "WHERE machine_id = ? AND recipe = ? AND recipe_version = ? AND status = 'ok' ORDER BY id DESC LIMIT ?",
            (machine, recipe, version, look),
        )
        for run_id, ref, sha, finished, doc in rows:
            if doc is None:
                continue
            try:
                parsed = json.loads(doc)
            except ValueError:
                continue
            out.append(StoredCoverage(run_id, machine, recipe, version, ref, sha, finished, parsed))
            break
    return out


def waits_of(conn: sqlite3.Connection, sha: str, machine_id: str, recipe: str) -> dict[str, list[dict[str, Any]]]:
    """A commit's sampled wait events on one machine and recipe (its own side of every ok run, paired or not):
    workload -> every sample of every run, oldest run first (master/explain/waits.py pools them)."""
    out: dict[str, list[dict[str, Any]]] = {}
    rows = conn.execute(
        "SELECT w.workload, w.samples FROM waits w JOIN runs r ON r.id = w.run_id WHERE r.sha = ? AND "
        "r.machine_id = ? AND r.recipe = ? AND r.status = 'ok' AND w.side = 'run' ORDER BY r.id",
        (sha, machine_id, recipe),
    )
    for workload, samples in rows:
        out.setdefault(workload, []).extend(json.loads(samples))
    return out


def metrics_of(
    conn: sqlite3.Connection, sha: str, machine_id: str, recipe: str
) -> dict[str, dict[str, tuple[str, list[float]]]]:
    """A commit's measured samples on one machine and recipe: workload -> metric -> (unit, samples), each from
    the newest ok run that measured it (a bisection probe measures one workload, a commit's own run them all)."""
    out: dict[str, dict[str, tuple[str, list[float]]]] = {}
    rows = conn.execute(
        "SELECT m.workload, m.metric, m.unit, m.samples FROM measurements m JOIN runs r ON r.id = m.run_id "
        "WHERE r.sha = ? AND r.machine_id = ? AND r.recipe = ? AND r.status = 'ok' ORDER BY r.id DESC",
        (sha, machine_id, recipe),
    )
    for workload, metric, unit, samples in rows:
        out.setdefault(workload, {}).setdefault(metric, (unit, [float(x) for x in json.loads(samples)]))
    return out
