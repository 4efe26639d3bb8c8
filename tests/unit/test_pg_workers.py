"""workers/create_worker.py: creates a real buildbot-worker directory and the master's password secret."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from workers import create_worker

ROOT = Path(__file__).resolve().parents[2]


def test_creates_worker_and_secret_that_agree(tmp_path: Path) -> None:
    rc = create_worker.main(
        [
            "w1",
            "--master",
            "127.0.0.1:9989",
            "--basedir",
            str(tmp_path / "w1"),
            "--secrets-dir",
            str(tmp_path / "secrets"),
        ]
    )
    assert rc == 0
    secret = tmp_path / "secrets" / "worker-w1"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    tac = (tmp_path / "w1" / "buildbot.tac").read_text()
    assert "workername = 'w1'" in tac and "port = 9989" in tac
    assert f"passwd = {secret.read_text().strip()!r}" in tac
    assert "perffarm machine" in (tmp_path / "w1" / "info" / "host").read_text()
    assert f"keepalive = {create_worker.KEEPALIVE}" in tac  # not buildbot-worker's 600 s: back soon after a cut link
    # A second run keeps the existing password (the master's secret stays valid).
    before = secret.read_text()
    assert (
        create_worker.main(
            [
                "w1",
                "--master",
                "127.0.0.1:9989",
                "--basedir",
                str(tmp_path / "w1"),
                "--secrets-dir",
                str(tmp_path / "secrets"),
            ]
        )
        == 0
    )
    assert secret.read_text() == before


def test_rejects_bad_names_and_addresses(tmp_path: Path) -> None:
    assert create_worker.main(["bad name; rm", "--master", "h:1", "--basedir", str(tmp_path / "x")]) == 2
    assert create_worker.main(["ok", "--master", "no-port", "--basedir", str(tmp_path / "x")]) == 2
    assert create_worker.main(["ok", "--master", "h:1", "--basedir", str(tmp_path / "x"), "--keepalive", "0"]) == 2
    assert not (tmp_path / "x").exists()


def test_check_only_prints_host_checks_without_the_venv() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "workers/create_worker.py"),
            "x",
            "--master",
            "h:1",
            "--basedir",
            "/nonexistent",
            "--check",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert '"host_checks"' in out.stdout and '"machine_id"' in out.stdout
