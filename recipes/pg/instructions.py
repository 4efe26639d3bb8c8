"""Instructions per query under valgrind: the deterministic metric for noisy machines.

Why this way: hardware counters are unavailable in this VM and wall-clock throughput has a CV of 6-20% here,
but the number of instructions a backend executes for a fixed set of queries on a fixed data directory is
repeatable to far below 0.1%. The backend runs in single-user mode (`postgres --single`: no postmaster, no
background workers, no network, no timing-dependent checkpoints) under callgrind with collection switched on
only inside `exec_simple_query`, so backend start-up and idle-time housekeeping are not counted. Each sample
starts from a pristine copy of the same data directory. Queries come from a seeded generator: the same keys
every time.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from recipes import sandbox as sandboxing
from recipes.api import BenchFailed, Context
from recipes.pg.build import Install
from recipes.pg.server import as_server_user, owned_dir
from recipes.sandbox import Sandbox

TOGGLE_FUNCTION = "exec_simple_query"
PROFILE_LIMIT = 256 << 20  # bytes of callgrind output read back (a profile of 1,000 queries is a few MB)
TOTALS_RE = re.compile(r"^(?:totals|summary):\s+(\d+)", re.M)


def queries(kind: str, count: int, scale: int, seed: int = 42) -> list[str]:
    """The fixed query lines for an instruction workload (one query or one transaction per line)."""
    rng = random.Random(seed)
    accounts = 100_000 * scale
    lines: list[str] = []
    if kind == "point-select":
        for _ in range(count):
            lines.append(f"SELECT abalance FROM pgbench_accounts WHERE aid = {rng.randint(1, accounts)};")
    elif kind == "point-select-prepared":
        lines.append("PREPARE ps(int) AS SELECT abalance FROM pgbench_accounts WHERE aid = $1;")
        for _ in range(count):
            lines.append(f"EXECUTE ps({rng.randint(1, accounts)});")
    elif kind == "simple-update":
        # pgbench -N (TPC-B-like without the branch/teller updates), one transaction per line.
        for _ in range(count):
            aid, bid, tid = rng.randint(1, accounts), rng.randint(1, scale), rng.randint(1, 10 * scale)
            delta = rng.randint(-5000, 5000)
            lines.append(
                f"BEGIN; UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid}; "
                f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid}; "
                f"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                f"VALUES ({tid}, {bid}, {aid}, {delta}, CURRENT_TIMESTAMP); END;"
            )
    else:
        raise ValueError(f"unknown instruction workload kind {kind!r}")
    return lines


@dataclass(frozen=True)
class Count:
    """Instructions counted inside exec_simple_query, and per query line."""

    total: int
    lines: int

    @property
    def per_query(self) -> float:
        return self.total / self.lines


def count(
    ctx: Context,
    install: Install,
    snapshot: Path,
    query_lines: list[str],
    scratch_root: Path,
    timeout: float = 1800,
    settings: Mapping[str, str] | None = None,
    keep_profile: Path | None = None,
    sandbox: Sandbox | None = None,
    sink: Callable[[bytes], None] | None = None,
) -> Count:
    """Run the query lines in a single-user backend on a copy of `snapshot` under callgrind; count instructions.
    With `keep_profile`, callgrind's output file (the per-function profile of exactly what was counted) is moved
    there: the profile costs no run of its own. With `sandbox` (a try-job's install), the backend and valgrind run
    inside it, seeing the install and a directory holding the data copy and callgrind's output, nothing else.
    `sink` gets callgrind's output too (the coverage figure reads it)."""
    raws = _callgrind(ctx, install, snapshot, query_lines, scratch_root, timeout, settings, sandbox)
    raw = raws[0]
    total = _total(raw)
    if sink is not None:
        sink(raw)
    if keep_profile is not None:
        keep_profile.parent.mkdir(parents=True, exist_ok=True)
        keep_profile.write_bytes(raw)
    return Count(total, len(query_lines))


def count_each(
    ctx: Context,
    install: Install,
    snapshot: Path,
    lines: list[str],
    scratch_root: Path,
    *,
    database: str = "postgres",
    keep: Mapping[int, Path] | None = None,
    timeout: float = 1800,
    sandbox: Sandbox | None = None,
    sink: Callable[[int, bytes], None] | None = None,
) -> list[int]:
    """Like `count`, but the instructions of every line separately, from the same run: callgrind dumps its
    counters after each `exec_simple_query` (one per line the backend reads), so a line's count is exactly that
    line's work. `keep` maps a line's index to where its profile is kept; `sink` gets each line's."""
    raws = _callgrind(ctx, install, snapshot, lines, scratch_root, timeout, None, sandbox, database, per_line=True)
    counts = []
    for i, raw in enumerate(raws):
        counts.append(_total(raw, zero_ok=True))
        if sink is not None:
            sink(i, raw)
        path = (keep or {}).get(i)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw)
    return counts


