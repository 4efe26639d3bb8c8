"""All alerts SQL: reading change points as lines, the alerts tables, and the delivery outbox.

Kept behind one module (like master/store.py) so the store could move to PostgreSQL. Callers hold the
transaction where several statements must be atomic; nothing here imports Buildbot or Twisted.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from master.alerts.rules import Line

_LINE_SQL = (
    "SELECT cp.id, cp.first_sha, cp.sha, cp.prev_sha, cp.position, cp.prev_position, cp.kind, cp.ratio, "
    "cp.ci_low, cp.ci_high, cp.pvalue, cp.state, s.machine_id, s.recipe, s.recipe_version, s.config_hash, "
    "s.workload, s.metric, s.branch, s.unit, s.direction FROM change_points cp JOIN series s ON s.id = cp.series_id"
)


def _line(r: sqlite3.Row) -> Line:
    key = "/".join(
        str(r[k]) for k in ("machine_id", "recipe", "recipe_version", "config_hash", "workload", "metric", "branch")
    )
    return Line(
        change_point_id=r["id"],
        series_key=key,
        machine_id=r["machine_id"],
        recipe=r["recipe"],
        workload=r["workload"],
        metric=r["metric"],
        branch=r["branch"],
        unit=r["unit"],
        direction=r["direction"],
        kind=r["kind"],
        first_sha=r["first_sha"],
        sha=r["sha"],
        prev_sha=r["prev_sha"],
        position=r["position"],
        prev_position=r["prev_position"],
        ratio=r["ratio"],
        ci_low=r["ci_low"],
        ci_high=r["ci_high"],
        pvalue=r["pvalue"],
        active=r["state"] == "active",
    )


def unassigned_lines(conn: sqlite3.Connection) -> list[Line]:
    """Active change points that belong to no alert yet (candidates)."""
    rows = conn.execute(
        _LINE_SQL + " WHERE cp.state = 'active' AND cp.id NOT IN (SELECT change_point_id FROM alert_lines) "
        "ORDER BY cp.id"
    )
    return [_line(r) for r in rows]


def member_lines(conn: sqlite3.Connection, alert_id: str | None = None) -> dict[str, list[tuple[Line, str]]]:
    """alert id -> [(line, stored line severity)] for every alert (or one)."""
    out: dict[str, list[tuple[Line, str]]] = {}
    where = " WHERE al.alert_id = ?" if alert_id is not None else ""
    rows = conn.execute(
        _LINE_SQL.replace("SELECT ", "SELECT al.alert_id, al.severity AS line_severity, ", 1)
        + " JOIN alert_lines al ON al.change_point_id = cp.id"
        + where
        + " ORDER BY al.alert_id, cp.position, cp.id",
        () if alert_id is None else (alert_id,),
    )
    for r in rows:
        out.setdefault(r["alert_id"], []).append((_line(r), r["line_severity"]))
    return out


def alerts(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Every alert, oldest first (the order in which new lines try to join them)."""
    return conn.execute("SELECT * FROM alerts ORDER BY created_at, id").fetchall()


