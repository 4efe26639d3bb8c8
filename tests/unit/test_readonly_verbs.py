"""`perffarm` verbs that only read the results database never migrate it (a newer checkout's `perffarm status`
against a running older master's data directory once changed the schema under that master)."""

from __future__ import annotations

import sqlite3

import pytest

from master import cli, store
from master.store.connection import _statements
from master.store.migrations import MIGRATIONS

READ_ONLY = [
    ["status"],
    ["results", "list"],
    ["results", "export"],
    ["jobs"],
    ["jobs", "--status", "1"],
    ["alerts", "list"],
    ["alerts", "show", "1"],
    ["alerts", "channels"],
    ["bisect", "--list"],
    ["bisect", "--status", "1"],
]


def older_database(path, version: int) -> None:
    """A results database at schema `version`, as an older master left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for n, script in enumerate(MIGRATIONS[:version], 1):
        for statement in _statements(script):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={n}")
    conn.close()


@pytest.mark.parametrize("verb", READ_ONLY, ids=[" ".join(v) for v in READ_ONLY])
def test_a_read_only_verb_leaves_an_older_schema_alone_and_says_who_migrates_it(verb, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    data.mkdir()
    db = data / "results.sqlite"
    older = len(MIGRATIONS) - 1
    older_database(db, older)
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(data))
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", "9")  # nothing listens there: "master not running"
    assert cli.main(verb) == 1
    err = capsys.readouterr().err
    assert f"schema version {older}, older than this code's ({len(MIGRATIONS)})" in err, err
    assert "perffarm run" in err and "Traceback" not in err
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == older
    finally:
        conn.close()


def test_read_only_opening_writes_nothing_and_creates_no_database(tmp_path):
    db = tmp_path / "results.sqlite"
    with pytest.raises(store.StoreError, match="no results database"):
        store.connect_readonly(db)
    assert not db.exists()
    store.connect(db).close()
    conn = store.connect_readonly(db)
    try:
        assert store.counts(conn)["runs"] == 0
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM runs")
    finally:
        conn.close()
