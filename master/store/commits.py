"""Commits, their first-parent order on each watched branch, and tags (tables commits, branch_commits, tags).

A long branch is ordered in several transactions (master/ingest.py); while its row is in `branch_indexing` its
rows in branch_commits are an incomplete prefix, and every reader here leaves the branch out: a half-ordered
branch never looks like a branch whose head is older.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from master.store.connection import _chunked


@dataclass(frozen=True)
class CommitInfo:
    """A commit as git describes it; `parents` lists the first parent first."""

    sha: str
    subject: str
    author: str
    authored_at: int
    committed_at: int
    parents: tuple[str, ...]
    committer: str = ""  # "Name <email>"; "" when not read (schema < 21)
    discussion: tuple[str, ...] = ()  # the message's `Discussion:` links (checked https URLs, gitmirror)


@dataclass(frozen=True)
class Commit:
    """What pages and messages show of a commit."""

    sha: str
    subject: str
    author: str  # "Name <email>"
    authored_at: int
    parents: tuple[str, ...] = ()  # first parent first (filled by `commits`, for the commit page's links)
    committer: str = ""  # "Name <email>"; "" for a commit stored before schema 21 and not read again since
    discussion: tuple[str, ...] = ()  # `Discussion:` links of the message


_COMMIT_COLUMNS = "sha, subject, author, authored_at, parents, committer, discussion"


def _commit(row: sqlite3.Row | tuple) -> Commit:
    return Commit(
        row[0], row[1], row[2], int(row[3]), tuple((row[4] or "").split()), row[5], tuple((row[6] or "").split())
    )


def upsert_commits(conn: sqlite3.Connection, commits: Sequence[CommitInfo]) -> None:
    """Store new commits; a commit stored before its committer was read (schema < 21) gets it and its links."""
    conn.executemany(
        "INSERT INTO commits (sha, subject, author, authored_at, committed_at, parents, committer, discussion) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha) DO UPDATE SET committer = excluded.committer, "
        "discussion = excluded.discussion WHERE commits.committer = '' AND excluded.committer != ''",
        [
            (
                c.sha,
                c.subject,
                c.author,
                c.authored_at,
                c.committed_at,
                " ".join(c.parents),
                c.committer,
                " ".join(c.discussion),
            )
            for c in commits
        ],
    )


def branch_head(conn: sqlite3.Connection, branch: str) -> tuple[int, str] | None:
    """(position, sha) of the newest commit stored for a branch, or None; for the ingest that writes the order,
    so a branch still being ordered (`indexing`) counts too."""
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


def copy_branch_prefix(conn: sqlite3.Connection, source: str, branch: str, last: int, first: int = 0) -> int:
    """Give `branch` the positions first..last of `source`'s order (the first-parent history the two share);
    returns how many rows were copied."""
    return conn.execute(
        "INSERT INTO branch_commits (branch, position, sha) "
        "SELECT ?, position, sha FROM branch_commits WHERE branch = ? AND position BETWEEN ? AND ?",
        (branch, source, first, last),
    ).rowcount


def reset_branch(conn: sqlite3.Connection, branch: str, keep: int = 0) -> None:
    """Forget a branch's order from position `keep` on (all of it by default: its history was rewritten); it is
    rebuilt from the mirror."""
    conn.execute("DELETE FROM branch_commits WHERE branch = ? AND position >= ?", (branch, keep))


def begin_indexing(conn: sqlite3.Connection, branch: str, head: str) -> None:
    """Mark a branch as being ordered up to `head` over several transactions: readers leave it out until
    `end_indexing`."""
    conn.execute(
        "INSERT INTO branch_indexing (branch, head, started_at) VALUES (?, ?, ?) "
        "ON CONFLICT(branch) DO UPDATE SET head = excluded.head",
        (branch, head, time.time()),
    )


def end_indexing(conn: sqlite3.Connection, branch: str) -> None:
    """The branch's order is complete: readers see it again."""
    conn.execute("DELETE FROM branch_indexing WHERE branch = ?", (branch,))


def indexing(conn: sqlite3.Connection) -> dict[str, str]:
    """Branches whose order is incomplete (being written, or left half-written by a master that was stopped),
    branch -> the head it is being ordered up to."""
    return {r[0]: r[1] for r in conn.execute("SELECT branch, head FROM branch_indexing")}


def set_tags(conn: sqlite3.Connection, tags: dict[str, str]) -> None:
    now = time.time()
    conn.executemany(
        "INSERT INTO tags (name, sha, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET sha = excluded.sha, updated_at = excluded.updated_at "
        "WHERE tags.sha != excluded.sha",
        [(name, sha, now) for name, sha in tags.items()],
    )


# For the queries of one branch (bound last): the branch is not being ordered (its rows are complete).
_ORDERED = "NOT EXISTS (SELECT 1 FROM branch_indexing WHERE branch = ?)"


