"""Exact counters beside instructions: system calls by name, WAL and buffers per query of an instruction workload.

Why: callgrind counts user-space instructions only, so a commit that adds kernel work (an open and a close per
query), WAL (a full-page image per transaction) or buffer accesses moves throughput while its instruction count
barely moves, and its differential profile is flat. These causes can be counted as exactly as instructions, in
the same kind of run: the same fixed, seeded query lines in a single-user backend (no postmaster, no background
work) on a pristine copy of the same data directory. Two runs per sample, both without valgrind:

* **system calls and WAL**: the backend runs under `strace -f`; the query lines sit between two marker queries
  that stat a path no file has (`/pf-counters-begin`, `/pf-counters-end`) and print the WAL insert position. Every
  system call the backend makes between the two markers is counted by name. The WAL between the two positions is
  read back with the install's own `pg_waldump`: records, bytes (each record's total length, full-page images
  included: what pg_stat_wal calls wal_bytes) and full-page images (`FPW` block references). One method for every
  major (13 has no pg_stat_wal, and single-user mode flushes no statistics).
* **buffers**: every statement EXPLAIN can run is run as `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`; the shared
  blocks hit, read, dirtied and written of its plan and of its planning, and its temporary blocks written (as
  bytes), are summed. Statements EXPLAIN cannot run (BEGIN, END, PREPARE, utility commands) add nothing, and the
  buffers of AFTER triggers (foreign-key checks) are not in a plan's figures: docs/explain.md lists the limits.

All figures are per query line (per transaction for a workload whose lines are transactions), like instructions.
docs/explain.md gives how exactly each one repeats, measured.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from recipes import sandbox as sandboxing
from recipes.api import BenchFailed, Context
from recipes.pg.build import Install
from recipes.pg.server import as_server_user, owned_dir
from recipes.sandbox import Sandbox

OPTION = "counters"  # counters=0: instruction workloads report instructions only
BEGIN, END = "/pf-counters-begin", "/pf-counters-end"
MAX_NAMED = 40  # system calls reported by name (the most frequent); the total counts every one
TRACE_LIMIT = 512 << 20  # bytes of strace output read back
WAL_KEEP = "1GB"  # the shutdown checkpoint must not recycle the segments between the markers before pg_waldump

# `PID name(args...` and `PID <... name resumed>`: a call is counted once, where it starts
_CALL_RE = re.compile(r"^(\d+)\s+([a-z_][a-z0-9_]*)\(", re.M)
_LSN_RE = re.compile(r'pg_current_wal_insert_lsn = "([0-9A-F]+/[0-9A-F]+)"')
_BLOCK_RE = re.compile(r'current_setting = "(\d+)"')
_RECORD_RE = re.compile(r"^rmgr: .*?len \(rec/tot\):\s*\d+/\s*(\d+),", re.M)
_FPW_RE = re.compile(r"blkref #\d+:[^,]*? FPW\b")
_PLAN_RE = re.compile(r'QUERY PLAN = "(.*?)"\t\(typeid', re.S)
EXPLAINABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "EXECUTE", "WITH", "VALUES", "TABLE")
EXPLAIN = "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, COSTS OFF, FORMAT JSON) "
_BUFFER_KEYS = {
    "buffers_hit": "Shared Hit Blocks",
    "buffers_read": "Shared Read Blocks",
    "buffers_dirtied": "Shared Dirtied Blocks",
    "buffers_written": "Shared Written Blocks",
}
WAL_METRICS = ("wal_records", "wal_bytes", "wal_fpi")
BUFFER_METRICS = (*_BUFFER_KEYS, "temp_bytes")


def marker(path: str) -> str:
    """A query whose one system call of its own (a stat of `path`, which does not exist) marks its place in the
    trace, and which prints the WAL insert position and the block size."""
    return (
        "SELECT pg_current_wal_insert_lsn(), current_setting('block_size'), "
        f"pg_stat_file('{path}', true) IS NULL AS pf_marker;"
    )


@dataclass(frozen=True)
class Counts:
    """One sample's counters of a workload: metric name -> (unit, value per query line)."""

    values: Mapping[str, tuple[str, float]]


def unit_of(kind: str, per: str) -> str:
    return f"{kind}/{per}"


def syscalls_between(trace: str, begin: str = BEGIN, end: str = END) -> Counter[str]:
    """System calls by name that the process which stats `begin` makes after that stat and before it stats `end`
    (other processes of the trace, e.g. a sandbox's, are not counted). ValueError when a marker is missing."""
    lines = trace.splitlines()
    start = next((i for i, ln in enumerate(lines) if f'"{begin}"' in ln), None)
    if start is None:
        raise ValueError(f"the trace has no system call on {begin}")
    m = _CALL_RE.match(lines[start])
    if m is None:
        raise ValueError(f"the trace's line on {begin} names no process")
    pid = m.group(1)
    out: Counter[str] = Counter()
    for ln in lines[start + 1 :]:
        if f'"{end}"' in ln:
            return out
        c = _CALL_RE.match(ln)
        if c is not None and c.group(1) == pid:
            out[c.group(2)] += 1
    raise ValueError(f"the trace has no system call on {end}")


