"""A performance cfbot, first part: every patch branch of a repository in cfbot's layout (one branch per proposed
patch, rebased on master) becomes a try-job, its head measured against its merge base with the base branch, again
on every push. Pure of Buildbot: git (a private bare clone of the patch repository, the master's mirror) and the
results store; the jobs it queues run as any try-job does (paired, in the worker's sandbox: docs/jobs.md).

A job is queued once per (branch, head): its `requested_by` is `cfbot BRANCH HEAD`, so a second pass over the
same heads queues nothing and a push (a new head) queues a new job. With it the head's subject and its thread
links are stored (`cfbot_heads`), what the patches page shows (master/publish/pages/patches.py). `one_pass` is
what `perffarm cfbot` and the master's timer (master/cfbot_service.py) both run.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from master import gitmirror, refnames, store
from master.jobs import core
from master.settings import Settings
from master.textsafe import safe_link, visible

PREFIX = "cfbot"
MAX_SUBJECT = 200  # characters of a head's subject kept for the patches page
# cfbot writes its commitfest entry into the head's message ("https://commitfest.postgresql.org/patch/4537");
# a commit message may name the thread with a `Discussion:` trailer, as PostgreSQL's commits do
_COMMITFEST = re.compile(r"https://commitfest\.postgresql\.org/[^\s<>\"']+")


@dataclass(frozen=True)
class Outcome:
    """What one pass did for one patch branch: `queued` a job id, or `skipped` with the reason."""

    branch: str
    head: str
    job_id: int | None = None
    reason: str = ""  # why nothing was queued: already measured, does not apply, base not in the mirror ...


def requested_by(branch: str, head: str) -> str:
    return f"{PREFIX} {branch} {head}"


def parse_requested_by(text: str) -> tuple[str, str] | None:
    """(branch, head) of a cfbot job's `requested_by`, None for any other job's."""
    prefix, _, rest = text.partition(" ")
    branch, _, head = rest.rpartition(" ")
    return (branch, head) if prefix == PREFIX and branch and head else None


def head_facts(clone: Path, head: str) -> tuple[str, tuple[str, ...]]:
    """The head's subject (control and bidi characters as escapes, as commit pages show them) and its thread links:
    `Discussion:` trailers, then commitfest links in the message (each a checked https URL, at most
    gitmirror.MAX_LINKS); what cannot be shown as a safe link is dropped."""
    out = gitmirror.git(
        [
            "show",
            "--no-patch",
            "-z",
            "--format=%s%x00%(trailers:key=Discussion,valueonly,separator=%x20)%x00%B",
            "--end-of-options",
            head,
        ],
        cwd=clone,
    )
    subject, _, rest = out.partition("\0")
    trailers, _, body = rest.partition("\0")
    links = list(gitmirror.discussion_links(trailers))
    for url in _COMMITFEST.findall(body):
        url = url.rstrip(".,;:)")
        if safe_link(url) and url not in links:
            links.append(url)
    return visible(subject)[:MAX_SUBJECT], tuple(links[: gitmirror.MAX_LINKS])


def _store_head(
    branch: str, head: str, subject: str, links: tuple[str, ...], conn: sqlite3.Connection, job_id: int
) -> None:
    store.jobs.add_cfbot_head(conn, store.jobs.CfbotHead(job_id, branch, head, subject, links))


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
            subject, links = head_facts(clone, head)
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
                also=partial(_store_head, branch, head, subject, links),
            )
        except (core.JobError, gitmirror.GitError) as e:
            outcomes.append(Outcome(branch, head, reason=str(e)))
            continue
        outcomes.append(Outcome(branch, head, job_id=job_id))
    return outcomes


def one_pass(
    settings: Settings,
    repo: str,
    pattern: str,
    base: str,
    builder: str,
    builders: Sequence[str],
    options: Sequence[str] = (),
) -> list[Outcome]:
    """Fetch the master's mirror and the patch repository (into `<data_dir>/cfbot.git`), then queue what is new;
    GitError says why a fetch failed (nothing is queued then)."""
    from master import ingest  # the mirror's fetch, under the lock the master's ingest takes too

    mirror = ingest.fresh_mirror(settings)
    clone = settings.data_dir / "cfbot.git"
    heads = patch_branches(clone, repo, pattern, base)
    conn = store.connect(settings.results_db)
    try:
        return queue(conn, clone, mirror, heads, base, builder, builders, options)
    finally:
        conn.close()
