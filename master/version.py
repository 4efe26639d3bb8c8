"""The version `perffarm --version` prints: the release from the package metadata (pyproject.toml) and, in a git
checkout, the commit it runs (`git describe`), so a bug report names the exact code. Standard library only."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def release() -> str:
    """The release number of pyproject.toml (as installed), or "unknown" when perffarm is not installed."""
    try:
        return metadata.version("perffarm")
    except metadata.PackageNotFoundError:
        return "unknown"


def from_git(root: Path = ROOT) -> str | None:
    """`git describe` of the checkout (a release tag, commits since it and the commit; "-dirty" with local
    changes), or None outside a git checkout or without git."""
    if not (root / ".git").exists():
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "describe", "--tags", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def version() -> str:
    """e.g. "perffarm 0.1.0 (git 60378b1c2d3e)"."""
    described = from_git()
    return f"perffarm {release()}" + (f" (git {described})" if described else "")
