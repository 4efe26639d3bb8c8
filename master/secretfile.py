"""One-line secrets from the farm's secrets directory, read as Buildbot's SecretInAFile reads them.

The master reads a few secrets itself (the repository's password, Buildbot's database password) before or beside
Buildbot: the same checks and messages for each, so an operator sees one kind of error whichever secret is wrong.
"""

from __future__ import annotations

from pathlib import Path


def read_line(secrets_dir: Path, name: str, key: str, holding: str, error: type[Exception]) -> str:
    """The one line of secret `name` in `secrets_dir` (trailing newline stripped). `key` is the setting that names
    the secret and `holding` what the file should hold, both for the messages; failures raise `error` saying what
    to do: a missing file, one other users can read (Buildbot's SecretInAFile refuses it at start, so do we), an
    unreadable or empty one, or one of several lines."""
    path = secrets_dir / name
    try:
        if path.stat().st_mode & 0o077:
            raise error(f"{key}: {path} can be read by other users; chmod 600 it")
        value = path.read_text(encoding="utf-8").rstrip("\r\n")
    except FileNotFoundError:
        raise error(f"{key}: the secret {name!r} does not exist; create {path} (mode 0600) holding {holding}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{key}: cannot read the secret {name!r}: {type(e).__name__}") from None
    if not value or any(ch in value for ch in "\r\n\0"):
        raise error(f"{key}: the secret {name!r} must hold one line ({holding})")
    return value
