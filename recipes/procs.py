"""Processes by pid (standard library only: shipped to workers with the recipes; the tests' fleet uses it too)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts; one of another user's too: kill says EPERM)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
