"""Jobs (table jobs): 2-8 sides measured interleaved in one build, their state and their validated result.

A job is release archaeology (`perffarm releases`), a try-job (`perffarm try`) or a bisection's culprit confirmation
(kind `bisect`, schema 26: master/bisection): never a commit's run, so its samples never enter a branch's series and
never raise an alert. master/jobs creates, runs and reads them; master/bisection/state.py queues its own."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

KINDS = ("releases", "try", "bisect")
STATES = ("queued", "running", "done", "failed")
ENDED = ("done", "failed")  # final: a job's result (or failure) is stored once and never replaced


@dataclass(frozen=True)
class JobSide:
    """One side as requested: its label, what the user named (a tag, a branch, a sha) and the commit."""

    label: str
    revision: str
    sha: str
    patched: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "revision": self.revision, "sha": self.sha, "patched": self.patched}


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    state: str
    builder: str
    branch: str
    sides: tuple[JobSide, ...]
    options: tuple[str, ...]
    patch: str | None
    requested_by: str
    build_id: int | None
    build_url: str | None
    machine_id: str | None
    result: dict[str, Any] | None
    error: str | None
    created_at: float
    updated_at: float
    finished_at: float | None
    build_request: int | None = None  # Buildbot's build request submitted for it (the newest)
    attempts: int = 0  # builds submitted for it
    note: str | None = None  # why the farm queued it again by itself (a build request that was lost)


_COLUMNS = (
    "id, kind, state, builder, branch, sides, options, patch, requested_by, build_id, build_url, machine_id, result, "
    "error, created_at, updated_at, finished_at, build_request, attempts, note"
)


def _job(row: sqlite3.Row) -> Job:
    v = list(row)
    v[5] = tuple(JobSide(**s) for s in json.loads(v[5]))
    v[6] = tuple(json.loads(v[6]))
    v[12] = json.loads(v[12]) if v[12] is not None else None
    return Job(*v)


def insert(
    conn: sqlite3.Connection,
    *,
    kind: str,
    builder: str,
    branch: str,
    sides: tuple[JobSide, ...],
    options: tuple[str, ...],
    patch: str | None,
    requested_by: str,
    now: float,
) -> int:
    if kind not in KINDS:
        raise ValueError(f"job kind {kind!r}: expected one of {KINDS}")
    cur = conn.execute(
        "INSERT INTO jobs (kind, builder, branch, sides, options, patch, requested_by, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            kind,
            builder,
            branch,
            json.dumps([s.to_json() for s in sides]),
            json.dumps(list(options)),
            patch,
            requested_by,
            now,
            now,
        ),
    )
    return int(cur.lastrowid or 0)


def get(conn: sqlite3.Connection, job_id: int) -> Job | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return _job(row) if row else None


def newest_first(conn: sqlite3.Connection, kind: str | None = None, limit: int = 100) -> list[Job]:
    where, args = ("WHERE kind = ?", (kind,)) if kind else ("", ())
    return [
        _job(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY id DESC LIMIT ?", (*args, limit))
    ]


def queued(conn: sqlite3.Connection) -> list[Job]:
    return [_job(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE state = 'queued' ORDER BY id")]


def running(conn: sqlite3.Connection) -> list[Job]:
    return [_job(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE state = 'running' ORDER BY id")]


def mark_running(conn: sqlite3.Connection, job_id: int, now: float) -> bool:
    """queued -> running when its build is submitted (one more attempt); False if it was not queued (another pass
    took it)."""
    cur = conn.execute(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, build_request = NULL, updated_at = ? "
        "WHERE id = ? AND state = 'queued'",
        (now, job_id),
    )
    return cur.rowcount == 1


def set_request(conn: sqlite3.Connection, job_id: int, build_request: int) -> None:
    """The build request submitted for a running job."""
    conn.execute("UPDATE jobs SET build_request = ? WHERE id = ? AND state = 'running'", (build_request, job_id))


def requeue(conn: sqlite3.Connection, job_id: int, now: float, note: str | None = None) -> bool:
    """running -> queued (its build was never submitted, or ended without ending the job); `note` says why, for
    `perffarm jobs` and the job's page. False if it was not running."""
    cur = conn.execute(
        "UPDATE jobs SET state = 'queued', note = COALESCE(?, note), updated_at = ? WHERE id = ? AND state = 'running'",
        (note, now, job_id),
    )
    return cur.rowcount == 1


def set_build(conn: sqlite3.Connection, job_id: int, build_id: int, build_url: str, now: float) -> None:
    """The build that measured the job; an ended job keeps the build that ended it."""
    conn.execute(
        "UPDATE jobs SET build_id = ?, build_url = ?, updated_at = ? WHERE id = ? AND state NOT IN ('done', 'failed')",
        (build_id, build_url, now, job_id),
    )


def finish(
    conn: sqlite3.Connection,
    job_id: int,
    *,
    result: dict[str, Any] | None,
    error: str | None,
    machine_id: str | None,
    now: float,
) -> bool:
    """done with its result, or failed with the reason (a failed build's job result is kept too). Only once: False
    (nothing written) when the job had ended already, so a retried or second build never replaces what the first
    stored (the job's id is its idempotency key)."""
    cur = conn.execute(
        "UPDATE jobs SET state = ?, result = ?, error = ?, machine_id = ?, updated_at = ?, finished_at = ? "
        "WHERE id = ? AND state NOT IN ('done', 'failed')",
        (
            "failed" if error else "done",
            json.dumps(result, sort_keys=True) if result is not None else None,
            error,
            machine_id,
            now,
            now,
            job_id,
        ),
    )
    return cur.rowcount == 1


# ------------------------------------------------------------------------------- cfbot jobs (schema 24)
@dataclass(frozen=True)
class CfbotHead:
    """The patch branch head a cfbot job measures, as its patches page shows it (master/jobs/cfbot.py)."""

    job_id: int
    branch: str
    head: str
    subject: str
    links: tuple[str, ...]  # the thread: checked https URLs from the head's message


def add_cfbot_head(conn: sqlite3.Connection, head: CfbotHead) -> None:
    conn.execute(
        "INSERT INTO cfbot_heads (job_id, branch, head, subject, links) VALUES (?, ?, ?, ?, ?)",
        (head.job_id, head.branch, head.head, head.subject, " ".join(head.links)),
    )


def requested_with_prefix(conn: sqlite3.Connection, prefix: str, limit: int) -> list[tuple[Job, CfbotHead | None]]:
    """The newest `limit` try-jobs whose requested_by starts with `prefix`, newest first, each with its cfbot head
    (None for one queued before schema 24)."""
    jobs = [
        _job(r)
        for r in conn.execute(
            f"SELECT {_COLUMNS} FROM jobs WHERE kind = 'try' AND substr(requested_by, 1, ?) = ? "
            "ORDER BY id DESC LIMIT ?",
            (len(prefix), prefix, limit),
        )
    ]
    heads = {
        row[0]: CfbotHead(row[0], row[1], row[2], row[3], tuple(row[4].split()))
        for row in conn.execute(
            "SELECT job_id, branch, head, subject, links FROM cfbot_heads WHERE job_id >= ?",
            (min((j.id for j in jobs), default=0),),
        )
    }
    return [(j, heads.get(j.id)) for j in jobs]
