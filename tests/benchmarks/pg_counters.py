"""How exactly the counters beside instructions repeat, and what they cost (issue #29, docs/explain.md).

For every install given, loads pgbench scale 1 into a fresh data directory (as the quick profile does, smaller),
then counts each instruction workload's query lines K times on copies of the same snapshot
(recipes/pg/counters.py) and prints, per workload and counter, the mean per query and the relative range of the
K counts, and the seconds one count takes (two single-user runs and pg_waldump: the cost per sample).

    .venv/bin/python -m tests.benchmarks.pg_counters --install ~/.cache/perffarm/test-pg/work/installs/<slot> \
        --install ... --k 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from recipes.api import Context
from recipes.pg import counters, instructions
from recipes.pg.build import Install, postgres_version
from recipes.pg.server import Server

WORKLOADS = (
    ("instr-point-select", "point-select", 1000),
    ("instr-point-select-prepared", "point-select-prepared", 1000),
    ("instr-simple-update", "simple-update", 300),
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--install", action="append", required=True, help="an install prefix (bin/postgres inside)")
    p.add_argument("--k", type=int, default=5, help="counts of the same build (default 5)")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pf-counters-bench-"))
    print(f"$ {' '.join([sys.executable, '-m', 'tests.benchmarks.pg_counters', *sys.argv[1:]])}")
    try:
        for prefix in map(Path, args.install):
            ctx = Context(root, root / "work", root / "state", "", "bench", {})
            major, version = postgres_version(ctx, prefix)
            inst = Install(prefix, "", major, version, "reused")
            with Server(ctx, inst, "fsync = off\n", root / "run", name=f"pg{major}") as srv:
                srv.run_client([srv.bin("pgbench"), "-i", "-q", "-s", "1"], "pgbench -i", timeout=600)
                srv.psql("VACUUM ANALYZE")
                srv.checkpoint()
                srv.stop()
                assert srv.dir is not None
                snap = srv.dir / "snapshot"
                shutil.copytree(srv.datadir, snap, symlinks=True)
                for name, kind, n in WORKLOADS:
                    lines = instructions.queries(kind, n, 1)
                    per = "tx" if kind == "simple-update" else "query"
                    got, secs = [], []
                    for _ in range(args.k):
                        t0 = time.monotonic()
                        got.append(counters.count(ctx, inst, snap, lines, root / "scratch", per).values)
                        secs.append(time.monotonic() - t0)
                    print(f"\nPostgreSQL {version} {name}: {args.k} counts, {statistics.median(secs):.2f} s each")
                    for metric in sorted({m for g in got for m in g}):
                        xs = [g.get(metric, ("", 0.0))[1] for g in got]
                        spread = (max(xs) - min(xs)) / max(abs(statistics.mean(xs)), 1e-12)
                        print(f"  {metric:<22} {statistics.mean(xs):>14,.4f} /{per}  range {spread:.2e}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
