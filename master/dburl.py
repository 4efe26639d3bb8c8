"""A database URL for Buildbot's own database (`master.buildbot_db_url`): checked, shown without secrets.

The URL text alone, no settings: `master.settings` checks the setting with it while loading, and
`master.buildbotdb` (which takes the loaded settings) connects with it. SQLAlchemy, Buildbot's own dependency,
parses a URL; the default URL, which every embedded farm uses, is known without it, so loading the settings of
such a farm does not load SQLAlchemy (a second of CPU on this VM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from master.redact import redact_text

BACKENDS = ("sqlite", "postgresql")
# Buildbot also runs on MySQL, but perffarm's start check, outage restart and password handling are tested on
# PostgreSQL only (tests/integration/test_buildbot_db.py): an untested backend is refused, not half-supported.
UNTESTED_BACKENDS = ("mysql", "mariadb")
DEFAULT_URL = "sqlite:///state.sqlite"
_DRIVER_RE = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
_PASSWORD_KEYS = ("password", "passwd", "passfile")


@dataclass(frozen=True)
class DbUrl:
    """A checked database URL: its backend (sqlite, postgresql) and the parts messages show."""

    text: str
    backend: str
    user: str | None
    host: str | None
    port: int | None
    database: str
    options: tuple[str, ...] = ()  # the keys of the URL's query (?uri=..., ?mode=...), lower case as given

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"


def sqlalchemy_url(text: str) -> Any:
    """SQLAlchemy's URL object for `text`, or None when it is not a URL (SQLAlchemy is loaded here, when needed)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(text)
    except (ArgumentError, ValueError):
        return None


def display_url(text: str) -> str:
    """`text` as messages may show it: any password masked (settings refuse one; belt and braces)."""
    if text == DEFAULT_URL:
        return DEFAULT_URL  # what SQLAlchemy renders it as (tests/unit/test_buildbot_db.py)
    url = sqlalchemy_url(text)
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
    if text == DEFAULT_URL:
        return DEFAULT  # what SQLAlchemy parses it to (tests/unit/test_buildbot_db.py)
    url = sqlalchemy_url(text)
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
    return DbUrl(
        text=text,
        backend=backend,
        user=url.username,
        host=url.host,
        port=url.port,
        database=database,
        options=tuple(url.query),
    )


DEFAULT = DbUrl(text=DEFAULT_URL, backend="sqlite", user=None, host=None, port=None, database="state.sqlite")


def with_password(text: str, password: str | None) -> str:
    """The URL Buildbot connects with: `text` plus the password, quoted as the URL needs (never logged: Buildbot
    logs the URL with its password stripped)."""
    if not password:
        return text
    url = sqlalchemy_url(text)
    return url.set(password=password).render_as_string(hide_password=False)


def sqlite_file(text: str, master_dir: Path) -> Path | None:
    """The file of an sqlite database URL (a relative one is in the master directory, as Buildbot has it); None
    for a server database."""
    parsed = parse(text)
    if not parsed.is_sqlite:
        return None
    path = Path(parsed.database % {"basedir": str(master_dir)})  # as Buildbot's enginestrategy does
    return path if path.is_absolute() else master_dir / path


def sqlite_problem(
    text: str, *, data_dir: Path, master_dir: Path, results_db: Path, secrets_dir: Path, incoming_dir: Path
) -> str | None:
    """Why an sqlite Buildbot database may not live where `master.buildbot_db_url` puts it, or None. Its file is
    written by the master as its own state: outside the data directory it would be some other file of this user's
    (`sqlite:////etc/passwd`, `sqlite:///../../x`), and in it only where nothing else of the farm's lives."""
    path = sqlite_file(text, master_dir)
    if path is None:
        return None
    shown = text  # parse refused a password and control characters
    if "uri" in parse(text).options:
        return (
            f"{shown!r}: an SQLite URI filename (uri=...) can name any file, so it is not accepted; name the file by "
            f"its path (default {DEFAULT_URL}, relative to the master directory)"
        )
    where = path.resolve()
    data = data_dir.resolve()
    if not where.is_relative_to(data):
        return (
            f"{shown!r} puts Buildbot's database at {where}, outside the data directory {data}: use a file in it "
            f"(default {DEFAULT_URL}, in {master_dir}) or a database server"
        )
    if where == results_db.resolve():
        return f"{shown!r} is the results database, a file of another schema; use {DEFAULT_URL}"
    for taken, what in ((secrets_dir, "secrets"), (incoming_dir, "incoming results")):
        if where.is_relative_to(taken.resolve()):
            return f"{shown!r} puts Buildbot's database in {taken}, the directory of {what}; use {DEFAULT_URL}"
    return None
