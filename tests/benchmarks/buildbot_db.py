"""Buildbot's database on SQLite vs PostgreSQL, side by side: the same farm, repository and commits on each.

For each backend a fresh farm (real master and worker, the fixture recipe) is started, `--commits` commits are
pushed one at a time and each measured, then the master is restarted. Printed per backend: the first start (master
directory and Buildbot's tables created, master and worker up, first poll), the median time from a push to the
stored run and of Buildbot's build duration (started_at to complete_at), `buildbot upgrade-master` alone (what
every restart runs first), and the restart (upgrade-master, master up, worker reconnected). PostgreSQL is a
throwaway cluster from the Debian package (tests/pgserver_support.py). One run each, one after the other: on a
shared machine repeat it before trusting a difference of a few seconds.

    .venv/bin/python -m tests.benchmarks.buildbot_db --commits 5
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from master import launcher
from tests.harness import Farm, make_repo, wait_until
from tests.pgserver_support import PgServer, find_bindir

SECRET_NAME = "buildbot-db"


def _measure(backend: str, base: Path, commits: int, env: dict[str, str]) -> dict[str, float]:
    repo = make_repo(base / "repo")
    farm = Farm(base / "data", str(repo.path), env=env)
    try:
        started = time.monotonic()
        farm.start()
        first_start = time.monotonic() - started
        to_run: list[float] = []
        for k in range(commits):
            repo.bench_commit(f"{backend} {k}", 1001 + k)
            pushed = time.monotonic()
            farm.wait_for_runs(k + 1, timeout=300)
            to_run.append(time.monotonic() - pushed)
            wait_until(lambda n=k + 1: len([b for b in farm.builds() if b["complete"]]) >= n, 60, "build complete")
        durations = [b["complete_at"] - b["started_at"] for b in farm.builds() if b["complete"]]
        farm.stop_master()
        upgrade_started = time.monotonic()
        launcher.prepare_master(farm.settings, env=farm.env)  # what a restart runs first: upgrade-master
        upgrade = time.monotonic() - upgrade_started
        restarted = time.monotonic()
        farm.start_master()  # upgrade-master again (a no-op upgrade), then the master up to its web API
        master_up = time.monotonic() - restarted
        farm.wait_worker_connected()
        restart = time.monotonic() - restarted
    finally:
        farm.stop()
    return {
        "first start (s)": first_start,
        "push to stored run, median (s)": statistics.median(to_run),
        "build duration in Buildbot, median (s)": statistics.median(durations),
        "upgrade-master alone (s)": upgrade,
        "master restart: web API answers (s)": master_up,
        "master restart: worker reconnected (s)": restart,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5, help="commits measured per backend (default 5)")
    args = parser.parse_args()
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL server under /usr/lib/postgresql/*/bin (make setup installs it)")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="perffarm-bbdb-") as tmp:
        results["SQLite"] = _measure("sqlite", Path(tmp) / "sqlite", args.commits, {})
        server = PgServer(bindir)
        try:
            server.start()
            password = secrets.token_urlsafe(16)
            server.create_role_and_database("perffarm", password, "buildbot")
            data = Path(tmp) / "postgresql" / "data"
            (data / "secrets").mkdir(parents=True, mode=0o700)
            (data / "secrets" / SECRET_NAME).write_text(password + "\n")
            os.chmod(data / "secrets" / SECRET_NAME, 0o600)
            env = {
                "PERFFARM_MASTER_BUILDBOT_DB_URL": server.url("perffarm", "buildbot"),
                "PERFFARM_MASTER_BUILDBOT_DB_PASSWORD_SECRET": SECRET_NAME,
            }
            results["PostgreSQL"] = _measure("postgresql", Path(tmp) / "postgresql", args.commits, env)
        finally:
            server.stop()
    print(f"| figure ({args.commits} commits each) | SQLite | PostgreSQL {bindir.parent.name} |")
    print("|---|---|---|")
    for figure in results["SQLite"]:
        print(f"| {figure} | {results['SQLite'][figure]:.1f} | {results['PostgreSQL'][figure]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
