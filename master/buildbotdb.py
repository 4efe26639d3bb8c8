"""Buildbot's own database (not the results store): which URL, its password from a secret, and a start check.

Buildbot keeps its state — changes, build requests, builds, steps, logs, the poller's last revisions — in one
SQL database named by `master.buildbot_db_url` (default: SQLite `state.sqlite` in the master directory). A
PostgreSQL or MySQL server lets that state outgrow one file and is what Buildbot's multi-master mode needs
(docs/scale.md). The URL never holds a password: settings refuse one (Buildbot, SQLAlchemy and our own messages
would have to keep it out of every log line); the password is the Buildbot secret named by
`master.buildbot_db_password_secret` and joins the URL only in memory, when Buildbot renders its db config.

Pure: SQLAlchemy (Buildbot's own dependency) parses and connects; nothing from Buildbot or Twisted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from master import secretfile
from master.redact import redact_text

if TYPE_CHECKING:
    from master.settings import Settings

BACKENDS = ("sqlite", "postgresql")
# Buildbot also runs on MySQL, but perffarm's start check, outage restart and password handling are tested on
# PostgreSQL only (tests/integration/test_buildbot_db.py): an untested backend is refused, not half-supported.
UNTESTED_BACKENDS = ("mysql", "mariadb")
DEFAULT_URL = "sqlite:///state.sqlite"
# The pip extra that brings each server's driver (SQLAlchemy's default driver for the scheme without "+driver").
DRIVER_EXTRA = {"postgresql": "the `postgres` extra (psycopg)"}
_DRIVER_RE = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
_PASSWORD_KEYS = ("password", "passwd", "passfile")
CONNECT_TIMEOUT = 10  # seconds for the start check's connection attempt


class BuildbotDbError(RuntimeError):
    """Buildbot's database cannot be used; the message says what was wrong and what to do."""


@dataclass(frozen=True)
class DbUrl:
    """A checked database URL: its backend (sqlite, postgresql) and the parts messages show."""

    text: str
    backend: str
    user: str | None
    host: str | None
    port: int | None
    database: str

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"


def _make_url(text: str) -> Any:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(text)
    except (ArgumentError, ValueError):
        return None


def display_url(text: str) -> str:
    """`text` as messages may show it: any password masked (settings refuse one; belt and braces)."""
    url = _make_url(text)
    if url is None:
        return redact_text(text)
    return _shown(url)


def _shown(url: Any) -> str:
    query = {k: ("***" if k.lower() in _PASSWORD_KEYS else v) for k, v in url.query.items()}
    return url.set(query=query).render_as_string(hide_password=True)


