"""Deliver the outbox: lease due messages, send each through its channel's sender, mark sent or back off.

Exactly once, as far as a sender can know: a message is marked sent in the same database, right after the
receiver accepted it; a deliverer killed before that mark leaves a lease that expires (or is released at the
next start), and the message is sent again with the *same* idempotency key (HTTP header `Idempotency-Key`,
the JSON body's `delivery_id`, the email's Message-ID), so a receiver that honours the key sees it once.
Nothing is ever dropped: failures are retried with exponential backoff, for ever, and a channel whose
messages keep failing is reported by `health.channel_health`.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from master import store
from master.alerts.channels import Sender, SendError, redact
from master.alerts.config import AlertSettings


def owner_id() -> str:
    """This process as a lease owner: host and pid, so a restarted master can free its dead self's leases."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(owner: str) -> bool | None:
    """Whether a lease owner on this host still runs (None: another host, cannot tell)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_dead_leases(conn: sqlite3.Connection) -> int:
    """Free leases of deliverers on this host that no longer run (after kill -9 or a crash)."""
    dead = [o for o in store.alerts.lease_owners(conn) if _alive(o) is False]
    return store.alerts.release_leases(conn, dead) if dead else 0


@dataclass
class DeliveryReport:
    """What one pass did."""

    sent: list[str] = field(default_factory=list)  # idempotency keys
    failed: list[tuple[str, str]] = field(default_factory=list)  # (key, reason)


def deliver_once(
    conn: sqlite3.Connection,
    settings: AlertSettings,
    senders: Mapping[str, Sender],
    *,
    owner: str | None = None,
    now: Callable[[], float] = time.time,
    limit: int = 50,
    secrets: Mapping[str, str] | None = None,
) -> DeliveryReport:
    """Lease due messages and send each once; a failure schedules a retry with backoff."""
    owner = owner or owner_id()
    policy = settings.retry
    with store.transaction(conn):
        rows = store.alerts.claim(conn, owner, now(), policy.lease_seconds, limit)
    report = DeliveryReport()
    for row in rows:
        sender = senders.get(row.channel)
        try:
            if sender is None:
                raise SendError(f"channel {row.channel!r} is not configured any more", permanent=True)
            sender.send(row)
        except SendError as e:
            failure = e
        except Exception as e:  # noqa: BLE001 - a sender bug must not stop the other channels' delivery
            # Only the type: the text of an unexpected error may quote a secret (a URL, a password).
            failure = SendError(f"the {row.channel!r} sender failed: {type(e).__name__}", permanent=True)
        else:
            store.alerts.mark_sent(conn, row.id, now())
            report.sent.append(row.key)
            continue
        reason = redact(str(failure), secrets or {})
        delay = policy.max_delay if failure.permanent else policy.delay(row.attempts + 1)
        store.alerts.mark_failed(conn, row.id, owner, reason, failure.permanent, now() + delay)
        report.failed.append((row.key, reason))
    return report