def markers_in(output: str) -> tuple[list[str], int]:
    """The WAL positions the two marker queries printed, and the block size (single-user mode's output)."""
    lsns = _LSN_RE.findall(output)
    block = _BLOCK_RE.search(output)
    if len(lsns) != 2 or block is None:
        raise ValueError(f"expected two marker rows with a WAL position, found {len(lsns)}")
    return lsns, int(block.group(1))


def wal_of(waldump: str) -> dict[str, int]:
    """Records, bytes (total record lengths) and full-page images in `pg_waldump` output (one line per record)."""
    sizes = [int(x) for x in _RECORD_RE.findall(waldump)]
    return {"wal_records": len(sizes), "wal_bytes": sum(sizes), "wal_fpi": len(_FPW_RE.findall(waldump))}


def explained(lines: Sequence[str]) -> list[str]:
    """The query lines with every statement EXPLAIN can run wrapped in EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON).
    Statements are split at `; ` (the generated lines never have one inside a literal)."""
    out = []
    for line in lines:
        parts = [p.strip() for p in line.strip().rstrip(";").split(";")]
        wrapped = [EXPLAIN + p if p.split(None, 1)[0].upper() in EXPLAINABLE else p for p in parts if p]
        out.append("; ".join(wrapped) + ";")
    return out


def buffers_of(output: str, block_size: int) -> dict[str, int]:
    """Shared hit/read/dirtied/written blocks and temp bytes written, summed over every plan printed in `output`
    (each plan's top node, which includes its children, and its planning)."""
    out = dict.fromkeys(BUFFER_METRICS, 0)
    for text in _PLAN_RE.findall(output):
        try:
            doc = json.loads(text)[0]
        except (ValueError, IndexError, KeyError, TypeError):
            raise ValueError(f"an EXPLAIN plan that is not JSON: {text[:200]!r}") from None
        for part in (doc.get("Plan", {}), doc.get("Planning", {})):
            for metric, key in _BUFFER_KEYS.items():
                out[metric] += int(part.get(key, 0))
            out["temp_bytes"] += int(part.get("Temp Written Blocks", 0)) * block_size
    return out


def count(
    ctx: Context,
    install: Install,
    snapshot: Path,
    query_lines: list[str],
    scratch_root: Path,
    per: str,
    timeout: float = 600,
    sandbox: Sandbox | None = None,
) -> Counts:
    """The counters of the query lines on copies of `snapshot` (two single-user runs, see the module docstring);
    `per` names what one line is ("query", "tx") in the units."""
    n = len(query_lines)
    lines = [marker(BEGIN), *query_lines, marker(END)]
    trace, output, wal = _run(ctx, install, snapshot, lines, scratch_root, timeout, sandbox, traced=True)
    try:
        calls = syscalls_between(trace)
        _, block = markers_in(output)
        wal_counts = wal_of(wal)
    except ValueError as e:
        raise BenchFailed(f"counting system calls and WAL: {e}", output[-3000:]) from None
    _, output, _ = _run(ctx, install, snapshot, explained(query_lines), scratch_root, timeout, sandbox)
    try:
        buffers = buffers_of(output, block)
    except ValueError as e:
        raise BenchFailed(f"counting buffers: {e}", output[-3000:]) from None
    values: dict[str, tuple[str, float]] = {"syscalls": (unit_of("syscalls", per), sum(calls.values()) / n)}
    for name, c in sorted(calls.most_common(MAX_NAMED)):
        values[f"syscalls.{name}"] = (unit_of("syscalls", per), c / n)
    kinds = {"wal_records": "records", "wal_bytes": "bytes", "wal_fpi": "fpi"}
    for metric, v in wal_counts.items():
        values[metric] = (unit_of(kinds[metric], per), v / n)
    for metric, v in buffers.items():
        values[metric] = (unit_of("bytes" if metric == "temp_bytes" else "buffers", per), v / n)
    return Counts(values)


