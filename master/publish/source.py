"""Read-only queries the site needs from the results database, returned as frozen records.

Read only: the publisher never writes results.sqlite. Kept in one module so these queries can move into
master/store.py with the rest of the SQL. Optional tables (`series`, `change_points`, `alerts`) are detected
with PRAGMA table_info so the site degrades to empty lists when a later migration has not landed yet.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from master.publish.names import digest
from master.textsafe import visible

CHUNK = 1000  # branch positions per data chunk: a new run at the head rewrites one chunk per series


@dataclass(frozen=True)
class MeasureKey:
    """What makes samples comparable, before the branch is chosen; `config_hash` is the workload's (a
    measurement's), so adding a workload to a recipe leaves the other workloads' keys as they were."""

    machine_id: str
    recipe: str
    recipe_version: int
    config_hash: str
    workload: str
    metric: str


@dataclass(frozen=True)
class SeriesKey:
    """A series: (machine, recipe version, config, workload, metric, branch)."""

    measure: MeasureKey
    branch: str

    @functools.cached_property
    def sid(self) -> str:
        """Stable file id of the series (a digest of its key, so no untrusted text reaches a path)."""
        m = self.measure
        return digest("\x1f".join([m.machine_id, m.recipe, str(m.recipe_version), m.config_hash, m.workload,
                                   m.metric, self.branch]))


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    authored_at: int


@dataclass(frozen=True)
class Run:
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
    build_url: str | None
    noisy: bool
    ingested_at: float
    log_excerpt: str


@dataclass(frozen=True)
class Sample:
    """All samples of one measure key at one commit: every ok run merged (bisection adds samples)."""

    sha: str
    run_ids: tuple[int, ...]
    samples: tuple[float, ...]
    unit: str
    direction: str
    noisy: bool
    sla_miss: bool


@dataclass(frozen=True)
class ChangePointRow:
    id: int
    sid: str
    first_sha: str
    sha: str
    prev_sha: str | None
    position: int
    kind: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    pvalue: float
    state: str


def has_table(conn: sqlite3.Connection, table: str) -> list[str]:
    """Column names of `table`, or [] when it does not exist (yet)."""
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]  # table: a literal from this module


def commits(conn: sqlite3.Connection, shas: Iterable[str] | None = None) -> dict[str, Commit]:
    """Commit facts; subject and author with control and bidi characters shown as escapes (textsafe), so they
    can neither reorder a page nor hide in it, whichever template or script shows them."""
    sql = "SELECT sha, subject, author, authored_at FROM commits"
    out: dict[str, Commit] = {}
    for r in _chunked(conn, sql, "sha", shas):
        out[r[0]] = Commit(r[0], visible(r[1]), visible(r[2]), int(r[3]))
    return out


def branch_order(conn: sqlite3.Connection, branch: str, lo: int = 0, hi: int | None = None) -> list[tuple[int, str]]:
    """(position, sha) of a branch between lo and hi (inclusive), oldest first."""
    hi = 2**62 if hi is None else hi
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT position, sha FROM branch_commits WHERE branch = ? AND position BETWEEN ? AND ? ORDER BY position",
        (branch, lo, hi))]


def branch_heads(conn: sqlite3.Connection) -> dict[str, int]:
    return {r[0]: r[1] for r in conn.execute("SELECT branch, MAX(position) FROM branch_commits GROUP BY branch")}


def positions_of(conn: sqlite3.Connection, sha: str) -> dict[str, int]:
    return {r[0]: r[1] for r in conn.execute("SELECT branch, position FROM branch_commits WHERE sha = ?", (sha,))}


def tags(conn: sqlite3.Connection) -> dict[str, str]:
    return {r[0]: r[1] for r in conn.execute("SELECT name, sha FROM tags ORDER BY name")}


def runs(conn: sqlite3.Connection, ids: Iterable[int] | None = None,
         shas: Iterable[str] | None = None) -> dict[int, Run]:
    sql = ("SELECT id, sha, ref, builder, worker, machine_id, recipe, recipe_version, config_hash, status, source, "
           "build_url, noisy, ingested_at, log_excerpt FROM runs")
    if ids is not None:
        rows = _chunked(conn, sql, "id", ids)
    else:
        rows = _chunked(conn, sql, "sha", shas)
    return {r[0]: Run(r[0], r[1], visible(r[2]), r[3], r[4], r[5], r[6], int(r[7]), r[8], r[9], r[10], r[11],
                      bool(r[12]), float(r[13]), visible(r[14], lines=True)) for r in rows}


def samples(
    conn: sqlite3.Connection, shas: Iterable[str] | None = None, keys: set[MeasureKey] | None = None
) -> dict[MeasureKey, dict[str, Sample]]:
    """Every ok run's samples grouped by measure key and commit (optionally only some commits and keys)."""
    sql = ("SELECT r.id, r.sha, r.machine_id, r.recipe, r.recipe_version, m.config_hash, r.noisy, m.workload, "
           "m.metric, m.unit, m.direction, m.samples, m.flags FROM runs r JOIN measurements m ON m.run_id = r.id "
           "WHERE r.status = 'ok'")
    acc: dict[MeasureKey, dict[str, list[Any]]] = {}
    loads = json.loads
    for r in _chunked(conn, sql, "r.sha", shas, where=True):
        key = MeasureKey(r[2], r[3], int(r[4]), r[5], r[7], r[8])
        if keys is not None and key not in keys:
            continue
        per = acc.setdefault(key, {})
        flags = r[12]
        sla = flags != "[]" and "sla-miss" in loads(flags)
        got = per.get(r[1])
        if got is None:
            per[r[1]] = [[r[0]], loads(r[11]), r[9], r[10], bool(r[6]), sla]
        else:
            got[0].append(r[0])
            got[1].extend(loads(r[11]))
            got[4] = got[4] or bool(r[6])
            got[5] = got[5] or sla
    return {
        key: {sha: Sample(sha, tuple(sorted(v[0])), tuple(float(x) for x in v[1]), v[2], v[3], v[4], v[5])
              for sha, v in per.items()}
        for key, per in acc.items()
    }


