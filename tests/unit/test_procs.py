"""recipes.procs.pid_alive: the one pid check the pg recipe's server sweep and the tests' fleet share."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from recipes import procs


def test_pid_alive_tells_a_live_process_from_a_reaped_one():
    assert procs.pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now (unless reused within this instant)
    assert not procs.pid_alive(child.pid)


def test_a_process_of_another_user_counts_as_alive(monkeypatch: pytest.MonkeyPatch):
    def refused(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(procs.os, "kill", refused)
    assert procs.pid_alive(1)
