"""A performance cfbot, first part: every patch branch of a repository in cfbot's layout (one branch per proposed
patch, rebased on master) becomes a try-job, its head measured against its merge base with the base branch, again
on every push. Pure of Buildbot: git (a private bare clone of the patch repository, the master's mirror) and the
results store; the jobs it queues run as any try-job does (paired, in the worker's sandbox: docs/jobs.md).

A job is queued once per (branch, head): its `requested_by` is `cfbot BRANCH HEAD`, so a second pass over the
same heads queues nothing and a push (a new head) queues a new job.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from master import gitmirror, refnames, store
from master.jobs import core

PREFIX = "cfbot"


@dataclass(frozen=True)
class Outcome:
    """What one pass did for one patch branch: `queued` a job id, or `skipped` with the reason."""

    branch: str
    head: str
    job_id: int | None = None
    reason: str = ""  # why nothing was queued: already measured, does not apply, base not in the mirror ...


def requested_by(branch: str, head: str) -> str:
    return f"{PREFIX} {branch} {head}"


def measured(conn: sqlite3.Connection) -> set[str]:
    """The (branch, head) keys of every cfbot job already queued."""
    return {j.requested_by for j in store.jobs.newest_first(conn, core.TRY, limit=1_000_000) if j.requested_by}


def patch_branches(clone: Path, url: str, pattern: str, base: str) -> dict[str, str]:
    """Fetch the patch repository into the bare `clone` and return branch -> head for the branches matching
    `pattern` (a full-match regex), the base branch left out."""
    if not (clone / "HEAD").exists():
        clone.mkdir(parents=True, exist_ok=True)
        gitmirror.git(["init", "--quiet", "--bare", str(clone)])
    gitmirror.git(["fetch", "--quiet", "--prune", "--end-of-options", url, "+refs/heads/*:refs/heads/*"], cwd=clone)
    out = gitmirror.git(["for-each-ref", "--format=%(refname:short)%00%(objectname)", "refs/heads"], cwd=clone)
    heads = {}
    for line in out.splitlines():
        name, _, sha = line.partition("\0")
        if name != base and re.fullmatch(pattern, name) and refnames.ref_problem(name) is None:
            heads[name] = sha
    return heads


def queue(
    conn: sqlite3.Connection,
    clone: Path,
    mirror: gitmirror.Mirror,
    heads: dict[str, str],
    base: str,
    builder: str,
    builders: Sequence[str],
    options: Sequence[str] = (),
) -> list[Outcome]:
    """Queue a try-job for every patch branch whose head has none yet: side A the merge base of the head and the
    base branch (a commit of the watched repository), side B the same commit with the branch's diff applied."""
    done = measured(conn)
    outcomes = []
    for branch, head in sorted(heads.items()):
        key = requested_by(branch, head)
        if key in done:
            outcomes.append(Outcome(branch, head, reason="this head is measured already"))
            continue
        try:
            merge_base = gitmirror.git(["merge-base", "--end-of-options", base, head], cwd=clone).strip()
            patch = gitmirror.git(["diff", "--end-of-options", merge_base, head, "--"], cwd=clone)
        except gitmirror.GitError as e:
            outcomes.append(Outcome(branch, head, reason=f"no merge base with {base}: {e}"))
            continue
        if not patch.strip():
            outcomes.append(Outcome(branch, head, reason=f"the branch changes nothing against {base}"))
            continue
        if not mirror.has_commit(merge_base):
            outcomes.append(
                Outcome(branch, head, reason=f"its merge base {merge_base[:12]} is not in the watched repository")
            )
            continue
        try:
            job_id = core.create_try(
                conn,
                merge_base,
                merge_base,
                core.check_patch(patch.encode()),  # size, encoding, a unified diff: as `perffarm try` checks
                mirror.patch_problem,
                builder,
                builders,
                options,
                requested_by=key,
            )
        except core.JobError as e:
            outcomes.append(Outcome(branch, head, reason=str(e)))
            continue
        outcomes.append(Outcome(branch, head, job_id=job_id))
    return outcomes
