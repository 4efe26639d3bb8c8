"""Safe, stable file names for pages derived from untrusted refs and keys (no path traversal, no collisions)."""

from __future__ import annotations

import hashlib
import re

_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_SHA = re.compile(r"^[0-9a-f]{7,64}$")


def digest(text: str, size: int = 12) -> str:
    """A short hex digest: stable across processes (unlike hash())."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()[:size]


def safe_name(ref: str) -> str:
    """A file-name component for a ref: readable, [A-Za-z0-9._-] only, never '.'/'..', unique per ref.

    A ref that is already safe keeps its name; anything else gets its unsafe characters replaced and a digest
    of the original appended, so `a/b` and `a_b` never share a file.
    """
    cleaned = _SAFE.sub("_", ref)[:60].lstrip(".") or "_"
    if cleaned == ref and ref not in ("", ".", ".."):
        return ref
    return f"{cleaned}-{digest(ref, 8)}"


def commit_name(sha: str) -> str:
    """A commit's file name: its lower-case hex sha, validated (shas come from the database, still untrusted)."""
    low = sha.lower()
    if not _SHA.match(low):
        raise ValueError(f"not a commit sha: {sha!r}")
    return low
