"""Repository credentials: read from the secret file, handed to git by a helper that never puts them in argv."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from master.gitauth import CredentialsError, GitCredentials, read_credentials
from master.settings import load_settings

TOKEN = "glpat-S3CRET-t0ken"


def _settings(tmp_path: Path):
    return load_settings(
        environ={
            "PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"),
            "PERFFARM_REPOSITORY_USER": "alice",
            "PERFFARM_REPOSITORY_PASSWORD_SECRET": "repository-token",
        }
    )


def test_credentials_come_from_the_secret_file_and_hide_in_repr(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    with pytest.raises(CredentialsError, match="the secret 'repository-token' does not exist; create .*/data/secrets/"):
        read_credentials(settings)
    settings.secrets_dir.mkdir(parents=True)
    (settings.secrets_dir / "repository-token").write_text("line one\nline two\n")
    (settings.secrets_dir / "repository-token").chmod(0o644)
    with pytest.raises(CredentialsError, match="repository-token can be read by other users; chmod 600 it"):
        read_credentials(settings)
    (settings.secrets_dir / "repository-token").chmod(0o600)
    with pytest.raises(CredentialsError, match="must hold one line"):
        read_credentials(settings)
    (settings.secrets_dir / "repository-token").write_text(TOKEN + "\n")
    creds = read_credentials(settings)
    assert creds == GitCredentials("alice", TOKEN) and TOKEN not in repr(creds)
    assert TOKEN not in " ".join(creds.config_args())
    assert read_credentials(load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data")})) is None


def test_the_helper_answers_git_and_no_other_helper_is_asked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    (home / ".git-credentials").write_text("https://mallory:stolen@git.example.org\n")
    creds = GitCredentials("alice", TOKEN)
    env = {**os.environ, "HOME": str(home), "GIT_TERMINAL_PROMPT": "0", **creds.env()}
    proc = subprocess.run(
        ["git", *creds.config_args(), "credential", "fill"],
        input="protocol=https\nhost=git.example.org\n\n",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"username=alice\npassword={TOKEN}\n" in proc.stdout
    subprocess.run(
        ["git", *creds.config_args(), "credential", "approve"],
        input=proc.stdout,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert TOKEN not in (home / ".git-credentials").read_text(), "the user's store helper was fed the token"
