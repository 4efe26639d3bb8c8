"""The results database: every run, every raw sample, commits in first-parent order (SQLite, WAL).

Separate from Buildbot's state.sqlite. The schema is an append-only list of migrations tracked by
PRAGMA user_version (see docs/results-db.md for every table). Nothing here imports Buildbot or Twisted; the
master calls it from a thread, never from the reactor. Keep all SQL behind this module so the store could
move to PostgreSQL the way Buildbot's own database does.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Append only: never edit a migration that has shipped; add a new one.
MIGRATIONS: list[str] = [
    # 1: the foundation
    """
    CREATE TABLE machines (
        id          TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        first_seen  REAL NOT NULL
    );
    CREATE TABLE commits (
        sha          TEXT PRIMARY KEY,
        subject      TEXT NOT NULL,
        author       TEXT NOT NULL,
        authored_at  INTEGER NOT NULL,
        committed_at INTEGER NOT NULL,
        parents      TEXT NOT NULL
    );
    CREATE TABLE branch_commits (
        branch   TEXT NOT NULL,
        position INTEGER NOT NULL,
        sha      TEXT NOT NULL REFERENCES commits(sha),
        PRIMARY KEY (branch, position)
    );
    CREATE UNIQUE INDEX branch_commits_sha ON branch_commits(branch, sha);
    CREATE INDEX branch_commits_by_sha ON branch_commits(sha);
    CREATE TABLE tags (
        name       TEXT PRIMARY KEY,
        sha        TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE runs (
        id             INTEGER PRIMARY KEY,
        sha            TEXT NOT NULL,
        revision       TEXT NOT NULL,
        ref            TEXT NOT NULL,
        builder        TEXT NOT NULL,
        worker         TEXT NOT NULL,
        machine_id     TEXT NOT NULL REFERENCES machines(id),
        recipe         TEXT NOT NULL,
        recipe_version INTEGER NOT NULL,
        config_hash    TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN ('ok', 'build-failed', 'bench-failed')),
        source         TEXT NOT NULL,
        build_id       INTEGER,
        build_url      TEXT,
        log_excerpt    TEXT NOT NULL,
        host_checks    TEXT NOT NULL,
        noisy          INTEGER NOT NULL,
        started_at     TEXT,
        finished_at    TEXT,
        ingested_at    REAL NOT NULL,
        result         TEXT NOT NULL
    );
    CREATE UNIQUE INDEX runs_build ON runs(build_id) WHERE build_id IS NOT NULL;
    CREATE INDEX runs_sha ON runs(sha, builder);
    CREATE INDEX runs_revision ON runs(revision, builder);
    CREATE TABLE measurements (
        run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        workload  TEXT NOT NULL,
        metric    TEXT NOT NULL,
        unit      TEXT NOT NULL,
        direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
        samples   TEXT NOT NULL,
        flags     TEXT NOT NULL,
        PRIMARY KEY (run_id, workload, metric)
    );
    CREATE TABLE attempts (
        build_id   INTEGER PRIMARY KEY,
        sha        TEXT NOT NULL,
        builder    TEXT NOT NULL,
        started_at REAL NOT NULL
    );
    CREATE INDEX attempts_sha ON attempts(sha, builder);
    CREATE TABLE rejections (
        id          INTEGER PRIMARY KEY,
        build_id    INTEGER,
        revision    TEXT NOT NULL,
        builder     TEXT NOT NULL,
        reason      TEXT NOT NULL,
        file        TEXT NOT NULL,
        rejected_at REAL NOT NULL
    );
    CREATE INDEX rejections_revision ON rejections(revision, builder);
    """,
    # 2: series and change points (written by master/analysis.py after each ingest)
    """
    CREATE TABLE series (
        id             INTEGER PRIMARY KEY,
        machine_id     TEXT NOT NULL REFERENCES machines(id),
        recipe         TEXT NOT NULL,
        recipe_version INTEGER NOT NULL,
        config_hash    TEXT NOT NULL,
        workload       TEXT NOT NULL,
        metric         TEXT NOT NULL,
        branch         TEXT NOT NULL,
        unit           TEXT NOT NULL,
        direction      TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
        analysed_at    REAL,
        UNIQUE (machine_id, recipe, recipe_version, config_hash, workload, metric, branch)
    );
    CREATE TABLE change_points (
        id          INTEGER PRIMARY KEY,
        series_id   INTEGER NOT NULL REFERENCES series(id),
        first_sha   TEXT NOT NULL,
        sha         TEXT NOT NULL,
        prev_sha    TEXT,
        position    INTEGER NOT NULL,
        prev_position INTEGER,
        kind        TEXT NOT NULL CHECK (kind IN ('regression', 'improvement')),
        ratio       REAL NOT NULL,
        ci_low      REAL,
        ci_high     REAL,
        pvalue      REAL NOT NULL,
        state       TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'retracted')),
        first_seen  REAL NOT NULL,
        updated_at  REAL NOT NULL,
        UNIQUE (series_id, first_sha)
    );
    CREATE INDEX change_points_sha ON change_points(sha);
    """,
    # 3: alerts, their lines, triage history and the delivery outbox (master/alerts, docs/alerts.md)
    """
    CREATE TABLE alerts (
        id              TEXT PRIMARY KEY,
        branch          TEXT NOT NULL,
        kind            TEXT NOT NULL CHECK (kind IN ('regression', 'improvement')),
        severity        TEXT NOT NULL CHECK (severity IN ('warn', 'critical')),
        state           TEXT NOT NULL DEFAULT 'new' CHECK (state IN ('new', 'bisecting', 'culprit-found',
                        'acknowledged', 'investigating', 'fixed', 'invalid', 'wontfix', 'backed-out')),
        active          INTEGER NOT NULL DEFAULT 1,
        prev_sha        TEXT,
        sha             TEXT NOT NULL,
        prev_position   INTEGER,
        position        INTEGER NOT NULL,
        bisection_state TEXT CHECK (bisection_state IN ('pending', 'running', 'culprit', 'ambiguous',
                        'not-reproducible', 'failed')),
        culprit_sha     TEXT,
        revision        INTEGER NOT NULL DEFAULT 1,
        signature       TEXT NOT NULL,
        changes         TEXT NOT NULL DEFAULT '[]',
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        state_changed_at REAL,
        state_by        TEXT,
        state_note      TEXT
    );
    CREATE INDEX alerts_open ON alerts(branch, kind, position);
    CREATE TABLE alert_lines (
        alert_id        TEXT NOT NULL REFERENCES alerts(id),
        change_point_id INTEGER NOT NULL UNIQUE REFERENCES change_points(id),
        severity        TEXT NOT NULL CHECK (severity IN ('warn', 'critical')),
        added_at        REAL NOT NULL,
        PRIMARY KEY (alert_id, change_point_id)
    );
    CREATE TABLE alert_history (
        id        INTEGER PRIMARY KEY,
        alert_id  TEXT NOT NULL REFERENCES alerts(id),
        at        REAL NOT NULL,
        old_state TEXT,
        new_state TEXT NOT NULL,
        by        TEXT NOT NULL,
        note      TEXT
    );
    CREATE INDEX alert_history_alert ON alert_history(alert_id, at);
    CREATE TABLE alert_outbox (
        id              INTEGER PRIMARY KEY,
        alert_id        TEXT NOT NULL REFERENCES alerts(id),
        channel         TEXT NOT NULL,
        event           TEXT NOT NULL CHECK (event IN ('opened', 'updated')),
        revision        INTEGER NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        payload         TEXT NOT NULL,
        state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'cancelled')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        available_at    REAL NOT NULL,
        lease_owner     TEXT,
        lease_until     REAL,
        last_error      TEXT,
        last_permanent  INTEGER NOT NULL DEFAULT 0,
        created_at      REAL NOT NULL,
        sent_at         REAL
    );
    CREATE INDEX alert_outbox_pending ON alert_outbox(state, available_at);
    CREATE INDEX alert_outbox_alert ON alert_outbox(alert_id, channel, id)