def _run(
    ctx: Context,
    install: Install,
    snapshot: Path,
    lines: list[str],
    scratch_root: Path,
    timeout: float,
    sandbox: Sandbox | None,
    traced: bool = False,
) -> tuple[str, str, str]:
    """(strace output, the backend's output, pg_waldump's output between the markers) of one single-user run."""
    work = owned_dir(scratch_root, "pf-count-")  # never swept by a concurrent run while this one lives
    try:
        inner = work / "backend"  # what the backend may write, apart from the farm's own files (as in instructions)
        inner.mkdir()
        data = inner / "data"
        try:
            shutil.copytree(snapshot, data, symlinks=True)
        except (OSError, shutil.Error) as e:
            raise BenchFailed(f"cannot copy the data directory for the counters: {str(e)[:300]}") from None
        (data / "postmaster.pid").unlink(missing_ok=True)
        qfile = work / "queries.sql"
        qfile.write_text("\n".join(lines) + "\n")
        argv: list[str] = [str(install.bindir / "postgres"), "--single", "-D", str(data), "-F"]
        argv += ["-c", f"wal_keep_size={WAL_KEEP}", "postgres"]
        trace_file = work / "strace.txt"
        # strace runs outside the sandbox or user namespace and follows into it (-f): the trace is the farm's file
        tracer = ["strace", "-f", "-qq", "-s", "48", "-o", str(trace_file)] if traced else []
        wrapped, env = _wrapped(install, argv, inner, sandbox)
        ctx.log(f"$ {' '.join(tracer[:3]) + ' ' if traced else ''}{' '.join(argv)} < {qfile.name} ({len(lines)} lines)")
        with qfile.open() as stdin, (work / "output.txt").open("w") as stdout:
            try:
                proc = subprocess.run(
                    [*tracer, *wrapped], stdin=stdin, stdout=stdout, stderr=subprocess.STDOUT, timeout=timeout, env=env
                )
            except subprocess.TimeoutExpired:
                raise BenchFailed(f"the counters' single-user run timed out after {timeout:.0f} s") from None
            except FileNotFoundError:
                raise BenchFailed("strace is not installed on this worker: apt-get install strace") from None
        output = (work / "output.txt").read_text(errors="replace")
        if proc.returncode != 0:
            raise BenchFailed(f"the counters' single-user postgres exited with {proc.returncode}", output[-3000:])
        errors = [ln for ln in output.splitlines() if "ERROR:" in ln or "FATAL:" in ln or "PANIC:" in ln]
        if errors:
            raise BenchFailed(f"the counters' run hit {len(errors)} errors: {errors[0][:300]}", output[-3000:])
        if not traced:
            return "", output, ""
        trace = trace_file.read_text(errors="replace") if trace_file.stat().st_size <= TRACE_LIMIT else ""
        try:
            (start, stop), _ = markers_in(output)
        except ValueError as e:
            raise BenchFailed(f"counting WAL: {e}", output[-3000:]) from None
        if start == stop:  # no WAL between the markers (a read-only workload): nothing for pg_waldump to read
            return trace, output, ""
        dump = [str(install.bindir / "pg_waldump"), "-p", str(data / "pg_wal"), "--start", start, "--end", stop]
        wrapped, env = _wrapped(install, dump, inner, sandbox)
        waldump = subprocess.run(wrapped, capture_output=True, timeout=timeout, env=env)
        if waldump.returncode != 0:
            raise BenchFailed("pg_waldump could not read the WAL between the markers", waldump.stderr.decode()[-2000:])
        return trace, output, waldump.stdout.decode(errors="replace")[: 256 << 20]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _wrapped(
    install: Install, argv: list[str], inner: Path, sandbox: Sandbox | None
) -> tuple[list[str], dict[str, str]]:
    """The command line of a server-side program (in the try-job's sandbox, or as the server user) and its env."""
    if sandbox is not None:
        return sandbox.seeing(ro=[install.prefix], rw=[inner]).argv(argv, install.env()), sandboxing.host_env()
    from recipes.pg.instructions import _base_env

    return [str(a) for a in as_server_user(argv)], {**_base_env(), **install.env()}


def samples(
    ctx: Context,
    install: Install,
    snapshot: Path,
    query_lines: list[str],
    scratch_root: Path,
    per: str,
    n: int,
    sandbox: Sandbox | None = None,
) -> list[tuple[str, str, list[float]]]:
    """`n` samples of the counters: (metric, unit, one value per sample). A system call that one sample made and
    another did not is 0 in the other, so every metric has `n` values (a steady series needs them all)."""
    got = [count(ctx, install, snapshot, query_lines, scratch_root, per, sandbox=sandbox).values for _ in range(n)]
    units = {m: u for values in got for m, (u, _) in values.items()}
    out = []
    for metric in sorted(units):
        out.append((metric, units[metric], [values.get(metric, ("", 0.0))[1] for values in got]))
    ctx.log(
        f"counters of {len(query_lines)} lines, first sample: "
        + ", ".join(f"{m} {got[0][m][1]:,.3f}" for m in ("syscalls", *WAL_METRICS, "buffers_hit", "buffers_read"))
    )
    return out