def keys_at(conn: sqlite3.Connection, shas: Sequence[str]) -> set[MeasureKey]:
    """Measure keys with ok results at any of these commits."""
    sql = ("SELECT DISTINCT r.machine_id, r.recipe, r.recipe_version, m.config_hash, m.workload, m.metric "
           "FROM runs r JOIN measurements m ON m.run_id = r.id WHERE r.status = 'ok'")
    return {MeasureKey(r[0], r[1], int(r[2]), r[3], r[4], r[5]) for r in _chunked(conn, sql, "r.sha", shas, where=True)}


def change_points(conn: sqlite3.Connection) -> list[ChangePointRow]:
    """Change points with the site id of their series; [] before migration 2's tables are filled."""
    if not has_table(conn, "change_points") or not has_table(conn, "series"):
        return []
    out = []
    for r in conn.execute(
        "SELECT c.id, s.machine_id, s.recipe, s.recipe_version, s.config_hash, s.workload, s.metric, s.branch, "
        "c.first_sha, c.sha, c.prev_sha, c.position, c.kind, c.ratio, c.ci_low, c.ci_high, c.pvalue, c.state "
        "FROM change_points c JOIN series s ON s.id = c.series_id ORDER BY c.id"
    ):
        sid = SeriesKey(MeasureKey(r[1], r[2], int(r[3]), r[4], r[5], r[6]), r[7]).sid
        out.append(ChangePointRow(r[0], sid, r[8], r[9], r[10], int(r[11]), r[12], float(r[13]), r[14], r[15],
                                  float(r[16]), r[17]))
    return out


