"""A second process for a full publish on a two-core machine: fork, let the child compute or write one part, take
its result back through a pipe (pickled). Only from a single-threaded process (publish_all checks): the master
publishes from threads and never forks.

The child works on the parent's memory as it was at the fork (copy-on-write: nothing is copied up front), uses
no database connection or lock of the parent's, and ends with os._exit so none of the parent's cleanup runs
twice.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class ChildFailed(RuntimeError):
    """The forked part raised or died; the message carries its error."""


@dataclass
class Child:
    pid: int
    fd: int  # read end of the pipe carrying the pickled result


def fork(work: Callable[[], Any]) -> Child:
    """Start `work` in a forked child; `join` returns its result (or raises what went wrong there)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's cleanup
        code = 1
        try:
            os.close(r)
            try:
                payload = pickle.dumps((True, work()), protocol=pickle.HIGHEST_PROTOCOL)
                code = 0
            except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises
                payload = pickle.dumps((False, f"{type(e).__name__}: {e}"[:8000]))
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(code)
    os.close(w)
    return Child(pid, r)


def join(child: Child) -> Any:
    """The child's result; reaps it whatever happens."""
    try:
        with os.fdopen(child.fd, "rb") as f:
            data = f.read()
    finally:
        _, status = os.waitpid(child.pid, 0)
    try:
        ok, value = pickle.loads(data)
    except Exception:  # noqa: BLE001 - nothing (or half) was written: the child died
        raise ChildFailed(f"the second publish process died (exit status {status})") from None
    if not ok:
        raise ChildFailed(value)
    return value


def kill(child: Child) -> None:
    """Stop a child the parent no longer waits for (the parent failed first)."""
    try:
        os.kill(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)
    except ChildProcessError:
        pass
    os.close(child.fd)


def both(here: Callable[[], Any], there: Callable[[], Any]) -> tuple[Any, Any]:
    """(here(), there()) with `there` computed in a forked child at the same time."""
    child = fork(there)
    try:
        mine = here()
    except BaseException:
        kill(child)
        raise
    return mine, join(child)


def halves(n: int, part: Callable[[int, int], Any], jobs: int, minimum: int) -> list[Any]:
    """part(a, b) over [0, n) in one piece, or with jobs > 1 and n >= minimum in two: [0, n//2) here and
    [n//2, n) in a forked child at the same time. Returns the parts' results in order."""
    if jobs < 2 or n < minimum:
        return [part(0, n)]
    mid = n // 2
    return list(both(lambda: part(0, mid), lambda: part(mid, n)))


def share(
    tasks: Sequence[Callable[[], None]],
    jobs: int,
    here_first: Callable[[], None] | None = None,
    child_result: Callable[[], Any] = lambda: None,
) -> Any:
    """Run every task once. With jobs > 1 a forked child and this process take tasks from one pipe (reading
    4 bytes claims one task), so whichever process gets more CPU does more of them. `here_first` runs in this
    process only (work that uses its database connections) before it joins in. Returns child_result() as
    evaluated in the child at its end (None without a child)."""
    if jobs < 2 or len(tasks) * 4 > 65536:  # the task numbers must fit the pipe's buffer (64 KiB on Linux)
        if here_first is not None:
            here_first()
        for task in tasks:
            task()
        return None
    r, w = os.pipe()
    try:
        os.write(w, b"".join(struct.pack("<I", i) for i in range(len(tasks))))
    finally:
        os.close(w)  # a drained pipe then reads as end of file

    def drain() -> None:
        while claim := os.read(r, 4):  # reads of <= PIPE_BUF bytes never interleave
            tasks[struct.unpack("<I", claim)[0]]()

    try:
        child = fork(lambda: (drain(), child_result())[1])
    except BaseException:
        os.close(r)
        raise
    try:
        if here_first is not None:
            here_first()
        drain()
    except BaseException:
        kill(child)
        raise
    finally:
        os.close(r)
    return join(child)
