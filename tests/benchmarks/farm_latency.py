"""Measure commit -> stored-result latency through a real master and worker, and their memory.

Usage: .venv/bin/python -m tests.benchmarks.farm_latency [--commits 10] [--poll-interval 1]
Pushes commits one at a time to a fresh git repository, waits for each result, and prints the median and p90
latency (push to row in results.sqlite), plus master and worker RSS. With polling, the latency includes on
average half a poll interval.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.harness import Farm, make_repo, wait_until


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--poll-interval", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = make_repo(base / "repo")
        farm = Farm(base / "data", str(repo.path), poll_interval=args.poll_interval, reconcile_interval=60)
        t0 = time.monotonic()
        farm.start()
        print(f"farm up (master + worker connected + first poll) in {time.monotonic() - t0:.1f} s")
        try:
            latencies = []
            for i in range(args.commits):
                pushed = time.time()
                sha = repo.bench_commit(f"commit {i}", 2000 + i)
                row = wait_until(
                    lambda sha=sha: farm.query("SELECT ingested_at FROM runs WHERE sha = ?", (sha,)), 120, f"commit {i}"
                )
                latencies.append(row[0][0] - pushed)
                print(f"  commit {i + 1:2d}: {latencies[-1]:.2f} s")
            rss = farm.rss_kb()
        finally:
            farm.stop()
    lat = sorted(latencies)
    p90 = lat[min(len(lat) - 1, int(round(0.9 * (len(lat) - 1))))]
    print(
        f"commit -> stored result over {len(lat)} commits, poll interval {args.poll_interval} s: "
        f"median {statistics.median(lat):.2f} s, p90 {p90:.2f} s, min {lat[0]:.2f} s, max {lat[-1]:.2f} s"
    )
    print(f"RSS: master {rss.get('master', 0) / 1024:.0f} MiB, worker {rss.get('worker', 0) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
