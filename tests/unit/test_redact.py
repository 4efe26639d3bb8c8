"""Repository URLs never show their credentials: redaction, and the CLI run as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from master.redact import redact_text, redact_url

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


def _perffarm(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    return subprocess.run(
        [sys.executable, "-m", "master.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60, env={**base, "PYTHONPATH": str(ROOT), **env},
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://alice:{TOKEN}@git.example.org/pg.git", "https://alice:***@git.example.org/pg.git"),
        (f"https://{TOKEN}@git.example.org/pg.git", "https://***@git.example.org/pg.git"),
        (f"https://git.example.org/pg.git?private_token={TOKEN}", "https://git.example.org/pg.git?private_token=***"),
    ],
)
def test_perffarm_settings_never_prints_a_token_from_the_url(tmp_path: Path, url: str, shown: str) -> None:
    env = {"PERFFARM_REPOSITORY_URL": url, "PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data")}
    text = _perffarm("settings", env=env, cwd=tmp_path)
    assert text.returncode == 0 and TOKEN not in text.stdout + text.stderr and shown in text.stdout
    as_json = _perffarm("settings", "--format", "json", env=env, cwd=tmp_path)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["repository.url"] == shown