def alert(conn: sqlite3.Connection, alert_id: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM alerts WHERE id = ?", (alert_id,)).fetchone()


def find_alerts(conn: sqlite3.Connection, prefix: str) -> list[sqlite3.Row]:
    """Alerts whose id starts with `prefix` (ids may be typed short, like shas)."""
    return conn.execute("SELECT * FROM alerts WHERE id LIKE ? ORDER BY id", (prefix.lower() + "%",)).fetchall()


def insert_alert(conn: sqlite3.Connection, values: dict[str, Any]) -> None:
    cols = ",".join(values)
    conn.execute(f"INSERT INTO alerts ({cols}) VALUES ({','.join('?' * len(values))})", list(values.values()))


def update_alert(conn: sqlite3.Connection, alert_id: str, values: dict[str, Any]) -> None:
    sets = ", ".join(f"{k} = ?" for k in values)
    conn.execute(f"UPDATE alerts SET {sets} WHERE id = ?", [*values.values(), alert_id])


def add_line(conn: sqlite3.Connection, alert_id: str, change_point_id: int, severity: str, now: float) -> None:
    conn.execute(
        "INSERT INTO alert_lines (alert_id, change_point_id, severity, added_at) VALUES (?, ?, ?, ?)",
        (alert_id, change_point_id, severity, now),
    )


def set_line_severity(conn: sqlite3.Connection, change_point_id: int, severity: str) -> None:
    conn.execute("UPDATE alert_lines SET severity = ? WHERE change_point_id = ?", (severity, change_point_id))


def add_history(
    conn: sqlite3.Connection, alert_id: str, old: str | None, new: str, by: str, note: str | None, now: float
) -> None:
    conn.execute(
        "INSERT INTO alert_history (alert_id, at, old_state, new_state, by, note) VALUES (?, ?, ?, ?, ?, ?)",
        (alert_id, now, old, new, by, note),
    )


def history(conn: sqlite3.Connection, alert_id: str) -> list[sqlite3.Row]:
    return conn.execute("SELECT * FROM alert_history WHERE alert_id = ? ORDER BY at, id", (alert_id,)).fetchall()


def commit(conn: sqlite3.Connection, sha: str | None) -> sqlite3.Row | None:
    if not sha:
        return None
    return conn.execute("SELECT sha, subject, author FROM commits WHERE sha = ?", (sha,)).fetchone()


# ---------------------------------------------------------------------------------------------- outbox


@dataclass(frozen=True)
class OutboxRow:
    """One message for one channel, as claimed by a deliverer."""

    id: int
    alert_id: str
    channel: str
    event: str
    revision: int
    key: str
    payload: dict[str, Any]
    attempts: int


def outbox_rows(conn: sqlite3.Connection, alert_id: str, channel: str) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT * FROM alert_outbox WHERE alert_id = ? AND channel = ? ORDER BY id", (alert_id, channel)
    ).fetchall()


def enqueue(
    conn: sqlite3.Connection,
    *,
    alert_id: str,
    channel: str,
    event: str,
    revision: int,
    key: str,
    payload: dict[str, Any],
    available_at: float,
    now: float,
) -> None:
    conn.execute(
        "INSERT INTO alert_outbox (alert_id, channel, event, revision, idempotency_key, payload, available_at, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (alert_id, channel, event, revision, key, json.dumps(payload, sort_keys=True), available_at, now),
    )


def replace_unsent(
    conn: sqlite3.Connection, row_id: int, *, revision: int, key: str, payload: dict[str, Any], available_at: float
) -> bool:
    """Refresh a message nobody has tried to send yet (so no receiver can have seen its key)."""
    cur = conn.execute(
        "UPDATE alert_outbox SET revision = ?, idempotency_key = ?, payload = ?, available_at = ? "
        "WHERE id = ? AND state = 'pending' AND attempts = 0 AND lease_owner IS NULL",
        (revision, key, json.dumps(payload, sort_keys=True), available_at, row_id),
    )
    return cur.rowcount == 1


def cancel_unsent(conn: sqlite3.Connection, alert_id: str, channel: str | None = None) -> int:
    """Cancel messages of an alert that no receiver can have seen (never tried, not claimed)."""
    sql = (
        "UPDATE alert_outbox SET state = 'cancelled' WHERE alert_id = ? AND state = 'pending' "
        "AND attempts = 0 AND lease_owner IS NULL"
    )
    params: list[Any] = [alert_id]
    if channel is not None:
        sql += " AND channel = ?"
        params.append(channel)
    return conn.execute(sql, params).rowcount


