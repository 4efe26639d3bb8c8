"""How each alert channel is doing (ok, retrying, failing), from the outbox: for `perffarm status`, `perffarm
alerts channels` and the site.

Apart from delivery (`delivery.py`, which loads the senders and their HTTP client): reading the outbox's counts
needs only the settings and the store.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from master.alerts.config import AlertSettings
from master.store import alerts as outbox


@dataclass(frozen=True)
class ChannelHealth:
    """How a channel is doing, for `perffarm status` and the site."""

    name: str
    kind: str | None  # None: messages exist for a channel no longer configured
    status: str  # ok | retrying | failing
    pending: int
    sent: int
    max_attempts: int
    oldest_pending_age: float | None
    last_sent_at: float | None
    last_error: str | None


def channel_health(conn: sqlite3.Connection, settings: AlertSettings, now: float | None = None) -> list[ChannelHealth]:
    """Every configured channel (and any with leftover messages): ok, retrying, or failing."""
    now = time.time() if now is None else now
    rows = {r.channel: r for r in outbox.channel_counts(conn)}
    names = [c.name for c in settings.channels] + sorted(set(rows) - {c.name for c in settings.channels})
    out = []
    for name in names:
        ch = settings.channel(name)
        r = rows.get(name)
        pending = int(r.pending or 0) if r else 0
        attempts = int(r.max_attempts or 0) if r else 0
        permanent = bool(r.permanent) if r else False
        if pending and (attempts >= settings.retry.failing_after or permanent or ch is None):
            status = "failing"
        elif pending and attempts > 0:
            status = "retrying"
        else:
            status = "ok"
        out.append(
            ChannelHealth(
                name=name,
                kind=ch.kind if ch else None,
                status=status,
                pending=pending,
                sent=int(r.sent or 0) if r else 0,
                max_attempts=attempts,
                oldest_pending_age=(now - r.oldest_pending) if r and r.oldest_pending else None,
                last_sent_at=r.last_sent_at if r else None,
                last_error=outbox.worst_error(conn, name) if pending else None,
            )
        )
    return out
