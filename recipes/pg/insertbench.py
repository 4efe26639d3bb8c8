"""Insert Benchmark-style steps (after Mark Callaghan's benchmark), driven by pgbench scripts.

Steps (sizes come from the profile data): l.i0 load in PK order; l.x create 3 secondary indexes; l.i1 and l.i2
insert+delete with 50 and 5 rows per commit on two connections; qrN / qpN range and point queries for a fixed
time while two more connections insert and delete at N rows/s each. A query step whose background insert rate
falls below `sla` x target is flagged `sla-miss`: its QPS was bought by not doing the background work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from recipes.api import HIGHER, BenchFailed
from recipes.pg import pgbench
from recipes.pg.server import Server

# Every script run() uses: they are part of the identity (series) of the insert-benchmark workload.
SCRIPTS = ("ib-schema.sql", "ib-insert.sql", "ib-indexes.sql", "ib-delete.sql", "ib-range.sql", "ib-point.sql")


def sql_file(name: str) -> str:
    return resources.files("recipes.pg").joinpath("sql", name).read_text()


@dataclass
class StepResult:
    """Values of one step: metric -> (unit, direction, value), plus flags."""

    values: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def _script(srv: Server, name: str) -> Path:
    assert srv.dir is not None
    path = srv.dir / name
    if not path.exists():
        path.write_text(sql_file(name))
    return path


def _parallel(srv: Server, jobs: list[tuple[list[str], Path, float | None, int | None]], what: str) -> list[Any]:
    """Run several pgbench processes at once; returns their Samples (or raises the first failure)."""
    results: list[Any] = [None] * len(jobs)

    def one(i: int, args: list[str], script: Path, duration: float | None, tx: int | None) -> None:
        try:
            results[i] = pgbench.run(
                srv, args, duration, f"{what} #{i + 1}", script=script, sampling_rate=None, transactions=tx
            )
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            results[i] = e

    threads = [threading.Thread(target=one, args=(i, *job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def run(srv: Server, spec: Mapping[str, Any]) -> dict[str, StepResult]:
    """All steps once on `srv`; returns step name -> result (workload names are `<prefix>-<step>`)."""
    rows = int(spec.get("rows", 1_000_000))
    load_batch = int(spec.get("load_batch", 1000))
    srv.psql(sql_file("ib-schema.sql"))
    out: dict[str, StepResult] = {}

    # l.i0: load in PK order (bigserial), `load_batch` rows per transaction, one connection.
    s = pgbench.run(
        srv,
        ["-D", f"batch={load_batch}"],
        None,
        "l.i0",
        script=_script(srv, "ib-insert.sql"),
        sampling_rate=None,
        transactions=max(rows // load_batch, 1),
    )
    out["l.i0"] = StepResult({"inserts": ("rows/s", HIGHER, s.out.tps * load_batch)})

    # l.x: create 3 secondary indexes.
    srv.checkpoint()
    t0 = time.monotonic()
    srv.psql(sql_file("ib-indexes.sql"), timeout=7200)
    out["l.x"] = StepResult({"indexed": ("rows/s", HIGHER, rows / (time.monotonic() - t0))})

    # l.i1 / l.i2: insert and delete `batch` rows per commit on two connections for a fixed number of rows.
    for step, batch, key in (("l.i1", 50, "l_i1_rows"), ("l.i2", 5, "l_i2_rows")):
        n_rows = int(spec.get(key, rows // 5))
        tx = max(n_rows // batch, 1)
        srv.checkpoint()
        ins, _dele = _parallel(
            srv,
            [
                (["-D", f"batch={batch}"], _script(srv, "ib-insert.sql"), None, tx),
                (["-D", f"batch={batch}"], _script(srv, "ib-delete.sql"), None, tx),
            ],
            step,
        )
        out[step] = StepResult({"inserts": ("rows/s", HIGHER, ins.out.tps * batch)})

    srv.psql("VACUUM ANALYZE ib", timeout=7200)
    seconds = float(spec.get("query_seconds", 60))
    sla = float(spec.get("sla", 0.95))
    for rate in spec.get("rates", [100]):
        for kind, script in (("qr", "ib-range.sql"), ("qp", "ib-point.sql")):
            step = f"{kind}{rate}"
            lo, hi = (int(x) for x in srv.psql("SELECT min(pk), max(pk) FROM ib").split("|"))
            srv.checkpoint()
            q, ins, _dele = _parallel(
                srv,
                [
                    (["-D", f"lo={lo}", "-D", f"hi={hi}", "-M", "prepared"], _script(srv, script), seconds, None),
                    (["-D", "batch=1", "-R", str(rate)], _script(srv, "ib-insert.sql"), seconds, None),
                    (["-D", "batch=1", "-R", str(rate)], _script(srv, "ib-delete.sql"), seconds, None),
                ],
                step,
            )
            res = StepResult(
                {"qps": ("queries/s", HIGHER, q.out.tps), "background_inserts": ("rows/s", HIGHER, ins.out.tps)}
            )
            if ins.out.tps < sla * rate:
                res.flags.append(f"sla-miss: background insert rate {ins.out.tps:.0f}/s < {sla:.0%} of {rate}/s")
            out[step] = res
    if not out:
        raise BenchFailed("the insert benchmark produced no steps")
    return out
