"""Test harness: real git repositories and a real Buildbot master + worker on free ports.

No mocks: `Farm` starts `buildbot start --nodaemon` and `buildbot-worker start --nodaemon` processes the way
`perffarm run` does, against a git repository the test makes, and reads the real results database.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from master import buildbotdb, launcher, store
from master.settings import Settings, load_settings

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.3) -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


BENCH_C = """#include <stdio.h>
#include <unistd.h>
int main(void) {{
    usleep({sleep_us});
    printf("ops {value}\\n");
    return 0;
}}
"""


@dataclass
class GitRepo:
    """A throwaway git repository with the fixture recipe's benchmark program in it."""

    path: Path

    def git(self, *args: str) -> str:
        env = dict(os.environ, GIT_AUTHOR_DATE="", GIT_COMMITTER_DATE="")
        env = {k: v for k, v in env.items() if v}
        return subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True, env=env
        ).stdout.strip()

    def commit(self, message: str, files: dict[str, str] | None = None, allow_empty: bool = False) -> str:
        for name, text in (files or {}).items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            self.git("add", name)
        self.git("commit", "--quiet", "-m", message, *(["--allow-empty"] if allow_empty else []))
        return self.head()

    def bench_commit(self, message: str, value: str | float, sleep_us: int = 0) -> str:
        """Commit a perffarm_bench.c that prints `ops <value>` (after sleeping `sleep_us`)."""
        return self.commit(message, {"perffarm_bench.c": BENCH_C.format(value=value, sleep_us=sleep_us)})

    def tag(self, name: str, annotated: bool = True, rev: str = "HEAD") -> None:
        if annotated:
            self.git("tag", "-a", name, "-m", f"release {name}", rev)
        else:
            self.git("tag", name, rev)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")


def make_repo(path: Path, first_value: float = 1000) -> GitRepo:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "--quiet", "-b", "master", str(path)], check=True)
    repo = GitRepo(path)
    repo.git("config", "user.email", "tester@example.org")
    repo.git("config", "user.name", "Test Er")
    repo.bench_commit("initial commit", first_value)
    return repo


def _signal_and_wait(proc: subprocess.Popen | None, sig: int, timeout: float) -> int | None:
    """Send `sig` to a running process and wait for its exit status (SIGKILL after `timeout`); None if not running."""
    if proc is None or proc.poll() is not None:
        return None
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