def claim(conn: sqlite3.Connection, owner: str, now: float, lease_seconds: float, limit: int) -> list[OutboxRow]:
    """Lease due messages to `owner`: the oldest pending message per (alert, channel), in id order.

    Only one message per (alert, channel) is ever in flight, so an update never overtakes its alert.
    The caller holds a BEGIN IMMEDIATE transaction, so two deliverers never lease the same row.
    """
    rows = conn.execute(
        "SELECT * FROM alert_outbox o WHERE o.state = 'pending' AND o.available_at <= :now "
        "AND (o.lease_until IS NULL OR o.lease_until < :now) AND o.id = (SELECT MIN(p.id) FROM alert_outbox p "
        "WHERE p.alert_id = o.alert_id AND p.channel = o.channel AND p.state = 'pending') "
        "ORDER BY o.id LIMIT :limit",
        {"now": now, "limit": int(limit)},
    ).fetchall()
    conn.executemany(
        "UPDATE alert_outbox SET lease_owner = ?, lease_until = ? WHERE id = ?",
        [(owner, now + lease_seconds, r["id"]) for r in rows],
    )
    return [
        OutboxRow(
            r["id"],
            r["alert_id"],
            r["channel"],
            r["event"],
            r["revision"],
            r["idempotency_key"],
            json.loads(r["payload"]),
            r["attempts"],
        )
        for r in rows
    ]


def mark_sent(conn: sqlite3.Connection, row_id: int, now: float) -> None:
    """The receiver accepted it: never send it again (whoever holds the lease now)."""
    conn.execute(
        "UPDATE alert_outbox SET state = 'sent', sent_at = ?, attempts = attempts + 1, lease_owner = NULL, "
        "lease_until = NULL, last_error = NULL, last_permanent = 0 WHERE id = ? AND state = 'pending'",
        (now, row_id),
    )


def mark_failed(
    conn: sqlite3.Connection, row_id: int, owner: str, error: str, permanent: bool, retry_at: float
) -> None:
    """Record a failed attempt and when to try again (only if `owner` still holds the lease)."""
    conn.execute(
        "UPDATE alert_outbox SET attempts = attempts + 1, last_error = ?, last_permanent = ?, available_at = ?, "
        "lease_owner = NULL, lease_until = NULL WHERE id = ? AND state = 'pending' AND lease_owner = ?",
        (error[:500], 1 if permanent else 0, retry_at, row_id, owner),
    )


def release_leases(conn: sqlite3.Connection, owners: Iterable[str]) -> int:
    """Free leases held by deliverers known to be dead (their messages become claimable at once)."""
    n = 0
    for owner in owners:
        n += conn.execute(
            "UPDATE alert_outbox SET lease_owner = NULL, lease_until = NULL WHERE state = 'pending' "
            "AND lease_owner = ?",
            (owner,),
        ).rowcount
    return n


def lease_owners(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT lease_owner FROM alert_outbox WHERE state = 'pending' AND lease_owner IS NOT NULL"
        )
    ]


def channel_rows(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Per channel: pending count, oldest pending creation, worst attempts, its error, last success."""
    return conn.execute(
        "SELECT channel, "
        "SUM(state = 'pending') AS pending, "
        "MIN(CASE WHEN state = 'pending' THEN created_at END) AS oldest_pending, "
        "MAX(CASE WHEN state = 'pending' THEN attempts ELSE 0 END) AS max_attempts, "
        "MAX(CASE WHEN state = 'pending' THEN last_permanent ELSE 0 END) AS permanent, "
        "MAX(sent_at) AS last_sent_at, SUM(state = 'sent') AS sent "
        "FROM alert_outbox GROUP BY channel ORDER BY channel"
    ).fetchall()


def worst_error(conn: sqlite3.Connection, channel: str) -> str | None:
    row = conn.execute(
        "SELECT last_error FROM alert_outbox WHERE channel = ? AND state = 'pending' AND last_error IS NOT NULL "
        "ORDER BY attempts DESC, id LIMIT 1",
        (channel,),
    ).fetchone()
    return row[0] if row else None


def outbox_for_alert(conn: sqlite3.Connection, alert_id: str) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT id, channel, event, revision, state, attempts, last_error, created_at, sent_at, available_at "
        "FROM alert_outbox WHERE alert_id = ? ORDER BY id",
        (alert_id,),
    ).fetchall()