def commit_exists(conn: sqlite3.Connection, sha: str) -> bool:
    return conn.execute("SELECT 1 FROM commits WHERE sha = ?", (sha,)).fetchone() is not None


def commit(conn: sqlite3.Connection, sha: str | None) -> Commit | None:
    """A stored commit, or None (also for no sha)."""
    if not sha:
        return None
    row = conn.execute(f"SELECT {_COMMIT_COLUMNS} FROM commits WHERE sha = ?", (sha,)).fetchone()
    return _commit(row) if row else None


def tag_sha(conn: sqlite3.Connection, name: str) -> str | None:
    """The commit a watched tag points at."""
    row = conn.execute("SELECT sha FROM tags WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def shas_with_prefix(conn: sqlite3.Connection, prefix: str, limit: int) -> list[str]:
    """Up to `limit` known commits whose sha starts with `prefix` (a validated hex prefix: no LIKE wildcards)."""
    return [
        r[0] for r in conn.execute("SELECT sha FROM commits WHERE sha LIKE ? LIMIT ?", (prefix.lower() + "%", limit))
    ]


def positions_on(conn: sqlite3.Connection, branch: str, shas: Sequence[str]) -> dict[str, int]:
    """sha -> branch position, for those of `shas` on the branch's first-parent history."""
    marks = ",".join("?" * len(shas))
    return dict(
        conn.execute(
            f"SELECT sha, position FROM branch_commits WHERE branch = ? AND sha IN ({marks}) AND {_ORDERED}",
            (branch, *shas, branch),
        ).fetchall()
    )


def branch_order(conn: sqlite3.Connection, branch: str, lo: int = 0, hi: int | None = None) -> list[tuple[int, str]]:
    """(position, sha) of a branch between lo and hi (inclusive), oldest first."""
    hi = 2**62 if hi is None else hi
    return [
        (r[0], r[1])
        for r in conn.execute(
            f"SELECT position, sha FROM branch_commits WHERE branch = ? AND position BETWEEN ? AND ? AND {_ORDERED} "
            "ORDER BY position",
            (branch, lo, hi, branch),
        )
    ]


def commits(conn: sqlite3.Connection, shas: Iterable[str] | None = None) -> dict[str, Commit]:
    """Commit facts, of every stored commit or of `shas`."""
    sql = f"SELECT {_COMMIT_COLUMNS} FROM commits"
    return {r[0]: _commit(r) for r in _chunked(conn, sql, "sha", shas)}


# One index seek per branch: GROUP BY branch read every row of the (branch, position) index, ~90 ms at
# postgres.git's 400,000 positions, three times per stored result (docs/scale.md).
_BRANCH_HEADS = """
WITH RECURSIVE b(name) AS (
    SELECT (SELECT MIN(branch) FROM branch_commits)
    UNION ALL
    SELECT (SELECT MIN(branch) FROM branch_commits WHERE branch > b.name) FROM b WHERE b.name IS NOT NULL
)
SELECT name, (SELECT MAX(position) FROM branch_commits WHERE branch = b.name) FROM b
WHERE name IS NOT NULL AND name NOT IN (SELECT branch FROM branch_indexing)
"""


def set_message(conn: sqlite3.Connection, sha: str, body: str) -> None:
    """Store a measured commit's message body (what follows its subject); a sha's message never changes."""
    conn.execute("INSERT OR IGNORE INTO commit_messages (sha, body) VALUES (?, ?)", (sha, body))


def messages(conn: sqlite3.Connection, shas: Iterable[str] | None = None) -> dict[str, str]:
    """sha -> message body, of every measured commit or of `shas` (a commit measured before schema 22: none)."""
    return {r[0]: r[1] for r in _chunked(conn, "SELECT sha, body FROM commit_messages", "sha", shas)}


def branch_heads(conn: sqlite3.Connection) -> dict[str, int]:
    """branch -> position of its newest stored commit (the cost grows with branches, not with history); a branch
    still being ordered is left out."""
    return {r[0]: r[1] for r in conn.execute(_BRANCH_HEADS)}


def positions_of(conn: sqlite3.Connection, sha: str) -> dict[str, int]:
    """branch -> the commit's position on it, for every branch whose first-parent history holds it."""
    return {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT branch, position FROM branch_commits WHERE sha = ? "
            "AND branch NOT IN (SELECT branch FROM branch_indexing)",
            (sha,),
        )
    }


def sha_at(conn: sqlite3.Connection, branch: str, position: int) -> str | None:
    row = conn.execute(
        f"SELECT sha FROM branch_commits WHERE branch = ? AND position = ? AND {_ORDERED}", (branch, position, branch)
    ).fetchone()
    return row[0] if row else None


def tags(conn: sqlite3.Connection) -> dict[str, str]:
    """Watched tag -> the commit it points at, by name."""
    return {r[0]: r[1] for r in conn.execute("SELECT name, sha FROM tags ORDER BY name")}