class Farm:
    """A real master and local worker for one test, with its own data directory and ports."""

    def __init__(
        self,
        data_dir: Path,
        repo_url: str,
        recipes: tuple[str, ...] = ("fixture",),
        poll_interval: int = 1,
        reconcile_interval: int = 2,
        reconcile_grace: int = 4,
        env: dict[str, str] | None = None,
    ) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
        # The master imports `master.farm` through buildbot.cfg: from this checkout, not whichever checkout the
        # virtualenv's editable install points at (a second worktree sharing one .venv would test the other's code).
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        self.env.update(
            {
                "PERFFARM_MASTER_DATA_DIR": str(data_dir),
                "PERFFARM_REPOSITORY_URL": repo_url,
                "PERFFARM_REPOSITORY_POLL_INTERVAL": str(poll_interval),
                "PERFFARM_MASTER_RECONCILE_INTERVAL": str(reconcile_interval),
                "PERFFARM_MASTER_RECONCILE_GRACE": str(reconcile_grace),
                "PERFFARM_MASTER_WEB_PORT": str(free_port()),
                "PERFFARM_MASTER_WORKER_PORT": str(free_port()),
                "PERFFARM_RECIPES_ENABLED": ",".join(recipes),
            }
        )
        self.env.update(env or {})
        self.settings: Settings = load_settings(environ=self.env)
        self.master: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self._bb_engine: Any = None  # SQLAlchemy engine on a server Buildbot DB, made on first use

    # ---------------------------------------------------------------------------------------- lifecycle
    def start(self, wait_first_poll: bool = True) -> Farm:
        self.start_master()
        self.start_worker()
        if wait_first_poll:
            self.wait_first_poll()
        return self

    def start_master(self) -> None:
        launcher.worker_password(self.settings, "local")
        self._start_master_process()

    def _start_master_process(self) -> None:
        """Create the master directory (once), start the master and wait for its web API."""
        launcher.prepare_master(self.settings, env=self.env)
        self.master = subprocess.Popen(
            [str(BIN / "buildbot"), "start", "--nodaemon", str(self.settings.master_dir)],
            cwd=self.settings.master_dir,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: self.api("masters") is not None or self._died(self.master), 90, "the master's web API")
        if self._died(self.master):
            raise RuntimeError("master exited at start:\n" + self.master_log()[-3000:])

    def start_worker(self) -> None:
        if self.worker is None:
            launcher.prepare_worker(self.settings)
        self.worker = subprocess.Popen(
            [str(BIN / "buildbot-worker"), "start", "--nodaemon", str(self.settings.worker_dir("local"))],
            cwd=self.settings.worker_dir("local"),
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.wait_worker_connected()

    def wait_worker_connected(self, timeout: float = 90) -> None:
        def connected() -> bool:
            data = self.api("workers/local")
            return bool(data and data["workers"] and data["workers"][0].get("connected_to"))

        wait_until(connected, timeout, "the local worker to connect")

    def _died(self, proc: subprocess.Popen | None) -> bool:
        return proc is not None and proc.poll() is not None

    def stop_master(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        """Send `sig` to the master and wait for it to exit (SIGKILL after `timeout`); None if it was not running."""
        return _signal_and_wait(self.master, sig, timeout)

    def stop(self) -> None:
        for proc in (self.worker, self.master):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def __enter__(self) -> Farm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------------------------------- queries
    def api(self, path: str) -> dict | None:
        try:
            r = requests.get(f"http://127.0.0.1:{self.settings.web_port}/api/v2/{path}", timeout=5)
            r.raise_for_status()
            return r.json()
        except (requests.RequestException, ValueError):
            return None

    def master_log(self) -> str:
        log = self.settings.master_dir / "twistd.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def wait_first_poll(self, timeout: float = 60) -> None:
        """The poller's first poll only records refs and builds nothing: wait for its lastRev state."""

        def polled() -> bool:
            rows = self.buildbot_db_query("SELECT value_json FROM object_state WHERE name = 'lastRev'")
            return any(json.loads(r[0]) for r in rows or [])

        wait_until(polled, timeout, "the poller's first poll")

    def runs(self) -> list[dict]:
        if not self.settings.results_db.exists():
            return []
        conn = store.connect(self.settings.results_db)
        try:
            rows = [dataclasses.asdict(r) for r in store.list_runs(conn, limit=None)]
            meas = store.measurements_for(conn, [r["id"] for r in rows])
        finally:
            conn.close()
        for r in rows:
            r["measurements"] = {(m.workload, m.metric): json.loads(m.samples) for m in meas if m.run_id == r["id"]}
        return sorted(rows, key=lambda r: r["id"])

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        conn = store.connect(self.settings.results_db)
        try:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    def wait_for_runs(self, n: int, timeout: float = 120) -> list[dict]:
        """Wait until at least `n` runs are stored; returns all runs, oldest first."""

        def enough() -> list[dict] | None:
            rows = self.runs()
            if self._died(self.master):
                raise RuntimeError("master died:\n" + self.master_log()[-3000:])
            return rows if len(rows) >= n else None

        return wait_until(enough, timeout, f"{n} stored runs")

    def builds(self) -> list[dict]:
        data = self.api("builds?order=buildid") or {"builds": []}
        return data["builds"]

    def force(
        self,
        builder: str,
        revision: str,
        branch: str = "master",
        reason: str = "test",
        options: str = "",
        session: requests.Session | None = None,
    ) -> None:
        """Press the force button (JSON-RPC on the REST API), as a user in the web UI would; `options` is the
        form's recipe options field (space-separated KEY=VALUE); `session` carries a login."""
        builderid = self.api(f"builders/{builder}")["builders"][0]["builderid"]
        r = (session or requests).post(
            f"http://127.0.0.1:{self.settings.web_port}/api/v2/forceschedulers/force",
            json={
                "jsonrpc": "2.0",
                "method": "force",
                "id": 1,
                "params": {
                    "builderid": str(builderid),
                    "branch": branch,
                    "revision": revision,
                    "reason": reason,
                    "perffarm_options": options,
                    "project": "perffarm",
                    "repository": self.settings.repository_url,
                },
            },
            timeout=10,
        )
        try:
            body = r.json()
        except ValueError:
            body = {}
        if "error" in body:
            raise RuntimeError(f"force failed (HTTP {r.status_code}): {body['error']}")
        r.raise_for_status()

    def step_log(self, buildid: int, step_name: str, log_slug: str) -> str:
        steps = (self.api(f"builds/{buildid}/steps") or {"steps": []})["steps"]
        for step in steps:
            if step["name"] == step_name:
                r = requests.get(
                    f"http://127.0.0.1:{self.settings.web_port}/api/v2/steps/{step['stepid']}/logs/{log_slug}/raw",
                    timeout=10,
                )
                return r.text
        return ""

    def rss_kb(self) -> dict[str, int]:
        """Resident memory of the master and worker processes (VmRSS from /proc)."""
        out = {}
        for name, proc in (("master", self.master), ("worker", self.worker)):
            if proc is None or proc.poll() is not None:
                continue
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[name] = int(line.split()[1])
        return out

    # ---------------------------------------------------------------------------------------- faults
    # Small additions for the fault suite (tests/benchmarks/chaos.py): stop the worker with a chosen signal,
    # and read what the farm is doing without going through a test's private helpers.
    def stop_worker(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        """Send `sig` to the worker and wait for it to exit (SIGKILL after `timeout`); None if it was not running.

        Only the worker process gets the signal, as `kill` would: a recipe command it was running keeps running
        as an orphan, exactly as after a real crash of buildbot-worker."""
        return _signal_and_wait(self.worker, sig, timeout)

    def alive(self) -> dict[str, bool]:
        """Whether the master and the worker processes are running."""
        return {
            name: proc is not None and proc.poll() is None
            for name, proc in (("master", self.master), ("worker", self.worker))
        }

    def pending_requests(self) -> list[dict] | None:
        """Build requests not finished yet (waiting or running); None when the API does not answer."""
        data = self.api("buildrequests?complete=false")
        return None if data is None else data["buildrequests"]

    def running_builds(self) -> list[dict] | None:
        """Builds not finished yet; None when the API does not answer."""
        data = self.api("builds?complete=false")
        return None if data is None else data["builds"]

    def step_running(self, name: str) -> dict | None:
        """The first unfinished build whose step `name` has started and not finished, or None."""
        for b in self.running_builds() or []:
            steps = (self.api(f"builds/{b['buildid']}/steps") or {"steps": []})["steps"]
            if any(s["name"] == name and s["started_at"] and not s["complete"] for s in steps):
                return b
        return None

    def build_complete_in_db(self, buildid: int) -> bool:
        """Whether Buildbot's own database has `buildid` finished (readable while the master is down)."""
        rows = self.buildbot_db_query("SELECT complete_at FROM builds WHERE id = :id", {"id": buildid})
        return bool(rows and rows[0][0])

    def buildbot_db_query(self, sql: str, params: dict | None = None) -> list[tuple] | None:
        """Rows of a read-only query on Buildbot's own database (master.buildbot_db_url: state.sqlite or a
        server), readable while the master is down; None when the database cannot be read (yet)."""
        db = buildbotdb.sqlite_path(self.settings)
        if db is not None:
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                    return [tuple(r) for r in conn.execute(sql, params or {}).fetchall()]
            except sqlite3.Error:
                return None
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        if self._bb_engine is None:
            self._bb_engine = buildbotdb.engine(self.settings)
        try:
            with self._bb_engine.connect() as conn:
                return [tuple(r) for r in conn.execute(text(sql), params or {}).fetchall()]
        except SQLAlchemyError:
            return None

    def reconcile_report(self) -> dict | None:
        """The reconciler's last pass (<data_dir>/reconcile.json: missing, re-queued, given up), or None."""
        try:
            return json.loads((self.settings.data_dir / "reconcile.json").read_text())
        except (OSError, ValueError):
            return None
