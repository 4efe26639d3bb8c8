"""Backend memory-growth probe: RSS of one long-lived backend over many executions of one query.

After the JIT leak report that 15.6/16.2 fixed (LLVM inlining caches grew ~80 kB per query): one pgbench
client runs the two-subquery query from that report `queries` times in one session while its backend's RSS is
sampled. With JIT when this PostgreSQL was built with LLVM (jit forced on for every query), without otherwise
(and the result says which, so series never mix the two).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recipes.api import LOWER, BenchFailed
from recipes.pg import pgbench
from recipes.pg.insertbench import StepResult, sql_file
from recipes.pg.procstat import children, rss_kib
from recipes.pg.server import Server

SCRIPT = "jit-leak.sql"  # the probe's query: part of the identity (series) of the memory-probe workload
JIT_ON = "-c jit=on -c jit_above_cost=0 -c jit_inline_above_cost=0 -c jit_optimize_above_cost=0"


def has_llvm(srv: Server) -> bool:
    """True when this install can JIT (llvmjit.so is installed next to the other modules). Only the two places an
    install puts it are looked at (lexists, no walk): a try-job's install may hold links anywhere."""
    lib = srv.install.prefix / "lib"
    return any(os.path.lexists(d / "llvmjit.so") for d in (lib, lib / "postgresql"))


@dataclass
class _Poller:
    srv: Server
    before: set[int]
    interval: float = 0.05

    def __post_init__(self) -> None:
        self.samples: list[int] = []
        self.stop = threading.Event()

    def loop(self) -> None:
        pm = self.srv.postmaster_pid()
        backend = None
        while not self.stop.wait(self.interval):
            if backend is None and pm is not None:
                new = [c for c in children(pm) if c not in self.before]
                backend = new[0] if new else None
            if backend is not None:
                kib = rss_kib(backend)
                if kib:
                    self.samples.append(kib)


def run(srv: Server, spec: Mapping[str, Any]) -> StepResult:
    rows = int(spec.get("rows", 100_000))
    queries = int(spec.get("queries", 1000))
    jit = spec.get("jit", "auto") != "off" and has_llvm(srv)
    srv.psql(
        "DROP TABLE IF EXISTS leak_test; "
        "CREATE TABLE leak_test (id integer NOT NULL, CONSTRAINT leak_test_pkey PRIMARY KEY (id)); "
        f"INSERT INTO leak_test (id) SELECT id FROM generate_series(1, {rows}) id"
    )
    srv.psql("VACUUM ANALYZE leak_test")  # not in the same -c: VACUUM cannot run inside a transaction block
    assert srv.dir is not None
    script = srv.dir / SCRIPT
    script.write_text(sql_file(SCRIPT))
    pm = srv.postmaster_pid()
    poller = _Poller(srv, set(children(pm)) if pm else set())
    thread = threading.Thread(target=poller.loop, daemon=True)
    if jit:
        srv.pgoptions = JIT_ON
    thread.start()
    try:
        pgbench.run(
            srv,
            ["-D", f"rows={min(rows, int(spec.get('rows_per_query', rows)))}"],
            None,
            "memory probe",
            script=script,
            sampling_rate=None,
            transactions=queries,
        )
    finally:
        poller.stop.set()
        thread.join(timeout=5)
        srv.pgoptions = ""
    if not poller.samples:
        raise BenchFailed(
            f"memory probe: the backend finished before its RSS could be sampled; "
            f"raise 'queries' (now {queries}) or 'rows' (now {rows})"
        )
    s = poller.samples
    first = s[min(len(s) - 1, max(len(s) // 10, 0))]  # after the first tenth: caches are warm by then
    result = StepResult(
        {
            "rss_peak": ("KiB", LOWER, float(max(s))),
            "rss_growth": ("KiB", LOWER, float(max(s) - first)),
        }
    )
    result.flags.append("jit" if jit else "no-jit (PostgreSQL built without LLVM)")
    return result
