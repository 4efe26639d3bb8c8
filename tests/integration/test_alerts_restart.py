"""Exactly once across kill -9: a deliverer process killed mid-send, restarted, never duplicates an alert.

The deliverer is the real `perffarm alerts deliver` loop in a subprocess against a real SQLite file; the
receiver is a real HTTP server on 127.0.0.1 that answers slowly, so each kill lands after the receiver has
the request and before the deliverer could mark it sent. The restarted deliverer frees the dead process's
leases and re-sends with the same Idempotency-Key; the receiver (honouring the key) processes each alert once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from master import store
from master.alerts.config import AlertSettings, ChannelConfig
from master.alerts.sync import sync
from tests.alerts_support import Farm, HttpReceiver

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
[alerts]
settle_seconds = 0
retry_base_delay = 0.2
retry_max_delay = 1
lease_seconds = 30
send_timeout = 5
[[alerts.channels]]
name = "hook"
kind = "webhook"
url_secret = "alerts-hook-url"
"""


def start_deliverer(db: Path, cfg: Path, secrets: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "master.cli",
            "alerts",
            "deliver",
            "--db",
            str(db),
            "--alerts-config",
            str(cfg),
            "--secrets-dir",
            str(secrets),
            "--interval",
            "0.1",
        ],
        cwd=ROOT,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def pending(db: Path) -> int:
    conn = store.connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM alert_outbox WHERE state = 'pending'").fetchone()[0]
    finally:
        conn.close()


def test_kill_9_mid_send_then_restart_delivers_each_alert_once(tmp_path: Path) -> None:
    receiver = HttpReceiver(delay=0.6).start()
    try:
        farm = Farm(tmp_path / "results.sqlite", n_commits=80)
        for i in range(6):  # six separate alerts, one per commit range
            farm.change_point(farm.series(f"w{i}"), 10 + 10 * i, 0.85)
        settings = AlertSettings(
            settle_seconds=0, channels=(ChannelConfig("hook", "webhook", url_secret="alerts-hook-url"),)
        )
        expected = {f"{e.alert_id}/hook/r1" for e in sync(farm.conn, settings, now=time.time())}
        farm.conn.close()
        assert len(expected) == 6
        cfg = tmp_path / "alerts.toml"
        cfg.write_text(CONFIG)
        secrets = tmp_path / "secrets"
        secrets.mkdir(mode=0o700)
        (secrets / "alerts-hook-url").write_text(receiver.url + "\n")
        log = tmp_path / "deliver.log"

        kills = 0
        deadline = time.monotonic() + 240  # a bound, not a figure: a deliverer start takes 10+ s at load 8
        while pending(farm.path) and time.monotonic() < deadline:
            receiver.got_request.clear()
            proc = start_deliverer(farm.path, cfg, secrets, log)
            if kills < 3 and receiver.got_request.wait(60):
                proc.send_signal(signal.SIGKILL)  # mid-send: the receiver holds the request for 0.6 s
                proc.wait()
                kills += 1
                continue
            while pending(farm.path) and time.monotonic() < deadline:
                time.sleep(0.1)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert kills == 3
        assert pending(farm.path) == 0, log.read_text()
        assert set(receiver.processed) == expected  # every alert processed, exactly once
        resent = receiver.duplicates()
        assert 1 <= resent <= kills  # the killed sends were repeated with the same key, nothing else was

        before = len(receiver.requests)  # one more restart: nothing is sent again
        proc = start_deliverer(farm.path, cfg, secrets, log)
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert len(receiver.requests) == before
        assert receiver.url not in log.read_text() and "SECRETPATH" not in log.read_text()
    finally:
        receiver.stop()
