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
from recipes.sandbox import read_untrusted
from recipes.stats import percentile

TPS_RE = re.compile(r"^tps = ([0-9.]+) \((without initial connection time|excluding connections establishing)\)", re.M)
TPS_ANY_RE = re.compile(r"^tps = ([0-9.]+)", re.M)
LAT_RE = re.compile(r"^latency average = ([0-9.]+) ms", re.M)
TX_RE = re.compile(r"^number of transactions actually processed: (\d+)", re.M)
FAILED_RE = re.compile(r"^number of failed transactions: (\d+)", re.M)
# `-r`: "statement latencies in milliseconds:" (13, 14), "... and failures:" (15+), "..., failures and retries:"
# (15+ with --max-tries); then one line per script command: latency, [failures, [retries,]] the command's text
STATEMENTS_RE = re.compile(r"^statement latencies in milliseconds[^\n]*:\n((?:[ \t]+[0-9].*\n?)*)", re.M)
STATEMENT_LINE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)((?:[ \t]+[0-9]+)*)[ \t]+(\S.*)$")
ABORTED_RE = re.compile(r"client \d+ (?:script \d+ )?aborted in command (\d+)[^:]*: (.*)")
RUN_ABORTED = "Run was aborted"
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


def statement_latencies(text: str, names: Sequence[str]) -> tuple[float, ...]:
    """Per-statement mean latencies (ms) from pgbench `-r` output, one per line of the script, in script order
    (`names[i]` names line i, for the error messages). BenchFailed, naming the statement, when a statement failed or
    aborted a client (the run's figures are then incomplete), or when the report does not list the script's lines."""
    aborted = ABORTED_RE.search(text)
    if aborted is not None:
        k = int(aborted.group(1))
        which = f"{names[k]} (line {k + 1} of the script)" if k < len(names) else f"command {k + 1} of the script"
        raise BenchFailed(f"{which} aborted a pgbench client: {' '.join(aborted.group(2).split())}", text[-3000:])
    if RUN_ABORTED in text:
        raise BenchFailed("pgbench says the run was aborted: its per-statement latencies are incomplete", text[-3000:])
    block = STATEMENTS_RE.search(text)
    if block is None:
        raise BenchFailed("pgbench printed no per-statement latencies (was -r given?)", text[-3000:])
    lines = [ln for ln in block.group(1).splitlines() if ln.strip()]
    if len(lines) != len(names):
        raise BenchFailed(
            f"pgbench reported {len(lines)} statement latencies for a script of {len(names)} statements", text[-3000:]
        )
    out = []
    for name, line in zip(names, lines, strict=True):
        m = STATEMENT_LINE_RE.match(line)
        if m is None:
            raise BenchFailed(f"{name}: unreadable per-statement latency line {line[:80]!r}", text[-3000:])
        failures = [int(x) for x in m.group(2).split()]
        if failures and failures[0] > 0:
            raise BenchFailed(f"{name}: {failures[0]} executions failed (pgbench -r)", text[-3000:])
        out.append(float(m.group(1)))
    return tuple(out)


def _statements(what: str, text: str, names: Sequence[str]) -> tuple[float, ...]:
    try:
        return statement_latencies(text, names)
    except BenchFailed as e:
        raise BenchFailed(f"{what}: {e.message}", e.log_excerpt) from None


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
    statements_ms: tuple[float, ...] = ()  # with `-r`: each script line's mean latency, in script order

    def per_tx(self, value: float, scale: float = 1e6) -> float:
        return value * scale / self.out.transactions if self.out.transactions else 0.0


def _sample(
    out: PgbenchOutput, latencies_us: Sequence[int], usage: Usage, statements_ms: Sequence[float] = ()
) -> Sample:
    lat = tuple(sorted(latencies_us))
    return Sample(
        out=out,
        p95_ms=percentile(lat, 95) / 1000 if lat else None,
        p99_ms=percentile(lat, 99) / 1000 if lat else None,
        usage=usage,
        latencies_us=lat,
        statements_ms=tuple(statements_ms),
    )


def combine_statements(slices: Sequence[Sample]) -> tuple[float, ...]:
    """Each statement's mean latency over consecutive slices: the slices' means weighted by their transactions
    (every transaction runs every line of the script once); () unless every slice has them, for the same lines."""
    tx = sum(s.out.transactions for s in slices)
    widths = {len(s.statements_ms) for s in slices}
    if not tx or len(widths) != 1 or 0 in widths:
        return ()
    n = widths.pop()
    return tuple(sum(s.statements_ms[i] * s.out.transactions for s in slices) / tx for i in range(n))


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
    return _sample(out, [x for s in slices for x in s.latencies_us], usage, combine_statements(slices))


def _argv(
    srv: Server,
    args: Sequence[str],
    duration_s: float | None,
    script: Path | None,
    log_dir: Path,
    sampling_rate: float | None,
    transactions: int | None,
    per_statement: bool = False,
    dbname: str | None = None,
) -> list[str]:
    argv: list[str] = [str(srv.bin("pgbench")), "-n", *args, *(["-r"] if per_statement else [])]
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
    if dbname is not None:
        argv.append(dbname)  # pgbench [OPTION]... [DBNAME]: last (PGDATABASE names the default)
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
    statements: Sequence[str] = (),
    dbname: str | None = None,
) -> Sample:
    """One pgbench run against `srv`, measured: -T duration (or -t transactions), logs sampled for p95/p99.

    With `cpus`, the client runs pinned to those CPUs (pin the server with Server.pin first). With `statements`
    (the names of the script's lines), pgbench reports each line's mean latency (`-r`) into the sample, and a line
    that fails is named in the error. `dbname`: the database it runs in (default: PGDATABASE, postgres)."""
    pid = srv.postmaster_pid()
    if pid is None:
        raise BenchFailed(f"{what}: the server is not running", srv.log_tail())
    log_dir = Path(tempfile.mkdtemp(prefix="pgbench-log-", dir=srv.dir))
    argv = _argv(srv, args, duration_s, script, log_dir, sampling_rate, transactions, bool(statements), dbname)
    if cpus:
        argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
    timeout = (duration_s or 0) + extra_timeout if transactions is None else 3600
    try:
        with Meter(pid) as meter:
            try:
                text = srv.run_client(argv, what, timeout=timeout, ro=[script] if script else [], rw=[log_dir])
            except BenchFailed as e:
                if statements and ABORTED_RE.search(e.log_excerpt):  # which query broke, not only "status 2"
                    _statements(what, e.log_excerpt, statements)
                raise
        srv.check_alive(what)
        out = parse_output(text)
        if out.failed:
            raise BenchFailed(f"{what}: {out.failed} pgbench transactions failed", text[-3000:])
        per_statement = _statements(what, text, statements) if statements else ()
        lat = log_latencies_us(log_dir) if sampling_rate is not None else []
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    assert meter.usage is not None
    return _sample(out, lat, meter.usage, per_statement)
