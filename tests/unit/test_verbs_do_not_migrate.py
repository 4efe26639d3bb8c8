"""Only the master's start (`perffarm run`) and `perffarm migrate` change the results database's schema: a `perffarm`
verb that writes (alerts ack, bisect, releases, publish, ...) pointed at a running older master's data directory
stops instead of migrating the database under that master. A fresh data directory still works."""

from __future__ import annotations

import http.server
import json
import os
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from master import cli, store
from master.store.migrations import MIGRATIONS
from tests.unit.test_readonly_verbs import older_database

CURRENT = len(MIGRATIONS)
OLDER = CURRENT - 1

WRITING = [
    ["alerts", "ack", "1"],
    ["alerts", "set-state", "1", "investigating"],
    ["alerts", "deliver", "--once"],
    ["bisect", "--good", "a", "--bad", "b", "--workload", "w"],
    ["bisect", "--local", "--good", "a", "--bad", "b", "--workload", "w"],
    ["publish", "--quiet", "--jobs", "1"],
]  # `releases` stops before the database without a master (test_releases_without_a_master_touches_nothing)


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.org", *args], cwd=repo, check=True, capture_output=True
    )


@pytest.fixture
def farm_env(tmp_path, monkeypatch) -> Path:
    """A data directory, a repository with two release tags, and no master (nothing listens on port 9)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "-b", "master")
    for tag in ("REL_1_0", "REL_1_1"):
        git(repo, "commit", "--quiet", "--allow-empty", "-m", tag)
        git(repo, "tag", tag)
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(data))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", str(repo))
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", "9")
    monkeypatch.setenv("PERFFARM_RECIPES_ENABLED", "pg-quick")
    return data


def user_version(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("verb", WRITING, ids=[" ".join(v) for v in WRITING])
def test_a_writing_verb_stops_at_an_older_schema_and_leaves_it(verb, farm_env, capsys):
    db = farm_env / "results.sqlite"
    older_database(db, OLDER)
    assert cli.main(verb) == 1
    err = capsys.readouterr().err
    assert f"schema version {OLDER}, older than this code's ({CURRENT})" in err, err
    assert "perffarm migrate" in err and "perffarm run" in err and "Traceback" not in err
    assert user_version(db) == OLDER


def test_a_writing_verb_stops_at_a_newer_schema(farm_env, capsys):
    db = farm_env / "results.sqlite"
    store.connect(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={CURRENT + 1}")
    conn.close()
    assert cli.main(["alerts", "ack", "1"]) == 1
    assert f"schema version {CURRENT + 1}, newer than this code ({CURRENT})" in capsys.readouterr().err
    assert user_version(db) == CURRENT + 1


def test_the_master_process_still_migrates_after_a_verb_ran_in_it(farm_env):
    db = farm_env / "results.sqlite"
    older_database(db, OLDER)
    assert cli.main(["alerts", "ack", "1"]) == 1
    store.connect(db).close()  # outside a verb: the master's services migrate as before
    assert user_version(db) == CURRENT


def test_releases_without_a_master_touches_nothing(farm_env, capsys):
    """Issue #31: on a data directory no farm has run on, with no master, reading the tags cloned the repository
    (from the network) first, for a job nothing would run: now neither the mirror nor the database is touched."""
    older_database(farm_env / "results.sqlite", OLDER)
    assert cli.main(["releases", "--tags", "REL_*"]) == 1
    assert "no farm has run on" in capsys.readouterr().err
    assert user_version(farm_env / "results.sqlite") == OLDER and not (farm_env / "mirror.git").exists()


def test_connect_without_migrating_creates_a_new_database_but_refuses_an_older_one(tmp_path):
    new = tmp_path / "new.sqlite"
    store.connect(new, migrate=False).close()
    assert user_version(new) == CURRENT
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()  # a file without a schema: created as well
    store.connect(empty, migrate=False).close()
    assert user_version(empty) == CURRENT
    old = tmp_path / "old.sqlite"
    older_database(old, OLDER)
    with pytest.raises(store.StoreError, match=f"schema version {OLDER}, older"):
        store.connect(old, migrate=False)
    assert user_version(old) == OLDER
    store.connect(old, migrate=True).close()
    assert user_version(old) == CURRENT


# ------------------------------------------------------------------------------------------------ perffarm migrate


def test_migrate_brings_an_older_database_to_this_schema(farm_env, capsys):
    db = farm_env / "results.sqlite"
    older_database(db, OLDER)
    assert cli.main(["migrate"]) == 0
    assert f"from schema version {OLDER} to {CURRENT}" in capsys.readouterr().out
    assert user_version(db) == CURRENT
    assert cli.main(["alerts", "list"]) == 0  # and the verbs work on it again
    assert cli.main(["migrate"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out


def test_migrate_leaves_a_fresh_data_dir_and_a_newer_database_alone(farm_env, capsys):
    db = farm_env / "results.sqlite"
    assert cli.main(["migrate"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out and not db.exists()
    store.connect(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={CURRENT + 1}")
    conn.close()
    assert cli.main(["migrate"]) == 1
    assert "newer than this code" in capsys.readouterr().err
    assert user_version(db) == CURRENT + 1


def test_migrate_refuses_while_a_daemonized_master_runs(farm_env, capsys):
    db = farm_env / "results.sqlite"
    older_database(db, OLDER)
    pidfile = farm_env / "master" / "twistd.pid"
    pidfile.parent.mkdir()
    pidfile.write_text(f"{os.getpid()}\n")  # a live process: this one
    assert cli.main(["migrate"]) == 1
    err = capsys.readouterr().err
    assert f"schema version {OLDER}, this code's is {CURRENT}" in err and str(pidfile) in err, err
    assert "nothing was changed" in err
    assert user_version(db) == OLDER
    child = subprocess.Popen(["true"])  # a pid that was reaped: the pid file is stale
    child.wait()
    pidfile.write_text(f"{child.pid}\n")
    assert cli.main(["migrate"]) == 0
    assert user_version(db) == CURRENT


@pytest.fixture
def answering_master(monkeypatch) -> Iterator[int]:
    """Something answering /api/v2/masters as a master started by `perffarm run` (no pid file) does."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps({"masters": [{"masterid": 1}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", str(port))
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


def test_migrate_refuses_while_a_master_answers_on_its_web_port(farm_env, answering_master, capsys):
    db = farm_env / "results.sqlite"
    older_database(db, OLDER)
    assert cli.main(["migrate"]) == 1
    err = capsys.readouterr().err
    assert f"answers on port {answering_master}" in err and f"schema version {OLDER}" in err, err
    assert user_version(db) == OLDER


def test_migrate_has_help():
    with pytest.raises(SystemExit) as e:
        cli.main(["migrate", "--help"])
    assert e.value.code == 0