def parse(text: str) -> DbUrl:
    """Check a database URL for Buildbot; raise ValueError saying what is wrong (the URL shown without secrets)."""
    if not isinstance(text, str) or not text.strip() or not text.isprintable() or any(c.isspace() for c in text):
        raise ValueError("expected a database URL without spaces or control characters, e.g. " + DEFAULT_URL)
    url = _make_url(text)
    if url is None:
        raise ValueError(
            f"{redact_text(text)!r} is not a database URL: expected sqlite:///FILE "
            "or postgresql://USER@HOST:PORT/DATABASE"
        )
    shown = _shown(url)
    backend, _, driver = url.drivername.partition("+")
    if backend in UNTESTED_BACKENDS:
        raise ValueError(
            f"{shown!r}: {backend} is not supported for Buildbot's database here: perffarm's start check, outage "
            "restart and password handling are tested on SQLite and PostgreSQL only. Use "
            "postgresql://USER@HOST:PORT/DATABASE (docs/scale.md, Buildbot's database and multi-master)"
        )
    if backend not in BACKENDS or (driver and not _DRIVER_RE.match(driver)):
        raise ValueError(f"{shown!r}: the scheme must be one of {', '.join(BACKENDS)} (optionally +DRIVER)")
    if url.password is not None or any(k.lower() in _PASSWORD_KEYS for k in url.query):
        raise ValueError(
            f"{shown!r} holds a password: Buildbot and SQLAlchemy errors, `perffarm settings` and the process "
            "list could show it. Remove it from the URL, put it in a Buildbot secret (a file "
            "<data_dir>/secrets/NAME, mode 0600) and set master.buildbot_db_password_secret = NAME"
        )
    database = url.database or ""
    if backend == "sqlite":
        if url.host or url.port or url.username:
            raise ValueError(f"{shown!r}: an sqlite URL has no user or host: sqlite:///RELATIVE or sqlite:////ABSOLUTE")
        if not database or database == ":memory:" or url.query.get("mode") == "memory":
            raise ValueError(
                f"{shown!r}: an in-memory database would forget every build at a restart; name a file "
                f"(default {DEFAULT_URL}, relative to the master directory)"
            )
        try:
            database % {"basedir": ""}  # Buildbot substitutes %(basedir)s in an sqlite path (enginestrategy)
        except (KeyError, ValueError, TypeError):
            raise ValueError(
                f"{text!r}: the only '%' Buildbot allows in an sqlite path is %(basedir)s (the master directory)"
            ) from None
    elif not database:
        raise ValueError(f"{shown!r}: name the database, e.g. {backend}://perffarm@db.example.org/buildbot")
    return DbUrl(text=text, backend=backend, user=url.username, host=url.host, port=url.port, database=database)


def with_password(text: str, password: str | None) -> str:
    """The URL Buildbot connects with: `text` plus the password, quoted as the URL needs (never logged: Buildbot
    logs the URL with its password stripped)."""
    if not password:
        return text
    url = _make_url(text)
    return url.set(password=password).render_as_string(hide_password=False)


def read_password(settings: Settings) -> str | None:
    """The database password from the secret `master.buildbot_db_password_secret` (None when not set), read the
    way Buildbot's SecretInAFile reads it (mode 0600, trailing newline stripped)."""
    name = settings.buildbot_db_password_secret
    if not name:
        return None
    return secretfile.read_line(
        settings.secrets_dir,
        name,
        "master.buildbot_db_password_secret",
        "the password of Buildbot's database user",
        BuildbotDbError,
    )


def sqlite_path(settings: Settings) -> Path | None:
    """The file of an sqlite Buildbot database (a relative one is in the master directory, as Buildbot has it);
    None for a server database."""
    parsed = parse(settings.buildbot_db_url)
    if not parsed.is_sqlite:
        return None
    path = Path(parsed.database % {"basedir": str(settings.master_dir)})  # as Buildbot's enginestrategy does
    return path if path.is_absolute() else settings.master_dir / path


def sqlite_problem(settings: Settings) -> str | None:
    """Why an sqlite Buildbot database may not live where `master.buildbot_db_url` puts it, or None. Its file is
    written by the master as its own state: outside the data directory it would be some other file of this user's
    (`sqlite:////etc/passwd`, `sqlite:///../../x`), and in it only where nothing else of the farm's lives."""
    path = sqlite_path(settings)
    if path is None:
        return None
    shown = settings.buildbot_db_url  # parse refused a password and control characters
    if "uri" in _make_url(shown).query:
        return (
            f"{shown!r}: an SQLite URI filename (uri=...) can name any file, so it is not accepted; name the file by "
            f"its path (default {DEFAULT_URL}, relative to the master directory)"
        )
    where = path.resolve()
    data = settings.data_dir.resolve()
    if not where.is_relative_to(data):
        return (
            f"{shown!r} puts Buildbot's database at {where}, outside the data directory {data}: use a file in it "
            f"(default {DEFAULT_URL}, in {settings.master_dir}) or a database server"
        )
    if where == settings.results_db.resolve():
        return f"{shown!r} is the results database, a file of another schema; use {DEFAULT_URL}"
    for taken, what in ((settings.secrets_dir, "secrets"), (settings.incoming_dir, "incoming results")):
        if where.is_relative_to(taken.resolve()):
            return f"{shown!r} puts Buildbot's database in {taken}, the directory of {what}; use {DEFAULT_URL}"
    return None


