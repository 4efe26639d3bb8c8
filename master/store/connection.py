"""Opening the results database (WAL, foreign keys on, migrated to the current schema by the master; as it is for
the `perffarm` verbs) and its transactions."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from master.store.migrations import MIGRATIONS


class StoreError(RuntimeError):
    """The results database refused an operation; the message says why."""


# Whether store.connect migrates when its caller does not say: yes in the master's process (its services migrate
# as they always did); no inside a `perffarm` verb (master/cli.py's main holds `verbs_do_not_migrate()`), whose
# code reaches store.connect through shared modules too (ingest for `bisect --local`, the publisher).
_MIGRATE_BY_DEFAULT = True


@contextmanager
def verbs_do_not_migrate() -> Iterator[None]:
    """Inside: store.connect() without `migrate=` never migrates an existing database (see connect)."""
    global _MIGRATE_BY_DEFAULT
    before, _MIGRATE_BY_DEFAULT = _MIGRATE_BY_DEFAULT, False
    try:
        yield
    finally:
        _MIGRATE_BY_DEFAULT = before


def connect(path: Path | str, *, migrate: bool | None = None) -> sqlite3.Connection:
    """Open (creating) the results database with WAL and foreign keys on, for reading and writing.

    migrate=True brings an existing database to this code's schema: the master does (`perffarm run` before it starts
    Buildbot, and its services), and `perffarm migrate`. migrate=False, what the `perffarm` verbs get by default,
    leaves an existing database's schema alone: one at another schema than this code's is a StoreError naming both
    versions, because a running master of another checkout uses it. A database that does not exist yet (or has no
    schema at all) is created at this code's schema either way: no master can be using it.
    None: the process's default (True, except inside `verbs_do_not_migrate`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        if _MIGRATE_BY_DEFAULT if migrate is None else migrate:
            _migrate(conn)
        else:
            _create_or_check(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _create_or_check(conn: sqlite3.Connection, path: Path) -> None:
    """A new database (schema version 0) gets this code's schema; an existing one must already be at it."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == len(MIGRATIONS):
        return
    if version == 0:
        with transaction(conn):  # read again inside the write lock: another opener may have created it meanwhile
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                _apply(conn, 0)
                return
    if version != len(MIGRATIONS):
        raise StoreError(_other_schema(path, version))


def schema_version(path: Path | str) -> int:
    """The schema version (`PRAGMA user_version`) of an existing database, read without changing anything."""
    conn = _open_existing(Path(path))
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def _open_existing(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise StoreError(f"no results database at {path}")
    # mode=rw: never creates the file (WAL readers still write the -shm index, so not mode=ro)
    conn = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=30, isolation_level=None, check_same_thread=False
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA query_only=ON")
        conn.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def connect_readonly(path: Path | str) -> sqlite3.Connection:
    """Open the results database only to read it, as the `perffarm` verbs that only look do (status, results
    list, jobs, alerts list, ...): never created and never migrated, and `query_only`, so no write slips through.

    A newer checkout's read-only verb pointed at a running older master's data directory once migrated the database
    under that master. Now a database at another schema than this code's is a StoreError saying so."""
    path = Path(path)
    conn = _open_existing(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except BaseException:
        conn.close()
        raise
    if version != len(MIGRATIONS):
        conn.close()
        raise StoreError(_other_schema(path, version))
    return conn


def _other_schema(path: Path, version: int) -> str:
    """Why a `perffarm` verb stops at a database of another schema, and what to do."""
    if version > len(MIGRATIONS):
        return _newer(version)
    return (
        f"the results database {path} is at schema version {version}, older than this code's "
        f"({len(MIGRATIONS)}); perffarm commands do not migrate it (a running master of an older checkout would "
        "break). The master migrates it when it starts (`perffarm run`, `make run`), and `perffarm migrate` does "
        "while no master runs on this data directory; while an older master runs, use the perffarm of the "
        "checkout it was started from"
    )


def _newer(version: int) -> str:
    return (
        f"the results database is at schema version {version}, newer than this code "
        f"({len(MIGRATIONS)}); upgrade perffarm or point it at another data directory"
    )


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the migrations this database has not seen; return the resulting schema version.

    Several processes open the database at once (the master, `perffarm` CLI verbs, tests), so the version is read
    inside the write lock: a second opener waits for the first migration and then finds nothing left to do.
    """
    if conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS):
        return len(MIGRATIONS)  # the common case, without taking the write lock
    with transaction(conn):
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current > len(MIGRATIONS):
            raise StoreError(_newer(current))
        _apply(conn, current)
    return len(MIGRATIONS)


def _apply(conn: sqlite3.Connection, current: int) -> None:
    """The migrations after `current`, inside the caller's transaction."""
    for version in range(current + 1, len(MIGRATIONS) + 1):
        for statement in _statements(MIGRATIONS[version - 1]):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={version}")


_migrate = migrate  # connect's keyword `migrate` hides the function inside it


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script. A trigger's body holds ';' between BEGIN and END, so a piece grows
    until SQLite calls it a complete statement."""
    piece = ""
    for part in script.split(";"):
        piece += part + ";"
        if sqlite3.complete_statement(piece):
            if piece.strip(" \n;"):
                yield piece
            piece = ""


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception: all of it is stored or none."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN (deferred) ... COMMIT: the reads inside see one snapshot of the database and, in WAL mode, never take
    the write lock nor keep a writer waiting. Inside the caller's own transaction, that one."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def columns(record: type, alias: str = "") -> str:
    """The SELECT list for a record type: its fields in order (so `record(*row)` builds it), optionally
    qualified by a table alias."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + f.name for f in dataclasses.fields(record))


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """Column names of `table`, or [] when it does not exist (yet)."""
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]  # table: a literal of the caller's


def _chunked(
    conn: sqlite3.Connection, sql: str, column: str, values: Iterable[Any] | None, where: bool = False
) -> Iterator[sqlite3.Row]:
    """Run `sql`, optionally restricted to `column IN values` in batches (SQLite caps bound parameters)."""
    if values is None:
        yield from conn.execute(sql)
        return
    vals = list(dict.fromkeys(values))
    joiner = " AND " if where else " WHERE "
    for i in range(0, len(vals), 900):
        part = vals[i : i + 900]
        yield from conn.execute(f"{sql}{joiner}{column} IN ({','.join('?' * len(part))})", part)
