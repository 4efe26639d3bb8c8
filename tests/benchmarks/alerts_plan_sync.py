"""What the plan-change pass adds to every alert sync (issue #27 item 2; docs/alerts.md "Plan changes").

`sync` runs every `alerts.poll_interval` (10 s) in the master's delivery service; since schema 25 it also reads
every analytic query's plan points (`store.series.plan_points`) to find plan changes not yet told to the channels.
This builds a results database of N measured commits x 22 queries x 2 metrics, each run carrying its plans (one
query's plan changes every 50 commits), stores it with the farm's own `insert_run`, and times a steady-state
`sync` (nothing new) with and without the plan pass.

    .venv/bin/python -m tests.benchmarks.alerts_plan_sync [--commits 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

from master import store
from master.alerts import plan_events
from master.alerts.config import AlertSettings, ChannelConfig
from master.alerts.sync import sync
from tests.alerts_support import sha_of
from tests.unit.test_result_schema import good

QUERIES = [f"tpch-q{i:02d}" for i in range(1, 23)]
PLANS = [
    "Hash Join\n  Seq Scan on lineitem\n  Hash\n    Seq Scan on part",
    "Nested Loop\n  Seq Scan on part\n  Index Scan on lineitem",
]


def build(path: Path, commits: int) -> None:
    conn = store.connect(path)
    shas = [sha_of(i, "plans") for i in range(commits)]
    infos = [
        store.CommitInfo(s, f"commit {i}", "A <a@x>", 1_700_000_000 + i, 1_700_000_000 + i, (shas[i - 1],) if i else ())
        for i, s in enumerate(shas)
    ]
    with store.transaction(conn):
        store.append_branch(conn, "master", infos, 0)
        for i, sha in enumerate(shas):
            doc = good()
            doc["commit"] = {"sha": sha, "ref": "master"}
            doc["recipe"] = {"name": "pg-quick", "version": 1, "config_hash": "cfg"}
            doc["workloads"] = [
                {
                    "name": q,
                    "config_hash": f"h-{q}",
                    "metrics": [
                        {"name": "instructions", "unit": "instructions/query", "direction": "lower", "samples": [7e6]},
                        {"name": "tps", "unit": "tps", "direction": "higher", "samples": [10.0]},
                    ],
                }
                for q in QUERIES
            ]
            doc["plans"] = {q: PLANS[(i // 50) % 2] if q == "tpch-q09" else PLANS[0] for q in QUERIES}
            store.runs.insert_run(
                conn,
                doc,
                store.RunContext(builder="b", worker="w", source="poll", build_id=i + 1, got_revision=sha),
            )
    conn.close()


def timed(path: Path, settings: AlertSettings, repeat: int, look: bool) -> float:
    """Median seconds of a sync with nothing new; `look`: as right after a run stored plans (the scan is due)."""
    conn = store.connect(path)
    try:
        sync(conn, settings, now=1.0)  # the first pass records every plan change
        times = []
        for n in range(repeat):
            if look:
                conn.execute("DELETE FROM plan_change_scan")  # what a new plans row does to the stored state
            t0 = time.perf_counter()
            sync(conn, settings, now=2.0 + n)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    settings = AlertSettings(
        settle_seconds=0, channels=(ChannelConfig("hook", "webhook", url_secret="u", kinds=("plan-change",)),)
    )
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "results.sqlite"
        build(db, args.commits)
        conn = store.connect(db)
        n_plans = conn.execute("SELECT COUNT(*) FROM plans").fetchone()[0]
        conn.close()
        steady = timed(db, settings, args.repeat, look=False)
        looking = timed(db, settings, args.repeat, look=True)
        with mock.patch.object(plan_events, "sync_plan_changes", lambda *a, **k: []):  # the pass left out
            without = timed(db, settings, args.repeat, look=False)
    print(
        f"commits {args.commits}, plans rows {n_plans}, median of {args.repeat}: sync with nothing new "
        f"{steady * 1000:.1f} ms; after a run stored plans (every plan read) {looking * 1000:.0f} ms; "
        f"without the plan pass {without * 1000:.1f} ms"
    )
    command = ".venv/bin/python -m tests.benchmarks.alerts_plan_sync"
    print(f"command: {command} --commits {args.commits} --repeat {args.repeat}")


if __name__ == "__main__":
    main()