def engine(settings: Settings, timeout: int = CONNECT_TIMEOUT) -> Any:
    """An SQLAlchemy engine on Buildbot's database (for checks and tests; the master makes its own). An sqlite URL
    is resolved against the master directory, as Buildbot does."""
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    url = _make_url(with_password(settings.buildbot_db_url, read_password(settings)))
    connect_args: dict[str, Any] = {}
    path = sqlite_path(settings)
    if path is not None:
        url = url.set(database=str(path))
    else:
        connect_args["connect_timeout"] = timeout
    return sa.create_engine(url, poolclass=NullPool, connect_args=connect_args)


# What to do about the errors a server gives at connect time (matched on the driver's message, lower case).
_HINTS = (
    (
        ("connection refused", "could not connect", "can't connect", "no such file or directory"),
        "is the server running and listening on that host and port? Start it, or fix master.buildbot_db_url",
    ),
    (
        ("timeout expired", "timed out", "could not translate host name"),
        "the host does not answer or its name does not resolve; check the host in master.buildbot_db_url and "
        "that a firewall lets this machine reach it",
    ),
    (
        ("password authentication failed", "access denied", "no password supplied", "password is required"),
        "the user or password is wrong: check the user in master.buildbot_db_url and the secret named by "
        "master.buildbot_db_password_secret (the file <data_dir>/secrets/NAME)",
    ),
    (
        ("does not exist", "unknown database"),
        "create the database and its owner first, e.g. `createuser --pwprompt perffarm && createdb -O perffarm "
        "buildbot` on the server (Buildbot creates its tables itself)",
    ),
    (
        ("no pg_hba.conf entry",),
        "the server refuses connections from this host or user: add a line for it to pg_hba.conf and reload",
    ),
)


def problem_hint(message: str) -> str:
    low = message.lower()
    for needles, hint in _HINTS:
        if any(n in low for n in needles):
            return hint
    return "check master.buildbot_db_url and the server's log"


def check_reachable(settings: Settings, timeout: int = CONNECT_TIMEOUT) -> None:
    """Connect once to a server database (not sqlite: a file Buildbot creates); raise BuildbotDbError saying
    what was wrong and what to do."""
    parsed = parse(settings.buildbot_db_url)
    if parsed.is_sqlite:
        return
    password = read_password(settings)
    shown = display_url(settings.buildbot_db_url)
    from sqlalchemy import text as sql
    from sqlalchemy.exc import NoSuchModuleError, SQLAlchemyError

    try:
        eng = engine(settings, timeout)
    except (ModuleNotFoundError, NoSuchModuleError) as e:
        missing = getattr(e, "name", None) or str(e)
        raise BuildbotDbError(
            f"cannot use Buildbot's database {shown}: its Python driver is not installed ({missing}); install "
            f"{DRIVER_EXTRA.get(parsed.backend, parsed.backend)}: for PostgreSQL "
            "`.venv/bin/pip install -c constraints.txt -e '.[postgres]'` (make setup does it)"
        ) from None

    try:
        with eng.connect() as conn:
            conn.execute(sql("SELECT 1"))
    except SQLAlchemyError as e:
        orig = getattr(e, "orig", None) or e
        first = next((line.strip() for line in str(orig).splitlines() if line.strip()), type(orig).__name__)
        if password:
            first = first.replace(password, "***")
        first = redact_text(first)[:300]
        raise BuildbotDbError(
            f"cannot use Buildbot's database {shown}: {first}\n  {problem_hint(first)} (docs/scale.md)"
        ) from None
    finally:
        eng.dispose()
