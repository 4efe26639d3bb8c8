"""`perffarm run` (what `make run` starts): URLs printed, web UI up, clean Ctrl-C, fast unreachable-repo error."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.harness import free_port, make_repo, wait_until

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PERFFARM = str(Path(sys.executable).parent / "perffarm")


def farm_env(tmp_path, repo_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env.update(
        PERFFARM_MASTER_DATA_DIR=str(tmp_path / "data"),
        PERFFARM_REPOSITORY_URL=repo_url,
        PERFFARM_MASTER_WEB_PORT=str(free_port()),
        PERFFARM_MASTER_WORKER_PORT=str(free_port()),
        PERFFARM_SITE_PORT=str(free_port()),
        PERFFARM_REPOSITORY_POLL_INTERVAL="1",
        PERFFARM_RECIPES_ENABLED="fixture",
    )
    return env


def test_run_starts_master_and_worker_and_ctrl_c_stops_both(tmp_path):
    repo = make_repo(tmp_path / "repo")
    env = farm_env(tmp_path, str(repo.path))
    port = env["PERFFARM_MASTER_WEB_PORT"]
    log = open(tmp_path / "run.log", "w+")
    proc = subprocess.Popen([PERFFARM, "run"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    pids: list[int] = []
    try:
        wait_until(
            lambda: "Ctrl-C stops it" in Path(log.name).read_text() or proc.poll() is not None,
            120,
            "perffarm run to be ready",
        )
        pids = _children(proc.pid)  # taken now: once `perffarm run` is gone they are no longer its children
        out = Path(log.name).read_text()
        assert proc.poll() is None, out
        assert f"http://127.0.0.1:{port}/" in out and "results DB" in out
        page = requests.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert page.status_code == 200 and "<html" in page.text.lower()
        site = f"http://127.0.0.1:{env['PERFFARM_SITE_PORT']}/"
        assert site in out  # the history site, published at start and served by `perffarm run`
        assert "Every machine" in requests.get(site + "index.html", timeout=10).text
        workers = requests.get(f"http://127.0.0.1:{port}/api/v2/workers", timeout=10).json()["workers"]
        connected = {w["name"]: bool(w["connected_to"]) for w in workers}
        # the local benchmark worker, and the in-process control worker of the bisection form
        assert connected == {"local": True, "perffarm-control": True}
        # a commit is measured while it runs
        wait_until(lambda: (tmp_path / "data/master/state.sqlite").exists(), 30, "state db")
        time.sleep(3)  # first poll
        sha = repo.bench_commit("measured by make run", 4242)
        wait_until(
            lambda: (
                sha[:12]
                in subprocess.run([PERFFARM, "results", "list"], env=env, capture_output=True, text=True).stdout
            ),
            120,
            "the commit's result",
        )
        # the master's after-ingest pipeline re-published the site with it (master/pipeline.py, incremental)
        wait_until(
            lambda: requests.get(f"{site}data/commits/{sha}.js", timeout=5).status_code == 200,
            60,
            "the commit on the served site",
        )
        assert pids, "master and worker should be child processes"
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=90) == 0
        out = Path(log.name).read_text()
        assert "stopped." in out
        time.sleep(1)
        assert not [p for p in pids if Path(f"/proc/{p}").exists() and "zombie" not in _state(p)]
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{port}/", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in set(pids) | set(_children(proc.pid)):
            if Path(f"/proc/{p}").exists():
                os.kill(p, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signal_to_the_launcher_alone_stops_the_master_and_the_worker(tmp_path, sig):
    # Issue #26, item 7: a supervisor stops `perffarm run` by signalling its process id, not its terminal's process
    # group as Ctrl-C does. The master and the worker run in their own sessions, so they hear nothing themselves:
    # SIGHUP, or the launcher killed outright, left both running, holding their ports and the data directory.
    repo = make_repo(tmp_path / "repo")
    env = farm_env(tmp_path, str(repo.path))
    ports = [int(env[k]) for k in ("PERFFARM_MASTER_WEB_PORT", "PERFFARM_MASTER_WORKER_PORT", "PERFFARM_SITE_PORT")]
    log = tmp_path / "run.log"
    with open(log, "w") as out:  # its own session: the signal below reaches the launcher and nothing else
        proc = subprocess.Popen(
            [PERFFARM, "run"], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True
        )
    pids: list[int] = []
    try:
        wait_until(lambda: "Ctrl-C stops it" in log.read_text() or proc.poll() is not None, 120, "perffarm run")
        pids = _children(proc.pid)
        assert proc.poll() is None and len(pids) == 2, log.read_text()  # the master and the local worker
        assert all(not _port_free(p) for p in ports)
        os.kill(proc.pid, sig)  # the launcher's pid only
        proc.wait(timeout=90)
        wait_until(lambda: not [p for p in pids if _running(p)], 60, f"master and worker to exit after {sig.name}")
        wait_until(lambda: all(_port_free(p) for p in ports), 30, "the web, worker and site ports to be free")
        if sig != signal.SIGKILL:
            assert proc.returncode == 0 and "stopped." in log.read_text(), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids:
            if _running(p):
                os.kill(p, signal.SIGKILL)


def _running(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:`port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def _children(pid: int) -> list[int]:
    """Buildbot processes whose parent is `pid`, read from /proc (ps truncates `args` to $COLUMNS in CI)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the comm field may hold spaces and parentheses
        if ppid == pid and "buildbot" in cmdline:
            found.append(int(entry.name))
    return found


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/postgresql.git", "/nonexistent/postgres.git"])
def test_unreachable_repository_is_reported_within_seconds(tmp_path, url):
    env = farm_env(tmp_path, url)
    start = time.monotonic()
    proc = subprocess.run([PERFFARM, "run"], env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2
    assert elapsed < 20
    assert "cannot reach the repository" in proc.stderr and "PERFFARM_REPOSITORY_URL=" in proc.stderr
    assert not (tmp_path / "data" / "master").exists(), "nothing should be started"


def test_checkconfig_passes_without_secrets(tmp_path):
    env = farm_env(tmp_path, "https://git.postgresql.org/git/postgresql.git")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "buildbot"), "checkconfig", str(ROOT / "buildbot.cfg")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Config file is good!" in proc.stdout
    assert list((tmp_path / "data" / "secrets").iterdir()) == []


def test_checkconfig_names_a_bad_setting(tmp_path):
    env = farm_env(tmp_path, "/x")
    env["PERFFARM_RECIPES_ENABLED"] = "no-such-recipe"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "buildbot"), "checkconfig", str(ROOT / "buildbot.cfg")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "recipes.enabled" in proc.stdout + proc.stderr and "no-such-recipe" in proc.stdout + proc.stderr
