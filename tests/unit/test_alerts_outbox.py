"""The outbox state machine: leases, one message in flight per alert and channel, backoff, dead leases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from master import store
from master.alerts.channels import SendError
from master.alerts.config import AlertSettings, ChannelConfig, RetryPolicy
from master.alerts.delivery import deliver_once, release_dead_leases
from master.alerts.sync import sync
from master.store import alerts as db
from tests.alerts_support import Farm

SETTINGS = AlertSettings(
    settle_seconds=0,
    retry=RetryPolicy(base_delay=5, max_delay=40, lease_seconds=20, timeout=2),
    channels=(ChannelConfig("hook", "webhook", url_secret="u"),),
)


class Recorder:
    """An injected sender that records what it is asked to send (the channel clients are tested for real
    against local receivers in tests/integration)."""

    def __init__(self, fail: bool = False) -> None:
        self.keys: list[str] = []
        self.fail = fail

    def send(self, row: db.OutboxRow) -> None:
        self.keys.append(row.key)
        if self.fail:
            raise SendError("HTTP 502")


def test_updates_never_overtake_their_alert_and_leases_block_a_second_deliverer(tmp_path: Path) -> None:
    farm = Farm(tmp_path / "r.sqlite")
    farm.change_point(farm.series("a"), 10, 0.9)
    (e,) = sync(farm.conn, SETTINGS, now=0)
    with store.transaction(farm.conn):
        (first,) = db.claim(farm.conn, "host:1", 0, 20, 10)  # deliverer 1 takes the opened message, then stalls
    farm.change_point(farm.series("b"), 10, 0.9)
    sync(farm.conn, SETTINGS, now=1)  # the opened message is in flight: the new line becomes an update
    assert [r["event"] for r in farm.outbox()] == ["opened", "updated"]
    other = Recorder()
    assert deliver_once(farm.conn, SETTINGS, {"hook": other}, owner="host:2", now=lambda: 5.0).sent == []
    assert other.keys == []  # neither the leased message nor the update behind it
    db.mark_sent(farm.conn, first.id, 6)
    deliver_once(farm.conn, SETTINGS, {"hook": other}, owner="host:2", now=lambda: 7.0)
    assert other.keys == [f"{e.alert_id}/hook/r2"]


def test_an_expired_lease_is_taken_over_with_the_same_key(tmp_path: Path) -> None:
    farm = Farm(tmp_path / "r.sqlite")
    farm.change_point(farm.series("a"), 10, 0.9)
    sync(farm.conn, SETTINGS, now=0)
    with store.transaction(farm.conn):
        (row,) = db.claim(farm.conn, "elsewhere:1", 0, 20, 10)
    rec = Recorder()
    deliver_once(farm.conn, SETTINGS, {"hook": rec}, now=lambda: 19.0)
    assert rec.keys == []
    deliver_once(farm.conn, SETTINGS, {"hook": rec}, now=lambda: 21.0)
    assert rec.keys == [row.key]
    assert farm.outbox()[0]["state"] == "sent"


def test_failures_back_off_exponentially_and_are_never_dropped(tmp_path: Path) -> None:
    farm = Farm(tmp_path / "r.sqlite")
    farm.change_point(farm.series("a"), 10, 0.9)
    sync(farm.conn, SETTINGS, now=0)
    rec = Recorder(fail=True)
    times = []
    t = 0.0
    for _ in range(7):
        deliver_once(farm.conn, SETTINGS, {"hook": rec}, now=lambda t=t: t)
        t = farm.outbox()[0]["available_at"]
        times.append(t)
    assert times == [5, 15, 35, 75, 115, 155, 195]  # +5, +10, +20, +40, then capped at 40
    assert farm.outbox()[0]["state"] == "pending" and farm.outbox()[0]["attempts"] == 7


def test_leases_of_a_dead_process_on_this_host_are_released(tmp_path: Path) -> None:
    farm = Farm(tmp_path / "r.sqlite")
    farm.change_point(farm.series("a"), 10, 0.9)
    sync(farm.conn, SETTINGS, now=0)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    owner = f"{socket.gethostname()}:{int(dead.stdout)}"
    with store.transaction(farm.conn):
        db.claim(farm.conn, owner, 0, 10_000, 10)
    with store.transaction(farm.conn):
        db.claim(farm.conn, "other-host:1", 0, 10_000, 10)  # nothing left to claim; other hosts are kept
    assert release_dead_leases(farm.conn) == 1
    rec = Recorder()
    deliver_once(farm.conn, SETTINGS, {"hook": rec}, now=lambda: 1.0)
    assert len(rec.keys) == 1
