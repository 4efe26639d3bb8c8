"""Write a file so that a crash, a kill or a full disk leaves the old content or the new one, never a part of it.

For state the master reads back (a deferred result's build context, the reconciler's report, the reason beside
a rejected result): a truncated or empty file there used to stop every later reconcile pass. Pure, stdlib only.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a rename or a new name in directory `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the rename itself is still atomic
    finally:
        os.close(fd)


def write_atomic(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` (str as UTF-8): write a temporary file in the same directory, fsync it, rename
    it over `path`, fsync the directory. On any error the temporary file is removed and `path` is unchanged."""
    path = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def move_durably(src: Path, dst: Path) -> None:
    """Rename `src` to `dst` (same file system) and make both directories' entries durable."""
    os.replace(src, dst)
    fsync_dir(Path(dst).parent)
    if Path(src).parent != Path(dst).parent:
        fsync_dir(Path(src).parent)


def create_once(path: Path, make: Callable[[], str], mode: int = 0o600) -> str:
    """The content of `path`, created whole the first time with `make()`: written to a temporary file, fsynced and
    renamed into place under a lock on its directory, so a crash leaves no file or the whole one and of racing
    creators (threads or processes) one wins and all read its value. An empty file (left by older code that
    created the file first and wrote it after) is replaced."""
    path = Path(path)
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        value = ""
    if value:
        return value
    # The lock is the directory itself (no lock file: the secrets directory must hold secrets only).
    fd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            value = path.read_text().strip()
        except FileNotFoundError:
            value = ""
        if not value:
            value = make().strip()
            write_atomic(path, value + "\n", mode)
    finally:
        os.close(fd)
    return value
