"""Run pgbench samples and turn their output and per-transaction logs into numbers.

`run` measures one pgbench process against one server; `combine` sums the short slices of one side of an A/B
sample (see recipes/pg/profile.py) into one sample.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes.api import BenchFailed
from recipes.pg.procstat import Meter, Usage
from recipes.pg.server import Server
from recipes.pg.stats import percentile
from recipes.sandbox import read_untrusted

TPS_RE = re.compile(r"^tps = ([0-9.]+) \((without initial connection time|excluding connections establishing)\)", re.M)
TPS_ANY_RE = re.compile(r"^tps = ([0-9.]+)", re.M)
LAT_RE = re.compile(r"^latency average = ([0-9.]+) ms", re.M)
TX_RE = re.compile(r"^number of transactions actually processed: (\d+)", re.M)
FAILED_RE = re.compile(r"^number of failed transactions: (\d+)", re.M)
LOG_LIMIT = 1 << 30  # bytes of one pgbench log file read back


@dataclass(frozen=True)
class PgbenchOutput:
    """What pgbench printed: throughput, average latency, transactions done and failed."""

    tps: float
    latency_avg_ms: float | None
    transactions: int
    failed: int


def parse_output(text: str) -> PgbenchOutput:
    """Parse pgbench's summary (PostgreSQL 10+ formats); BenchFailed if there is no tps line."""
    m = TPS_RE.search(text) or TPS_ANY_RE.search(text)
    if not m:
        if re.search(r"number of transactions actually processed: 0\b", text):
            raise BenchFailed(
                "pgbench processed no transaction before its -T time ran out (with many clients, connecting them "
                "takes seconds on a small machine and the clock runs meanwhile): give the workload a longer "
                "duration_s in its profile entry",
                text[-3000:],
            )
        raise BenchFailed("pgbench printed no 'tps =' line", text[-3000:])
    lat = LAT_RE.search(text)
    tx = TX_RE.search(text)
    failed = FAILED_RE.search(text)
    return PgbenchOutput(
        tps=float(m.group(1)),
        latency_avg_ms=float(lat.group(1)) if lat else None,
        transactions=int(tx.group(1)) if tx else 0,
        failed=int(failed.group(1)) if failed else 0,
    )


def log_latencies_us(log_dir: Path) -> list[int]:
    """Per-transaction latencies (µs) from pgbench's --log files (column 3; failed/skipped rows ignored). A
    try-job's pgbench wrote them inside its sandbox: read as untrusted files (regular files, never through a link)."""
    out: list[int] = []
    for f in sorted(log_dir.glob("pgbench_log.*")):
        try:
            text = read_untrusted(f, LOG_LIMIT).decode(errors="replace")
        except OSError as e:
            raise BenchFailed(f"unreadable pgbench log {f.name}: {e}") from None
        for line in text.splitlines():
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[2].isdigit():
                out.append(int(parts[2]))
    return out


@dataclass(frozen=True)
class Sample:
    """One pgbench sample: parsed output, latency percentiles and resource use."""

    out: PgbenchOutput
    p95_ms: float | None
    p99_ms: float | None
    usage: Usage
    latencies_us: tuple[int, ...] = ()  # the sampled per-transaction latencies behind p95/p99, sorted

    def per_tx(self, value: float, scale: float = 1e6) -> float:
        return value * scale / self.out.transactions if self.out.transactions else 0.0


def _sample(out: PgbenchOutput, latencies_us: Sequence[int], usage: Usage) -> Sample:
    lat = tuple(sorted(latencies_us))
    return Sample(
        out=out,
        p95_ms=percentile(lat, 95) / 1000 if lat else None,
        p99_ms=percentile(lat, 99) / 1000 if lat else None,
        usage=usage,
        latencies_us=lat,
    )


def combine(slices: Sequence[Sample]) -> Sample:
    """One sample from consecutive slices of the same side: throughput = all transactions / all their time."""
    if not slices:
        raise ValueError("combine needs at least one slice")
    tx = sum(s.out.transactions for s in slices)
    busy = sum(s.out.transactions / s.out.tps for s in slices if s.out.tps > 0)
    lats = [s.out.latency_avg_ms for s in slices]
    lat_avg = (
        sum(s.out.latency_avg_ms * s.out.transactions for s in slices) / tx  # type: ignore[operator]
        if tx and None not in lats
        else None
    )
    out = PgbenchOutput(
        tps=tx / busy if busy else 0.0,
        latency_avg_ms=lat_avg,
        transactions=tx,
        failed=sum(s.out.failed for s in slices),
    )
    usage = Usage(
        server_cpu_s=sum(s.usage.server_cpu_s for s in slices),
        client_cpu_s=sum(s.usage.client_cpu_s for s in slices),
        context_switches=sum(s.usage.context_switches for s in slices),
        peak_backend_rss_kib=max(s.usage.peak_backend_rss_kib for s in slices),
        wall_s=sum(s.usage.wall_s for s in slices),
    )
    return _sample(out, [x for s in slices for x in s.latencies_us], usage)


def _argv(
    srv: Server,
    args: Sequence[str],
    duration_s: float | None,
    script: Path | None,
    log_dir: Path,
    sampling_rate: float | None,
    transactions: int | None,
) -> list[str]:
    argv: list[str] = [str(srv.bin("pgbench")), "-n", *args]
    if script is not None:
        argv += ["-f", str(script)]
    if transactions is not None:
        argv += ["-t", str(transactions)]
    elif duration_s is not None:
        argv += ["-T", str(max(1, round(duration_s)))]
    if sampling_rate is not None:
        argv += ["-l", f"--log-prefix={log_dir / 'pgbench_log'}"]
        if sampling_rate < 1:
            argv += [f"--sampling-rate={sampling_rate}"]
    return argv


def run(
    srv: Server,
    args: Sequence[str],
    duration_s: float | None,
    what: str,
    script: Path | None = None,
    sampling_rate: float | None = 0.1,
    extra_timeout: float = 180,
    transactions: int | None = None,
    cpus: Sequence[int] | None = None,
) -> Sample:
    """One pgbench run against `srv`, measured: -T duration (or -t transactions), logs sampled for p95/p99.

    With `cpus`, the client runs pinned to those CPUs (pin the server with Server.pin first)."""
    pid = srv.postmaster_pid()
    if pid is None:
        raise BenchFailed(f"{what}: the server is not running", srv.log_tail())
    log_dir = Path(tempfile.mkdtemp(prefix="pgbench-log-", dir=srv.dir))
    argv = _argv(srv, args, duration_s, script, log_dir, sampling_rate, transactions)
    if cpus:
        argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
    timeout = (duration_s or 0) + extra_timeout if transactions is None else 3600
    try:
        with Meter(pid) as meter:
            text = srv.run_client(argv, what, timeout=timeout, ro=[script] if script else [], rw=[log_dir])
        srv.check_alive(what)
        out = parse_output(text)
        if out.failed:
            raise BenchFailed(f"{what}: {out.failed} pgbench transactions failed", text[-3000:])
        lat = log_latencies_us(log_dir) if sampling_rate is not None else []
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    assert meter.usage is not None
    return _sample(out, lat, meter.usage)
