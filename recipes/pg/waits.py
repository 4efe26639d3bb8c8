"""Where the backends waited while a pgbench sample ran: the server's own wait events, sampled at a fixed rate.

Why: a contention regression (a lock held longer, WAL written under a lock) makes throughput at two or more
clients fall while instructions, system calls and WAL per query barely move (docs/explain.md). PostgreSQL says what
each backend waits for in `pg_stat_activity` (`wait_event_type`, `wait_event`; both NULL while it runs on a CPU).
Sampling that view at a fixed rate during a sample gives the share of backend-samples spent in each wait:
"LWLock:WALWrite 31% → 44%".

One long-lived `psql` per sample and side reads the view (never a process per sample point: starting psql costs
more than the query). Its stdin is a pipe; after each query the sampler sends `\\echo` of a marker line, so it
knows where one answer ends without parsing psql's prompts. The sampler's own backend (`pg_backend_pid()`) and every
backend that is not a client backend (background writer, WAL writer, ...: `backend_type`, since PostgreSQL 10) or
not `active` (a client backend between transactions waits in `Client:ClientRead` and is idle, not busy) are left
out. A sample is paused between its slices (only the side whose slice runs is sampled) and its counts add up
over them, so a sample's waits cover the same time as its throughput.

Standard library only (this runs on the worker). The master checks what a worker reports (recipes/result.py
`_waits`) and judges changes (master/explain/waits.py).
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from recipes.api import BenchFailed
from recipes.pg.server import Server

OPTION = "waits"  # waits=<Hz>: the sampling rate during pgbench samples; waits=0 turns sampling off
DEFAULT_HZ = 20.0
MAX_HZ = 1000.0
CPU = "CPU"  # a backend that is active and waits for nothing is running (or runnable) on a CPU
MARKER = "pf-waits-end"
# The query returns one line per wait: "<type>:<event>|<backend count>". GROUP BY keeps the answer a few lines
# long at any client count. NULL wait_event_type is a backend on a CPU.
QUERY = (
    "SELECT coalesce(wait_event_type || ':' || wait_event, '" + CPU + "'), count(*) FROM pg_stat_activity "
    "WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid() GROUP BY 1;"
)
NAME_RE = re.compile(r"^[A-Za-z0-9_:]{1,128}$")  # what a wait name may be (recipes/result.py checks it again)
MAX_WAITS = 64  # waits named per sample; the rest are summed as OTHER
OTHER = "Other"
_LINE_RE = re.compile(r"^(.+)\|(\d{1,9})$")
ANSWER_TIMEOUT_S = 10.0  # one answer of psql; the server is loaded, but not that much


def rate(options: Mapping[str, str]) -> float:
    """The sampling rate the options ask for (0: off); BenchFailed with what to write when it is not a number."""
    value = options.get(OPTION, str(DEFAULT_HZ))
    try:
        hz = float(value)
    except ValueError:
        hz = -1.0
    if not 0 <= hz <= MAX_HZ:
        raise BenchFailed(f"{OPTION}={value[:40]!r}: expected a sampling rate in Hz from 0 (off) to {MAX_HZ:.0f}")
    return hz


@dataclass(frozen=True)
class Waits:
    """One sample's waits: backend-samples per wait, the sample points taken (ticks) and their rate."""

    counts: Mapping[str, int]
    ticks: int
    hz: float

    @property
    def observations(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        """The result's form (docs/result-schema.md, `waits`): shares of the observations, at most MAX_WAITS named
        (the most frequent; the rest summed as `Other`)."""
        n = self.observations
        top = Counter(self.counts).most_common()
        named = dict(top[: MAX_WAITS - 1]) if len(top) > MAX_WAITS else dict(top)
        rest = n - sum(named.values())
        if rest:
            named[OTHER] = named.get(OTHER, 0) + rest
        return {
            "observations": n,
            "ticks": self.ticks,
            "hz": self.hz,
            "shares": {k: round(v / n, 6) for k, v in sorted(named.items())} if n else {},
        }


def parse_answer(lines: list[str]) -> Counter[str]:
    """One answer of QUERY: wait -> backends. ValueError for a line that is not `name|count` with a wait's name
    (an error message, or a name no PostgreSQL prints)."""
    out: Counter[str] = Counter()
    for line in lines:
        m = _LINE_RE.match(line.strip())
        if m is None or not NAME_RE.match(m.group(1)):
            raise ValueError(f"unexpected line from the wait sampler's psql: {line[:200]!r}")
        out[m.group(1)] += int(m.group(2))
    return out


def merge(parts: list[Waits]) -> Waits:
    """The waits of consecutive slices of one sample, summed."""
    counts: Counter[str] = Counter()
    for p in parts:
        counts.update(p.counts)
    return Waits(dict(counts), sum(p.ticks for p in parts), parts[0].hz if parts else 0.0)


class Sampler:
    """One psql reading `pg_stat_activity` of `srv` at `hz` in a thread, for one sample (see the module docstring):
    `with Sampler(srv, hz) as s:` starts psql; `with s.sampling():` around each slice samples it; `s.result()`."""

    def __init__(self, srv: Server, hz: float) -> None:
        self.srv = srv
        self.hz = hz
        self.counts: Counter[str] = Counter()
        self.ticks = 0
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: str | None = None

    def __enter__(self) -> Sampler:
        argv = [self.srv.bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=0", "-d", "postgres"]
        command, env = self.srv.client(argv)
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt()
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._proc = None

    def _ask(self) -> Counter[str]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{QUERY}\n\\echo {MARKER}\n")
        proc.stdin.flush()
        lines = []
        while True:
            line = proc.stdout.readline()
            if not line:
                raise ValueError(f"the wait sampler's psql exited (code {proc.poll()}): {' '.join(lines)[-300:]}")
            if line.strip() == MARKER:
                return parse_answer(lines)
            lines.append(line.rstrip("\n"))

    def _loop(self) -> None:
        period = 1.0 / self.hz
        start = time.monotonic()
        k = 0
        try:
            while not self._stop.is_set():
                self.counts.update(self._ask())
                self.ticks += 1
                # a fixed schedule (tick k at start + k/hz); a late answer skips the ticks it overran, never
                # queries back to back to catch up
                k = max(k + 1, int((time.monotonic() - start) * self.hz) + 1)
                self._stop.wait(max(0.0, start + k * period - time.monotonic()))
        except (OSError, ValueError) as e:
            self._error = str(e)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[None]:
        """Sample while the with-block runs (one slice of the sample)."""
        if self._proc is None:
            raise RuntimeError("Sampler.sampling() outside `with Sampler(...)`")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="pf-waits", daemon=True)
        self._thread.start()
        try:
            yield
        finally:
            self._halt()

    def _halt(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=ANSWER_TIMEOUT_S + 5)
            if self._thread.is_alive():
                self._error = self._error or f"no answer from the wait sampler's psql in {ANSWER_TIMEOUT_S:.0f} s"
                if self._proc is not None:
                    self._proc.kill()
            self._thread = None

    def result(self, what: str) -> Waits:
        """The sample's waits; BenchFailed when the sampler failed (psql died, printed an error)."""
        if self._error is not None:
            raise BenchFailed(f"{what}: sampling the wait events failed: {self._error}", self.srv.log_tail())
        return Waits(dict(self.counts), self.ticks, self.hz)
