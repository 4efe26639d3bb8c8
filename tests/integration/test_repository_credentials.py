"""A repository that wants a password: credentials from a Buildbot secret reach git, never a log or a database.

The repository is served by a real `git http-backend` behind HTTP Basic auth on 127.0.0.1
(tests/git_http_support.py). The master's own git calls, Buildbot's GitPoller and the worker's Git step all
authenticate with `repository.user` + the secret named by `repository.password_secret`; the token appears in no
log, no build log, no database and no file left behind, and a URL that carries a token is redacted wherever
the farm shows it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from master import gitauth, gitmirror, ingest, store
from master.settings import load_settings
from tests.alerts_support import HttpReceiver
from tests.git_http_support import GitHttpServer, publish
from tests.harness import Farm, free_port, make_repo
from tests.unit.test_store_ingest import result_for, run_ctx

pytestmark = pytest.mark.integration
TOKEN = "glpat-S3CRET-t0ken-4242"
USER = "perffarm-bot"
ROOT = Path(__file__).resolve().parents[2]
PERFFARM = [sys.executable, "-m", "master.cli"]  # this checkout's code, as `perffarm`


@pytest.fixture
def served(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    root = tmp_path / "served"
    root.mkdir()
    bare = publish(repo.path, root, "pg")
    server = GitHttpServer(root, USER, TOKEN).start()
    try:
        yield repo, bare, server
    finally:
        server.stop()


def _isolated_git_home(tmp_path: Path) -> Path:
    """A HOME whose git config has a credential helper that would store any password it is given."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    return home


def test_the_masters_mirror_authenticates_from_the_secret(tmp_path: Path, served, monkeypatch) -> None:
    repo, _, server = served
    home = _isolated_git_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    mirror = gitmirror.Mirror(server.url("pg"), tmp_path / "mirror.git", gitauth.GitCredentials(USER, TOKEN))
    mirror.fetch()
    assert mirror.has_commit(repo.head()) and server.authenticated() > 0
    assert gitmirror.check_reachable(server.url("pg"), credentials=mirror.credentials) is None
    assert not (home / ".git-credentials").exists(), "the user's credential helper must not be asked or fed"

    wrong = gitmirror.Mirror(server.url("pg"), tmp_path / "wrong.git", gitauth.GitCredentials(USER, "not-it"))
    with pytest.raises(gitmirror.GitError) as e:
        wrong.fetch()
    assert "not-it" not in str(e.value)
    assert gitmirror.check_reachable(server.url("pg")) is not None  # no credentials: refused
    assert all(TOKEN not in r.path for r in server.requests)


def test_a_token_in_a_url_is_redacted_from_git_errors_and_rejections(tmp_path: Path) -> None:
    """Belt and braces behind the settings check: git prints a query string as it is; the farm never shows it."""
    server = HttpReceiver(status=404).start()  # "fatal: repository '<the URL>/' not found"
    try:
        _check_redacted(tmp_path, f"http://127.0.0.1:{server.port}/missing.git?private_token={TOKEN}")
    finally:
        server.stop()


def _check_redacted(tmp_path: Path, leaky: str) -> None:
    reason = gitmirror.check_reachable(leaky)
    assert reason is not None and "private_token=***" in reason and TOKEN not in reason

    env = {"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": "http://127.0.0.1:9/x"}
    settings = dataclasses.replace(load_settings(environ=env), repository_url=leaky)
    settings.incoming_dir.mkdir(parents=True)
    result = settings.incoming_dir / "fixture_local-1.json"
    result.write_text(json.dumps(result_for("f" * 40)))
    run = run_ctx(sha="f" * 40, revision="f" * 40)
    with pytest.raises(ingest.IngestDeferred) as deferred:
        ingest.ingest_file(settings, result, run, "fixture")
    assert TOKEN not in str(deferred.value) and "private_token=***" in str(deferred.value)

    ingest._reject(settings, result, run, f"$.commit.sha: not a commit of {leaky}")
    conn = store.connect(settings.results_db)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert "private_token=***" in dump and TOKEN not in dump
    kept = settings.incoming_dir / "rejected" / (result.name + ".error")
    assert TOKEN not in kept.read_text()


