"""Buildbot's own database as a setting: checked URLs, no password in them, the password from a secret, and a start
check that says what is wrong with a server it cannot use."""

from __future__ import annotations

import os
import socket

import pytest
from sqlalchemy.engine import make_url

from master import buildbotdb, dburl, launcher
from master.settings import SettingsError, describe, load_settings

SECRET = "s3cr3t-Pw"


def _settings(tmp_path, url: str, secret: str = "", **env: str):
    return load_settings(
        environ={
            "PERFFARM_MASTER_DATA_DIR": str(tmp_path),
            "PERFFARM_MASTER_BUILDBOT_DB_URL": url,
            "PERFFARM_MASTER_BUILDBOT_DB_PASSWORD_SECRET": secret,
            **env,
        }
    )


def _write_secret(settings, value: str, mode: int = 0o600) -> None:
    settings.secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = settings.secrets_dir / settings.buildbot_db_password_secret
    path.write_text(value)
    os.chmod(path, mode)


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: a connection is refused at once
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_default_is_sqlite_in_the_master_directory(tmp_path):
    s = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path)})
    assert s.buildbot_db_url == "sqlite:///state.sqlite" and s.buildbot_db_password_secret == ""
    assert buildbotdb.sqlite_path(s) == s.master_dir / "state.sqlite"
    rows = {key: (value, source) for key, value, source in describe(s)}
    assert rows["master.buildbot_db_url"] == ("sqlite:///state.sqlite", "default")


def test_the_default_url_is_known_without_sqlalchemy_as_sqlalchemy_reads_it(monkeypatch):
    # Every embedded farm loads its settings with the default URL: dburl answers for it without SQLAlchemy (a
    # second of CPU at each `perffarm` command here); the answer must be SQLAlchemy's own.
    from_sqlalchemy = dburl.parse("sqlite:///state.sqlite?x=1")  # the same path through SQLAlchemy
    url = make_url(dburl.DEFAULT_URL)
    assert dburl.DEFAULT == dburl.DbUrl(
        text=dburl.DEFAULT_URL,
        backend=url.drivername,
        user=url.username,
        host=url.host,
        port=url.port,
        database=url.database,
        options=tuple(url.query),
    )
    assert from_sqlalchemy.database == dburl.DEFAULT.database and from_sqlalchemy.options == ("x",)
    assert url.render_as_string(hide_password=True) == dburl.DEFAULT_URL
    monkeypatch.setattr(dburl, "sqlalchemy_url", None)  # the default never reaches SQLAlchemy
    assert dburl.parse(dburl.DEFAULT_URL) == dburl.DEFAULT
    assert dburl.display_url(dburl.DEFAULT_URL) == dburl.DEFAULT_URL


@pytest.mark.parametrize(
    "url, backend",
    [
        ("sqlite:///state.sqlite", "sqlite"),
        ("sqlite:///../buildbot.sqlite", "sqlite"),  # <data_dir>/buildbot.sqlite
        ("sqlite:///%(basedir)s/state.sqlite", "sqlite"),  # Buildbot's own substitution
        ("postgresql://perffarm@db.example.org:5432/buildbot", "postgresql"),
        ("postgresql+psycopg://perffarm@127.0.0.1/buildbot", "postgresql"),
        ("postgresql:///buildbot?host=/var/run/postgresql", "postgresql"),
        ("postgresql://perffarm@db.example.org/buildbot?connect_timeout=5", "postgresql"),
    ],
)
def test_accepted_urls(tmp_path, url, backend):
    s = _settings(tmp_path, url)
    assert s.buildbot_db_url == url and buildbotdb.parse(url).backend == backend
    shown = buildbotdb.display_url(url)
    assert ("master.buildbot_db_url", shown, "env PERFFARM_MASTER_BUILDBOT_DB_URL") in describe(s)
    assert make_url(shown) == make_url(url)


