"""The first ingest against a long history: how long it shuts every other ingest out.

Usage: .venv/bin/python -m tests.benchmarks.first_ingest --repo PATH.git [--filter default|wide] [--batch-rows N]
       [--json FILE]

Fetches the master's mirror of the repository (not measured), then stores one result for the head of `master`
with an empty results database (master.ingest.ingest_file): that ingest orders every watched branch's first-parent
history. Meanwhile a second thread, the way a concurrent ingest would, every 50 ms takes the mirror lock
(master.ingest._mirror_lock) and opens a write transaction (BEGIN IMMEDIATE) on its own connection, and records how
long each wait was. Reported: the ingest's wall and CPU seconds (its git processes included), the longest single
hold of the mirror lock and of a write transaction (seconds, and the rows of commits and branch_commits that
transaction wrote), how many of each, and the probe's longest waits.
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from master import gitmirror, ingest, store
from master.settings import load_settings
from tests.unit.test_result_schema import good

WIDE = {"PERFFARM_REPOSITORY_BRANCHES": ".*", "PERFFARM_REPOSITORY_TAGS": ".*"}


class TimedLock:
    """The mirror lock, recording how long each acquisition held it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.holds: list[float] = []
        self._since = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self.inner.acquire(blocking, timeout)
        if got:
            self._since.t = time.perf_counter()
        return got

    def release(self) -> None:
        self.holds.append(time.perf_counter() - self._since.t)
        self.inner.release()

    def locked(self) -> bool:
        return self.inner.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(repo: Path, work: Path, environ: dict[str, str]) -> dict[str, Any]:
    env = {"PERFFARM_MASTER_DATA_DIR": str(work / "data"), "PERFFARM_REPOSITORY_URL": str(repo), **environ}
    settings = load_settings(environ=env)
    settings.incoming_dir.mkdir(parents=True, exist_ok=True)
    gitmirror.Mirror(settings.repository_url, settings.mirror_dir).fetch()
    store.connect(settings.results_db).close()  # the schema, before the clock starts
    head = subprocess.run(
        ["git", "rev-parse", "refs/heads/master"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()

    lock = TimedLock(ingest._mirror_lock)
    transactions: list[tuple[float, int]] = []  # (seconds, rows changed) of each write transaction
    real_transaction = store.transaction

    def written(conn: sqlite3.Connection) -> int:  # rows of commits and branch_commits, kept by triggers (schema 14)
        return conn.execute("SELECT SUM(n) FROM row_counts WHERE name IN ('commits', 'branch_commits')").fetchone()[0]

    @contextmanager
    def timed_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        t0 = time.perf_counter()
        with real_transaction(conn):
            before = written(conn)
            yield conn
            rows = abs(written(conn) - before)
        transactions.append((time.perf_counter() - t0, rows))

    waits: dict[str, list[float]] = {"mirror lock": [], "write transaction": []}
    done = threading.Event()

    def probe() -> None:
        other = sqlite3.connect(settings.results_db, timeout=3600, isolation_level=None)
        while not done.is_set():
            t0 = time.perf_counter()
            with lock:
                pass
            waits["mirror lock"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            other.execute("BEGIN IMMEDIATE")
            other.execute("COMMIT")
            waits["write transaction"].append(time.perf_counter() - t0)
            done.wait(0.05)
        other.close()

    doc = good()
    doc["commit"] = {"sha": head, "ref": "master"}
    path = settings.incoming_dir / "first.json"
    path.write_text(json.dumps(doc))
    run = store.RunContext("fixture@local", "local", "poll", build_id=1, got_revision=head, ref="master")
    ingest._mirror_lock, store.transaction = lock, timed_transaction  # type: ignore[assignment]
    prober = threading.Thread(target=probe)
    try:
        prober.start()
        cpu0, t0 = _cpu(), time.perf_counter()
        outcome = ingest.ingest_file(settings, path, run, "fixture")
        wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    finally:
        done.set()
        prober.join()
        ingest._mirror_lock, store.transaction = lock.inner, real_transaction  # type: ignore[assignment]
    conn = store.connect(settings.results_db)
    try:
        positions = conn.execute("SELECT COUNT(*) FROM branch_commits").fetchone()[0]
    finally:
        conn.close()
    longest = max(transactions, default=(0.0, 0))
    return {
        "message": outcome.message,
        "positions": positions,
        "wall": wall,
        "cpu": cpu,
        "lock_holds": len(lock.holds),
        "lock_longest": max(lock.holds, default=0.0),
        "transactions": len(transactions),
        "transaction_longest": longest[0],
        "transaction_longest_rows": longest[1],
        "transaction_most_rows": max((n for _, n in transactions), default=0),
        "probes": len(waits["mirror lock"]),
        "probe_lock_wait_max": max(waits["mirror lock"], default=0.0),
        "probe_write_wait_max": max(waits["write transaction"], default=0.0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a bare repository (tests.benchmarks.synth_history)")
    parser.add_argument("--filter", choices=("default", "wide"), default="default")
    parser.add_argument("--batch-rows", type=int, help="master.ingest.BATCH_ROWS for this run (default: the code's)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.batch_rows:
        ingest.BATCH_ROWS = args.batch_rows  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="perffarm-first-ingest-") as tmp:
        r = measure(args.repo, Path(tmp), WIDE if args.filter == "wide" else {})
    print(
        f"first ingest ({args.filter} filter, {r['positions']:,} branch positions): {r['wall']:.1f} s wall, "
        f"{r['cpu']:.1f} s CPU\n"
        f"  mirror lock: {r['lock_holds']} holds, longest {r['lock_longest']:.2f} s\n"
        f"  write transactions: {r['transactions']}, longest {r['transaction_longest']:.2f} s "
        f"({r['transaction_longest_rows']:,} rows); most rows in one: {r['transaction_most_rows']:,}\n"
        f"  a concurrent writer ({r['probes']} tries): longest wait for the mirror lock "
        f"{r['probe_lock_wait_max']:.2f} s, for a write transaction {r['probe_write_wait_max']:.2f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(r, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