def test_perffarm_run_never_shows_a_token_from_the_url(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env.update(
        PERFFARM_MASTER_DATA_DIR=str(tmp_path / "data"),
        PERFFARM_REPOSITORY_URL=f"http://{USER}:{TOKEN}@127.0.0.1:9/postgresql.git",
        PERFFARM_MASTER_WEB_PORT=str(free_port()),
        PERFFARM_MASTER_WORKER_PORT=str(free_port()),
    )
    proc = subprocess.run(
        [*PERFFARM, "run"], env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and TOKEN not in proc.stdout + proc.stderr
    assert f"http://{USER}:***@127.0.0.1:9/postgresql.git" in proc.stderr
    assert not (tmp_path / "data" / "master").exists(), "nothing should be started"


def test_perffarm_run_names_a_missing_password_secret(tmp_path: Path, served) -> None:
    _, _, server = served
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env.update(
        PERFFARM_MASTER_DATA_DIR=str(tmp_path / "data"),
        PERFFARM_REPOSITORY_URL=server.url("pg"),
        PERFFARM_REPOSITORY_USER=USER,
        PERFFARM_REPOSITORY_PASSWORD_SECRET="repository-token",
        PERFFARM_MASTER_WEB_PORT=str(free_port()),
        PERFFARM_MASTER_WORKER_PORT=str(free_port()),
    )
    proc = subprocess.run(
        [*PERFFARM, "run"], env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "the secret 'repository-token' does not exist" in proc.stderr
    assert str(tmp_path / "data" / "secrets" / "repository-token") in proc.stderr


def test_a_farm_on_a_password_protected_repository_never_shows_the_token(tmp_path: Path, served) -> None:
    repo, bare, server = served
    home = _isolated_git_home(tmp_path)
    farm = Farm(
        tmp_path / "data",
        server.url("pg"),
        env={
            "PERFFARM_REPOSITORY_USER": USER,
            "PERFFARM_REPOSITORY_PASSWORD_SECRET": "repository-token",
            "HOME": str(home),
        },
    )
    secret = farm.settings.secrets_dir / "repository-token"
    secret.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret.write_text(TOKEN + "\n")
    secret.chmod(0o600)
    farm.start()
    try:
        sha = repo.bench_commit("a commit behind a password", 2000)
        repo.git("push", "--quiet", str(bare), "master")
        (run,) = farm.wait_for_runs(1, timeout=180)
        assert (run["sha"], run["status"], run["source"]) == (sha, "ok", "poll")  # the poller got in
        assert run["subject"] == "a commit behind a password"  # the master's mirror got in
        (build,) = farm.builds()
        steps = (farm.api(f"builds/{build['buildid']}/steps") or {"steps": []})["steps"]
        build_logs = [farm.step_log(build["buildid"], s["name"], "stdio") for s in steps]
        assert any("credential.helper=store" in log for log in build_logs)  # the worker's checkout got in
    finally:
        farm.stop()
    assert USER in {r.user for r in server.requests} and all(TOKEN not in r.path for r in server.requests)
    texts = [
        farm.master_log(),
        (farm.settings.worker_dir("local") / "twistd.log").read_text(errors="replace"),
        *build_logs,
    ]
    for db in (farm.settings.master_dir / "state.sqlite", farm.settings.results_db):  # changes, steps, results
        conn = sqlite3.connect(db)
        try:
            texts.append("\n".join(conn.iterdump()))
        finally:
            conn.close()
    assert [t[:200] for t in texts if TOKEN in t] == []
    leftovers = [p for p in (tmp_path / "data").rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leftovers == [secret], "Buildbot's credential files are removed after use"
    assert not (home / ".git-credentials").exists(), "the user's own credential helper was never fed"


def test_checkconfig_passes_with_a_password_secret_that_does_not_exist_yet(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env.update(
        PERFFARM_MASTER_DATA_DIR=str(tmp_path / "data"),
        PERFFARM_REPOSITORY_URL="https://git.example.org/pg.git",
        PERFFARM_REPOSITORY_USER=USER,
        PERFFARM_REPOSITORY_PASSWORD_SECRET="repository-token",
        PERFFARM_RECIPES_ENABLED="fixture",
    )
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "buildbot"), "checkconfig", str(ROOT / "buildbot.cfg")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0 and "Config file is good!" in proc.stdout, proc.stdout + proc.stderr
