"""What sampling the wait events costs in throughput (issue #29 item 2, docs/explain.md).

One server of the quick profile's settings (pgbench scale 1), one workload: `pgbench -S -M prepared -c2 -j2` (the
quick profile's pgbench-ro-prepared-c2). Samples run in paired rounds, sampling off and on interleaved (off first in
even rounds, on first in odd ones, so neither goes first more often), each `--duration` seconds, the "on" sample
with the wait sampler of recipes/pg/waits.py at `--hz`. Prints the order-balanced ratio on/off of throughput with
its 95% interval (recipes/stats.py, as `perffarm compare` reports B/A), and what the sampler observed.

    .venv/bin/python -m tests.benchmarks.wait_cost --install ~/.cache/perffarm/test-pg/work/installs/<slot> \
        --rounds 10 --duration 10
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from recipes.api import Context
from recipes.pg import pgbench, waits
from recipes.pg.build import Install, postgres_version
from recipes.pg.profile import conf_text, load_profile
from recipes.pg.server import Server
from recipes.stats import paired_estimate

ARGS = ["-S", "-M", "prepared", "-c", "2", "-j", "2"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--install", required=True, help="an install prefix (bin/postgres inside)")
    p.add_argument("--rounds", type=int, default=10, help="paired rounds (default 10; even)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per sample (default 10)")
    p.add_argument("--hz", type=float, default=waits.DEFAULT_HZ, help="sampling rate of the 'on' samples")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pf-waits-bench-"))
    print(f"$ {' '.join([sys.executable, '-m', 'tests.benchmarks.wait_cost', *sys.argv[1:]])}")
    off: list[float] = []
    on: list[float] = []
    seen: list[waits.Waits] = []
    try:
        ctx = Context(root, root / "work", root / "state", "", "bench", {})
        major, version = postgres_version(ctx, Path(args.install))
        inst = Install(Path(args.install), "", major, version, "reused")
        with Server(ctx, inst, conf_text(load_profile("quick"), major), root / "run", name="waits") as srv:
            srv.run_client([srv.bin("pgbench"), "-i", "-q", "-s", "1"], "pgbench -i", timeout=600)
            srv.psql("VACUUM ANALYZE")
            pgbench.run(srv, ARGS, 5, "warm-up")
            for r in range(args.rounds + args.rounds % 2):
                for sampled in (False, True) if r % 2 == 0 else (True, False):
                    srv.checkpoint()
                    if sampled:
                        with waits.Sampler(srv, args.hz) as sampler:
                            with sampler.sampling():
                                s = pgbench.run(srv, ARGS, args.duration, "sampled")
                            got = sampler.result("sampled")
                        seen.append(got)
                        on.append(s.out.tps)
                    else:
                        off.append(pgbench.run(srv, ARGS, args.duration, "not sampled").out.tps)
                print(f"round {r + 1}: off {off[-1]:,.0f} tx/s, on {on[-1]:,.0f} tx/s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    e = paired_estimate(off, on)
    merged = waits.merge(seen)
    print(f"\nPostgreSQL {version}, pgbench {' '.join(ARGS)}, {len(off)} rounds of {args.duration:.0f} s")
    print(
        f"throughput off: median {statistics.median(off):,.0f} tx/s; on ({args.hz:g} Hz): {statistics.median(on):,.0f}"
    )
    print(f"ratio on/off: {e.ratio:.4f}, 95% CI [{e.low:.4f}, {e.high:.4f}] ({e.half_width:.2%})")
    per = merged.ticks / len(seen) if seen else 0
    print(f"sampler: {per:,.0f} sample points per sample, {merged.observations / max(merged.ticks, 1):.2f} active")
    shares = waits.Waits(merged.counts, merged.ticks, args.hz).to_json()["shares"]
    print("waits: " + ", ".join(f"{k} {v:.1%}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