@pytest.mark.parametrize(
    "url, says",
    [
        ("oracle://perffarm@db/buildbot", "scheme must be one of sqlite, postgresql"),
        ("mysql://perffarm@db.example.org/buildbot", "mysql is not supported"),
        ("mariadb+pymysql://perffarm@db/buildbot", "tested on SQLite and PostgreSQL only"),
        ("postgresql+evil driver://u@h/db", "without spaces"),
        ("https://db.example.org/buildbot", "scheme must be one of"),
        ("state.sqlite", "is not a database URL"),
        ("", "expected a database URL"),
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite://user@host/state.sqlite", "no user or host"),
        ("postgresql://perffarm@db.example.org", "name the database"),
        ("postgresql://perffarm@db/buildbot\x1b[2J", "control characters"),
    ],
)
def test_bad_urls_are_refused_naming_the_key(tmp_path, url, says):
    with pytest.raises(SettingsError, match="master.buildbot_db_url") as e:
        _settings(tmp_path, url)
    assert says in str(e.value)


def test_an_absolute_sqlite_path_in_the_data_directory_is_accepted(tmp_path):
    s = _settings(tmp_path, f"sqlite:///{tmp_path}/buildbot.sqlite")
    assert buildbotdb.sqlite_path(s) == tmp_path / "buildbot.sqlite"


@pytest.mark.parametrize(
    "url, says",
    [
        ("sqlite:////etc/passwd", "at /etc/passwd, outside the data directory"),
        ("sqlite:///../../state.sqlite", "outside the data directory"),
        ("sqlite:///%(basedir)s" + "/.." * 20 + "/etc/passwd", "at /etc/passwd, outside the data directory"),
        ("sqlite:///../results.sqlite", "is the results database"),
        ("sqlite:///../secrets/state.sqlite", "the directory of secrets"),
        ("sqlite:///../incoming/state.sqlite", "the directory of incoming results"),
        ("sqlite:///state.sqlite?uri=true", "SQLite URI filename"),
        ("sqlite:///file:/etc/passwd?uri=true&mode=ro", "SQLite URI filename"),
        ("sqlite:///100%.db", "the only '%'"),
    ],
)
def test_an_sqlite_file_outside_the_data_directory_is_refused_naming_the_key(tmp_path, url, says):
    # issue #26, item 10: Buildbot would have written its tables into whatever file the URL named
    with pytest.raises(SettingsError) as e:
        _settings(tmp_path / "data", url)
    message = str(e.value)
    assert message.startswith("master.buildbot_db_url: ") and says in message and "\n" not in message


def test_a_symlink_out_of_the_data_directory_is_followed(tmp_path):
    (tmp_path / "data" / "master").mkdir(parents=True)
    (tmp_path / "data" / "master" / "state.sqlite").symlink_to(tmp_path / "elsewhere.sqlite")
    with pytest.raises(SettingsError, match="outside the data directory"):
        _settings(tmp_path / "data", "sqlite:///state.sqlite")


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://perffarm:{SECRET}@db.example.org/buildbot",
        f"postgresql://perffarm:{SECRET}%40x@db.example.org/buildbot",
        f"postgresql+psycopg://perffarm:{SECRET}@db.example.org/buildbot",
        f"postgresql://perffarm@db.example.org/buildbot?password={SECRET}",
        f"postgresql://perffarm@db.example.org/buildbot?passwd={SECRET}",
    ],
)
def test_a_password_in_the_url_is_refused_and_never_repeated(tmp_path, url):
    with pytest.raises(SettingsError) as e:
        _settings(tmp_path, url)
    message = str(e.value)
    assert message.startswith("master.buildbot_db_url:") and "holds a password" in message
    assert "master.buildbot_db_password_secret" in message
    assert SECRET not in message


@pytest.mark.parametrize("url", ["sqlite:///state.sqlite", "postgresql://db.example.org/buildbot"])
def test_a_password_secret_needs_a_server_and_a_user(tmp_path, url):
    with pytest.raises(SettingsError, match="master.buildbot_db_password_secret: a password needs a server"):
        _settings(tmp_path, url, secret="buildbot-db")


@pytest.mark.parametrize("name", ["../etc/passwd", "a b", "-x"])
def test_the_secret_name_is_a_plain_name(tmp_path, name):
    with pytest.raises(SettingsError, match="master.buildbot_db_password_secret"):
        _settings(tmp_path, "postgresql://perffarm@db/buildbot", secret=name)