""",
    # 4: bisections (master/bisection): state lives here so a bisection survives a master restart
    """
    CREATE TABLE bisections (
        id              INTEGER PRIMARY KEY,
        change_point_id INTEGER REFERENCES change_points(id),
        builder         TEXT NOT NULL,
        machine_id      TEXT NOT NULL,
        recipe          TEXT NOT NULL,
        config_hash     TEXT NOT NULL,
        workload        TEXT NOT NULL,
        metric          TEXT NOT NULL,
        direction       TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
        branch          TEXT NOT NULL,
        good            TEXT NOT NULL,
        bad             TEXT NOT NULL,
        commits         TEXT NOT NULL,
        state           TEXT NOT NULL CHECK (state IN ('running', 'culprit', 'ambiguous', 'not-reproducible')),
        culprit         TEXT,
        parent          TEXT,
        ratio           REAL,
        ci_low          REAL,
        ci_high         REAL,
        probes          INTEGER NOT NULL DEFAULT 0,
        rounds          INTEGER NOT NULL DEFAULT 0,
        samples         INTEGER NOT NULL DEFAULT 0,
        reason          TEXT NOT NULL DEFAULT '',
        log             TEXT NOT NULL DEFAULT '[]',
        requested_by    TEXT NOT NULL DEFAULT 'detector',
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        finished_at     REAL
    );
    CREATE UNIQUE INDEX bisections_change_point ON bisections(change_point_id) WHERE change_point_id IS NOT NULL;
    CREATE TABLE bisection_runs (
        bisection_id INTEGER NOT NULL REFERENCES bisections(id),
        run_id       INTEGER NOT NULL REFERENCES runs(id),
        PRIMARY KEY (bisection_id, run_id)
    );
    """,
    # 5: the idempotency key of a measurement is its Buildbot build request ("<master instance>/<request id>"):
    # a build retried after the master was killed (same request, new build id) finds its result already stored
    # instead of storing it twice. Build ids restart when Buildbot's own database is recreated, so they are no
    # longer unique keys (a new build must never be mistaken for an old one).
    """
    ALTER TABLE runs ADD COLUMN request_key TEXT;
    CREATE UNIQUE INDEX runs_request ON runs(request_key) WHERE request_key IS NOT NULL;
    DROP INDEX runs_build;
    CREATE INDEX runs_build ON runs(build_id)
    """,
    # 6: series identity is per workload: each measurement carries its workload's config hash (the result's
    # workloads[].config_hash), so adding a workload to a recipe no longer starts a new series for every other
    # workload. Stored rows take their run's hash, which was their series identity until now: they stay in the
    # series they were in (and adopt_workload_hashes moves them on). Always written by insert_run (SQLite adds a
    # NOT NULL column only with a default). The index finds a series' rows: on config_hash alone, SQLite would
    # read every row of a run hash to load one series of it.
    """
    ALTER TABLE measurements ADD COLUMN config_hash TEXT NOT NULL DEFAULT '';
    UPDATE measurements SET config_hash = (SELECT r.config_hash FROM runs r WHERE r.id = measurements.run_id);
    CREATE INDEX measurements_series ON measurements(config_hash, workload, metric)
    """,
]


class StoreError(RuntimeError):
    """The results database refused an operation; the message says why."""


class AlreadyStored(StoreError):
    """This measurement's result is in the database already (ingest is idempotent per build request)."""

    def __init__(self, message: str, run_id: int | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclass(frozen=True)
class CommitInfo:
    """A commit as git describes it; `parents` lists the first parent first."""

    sha: str
    subject: str
    author: str
    authored_at: int
    committed_at: int
    parents: tuple[str, ...]


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


def connect(path: Path | str) -> sqlite3.Connection:
    """Open (creating and migrating) the results database with WAL and foreign keys on."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    migrate(conn)
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the migrations this database has not seen; return the resulting schema version.

    Several processes open the database at once (the master, `perffarm` CLI verbs, tests), so the version is read
    inside the write lock: a second opener waits for the first migration and then finds nothing left to do.
    """
    if conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS):
        return len(MIGRATIONS)  # the common case, without taking the write lock
    with transaction(conn):
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current > len(MIGRATIONS):
            raise StoreError(
                f"the results database is at schema version {current}, newer than this code "
                f"({len(MIGRATIONS)}); upgrade perffarm or point it at another data directory"
            )
        for version in range(current + 1, len(MIGRATIONS) + 1):
            for statement in _statements(MIGRATIONS[version - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version}")
    return len(MIGRATIONS)


def _statements(script: str) -> Iterator[str]:
    for part in script.split(";"):
        if part.strip():
            yield part


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception: all of it is stored or none."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# ---------------------------------------------------------------------------------------------- commits


def upsert_commits(conn: sqlite3.Connection, commits: Sequence[CommitInfo]) -> None:
    conn.executemany(
        "INSERT INTO commits (sha, subject, author, authored_at, committed_at, parents) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(sha) DO NOTHING",
        [(c.sha, c.subject, c.author, c.authored_at, c.committed_at, " ".join(c.parents)) for c in commits],
    )


def branch_head(conn: sqlite3.Connection, branch: str) -> tuple[int, str] | None:
    """(position, sha) of the newest commit stored for a branch, or None."""
    row = conn.execute(
        "SELECT position, sha FROM branch_commits WHERE branch = ? ORDER BY position DESC LIMIT 1", (branch,)
    ).fetchone()
    return (row["position"], row["sha"]) if row else None


def append_branch(conn: sqlite3.Connection, branch: str, commits: Sequence[CommitInfo], start: int) -> None:
    """Record `commits` (oldest first) at positions start, start+1, ... of the branch's first-parent order."""
    upsert_commits(conn, commits)
    conn.executemany(
        "INSERT INTO branch_commits (branch, position, sha) VALUES (?, ?, ?)",
        [(branch, start + i, c.sha) for i, c in enumerate(commits)],
    )


def reset_branch(conn: sqlite3.Connection, branch: str) -> None:
    """Forget a branch's order (its history was rewritten); it is rebuilt from the mirror."""
    conn.execute("DELETE FROM branch_commits WHERE branch = ?", (branch,))


def set_tags(conn: sqlite3.Connection, tags: dict[str, str]) -> None:
    now = time.time()
    conn.executemany(
        "INSERT INTO tags (name, sha, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET sha = excluded.sha, updated_at = excluded.updated_at "
        "WHERE tags.sha != excluded.sha",
        [(name, sha, now) for name, sha in tags.items()],
    )


def commit_exists(conn: sqlite3.Connection, sha: str) -> bool:
    return conn.execute("SELECT 1 FROM commits WHERE sha = ?", (sha,)).fetchone() is not None


# ---------------------------------------------------------------------------------------------- runs


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
        "ingested_at, result, request_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        ),
    )
    run_id = cur.lastrowid
    assert run_id is not None  # set by every INSERT
    rows = []
    for w in doc["workloads"]:
        flags = json.dumps(w.get("flags", []))
        config_hash = workload_config_hash(doc, w)
        for m in w["metrics"]:
            rows.append((run_id, w["name"], m["name"], m["unit"], m["direction"], json.dumps(m["samples"]), flags,
                         config_hash))
    conn.executemany(
        "INSERT INTO measurements (run_id, workload, metric, unit, direction, samples, flags, config_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    adopt_workload_hashes(conn, doc, run_id)
    if run.bisection_id is not None:
        conn.execute(  # a probe of a bisection that no longer exists is still a stored run
            "INSERT INTO bisection_runs (bisection_id, run_id) SELECT ?, ? "
            "WHERE EXISTS (SELECT 1 FROM bisections WHERE id = ?)",
            (run.bisection_id, run_id, run.bisection_id),
        )
    return run_id


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


def list_runs(
    conn: sqlite3.Connection,
    *,
    ref: str | None = None,
    builder: str | None = None,
    sha_prefix: str | None = None,
    limit: int | None = 50,
) -> list[sqlite3.Row]:
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
        "SELECT r.id, r.sha, r.ref, r.builder, r.worker, r.machine_id, r.recipe, r.recipe_version, "
        "r.config_hash, r.status, r.source, r.build_id, r.build_url, r.noisy, r.started_at, r.finished_at, "
        "r.ingested_at, c.subject, c.author FROM runs r LEFT JOIN commits c ON c.sha = r.sha"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r.id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return conn.execute(sql, params).fetchall()


def measurements_for(conn: sqlite3.Connection, run_ids: Sequence[int]) -> list[sqlite3.Row]:
    if not run_ids:
        return []
    marks = ",".join("?" * len(run_ids))
    return conn.execute(
        f"SELECT run_id, workload, metric, unit, direction, samples, flags FROM measurements "
        f"WHERE run_id IN ({marks}) ORDER BY run_id, workload, metric",
        list(run_ids),
    ).fetchall()


def latest_per_ref(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """The newest stored run of every (ref, builder)."""
    return conn.execute(
        "SELECT r.ref, r.builder, r.sha, r.status, r.finished_at, r.ingested_at, c.subject "
        "FROM runs r LEFT JOIN commits c ON c.sha = r.sha "
        "WHERE r.id IN (SELECT MAX(id) FROM runs GROUP BY ref, builder) ORDER BY r.ref, r.builder"
    ).fetchall()


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    out = {}
    for table in ("runs", "measurements", "commits", "branch_commits", "tags", "machines", "rejections"):
        out[table] = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return out
