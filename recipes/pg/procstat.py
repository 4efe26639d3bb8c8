"""Per-sample resource use from /proc: server CPU seconds, client CPU, context switches, peak backend RSS.

Why /proc and not perf: hardware counters are unavailable in this kind of VM, but the kernel's per-process
accounting always is. Server CPU is the postmaster's own time, the time of its living children, and the time of
children it has already reaped (cutime/cstime), so short-lived backends are counted too.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces: split after the last ')'.
    return text[text.rindex(")") + 2 :].split()


def children(pid: int) -> list[int]:
    """Direct children of `pid` (the postmaster's backends and auxiliary processes)."""
    out = []
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        for t in tasks:
            try:
                out.extend(int(c) for c in (t / "children").read_text().split())
            except OSError:
                continue
    except OSError:
        pass
    return out


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user+system) of `pid`, its reaped children, and its living children."""
    f = _stat_fields(pid)
    if f is None:
        return 0.0
    # Fields after the command: state=0 ... utime=11 stime=12 cutime=13 cstime=14 (0-based from 'state').
    total = sum(int(f[i]) for i in (11, 12, 13, 14))
    for c in children(pid):
        cf = _stat_fields(c)
        if cf is not None:
            total += int(cf[11]) + int(cf[12])
    return total / CLK_TCK


def system_context_switches() -> int:
    """Context switches on the whole host since boot (/proc/stat ctxt)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("ctxt "):
            return int(line.split()[1])
    return 0


def rss_hwm_kib(pid: int) -> int:
    """Peak resident set size (VmHWM) of a process in KiB, 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kib(pid: int) -> int:
    """Current resident set size (VmRSS) in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakRss:
    """Polls the postmaster's children while a sample runs and keeps the largest backend VmHWM seen."""

    def __init__(self, postmaster: int, interval: float = 0.2) -> None:
        self.postmaster = postmaster
        self.interval = interval
        self.peak_kib = 0
        self._known: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeakRss:
        self._known = set(children(self.postmaster))  # auxiliary processes that existed before the sample
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._poll()
        self._stop.set()
        self._thread.join(timeout=5)

    def _poll(self) -> None:
        for c in children(self.postmaster):
            if c not in self._known:
                self.peak_kib = max(self.peak_kib, rss_hwm_kib(c))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._poll()


@dataclass(frozen=True)
class Usage:
    """Resources one sample used."""

    server_cpu_s: float
    client_cpu_s: float
    context_switches: int
    peak_backend_rss_kib: int
    wall_s: float


class Meter:
    """Measure a block: `with Meter(postmaster_pid) as m: run(); usage = m.usage`."""

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster
        self.usage: Usage | None = None

    def __enter__(self) -> Meter:
        self._t0 = time.monotonic()
        self._srv0 = tree_cpu_seconds(self.postmaster)
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._cli0 = ru.ru_utime + ru.ru_stime
        self._ctx0 = system_context_switches()
        self._rss = PeakRss(self.postmaster).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._rss.__exit__()
        wall = time.monotonic() - self._t0
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.usage = Usage(
            server_cpu_s=tree_cpu_seconds(self.postmaster) - self._srv0,
            client_cpu_s=ru.ru_utime + ru.ru_stime - self._cli0,
            context_switches=system_context_switches() - self._ctx0,
            peak_backend_rss_kib=self._rss.peak_kib,
            wall_s=wall,
        )
