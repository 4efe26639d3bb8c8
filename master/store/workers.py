"""Worker logins the master refused: who tried, why, from where, how often, until that worker connects."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from master.store.connection import columns

REASONS = ("wrong-password", "unknown-worker")
KEEP = 100  # rows kept: names come from the network, so a stream of made-up names must not grow the table


@dataclass(frozen=True)
class RefusedLogin:
    name: str  # as the worker sent it (bounded and made visible by the caller)
    reason: str  # one of REASONS
    address: str  # the peer's address at the last attempt ("" when the log did not say)
    attempts: int
    first_seen: float
    last_seen: float


def record_refused(conn: sqlite3.Connection, name: str, reason: str, address: str, now: float) -> bool:
    """Count one refused login of `name`; True when it is the first since that name last connected. The
    caller holds the transaction."""
    if reason not in REASONS:
        raise ValueError(f"refused login reason {reason!r} is not one of {REASONS}")
    new = conn.execute("SELECT 1 FROM refused_logins WHERE name = ? AND reason = ?", (name, reason)).fetchone() is None
    conn.execute(
        "INSERT INTO refused_logins (name, reason, address, attempts, first_seen, last_seen) VALUES (?, ?, ?, 1, ?, ?) "
        "ON CONFLICT (name, reason) DO UPDATE SET attempts = attempts + 1, address = excluded.address, "
        "last_seen = excluded.last_seen",
        (name, reason, address, now, now),
    )
    conn.execute(
        "DELETE FROM refused_logins WHERE rowid NOT IN "
        "(SELECT rowid FROM refused_logins ORDER BY last_seen DESC, rowid DESC LIMIT ?)",
        (KEEP,),
    )
    return new


def clear_refused(conn: sqlite3.Connection, name: str) -> int:
    """Forget the refusals of `name` (it has just connected); how many rows went."""
    return conn.execute("DELETE FROM refused_logins WHERE name = ?", (name,)).rowcount


def refused_logins(conn: sqlite3.Connection) -> list[RefusedLogin]:
    """Every remembered refusal, the most recent first."""
    return [
        RefusedLogin(*r)
        for r in conn.execute(f"SELECT {columns(RefusedLogin)} FROM refused_logins ORDER BY last_seen DESC, name")
    ]