def _total(raw: bytes, zero_ok: bool = False) -> int:
    m = TOTALS_RE.search(raw.decode(errors="replace"))
    if not m or (int(m.group(1)) == 0 and not zero_ok):
        raise BenchFailed(f"callgrind counted nothing inside {TOGGLE_FUNCTION} (inlined? stripped binary?)")
    return int(m.group(1))


def _callgrind(
    ctx: Context,
    install: Install,
    snapshot: Path,
    query_lines: list[str],
    scratch_root: Path,
    timeout: float,
    settings: Mapping[str, str] | None,
    sandbox: Sandbox | None,
    database: str = "postgres",
    per_line: bool = False,
) -> list[bytes]:
    """callgrind's output of the lines: one file, or with `per_line` one per line (in order)."""
    work = owned_dir(scratch_root, "pf-instr-")  # never swept by a concurrent run while this one lives
    try:
        # what the backend writes (the data copy, callgrind's output) is apart from the farm's own files (the
        # queries, the captured output): a sandboxed backend can change the first, never the second
        inner = work / "backend"
        inner.mkdir()
        data = inner / "data"
        try:
            shutil.copytree(snapshot, data, symlinks=True)
        except (OSError, shutil.Error) as e:
            raise BenchFailed(f"cannot copy the data directory for the instruction count: {str(e)[:300]}") from None
        (data / "postmaster.pid").unlink(missing_ok=True)
        qfile = work / "queries.sql"
        qfile.write_text("\n".join(query_lines) + "\n")
        out_file = inner / "callgrind.out"
        argv: list[str] = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out_file}",
            "--collect-atstart=no",
            f"--toggle-collect={TOGGLE_FUNCTION}",
            *([f"--dump-after={TOGGLE_FUNCTION}"] if per_line else []),
            "--dump-instr=no",
            "--compress-strings=no",
            "--compress-pos=no",
            "--error-limit=no",
            "--quiet",
            str(install.bindir / "postgres"),
            "--single",
            "-D",
            str(data),
            "-F",
        ]
        for k, v in (settings or {}).items():
            argv += ["-c", f"{k}={v}"]
        argv.append(database)
        shown = [str(a) for a in argv]
        if sandbox is not None:
            env = sandboxing.host_env()
            argv = sandbox.seeing(ro=[install.prefix], rw=[inner]).argv(argv, install.env())
        else:
            env = {**_base_env(), **install.env()}
            argv = [str(a) for a in as_server_user(argv)]
        ctx.log(f"$ {'[sandbox] ' if sandbox else ''}{' '.join(shown)} < {qfile.name} ({len(query_lines)} lines)")
        with qfile.open() as stdin, (work / "output.txt").open("w") as stdout:
            try:
                proc = subprocess.run(
                    argv, stdin=stdin, stdout=stdout, stderr=subprocess.STDOUT, timeout=timeout, env=env
                )
            except subprocess.TimeoutExpired:
                raise BenchFailed(f"valgrind run timed out after {timeout:.0f} s", _tail(work / "output.txt")) from None
            except FileNotFoundError:
                raise BenchFailed("valgrind is not installed on this worker: apt-get install valgrind") from None
        output = (work / "output.txt").read_text(errors="replace")
        if proc.returncode != 0:
            raise BenchFailed(f"single-user postgres under valgrind exited with {proc.returncode}", output[-3000:])
        errors = [ln for ln in output.splitlines() if "ERROR:" in ln or "FATAL:" in ln or "PANIC:" in ln]
        if errors:
            raise BenchFailed(f"the instruction workload hit {len(errors)} errors: {errors[0][:300]}", output[-3000:])
        # written inside the sandbox for a try-job: read as untrusted (never through a link)
        if not per_line:
            try:
                return [sandboxing.read_untrusted(out_file, PROFILE_LIMIT)]
            except OSError:
                raise BenchFailed(
                    f"callgrind counted nothing inside {TOGGLE_FUNCTION} (no output file)", output[-3000:]
                ) from None
        raws = []
        for i in range(1, len(query_lines) + 1):  # callgrind numbers its dumps from 1: <out>.1, <out>.2, ...
            try:
                raws.append(sandboxing.read_untrusted(out_file.with_name(f"{out_file.name}.{i}"), PROFILE_LIMIT))
            except OSError:
                raise BenchFailed(
                    f"callgrind wrote {i - 1} profiles for {len(query_lines)} lines (one per line expected)",
                    output[-3000:],
                ) from None
        return raws
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""
