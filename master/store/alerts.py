"""Alerts, the change points filed in them, their triage history, the links to where they are tracked, the plan
changes the channels were told of and the delivery outbox (tables alerts, alert_lines, alert_history, alert_links,
plan_changes, alert_outbox; docs/alerts.md).

Callers hold the transaction where several statements must be atomic.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from master.store import changes
from master.store.changes import StoredChangePoint
from master.store.connection import columns, table_columns


@dataclass(frozen=True)
class Alert:
    """One row of `alerts`, every column as stored (`perffarm alerts … --format json` prints them)."""

    id: str
    branch: str
    kind: str  # regression | improvement
    severity: str  # warn | critical
    state: str
    active: int  # 0 when every line is retracted
    prev_sha: str | None
    sha: str
    prev_position: int | None
    position: int
    bisection_state: str | None
    culprit_sha: str | None
    message_version: int  # goes up when the message content changes (docs/glossary.md); was `revision`
    signature: str  # what was last notified (JSON)
    changes: str  # JSON [[message_version, text], ...]
    created_at: float
    updated_at: float
    state_changed_at: float | None
    state_by: str | None
    state_note: str | None


@dataclass(frozen=True)
class AlertLine:
    """A change point filed in an alert, with the severity stored for it there."""

    alert_id: str
    severity: str
    change_point: StoredChangePoint


@dataclass(frozen=True)
class HistoryEntry:
    """One state change of an alert (`alert_history`)."""

    id: int
    alert_id: str
    at: float
    old_state: str | None
    new_state: str
    by: str
    note: str | None


@dataclass(frozen=True)
class Delivery:
    """A message of an alert for one channel, without its payload (`alert_outbox`)."""

    id: int
    alert_id: str
    channel: str
    event: str  # opened | updated
    message_version: int
    state: str  # pending | sent | cancelled
    attempts: int
    lease_owner: str | None
    last_error: str | None
    created_at: float
    sent_at: float | None
    available_at: float


@dataclass(frozen=True)
class OutboxRow:
    """One message for one channel, as claimed by a deliverer: of an alert, or of a plan change (event
    'plan-change', `alert_id` None)."""

    id: int
    alert_id: str | None
    channel: str
    event: str
    message_version: int
    key: str
    payload: dict[str, Any]
    attempts: int
    plan_change_id: str | None = None


@dataclass(frozen=True)
class PlanChangeRecord:
    """A plan change the alert sync has seen (`plan_changes`, schema 25): of one analytic query's series without
    its metric (the plan is the workload's), first seen at `sha`; `id` is `p-` + 12 hex digits."""

    id: str
    machine_id: str
    recipe: str
    recipe_version: int
    config_hash: str
    workload: str
    branch: str
    prev_sha: str
    sha: str
    position: int
    before: str
    after: str
    first_seen: float


@dataclass(frozen=True)
class PlanMessage:
    """A plan change's message for one channel that nobody has tried to send yet (`alert_outbox`)."""

    id: int
    plan_change_id: str
    channel: str


@dataclass(frozen=True)
class ChannelCounts:
    """A channel's outbox at a glance: what `channel_health` judges it by."""

    channel: str
    pending: int | None
    oldest_pending: float | None  # creation time of its oldest pending message
    max_attempts: int | None  # the most attempts of a pending message
    permanent: int | None  # 1 when a pending message failed permanently
    last_sent_at: float | None
    sent: int | None


_ALERT = f"SELECT {columns(Alert)} FROM alerts"
_LINE = (
    changes.SELECT + ", al.alert_id, al.severity" + changes.FROM + " JOIN alert_lines al ON al.change_point_id = cp.id"
)


def _line(r: sqlite3.Row) -> AlertLine:
    return AlertLine(r[changes.WIDTH], r[changes.WIDTH + 1], changes.from_row(r))


# ------------------------------------------------------------------------------------------------ lines


def unassigned_change_points(conn: sqlite3.Connection) -> list[StoredChangePoint]:
    """Active change points that belong to no alert yet (candidates)."""
    rows = conn.execute(
        changes.SELECT
        + changes.FROM
        + " WHERE cp.state = 'active' AND cp.id NOT IN (SELECT change_point_id FROM alert_lines) ORDER BY cp.id"
    )
    return [changes.from_row(r) for r in rows]


def member_lines(conn: sqlite3.Connection, alert_id: str | None = None) -> dict[str, list[AlertLine]]:
    """alert id -> its lines, in branch order, for every alert (or one)."""
    out: dict[str, list[AlertLine]] = {}
    where = " WHERE al.alert_id = ?" if alert_id is not None else ""
    rows = conn.execute(
        _LINE + where + " ORDER BY al.alert_id, cp.position, cp.id", () if alert_id is None else (alert_id,)
    )
    for r in rows:
        line = _line(r)
        out.setdefault(line.alert_id, []).append(line)
    return out


def lines_by_workload(conn: sqlite3.Connection) -> list[AlertLine]:
    """Every alert's lines, per alert by workload and metric (the site's order)."""
    return [_line(r) for r in conn.execute(_LINE + " ORDER BY al.alert_id, s.workload, s.metric, cp.id")]


def add_line(conn: sqlite3.Connection, alert_id: str, change_point_id: int, severity: str, now: float) -> None:
    conn.execute(
        "INSERT INTO alert_lines (alert_id, change_point_id, severity, added_at) VALUES (?, ?, ?, ?)",
        (alert_id, change_point_id, severity, now),
    )


def set_line_severity(conn: sqlite3.Connection, change_point_id: int, severity: str) -> None:
    conn.execute("UPDATE alert_lines SET severity = ? WHERE change_point_id = ?", (severity, change_point_id))


def alert_for_change_point(conn: sqlite3.Connection, change_point_id: int) -> str | None:
    """The alert a change point belongs to (bisection starts from change points)."""
    row = conn.execute("SELECT alert_id FROM alert_lines WHERE change_point_id = ?", (change_point_id,)).fetchone()
    return row[0] if row else None


# ------------------------------------------------------------------------------------------------ alerts


def alerts(conn: sqlite3.Connection) -> list[Alert]:
    """Every alert, oldest first (the order in which new lines try to join them)."""
    return [Alert(*r) for r in conn.execute(_ALERT + " ORDER BY created_at, id")]


def alerts_newest_first(conn: sqlite3.Connection) -> list[Alert]:
    return [Alert(*r) for r in conn.execute(_ALERT + " ORDER BY created_at DESC, id")]


def alerts_at(conn: sqlite3.Connection, sha: str) -> list[Alert]:
    """Alerts whose range ends at `sha` or whose culprit it is (the alerts that can name a plan change there)."""
    return [Alert(*r) for r in conn.execute(_ALERT + " WHERE sha = ? OR culprit_sha = ? ORDER BY id", (sha, sha))]


def alert(conn: sqlite3.Connection, alert_id: str) -> Alert | None:
    row = conn.execute(_ALERT + " WHERE id = ?", (alert_id,)).fetchone()
    return Alert(*row) if row else None


def find_alerts(conn: sqlite3.Connection, prefix: str) -> list[Alert]:
    """Alerts whose id starts with `prefix` (ids may be typed short, like shas)."""
    return [Alert(*r) for r in conn.execute(_ALERT + " WHERE id LIKE ? ORDER BY id", (prefix.lower() + "%",))]


def list_alerts(
    conn: sqlite3.Connection, *, state: str | None, open_states: Sequence[str] | None, limit: int
) -> list[tuple[Alert, int]]:
    """Alerts newest first with their number of lines: in `state`, or (open_states) open in one of those states
    and not retracted, or all."""
    where: list[str] = []
    params: list[Any] = []
    if state:
        where.append("state = ?")
        params.append(state)
    elif open_states is not None:
        where.append(f"state IN ({','.join('?' * len(open_states))}) AND active = 1")
        params.extend(open_states)
    sql = (
        f"SELECT {columns(Alert, 'a')}, (SELECT COUNT(*) FROM alert_lines l WHERE l.alert_id = a.id) AS n_lines "
        "FROM alerts a"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = conn.execute(sql + f" ORDER BY created_at DESC, id LIMIT {int(limit)}", params)
    return [(Alert(*r[:-1]), int(r[-1])) for r in rows]


def insert_alert(conn: sqlite3.Connection, values: dict[str, Any]) -> None:
    cols = ",".join(values)
    conn.execute(f"INSERT INTO alerts ({cols}) VALUES ({','.join('?' * len(values))})", list(values.values()))


def update_alert(conn: sqlite3.Connection, alert_id: str, values: dict[str, Any]) -> None:
    sets = ", ".join(f"{k} = ?" for k in values)
    conn.execute(f"UPDATE alerts SET {sets} WHERE id = ?", [*values.values(), alert_id])


def add_history(
    conn: sqlite3.Connection, alert_id: str, old: str | None, new: str, by: str, note: str | None, now: float
) -> None:
    conn.execute(
        "INSERT INTO alert_history (alert_id, at, old_state, new_state, by, note) VALUES (?, ?, ?, ?, ?, ?)",
        (alert_id, now, old, new, by, note),
    )


def history(conn: sqlite3.Connection, alert_id: str) -> list[HistoryEntry]:
    return [
        HistoryEntry(*r)
        for r in conn.execute(
            f"SELECT {columns(HistoryEntry)} FROM alert_history WHERE alert_id = ? ORDER BY at, id", (alert_id,)
        )
    ]


def histories(conn: sqlite3.Connection) -> dict[str, list[HistoryEntry]]:
    """alert id -> its state changes, oldest first."""
    out: dict[str, list[HistoryEntry]] = {}
    for r in conn.execute(f"SELECT {columns(HistoryEntry)} FROM alert_history ORDER BY at, id"):
        entry = HistoryEntry(*r)
        out.setdefault(entry.alert_id, []).append(entry)
    return out


@dataclass(frozen=True)
class AlertLink:
    """Where an alert is tracked (`alert_links`): a thread or a bug, added by hand."""

    alert_id: str
    url: str
    added_by: str
    added_at: float


def add_link(conn: sqlite3.Connection, alert_id: str, url: str, by: str, now: float) -> bool:
    """Record a link (True), or nothing when the alert has it already (False)."""
    cur = conn.execute(
        "INSERT INTO alert_links (alert_id, url, added_by, added_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (alert_id, url, by, now),
    )
    return cur.rowcount == 1


def links(conn: sqlite3.Connection, alert_id: str | None = None) -> dict[str, list[AlertLink]]:
    """alert id -> its links, oldest first (of one alert, or of all); {} before migration 20."""
    if not table_columns(conn, "alert_links"):
        return {}
    sql = f"SELECT {columns(AlertLink)} FROM alert_links"
    rows = (
        conn.execute(sql + " WHERE alert_id = ? ORDER BY added_at, rowid", (alert_id,))
        if alert_id
        else (conn.execute(sql + " ORDER BY added_at, rowid"))
    )
    out: dict[str, list[AlertLink]] = {}
    for r in rows:
        link = AlertLink(*r)
        out.setdefault(link.alert_id, []).append(link)
    return out


# ------------------------------------------------------------------------------------------------ outbox

_DELIVERY = f"SELECT {columns(Delivery)} FROM alert_outbox"
_OF_ALERTS = " WHERE alert_id IS NOT NULL"  # schema 25: the outbox also holds plan changes' messages


def outbox_rows(conn: sqlite3.Connection, alert_id: str, channel: str) -> list[Delivery]:
    return [
        Delivery(*r)
        for r in conn.execute(_DELIVERY + " WHERE alert_id = ? AND channel = ? ORDER BY id", (alert_id, channel))
    ]


def outbox_for_alert(conn: sqlite3.Connection, alert_id: str) -> list[Delivery]:
    return [Delivery(*r) for r in conn.execute(_DELIVERY + " WHERE alert_id = ? ORDER BY id", (alert_id,))]


def deliveries(conn: sqlite3.Connection) -> dict[str, list[Delivery]]:
    """alert id -> its messages per channel (state, attempts, last error; never the payload)."""
    out: dict[str, list[Delivery]] = {}
    for r in conn.execute(_DELIVERY + _OF_ALERTS + " ORDER BY alert_id, id"):
        d = Delivery(*r)
        out.setdefault(d.alert_id, []).append(d)
    return out


def enqueue(
    conn: sqlite3.Connection,
    *,
    alert_id: str | None,
    channel: str,
    event: str,
    message_version: int,
    key: str,
    payload: dict[str, Any],
    available_at: float,
    now: float,
    plan_change_id: str | None = None,
) -> None:
    """Queue a message of an alert, or (alert_id None) of a plan change."""
    conn.execute(
        "INSERT INTO alert_outbox (alert_id, plan_change_id, channel, event, message_version, idempotency_key, "
        "payload, available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            alert_id,
            plan_change_id,
            channel,
            event,
            message_version,
            key,
            json.dumps(payload, sort_keys=True),
            available_at,
            now,
        ),
    )


def replace_unsent(
    conn: sqlite3.Connection,
    row_id: int,
    *,
    message_version: int,
    key: str,
    payload: dict[str, Any],
    available_at: float,
) -> bool:
    """Refresh a message nobody has tried to send yet (so no receiver can have seen its key)."""
    cur = conn.execute(
        "UPDATE alert_outbox SET message_version = ?, idempotency_key = ?, payload = ?, available_at = ? "
        "WHERE id = ? AND state = 'pending' AND attempts = 0 AND lease_owner IS NULL",
        (message_version, key, json.dumps(payload, sort_keys=True), available_at, row_id),
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
    return int(conn.execute(sql, params).rowcount)


def claim(conn: sqlite3.Connection, owner: str, now: float, lease_seconds: float, limit: int) -> list[OutboxRow]:
    """Lease due messages to `owner`: the oldest pending message per (alert or plan change, channel), in id order.

    Only one message per (alert, channel) is ever in flight, so an update never overtakes its alert.
    The caller holds a BEGIN IMMEDIATE transaction, so two deliverers never lease the same row.
    """
    rows = conn.execute(
        "SELECT * FROM alert_outbox o WHERE o.state = 'pending' AND o.available_at <= :now "
        "AND (o.lease_until IS NULL OR o.lease_until < :now) AND o.id = (SELECT MIN(p.id) FROM alert_outbox p "
        "WHERE p.alert_id IS o.alert_id AND p.plan_change_id IS o.plan_change_id AND p.channel = o.channel "
        "AND p.state = 'pending') ORDER BY o.id LIMIT :limit",
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
            r["message_version"],
            r["idempotency_key"],
            json.loads(r["payload"]),
            r["attempts"],
            r["plan_change_id"],
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


def channel_counts(conn: sqlite3.Connection) -> list[ChannelCounts]:
    """Per channel: pending count, oldest pending creation, worst attempts, its error, last success."""
    return [
        ChannelCounts(*r)
        for r in conn.execute(
            "SELECT channel, "
            "SUM(state = 'pending') AS pending, "
            "MIN(CASE WHEN state = 'pending' THEN created_at END) AS oldest_pending, "
            "MAX(CASE WHEN state = 'pending' THEN attempts ELSE 0 END) AS max_attempts, "
            "MAX(CASE WHEN state = 'pending' THEN last_permanent ELSE 0 END) AS permanent, "
            "MAX(sent_at) AS last_sent_at, SUM(state = 'sent') AS sent "
            "FROM alert_outbox GROUP BY channel ORDER BY channel"
        )
    ]


def worst_error(conn: sqlite3.Connection, channel: str) -> str | None:
    row = conn.execute(
        "SELECT last_error FROM alert_outbox WHERE channel = ? AND state = 'pending' AND last_error IS NOT NULL "
        "ORDER BY attempts DESC, id LIMIT 1",
        (channel,),
    ).fetchone()
    return row[0] if row else None


# ------------------------------------------------------------------------------------------------ plan changes


def plan_change_ids(conn: sqlite3.Connection) -> set[str]:
    """The ids of every plan change the alert sync has seen (and told the channels of, or left to an alert)."""
    return {r[0] for r in conn.execute("SELECT id FROM plan_changes")}


def plan_change(conn: sqlite3.Connection, plan_change_id: str) -> PlanChangeRecord | None:
    row = conn.execute(
        f"SELECT {columns(PlanChangeRecord)} FROM plan_changes WHERE id = ?", (plan_change_id,)
    ).fetchone()
    return PlanChangeRecord(*row) if row else None


def insert_plan_change(conn: sqlite3.Connection, p: PlanChangeRecord) -> bool:
    """Record a plan change as seen (True), or nothing when it was seen before (False)."""
    names = [f.name for f in fields(PlanChangeRecord)]
    cur = conn.execute(
        f"INSERT INTO plan_changes ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) ON CONFLICT DO NOTHING",
        [getattr(p, n) for n in names],
    )
    return cur.rowcount == 1


def plan_scan_state(conn: sqlite3.Connection) -> str:
    """What the plan changes depend on, cheaply: the newest `plans` row, the newest `branch_commits` row and the
    branches being indexed (a new run, a measured commit between two others, a branch that grew or finished)."""
    row = conn.execute(
        "SELECT (SELECT MAX(rowid) FROM plans), (SELECT MAX(rowid) FROM branch_commits), "
        "(SELECT group_concat(branch || '@' || head) FROM branch_indexing)"
    ).fetchone()
    return json.dumps(list(row))


def plan_scan_seen(conn: sqlite3.Connection) -> str | None:
    """`plan_scan_state` at the alert sync's last look for new plan changes (None: never looked)."""
    row = conn.execute("SELECT state FROM plan_change_scan WHERE id = 1").fetchone()
    return row[0] if row else None


def set_plan_scan_seen(conn: sqlite3.Connection, state: str) -> None:
    conn.execute(
        "INSERT INTO plan_change_scan (id, state) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET state = excluded.state",
        (state,),
    )


def untried_plan_messages(conn: sqlite3.Connection) -> list[PlanMessage]:
    """Plan changes' messages no receiver can have seen yet (pending, never tried, not claimed)."""
    return [
        PlanMessage(*r)
        for r in conn.execute(
            "SELECT id, plan_change_id, channel FROM alert_outbox WHERE plan_change_id IS NOT NULL "
            "AND state = 'pending' AND attempts = 0 AND lease_owner IS NULL ORDER BY id"
        )
    ]


def cancel_message(conn: sqlite3.Connection, row_id: int) -> bool:
    """Cancel one message if no receiver can have seen it (never tried, not claimed)."""
    cur = conn.execute(
        "UPDATE alert_outbox SET state = 'cancelled' WHERE id = ? AND state = 'pending' AND attempts = 0 "
        "AND lease_owner IS NULL",
        (row_id,),
    )
    return cur.rowcount == 1