def machines(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    out = {}
    for r in conn.execute("SELECT id, fingerprint, first_seen FROM machines ORDER BY id"):
        try:
            fp = json.loads(r[1])
        except ValueError:
            fp = {}
        out[r[0]] = {"fingerprint": fp if isinstance(fp, dict) else {}, "first_seen": r[2]}
    return out


def last_noisy_run(conn: sqlite3.Connection, machine_id: str) -> tuple[str, float] | None:
    """(host_checks JSON, ingest time) of the machine's newest run flagged noisy, or None."""
    return conn.execute("SELECT host_checks, ingested_at FROM runs WHERE machine_id = ? AND noisy = 1 "
                        "ORDER BY id DESC LIMIT 1", (machine_id,)).fetchone()


def run_health(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Per (worker, builder): runs, failures, noisy runs, newest ingest."""
    return conn.execute(
        "SELECT worker, builder, machine_id, COUNT(*) AS runs, SUM(status != 'ok') AS failed, SUM(noisy) AS noisy, "
        "MAX(ingested_at) AS last FROM runs GROUP BY worker, builder, machine_id ORDER BY worker, builder"
    ).fetchall()


def last_result_per_branch(conn: sqlite3.Connection) -> dict[str, tuple[float, int, int]]:
    """branch -> (newest ingest time of a run on it, head position, position of the newest tested commit)."""
    out = {}
    for r in conn.execute(
        "SELECT bc.branch, MAX(r.ingested_at), MAX(bc.position) FROM branch_commits bc JOIN runs r ON r.sha = bc.sha "
        "GROUP BY bc.branch"
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
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.sha = bc.sha)", (branch, head - window)).fetchone()[0]
    return out


def run_of(conn: sqlite3.Connection, run_id: int) -> Run | None:
    return runs(conn, ids=[run_id]).get(run_id)


def last_run_id(conn: sqlite3.Connection) -> int:
    """The highest stored run id (0 without runs): what a full publish shows everything up to."""
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM runs").fetchone()[0])


def run_ids_above(conn: sqlite3.Connection, run_id: int) -> list[int]:
    """Stored runs newer than `run_id`, in id order."""
    return [r[0] for r in conn.execute("SELECT id FROM runs WHERE id > ? ORDER BY id", (run_id,))]


def _chunked(conn: sqlite3.Connection, sql: str, column: str, values: Iterable[Any] | None,
             where: bool = False) -> Iterable[sqlite3.Row]:
    """Run `sql`, optionally restricted to `column IN values` in batches (SQLite caps bound parameters)."""
    if values is None:
        yield from conn.execute(sql)
        return
    vals = list(dict.fromkeys(values))
    joiner = " AND " if where else " WHERE "
    for i in range(0, len(vals), 900):
        part = vals[i : i + 900]
        yield from conn.execute(f"{sql}{joiner}{column} IN ({','.join('?' * len(part))})", part)


# ------------------------------------------------------------------------------------------------ alerts


@dataclass(frozen=True)
class AlertLineRow:
    """One workload of an alert: its change point and series."""

    alert_id: str
    change_point_id: int
    sid: str
    workload: str
    metric: str
    machine_id: str
    recipe: str
    recipe_version: int
    unit: str
    direction: str
    kind: str
    severity: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    sha: str
    prev_sha: str | None
    state: str


def alert_rows(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Every alert (migration 3), newest first; [] when the table does not exist."""
    if not has_table(conn, "alerts"):
        return []
    return conn.execute("SELECT * FROM alerts ORDER BY created_at DESC, id").fetchall()


def alert_lines(conn: sqlite3.Connection) -> list[AlertLineRow]:
    if not has_table(conn, "alert_lines"):
        return []
    out = []
    for r in conn.execute(
        "SELECT al.alert_id, cp.id, s.machine_id, s.recipe, s.recipe_version, s.config_hash, s.workload, s.metric, "
        "s.branch, s.unit, s.direction, cp.kind, al.severity, cp.ratio, cp.ci_low, cp.ci_high, cp.sha, cp.prev_sha, "
        "cp.state FROM alert_lines al JOIN change_points cp ON cp.id = al.change_point_id "
        "JOIN series s ON s.id = cp.series_id ORDER BY al.alert_id, s.workload, s.metric, cp.id"
    ):
        sid = SeriesKey(MeasureKey(r[2], r[3], int(r[4]), r[5], r[6], r[7]), r[8]).sid
        out.append(AlertLineRow(r[0], r[1], sid, r[6], r[7], r[2], r[3], int(r[4]), r[9], r[10], r[11], r[12],
                                float(r[13]), r[14], r[15], r[16], r[17], r[18]))
    return out


def alert_history(conn: sqlite3.Connection) -> dict[str, list[sqlite3.Row]]:
    if not has_table(conn, "alert_history"):
        return {}
    out: dict[str, list[sqlite3.Row]] = {}
    for r in conn.execute("SELECT alert_id, at, old_state, new_state, by, note FROM alert_history ORDER BY at, id"):
        out.setdefault(r["alert_id"], []).append(r)
    return out


def alert_deliveries(conn: sqlite3.Connection) -> dict[str, list[sqlite3.Row]]:
    """alert id -> its messages per channel (state, attempts, last error; never the payload)."""
    if not has_table(conn, "alert_outbox"):
        return {}
    out: dict[str, list[sqlite3.Row]] = {}
    for r in conn.execute("SELECT alert_id, channel, event, revision, state, attempts, last_error, sent_at "
                          "FROM alert_outbox ORDER BY alert_id, id"):
        out.setdefault(r["alert_id"], []).append(r)
    return out


def bisections_by_change_point(conn: sqlite3.Connection) -> dict[int, sqlite3.Row]:
    """change point id -> its bisection (state, culprit, ratio, probes, log as JSON lines)."""
    if not has_table(conn, "bisections"):
        return {}
    return {r["change_point_id"]: r for r in conn.execute(
        "SELECT b.*, (SELECT COUNT(*) FROM bisection_runs br WHERE br.bisection_id = b.id) AS probe_runs "
        "FROM bisections b WHERE b.change_point_id IS NOT NULL ORDER BY b.id")}


def prev_point_position(conn: sqlite3.Connection, key: MeasureKey, branch: str, before: int) -> int | None:
    """Branch position of the series' last tested commit before `before` (for the ratio vs the previous point)."""
    row = conn.execute(
        "SELECT MAX(bc.position) FROM branch_commits bc JOIN runs r ON r.sha = bc.sha "
        "JOIN measurements m ON m.run_id = r.id WHERE bc.branch = ? AND bc.position < ? AND r.status = 'ok' "
        "AND r.machine_id = ? AND r.recipe = ? AND r.recipe_version = ? AND m.config_hash = ? AND m.workload = ? "
        "AND m.metric = ?",
        (branch, before, key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.metric),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def sha_at(conn: sqlite3.Connection, branch: str, position: int) -> str | None:
    row = conn.execute("SELECT sha FROM branch_commits WHERE branch = ? AND position = ?",
                       (branch, position)).fetchone()
    return row[0] if row else None


def run_shas(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT DISTINCT sha FROM runs")}
