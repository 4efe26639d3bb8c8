"""Render into a new version directory next to the output, then swap it in with one atomic rename.

`out_dir` is a symlink to `.<name>.versions/<version>/`. A publish writes a complete new version (an incremental
one hard-links every unchanged file from the current version and writes changed files as new inodes, so the
old version is never modified), then points a fresh symlink at it and renames that over `out_dir`: a reader
sees the old site or the new one, never a half-written one. The previous version is kept for readers in the
middle of loading a page; older ones are removed. Nothing is ever deleted before its replacement is live.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from master.publish.isolate import PageFailure

MARKER = "manifest.json"


class PublishError(RuntimeError):
    """The output directory cannot be published to; the message says why."""


def _check_rel(rel: str) -> str:
    """A site-relative path made only of normal components (string checks: called for every one of ~13,000
    files of a full publish)."""
    if not rel or rel[0] == "/" or "\\" in rel or any(p in ("", ".", "..") for p in rel.split("/")):
        raise PublishError(f"refusing to write outside the site: {rel!r}")
    return rel


@contextlib.contextmanager
def publish_lock(out_dir: Path) -> Iterator[None]:
    """One publisher at a time per output directory (the master's incremental publish, `perffarm publish`,
    `perffarm run`'s start-up publish): the later one waits, then builds on the version the first swapped in."""
    out = Path(os.path.abspath(out_dir))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class SiteWriter:
    """One new version of the site; `commit()` swaps it in, `abort()` throws it away."""

    def __init__(self, out_dir: Path, incremental: bool) -> None:
        self.out_dir = Path(os.path.abspath(out_dir))
        self.versions = self.out_dir.parent / f".{self.out_dir.name}.versions"
        self.versions.mkdir(parents=True, exist_ok=True)
        _spread_subdirectories(self.versions)
        self.current = self._current()
        if incremental and self.current is None:
            raise PublishError(f"no published site at {self.out_dir} to update; run a full publish first")
        self.root = self.versions / f"v{time.time_ns():020d}-{os.getpid()}.tmp"
        self.root.mkdir()
        self.incremental = incremental
        self._root = str(self.root)
        self._dirs: set[str] = {self._root}
        self.written: list[str] = []
        if incremental and self.current is not None:
            self._link_tree(self.current, self.root)
        # a full publish over a live site hard-links every file whose bytes did not change from it: no new inode
        # and no write for most of a site that mostly did not change (creating ~13,000 inodes is a large part of
        # a full publish on a busy ext4), and the version it retires frees only what changed
        self._reuse = str(self.current) if not incremental and self.current is not None else None
        self.linked = 0
        self.failures: list[PageFailure] = []  # pages written as what went wrong instead (master/publish/isolate.py)

    def _current(self) -> Path | None:
        if self.out_dir.is_symlink():
            target = Path(os.path.realpath(self.out_dir))
            return target if target.is_dir() else None
        if self.out_dir.exists():
            if not self.out_dir.is_dir() or any(self.out_dir.iterdir()) and not (self.out_dir / MARKER).exists():
                raise PublishError(f"{self.out_dir} exists and is not a perffarm site; choose another --out")
        return None

    @staticmethod
    def _link_tree(src: Path, dst: Path) -> None:
        """Hard-link every file of the live version into the new one (plain strings: ~15 us per file)."""
        src_s, dst_s = str(src), str(dst)
        link, mkdir, join = os.link, os.mkdir, os.path.join
        for dirpath, dirnames, filenames in os.walk(src_s):
            target = dst_s + dirpath[len(src_s) :]
            for d in dirnames:
                mkdir(join(target, d))
            for f in filenames:
                link(join(dirpath, f), join(target, f))

    def exists(self, rel: str) -> bool:
        return (self.root / _check_rel(rel)).exists()

    def write(self, rel: str, text: str) -> None:
        """Write one file of the new, not yet visible version. A file hard-linked from the live version is
        unlinked first, so the new content gets a new inode and the live file is never modified. Plain os calls:
        three system calls per file instead of open()'s six, and no text wrapper objects."""
        path = f"{self._root}/{_check_rel(rel)}"
        parent = path.rpartition("/")[0]
        if parent not in self._dirs:
            os.makedirs(parent, exist_ok=True)
            self._dirs.add(parent)
        if self.incremental:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        data = memoryview(text.encode("utf-8"))
        if self._reuse is not None and _holds(f"{self._reuse}/{rel}", data):
            os.link(f"{self._reuse}/{rel}", path)  # the live file is only read and linked, never modified
            self.written.append(rel)
            self.linked += 1
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
        self.written.append(rel)

    def write_changed(self, rel: str, text: str) -> bool:
        """write(), except that a file of an incremental version whose bytes are already the live version's stays
        the hard link it is and is not counted as written: for pages rendered on every publish that one run
        rarely changes (each machine's overview page). Whether it wrote."""
        if self.incremental and _holds(f"{self._root}/{_check_rel(rel)}", memoryview(text.encode("utf-8"))):
            return False
        self.write(rel, text)
        return True

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Take turns with other processes writing this version (a full publish's forked writer): creating a file
        holds its directory's lock in the kernel, and a process waiting for it spins (perf, two processes each
        writing batches of data/commits/*.js: 7.5% of a cold publish's CPU in rwsem_spin_on_owner while ext4
        scanned past recently freed inodes). A flock on the version directory, opened per call (so parent and
        child hold separate locks), makes the waiter sleep instead; closing releases it."""
        fd = os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def keep_only(self, rel_dir: str, keep: set[str]) -> None:
        """Delete the files directly in `rel_dir` of the new version that are not in `keep` (paths relative to the
        site): an incremental version starts as links to every live file, so pages of things that no longer
        exist (a removed tag's release page) must go. Only the new version's links are removed."""
        d = self.root / _check_rel(rel_dir)
        if not d.is_dir():
            return
        for p in d.iterdir():
            if p.is_file() and f"{rel_dir}/{p.name}" not in keep:
                p.unlink()

    def keep_only_tree(self, rel_dir: str, keep: set[str]) -> None:
        """keep_only for `rel_dir` and every directory below it; directories left empty go too (a machine's release
        tables of a major no longer measured at two tags)."""
        d = self.root / _check_rel(rel_dir)
        if not d.is_dir():
            return
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            self.keep_only(str(sub.relative_to(self.root)), keep)
            if not any(sub.iterdir()):
                sub.rmdir()
        self.keep_only(rel_dir, keep)

    def keep_only_dirs(self, rel_dir: str, keep: set[str]) -> None:
        """Delete the directories directly in `rel_dir` of the new version that are not in `keep` (paths relative
        to the site), with what they hold: a machine no longer measured at any release tag."""
        d = self.root / _check_rel(rel_dir)
        if not d.is_dir():
            return
        for p in d.iterdir():
            if p.is_dir() and not p.is_symlink() and f"{rel_dir}/{p.name}" not in keep:
                shutil.rmtree(p)

    def copy_tree(self, src: Path, rel: str) -> None:
        """Copy static assets into the new version."""
        dst = self.root / _check_rel(rel)
        if dst.exists():
            shutil.rmtree(dst)  # inside the new, unpublished version only
        shutil.copytree(src, dst)

    def commit(self) -> Path:
        """Swap the new version in atomically and prune versions older than the previous one."""
        final = self.root.with_suffix("")
        os.rename(self.root, final)
        if self.out_dir.exists() and not self.out_dir.is_symlink():
            # a first publish over an older, plain-directory site: keep it as a version, then link
            legacy = self.versions / f"v{time.time_ns():020d}-legacy"
            os.rename(self.out_dir, legacy)
        link = self.out_dir.parent / f".{self.out_dir.name}.swap-{os.getpid()}"
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(os.path.relpath(final, self.out_dir.parent), link)
        os.replace(link, self.out_dir)
        self._prune(keep={final.name, self.current.name if self.current else ""})
        return final

    def abort(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _prune(self, keep: set[str]) -> None:
        """Retire old versions: renamed to *.trash at once (so no later publish links from them), deleted by a
        background thread: deleting ~10,000 files takes about a second, and the new version is already live."""
        doomed = []
        for entry in self.versions.iterdir():
            if entry.name.endswith(".trash"):
                doomed.append(entry)  # left by a process that ended before its cleanup finished
            elif entry.name.endswith(".tmp"):
                if entry != self.root and _stale(entry):
                    doomed.append(entry)
            elif entry.name not in keep:
                trash = entry.with_name(f"{entry.name}.{os.getpid()}.{time.time_ns()}.trash")
                try:
                    os.rename(entry, trash)
                except OSError:
                    continue
                doomed.append(trash)
        if doomed:
            # not a daemon: a short-lived process (perffarm publish) finishes the deletion before it exits
            t = threading.Thread(target=_remove_all, args=(doomed,), name="perffarm-site-prune")
            _CLEANUPS.append(t)
            t.start()


_CLEANUPS: list[threading.Thread] = []


def wait_for_cleanup() -> None:
    """Wait until retired versions are deleted (benchmarks call this so runs do not overlap the deletions)."""
    while _CLEANUPS:
        _CLEANUPS.pop().join()


def only_cleanup_threads() -> bool:
    """Every thread besides the main one is a deletion thread of this module (joining them makes the process
    single-threaded again, so it may fork)."""
    return all(t is threading.main_thread() or t in _CLEANUPS for t in threading.enumerate())


def _remove_all(paths: list[Path]) -> None:
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)


_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS, _FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000  # linux/fs.h


def _spread_subdirectories(path: Path) -> None:
    """Mark the versions directory as the top of directory hierarchies (chattr +T) so ext4 places each new
    version in a fresh block group instead of next to the version just deleted. Why: ext4 without a journal
    (this VM's root file system) will not reuse an inode freed in the last 30 s and scans past every such inode
    at each allocation (perf: find_inode_bit -> recently_deleted); writing 13,000 files right after deleting
    13,000 took 5 s of CPU instead of 0.3 s. Other file systems ignore the hint or refuse it: both are fine."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        if not flags[0] & _FS_TOPDIR_FL:
            flags[0] |= _FS_TOPDIR_FL
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags, True)
    except OSError:
        pass  # not ext2/3/4, or not ours to change: the hint only changes where inodes are placed
    finally:
        os.close(fd)


def _holds(path: str, data: memoryview) -> bool:
    """The regular file at `path` holds exactly `data` (its size is compared first)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        got = bytearray()
        while len(got) <= len(data) and (chunk := os.read(fd, len(data) + 1 - len(got))):
            got += chunk
        return got == data
    finally:
        os.close(fd)


_TEMP_VERSION = re.compile(r"v\d+-(\d+)(?:-spill)?\.tmp")  # SiteWriter's temp version and its spill: the pid


def _stale(path: Path, age: float = 3600.0) -> bool:
    """A leftover temp version of a publish that will never finish: the process named in it is gone (a master
    killed mid-publish; the site is written by processes of one host, docs/scale.md), or it is an hour old."""
    m = _TEMP_VERSION.fullmatch(path.name)
    if m and not _running(int(m.group(1))):
        return True
    try:
        return time.time() - path.stat().st_mtime > age
    except OSError:
        return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or not a pid: leave it to the age rule
    return True
