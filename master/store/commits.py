"""Commits, their first-parent order on each watched branch, and tags (tables commits, branch_commits, tags)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CommitInfo:
    """A commit as git describes it; `parents` lists the first parent first."""

    sha: str
    subject: str
    author: str
    authored_at: int
    committed_at: int
    parents: tuple[str, ...]


@dataclass(frozen=True)
class Commit:
    """What pages and messages show of a commit."""

    sha: str
    subject: str
    author: str  # "Name <email>"
    authored_at: int


def upsert_commits(conn: sqlite3.Connection, commits: Sequence[CommitInfo]) -> None:
    conn.executemany(
        "INSERT INTO commits (sha, subject, author, authored_at, committed_at, parents) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(sha) DO NOTHING",
        [(c.sha, c.subject, c.author, c.authored_at, c.committed_at, " ".join(c.parents)) for c in commits],
    )


def branch_head(conn: sqlite3.Connection, branch: str) -> tuple[int, str] | None:
    """(position, sha) of the newest commit stored for a branch, or None."""
    row = conn.execute(
        "SELECT position, sha FROM branch_commits WHERE branch = ? ORDER BY position DESC LIMIT 1", (branch,)
    ).fetchone()
    return (row["position"], row["sha"]) if row else None


def append_branch(conn: sqlite3.Connection, branch: str, commits: Sequence[CommitInfo], start: int) -> None:
    """Record `commits` (oldest first) at positions start, start+1, ... of the branch's first-parent order."""
    upsert_commits(conn, commits)
    conn.executemany(
        "INSERT INTO branch_commits (branch, position, sha) VALUES (?, ?, ?)",
        [(branch, start + i, c.sha) for i, c in enumerate(commits)],
    )


def reset_branch(conn: sqlite3.Connection, branch: str) -> None:
    """Forget a branch's order (its history was rewritten); it is rebuilt from the mirror."""
    conn.execute("DELETE FROM branch_commits WHERE branch = ?", (branch,))


def set_tags(conn: sqlite3.Connection, tags: dict[str, str]) -> None:
    now = time.time()
    conn.executemany(
        "INSERT INTO tags (name, sha, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET sha = excluded.sha, updated_at = excluded.updated_at "
        "WHERE tags.sha != excluded.sha",
        [(name, sha, now) for name, sha in tags.items()],
    )


def commit_exists(conn: sqlite3.Connection, sha: str) -> bool:
    return conn.execute("SELECT 1 FROM commits WHERE sha = ?", (sha,)).fetchone() is not None


def commit(conn: sqlite3.Connection, sha: str | None) -> Commit | None:
    """A stored commit, or None (also for no sha)."""
    if not sha:
        return None
    row = conn.execute("SELECT sha, subject, author, authored_at FROM commits WHERE sha = ?", (sha,)).fetchone()
    return Commit(*row) if row else None
