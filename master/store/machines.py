"""Which worker a machine id is bound to, and the results refused for claiming a machine that is not theirs
(tables machines, machine_refusals; the rule is master/machinebinding.py)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from master.store.connection import columns

KEEP = 100  # refusal rows kept: machine ids and their claims come from workers, so a stream of them is bounded


@dataclass(frozen=True)
class Binding:
    """A stored machine: the fingerprint it was first reported with and the worker that reported it."""

    id: str
    fingerprint: dict[str, Any]  # {} when the stored JSON is not an object
    worker: str | None  # None: not bound yet (only the master's own process reported it)
    first_seen: float


@dataclass(frozen=True)
class MachineRefusal:
    """Results of one worker refused for one machine id, until the newest KEEP are kept."""

    machine_id: str  # as the result claimed it (≤ 128 characters, the result schema's limit)
    worker: str  # the worker that uploaded it (Buildbot's name for it, not the result's word)
    bound_worker: str | None  # the machine's worker; None when the id did not match the result's own fingerprint
    reason: str  # the rejection message, redacted
    attempts: int
    first_seen: float
    last_seen: float


def binding(conn: sqlite3.Connection, machine_id: str) -> Binding | None:
    sql = "SELECT id, fingerprint, worker, first_seen FROM machines WHERE id = ?"
    row = conn.execute(sql, (machine_id,)).fetchone()
    if row is None:
        return None
    try:
        fingerprint = json.loads(row[1])
    except ValueError:
        fingerprint = {}
    return Binding(row[0], fingerprint if isinstance(fingerprint, dict) else {}, row[2], row[3])


def bindings(conn: sqlite3.Connection, machine_ids: list[str] | None = None) -> dict[str, Binding]:
    """Stored machines by id (all, or those of `machine_ids`)."""
    sql = "SELECT id, fingerprint, worker, first_seen FROM machines"
    rows = conn.execute(sql).fetchall()
    out = {}
    for row in rows:
        if machine_ids is not None and row[0] not in machine_ids:
            continue
        try:
            fingerprint = json.loads(row[1])
        except ValueError:
            fingerprint = {}
        out[row[0]] = Binding(row[0], fingerprint if isinstance(fingerprint, dict) else {}, row[2], row[3])
    return out


def bind(conn: sqlite3.Connection, machine_id: str, fingerprint: dict[str, Any], worker: str, now: float) -> None:
    """Record the machine with its first fingerprint and worker, or give an unbound one its worker; a bound
    machine is left as it is. The caller holds the transaction, and has checked the binding in it."""
    conn.execute(
        "INSERT INTO machines (id, fingerprint, first_seen, worker) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET worker = excluded.worker WHERE machines.worker IS NULL",
        (machine_id, json.dumps(fingerprint, sort_keys=True), now, worker),
    )


def record_refusal(
    conn: sqlite3.Connection, machine_id: str, worker: str, bound_worker: str | None, reason: str, now: float
) -> None:
    """Count one refused result of `worker` for `machine_id`; the caller holds the transaction."""
    conn.execute(
        "INSERT INTO machine_refusals (machine_id, worker, bound_worker, reason, attempts, first_seen, last_seen) "
        "VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (machine_id, worker) DO UPDATE SET attempts = attempts + 1, "
        "bound_worker = excluded.bound_worker, reason = excluded.reason, last_seen = excluded.last_seen",
        (machine_id, worker, bound_worker, reason, now, now),
    )
    conn.execute(
        "DELETE FROM machine_refusals WHERE rowid NOT IN "
        "(SELECT rowid FROM machine_refusals ORDER BY last_seen DESC, rowid DESC LIMIT ?)",
        (KEEP,),
    )


def refusals(conn: sqlite3.Connection) -> list[MachineRefusal]:
    """Every remembered refusal, the most recent first."""
    return [
        MachineRefusal(*r)
        for r in conn.execute(
            f"SELECT {columns(MachineRefusal)} FROM machine_refusals ORDER BY last_seen DESC, machine_id, worker"
        )
    ]