@pytest.mark.parametrize("password", ["plain", "p@ss:w/rd?#%&=+ 'x\"", "ünïcødé"])
def test_the_password_joins_the_url_quoted_only_in_memory(password):
    url = "postgresql://perffarm@db.example.org:5432/buildbot"
    joined = make_url(buildbotdb.with_password(url, password))
    assert joined.password == password
    assert (joined.username, joined.host, joined.port, joined.database) == (
        "perffarm",
        "db.example.org",
        5432,
        "buildbot",
    )
    assert buildbotdb.with_password(url, None) == url


def test_buildbot_gets_the_secret_not_its_value(tmp_path):
    from buildbot.process.properties import Secret, Transform

    from master.farm import buildbot_db

    plain = _settings(tmp_path, "postgresql://perffarm@db/buildbot")
    assert buildbot_db(plain) == {"db_url": "postgresql://perffarm@db/buildbot"}
    s = _settings(tmp_path, "postgresql://perffarm@db/buildbot", secret="buildbot-db")
    _write_secret(s, SECRET)
    db = buildbot_db(s)
    assert isinstance(db["db_url"], Transform)
    args = db["db_url"]._args
    assert args[0] == "postgresql://perffarm@db/buildbot" and isinstance(args[1], Secret)
    assert args[1].secret_name == "buildbot-db"
    assert SECRET not in repr(db)


def test_the_secret_file_is_checked_like_buildbot_does(tmp_path):
    s = _settings(tmp_path, "postgresql://perffarm@127.0.0.1/buildbot", secret="buildbot-db")
    with pytest.raises(buildbotdb.BuildbotDbError, match="does not exist; create .*buildbot-db"):
        buildbotdb.read_password(s)
    _write_secret(s, SECRET, mode=0o644)
    with pytest.raises(buildbotdb.BuildbotDbError, match="can be read by other users; chmod 600"):
        buildbotdb.read_password(s)
    _write_secret(s, "one\ntwo\n")
    with pytest.raises(buildbotdb.BuildbotDbError, match="must hold one line"):
        buildbotdb.read_password(s)
    _write_secret(s, SECRET + "\n")
    assert buildbotdb.read_password(s) == SECRET


def test_a_server_that_is_not_there_is_reported_with_what_to_do(tmp_path):
    port = _closed_port()
    s = _settings(tmp_path, f"postgresql://perffarm@127.0.0.1:{port}/buildbot", secret="buildbot-db")
    _write_secret(s, SECRET)
    with pytest.raises(buildbotdb.BuildbotDbError) as e:
        buildbotdb.check_reachable(s, timeout=5)
    message = str(e.value)
    assert f"cannot use Buildbot's database postgresql://perffarm@127.0.0.1:{port}/buildbot" in message
    assert "Connection refused" in message and "is the server running" in message
    assert SECRET not in message


def test_a_missing_driver_says_what_to_install(tmp_path):
    pytest.importorskip("sqlalchemy")
    try:
        import pg8000  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the pg8000 driver is installed here")
    s = _settings(tmp_path, f"postgresql+pg8000://perffarm@127.0.0.1:{_closed_port()}/buildbot")
    with pytest.raises(buildbotdb.BuildbotDbError, match="Python driver is not installed"):
        buildbotdb.check_reachable(s, timeout=5)


def test_sqlite_needs_no_check(tmp_path):
    buildbotdb.check_reachable(_settings(tmp_path, "sqlite:///state.sqlite"))  # Buildbot creates the file


def test_perffarm_run_stops_at_an_unreachable_database_before_starting_anything(tmp_path, capsys):
    s = _settings(tmp_path, f"postgresql://perffarm@127.0.0.1:{_closed_port()}/buildbot")
    assert launcher.run(s, check_repo=False) == 2
    err = capsys.readouterr().err
    assert "cannot use Buildbot's database" in err and "is the server running" in err
    assert not s.master_dir.exists(), "no master may be created for a database it cannot use"
