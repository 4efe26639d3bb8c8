"""Repository URLs never show their credentials: redaction, settings that refuse them, the CLI as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from master.redact import credentials_problem, redact_text, redact_url
from master.settings import SettingsError, describe, load_settings

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "glpat-S3CRET-t0ken"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://alice:{TOKEN}@git.example.org/pg.git", "https://alice:***@git.example.org/pg.git"),
        (f"https://{TOKEN}@github.com/org/pg.git", "https://***@github.com/org/pg.git"),
        (f"https://git.example.org/pg.git?private_token={TOKEN}", "https://git.example.org/pg.git?private_token=***"),
        (f"https://h.example/pg.git?a=1&token={TOKEN}#frag", "https://h.example/pg.git?a=***&token=***#frag"),
        (f"https://h.example/pg.git?{TOKEN}", "https://h.example/pg.git?***"),
        (f"https://alice:{TOKEN}/x@h.example/pg.git", "https://alice:***@h.example/pg.git"),  # '/' in a password
        (f"ssh://git:{TOKEN}@h.example/pg.git", "ssh://git:***@h.example/pg.git"),
        ("ssh://git@h.example/pg.git", "ssh://git@h.example/pg.git"),
        ("git@github.com:org/pg.git", "git@github.com:org/pg.git"),
        ("https://git.postgresql.org/git/postgresql.git", "https://git.postgresql.org/git/postgresql.git"),
        ("/srv/pg@home/postgres.git", "/srv/pg@home/postgres.git"),
        ("file:///srv/pg@home/postgres.git", "file:///srv/pg@home/postgres.git"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert TOKEN not in redact_url(url)


def test_redact_text_finds_every_url_in_gits_words() -> None:
    text = (
        f"fatal: unable to access 'https://alice:{TOKEN}@h.example/pg.git/': 403\n"
        f"fatal: repository 'http://127.0.0.1:9/pg.git?private_token={TOKEN}/' not found; "
        f"see https://{TOKEN}@h.example/x."
    )
    out = redact_text(text)
    assert TOKEN not in out
    assert "'https://alice:***@h.example/pg.git/'" in out and "private_token=***" in out
    assert redact_text("nothing secret: git@h:org/pg.git /srv/pg.git") == "nothing secret: git@h:org/pg.git /srv/pg.git"


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        (f"https://alice:{TOKEN}@h.example/pg.git", True),
        (f"https://{TOKEN}@h.example/pg.git", True),
        (f"http://h.example/pg.git?token={TOKEN}", True),
        ("git://alice@h.example/pg.git", True),
        (f"ssh://git:{TOKEN}@h.example/pg.git", True),
        ("ssh://git@h.example/pg.git", False),
        ("git@h.example:org/pg.git", False),
        ("https://git.postgresql.org/git/postgresql.git", False),
        ("/srv/postgres.git", False),
        ("file:///srv/a@b/postgres.git", False),
    ],
)
def test_credentials_problem(url: str, refused: bool) -> None:
    assert (credentials_problem(url) is not None) == refused


@pytest.mark.parametrize(
    "url",
    [
        f"https://alice:{TOKEN}@h.example/pg.git",
        f"https://{TOKEN}@h.example/pg.git",
        f"https://h.example/pg.git?private_token={TOKEN}",
    ],
)
def test_settings_refuse_credentials_in_the_url_without_showing_them(url: str) -> None:
    with pytest.raises(SettingsError) as e:
        load_settings(environ={"PERFFARM_REPOSITORY_URL": url})
    message = str(e.value)
    assert message.startswith("repository.url: https://") and TOKEN not in message
    assert "repository.user" in message and "repository.password_secret" in message  # says where they go


def test_a_password_in_master_web_url_is_refused_without_showing_it() -> None:
    with pytest.raises(SettingsError) as e:
        load_settings(environ={"PERFFARM_MASTER_WEB_URL": f"https://admin:{TOKEN}@perf.example.org/"})
    assert str(e.value).startswith("master.web_url: 'https://admin:***@perf.example.org/'")
    assert TOKEN not in str(e.value)


def test_credentials_settings_go_together_and_only_for_http() -> None:
    with pytest.raises(SettingsError, match=r"^repository\.password_secret: .*go together"):
        load_settings(environ={"PERFFARM_REPOSITORY_USER": "alice"})
    with pytest.raises(SettingsError, match=r"^repository\.password_secret: .*go together"):
        load_settings(environ={"PERFFARM_REPOSITORY_PASSWORD_SECRET": "repository-token"})
    with pytest.raises(SettingsError, match=r"^repository\.password_secret: credentials apply to http"):
        load_settings(
            environ={
                "PERFFARM_REPOSITORY_URL": "/srv/pg.git",
                "PERFFARM_REPOSITORY_USER": "alice",
                "PERFFARM_REPOSITORY_PASSWORD_SECRET": "repository-token",
            }
        )
    with pytest.raises(SettingsError, match=r"^repository\.password_secret: expected a secret name"):
        load_settings(environ={"PERFFARM_REPOSITORY_PASSWORD_SECRET": "../etc/passwd"})
    s = load_settings(
        environ={"PERFFARM_REPOSITORY_USER": "alice", "PERFFARM_REPOSITORY_PASSWORD_SECRET": "repository-token"}
    )
    rows = {k: v for k, v, _ in describe(s)}
    assert rows["repository.user"] == "alice" and rows["repository.password_secret"] == "repository-token"


def _perffarm(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    return subprocess.run(
        [sys.executable, "-m", "master.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "PYTHONPATH": str(ROOT), **env},
    )


@pytest.mark.parametrize(
    "url",
    [
        f"https://alice:{TOKEN}@git.example.org/pg.git",
        f"https://{TOKEN}@git.example.org/pg.git",
        f"https://git.example.org/pg.git?private_token={TOKEN}",
    ],
)
@pytest.mark.parametrize("verb", [["settings"], ["settings", "--format", "json"], ["status"]])
def test_perffarm_never_prints_a_token_from_the_url(tmp_path: Path, url: str, verb: list[str]) -> None:
    env = {
        "PERFFARM_REPOSITORY_URL": url,
        "PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"),
        "PERFFARM_MASTER_WEB_PORT": "9",
    }
    proc = _perffarm(*verb, env=env, cwd=tmp_path)
    assert TOKEN not in proc.stdout + proc.stderr
    assert proc.returncode == 2 and "repository.url: https://" in proc.stderr and "***" in proc.stderr


def test_perffarm_settings_shows_the_secret_name_never_its_value(tmp_path: Path) -> None:
    secrets = tmp_path / "data" / "secrets"
    secrets.mkdir(parents=True)
    (secrets / "repository-token").write_text(TOKEN + "\n")
    env = {
        "PERFFARM_REPOSITORY_URL": "https://git.example.org/pg.git",
        "PERFFARM_REPOSITORY_USER": "alice",
        "PERFFARM_REPOSITORY_PASSWORD_SECRET": "repository-token",
        "PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"),
    }
    proc = _perffarm("settings", "--format", "json", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["repository.url"]["value"] == "https://git.example.org/pg.git"
    assert (shown["repository.user"]["value"], shown["repository.password_secret"]["value"]) == (
        "alice",
        "repository-token",
    )
    assert TOKEN not in proc.stdout + proc.stderr
