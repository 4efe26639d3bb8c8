"""Buildbot's own database (not the results store): which URL, its password from a secret, and a start check.

Buildbot keeps its state — changes, build requests, builds, steps, logs, the poller's last revisions — in one
SQL database named by `master.buildbot_db_url` (default: SQLite `state.sqlite` in the master directory). A
PostgreSQL or MySQL server lets that state outgrow one file and is what Buildbot's multi-master mode needs
(docs/scale.md). The URL never holds a password: settings refuse one (Buildbot, SQLAlchemy and our own messages
would have to keep it out of every log line); the password is the Buildbot secret named by
`master.buildbot_db_password_secret` and joins the URL only in memory, when Buildbot renders its db config.

Pure: SQLAlchemy (Buildbot's own dependency) connects; the URL itself is checked by `master.dburl`; nothing from
Buildbot or Twisted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from master import secretfile
from master.dburl import display_url, parse, sqlalchemy_url, sqlite_file, with_password
from master.redact import redact_text

if TYPE_CHECKING:
    from master.settings import Settings

DRIVER_EXTRA = {"postgresql": "the `postgres` extra (psycopg)"}
CONNECT_TIMEOUT = 10  # seconds for the start check's connection attempt


class BuildbotDbError(RuntimeError):
    """Buildbot's database cannot be used; the message says what was wrong and what to do."""


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
    """The file of an sqlite Buildbot database (in the master directory unless absolute); None for a server
    database."""
    return sqlite_file(settings.buildbot_db_url, settings.master_dir)


def engine(settings: Settings, timeout: int = CONNECT_TIMEOUT) -> Any:
    """An SQLAlchemy engine on Buildbot's database (for checks and tests; the master makes its own). An sqlite URL
    is resolved against the master directory, as Buildbot does."""
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    url = sqlalchemy_url(with_password(settings.buildbot_db_url, read_password(settings)))
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
