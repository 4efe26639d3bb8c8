"""patches.html: the performance cfbot's patches (docs/jobs.md "A performance cfbot"), one row per patch branch,
the branch with the newest head first: its head, the verdict of its newest finished job (improvement, regression or
no change, from each workload's paired ratio and CI exactly as the job's page shows them: jobs.rows), the top
functions of the job's differential profile where the job's page explains one (jobs.explanations), the link to
the job's page (its flame graph) and the patch's thread. Written by a full publish and when a job finishes
(`when=JOBS`, with the jobs pages)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from master import store
from master.jobs import cfbot
from master.publish.context import Context
from master.publish.pages import jobs
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter
from master.store.jobs import Job
from master.textsafe import safe_link, visible

LIST_LIMIT = jobs.LIST_LIMIT  # cfbot jobs read; each has its page among the jobs pages
SHOWN = 3  # ratios and functions a row lists


@dataclass(frozen=True)
class Verdict:
    """A finished job's word for side B against A, with the ratios (and CIs) that made it."""

    word: str  # improvement, regression, no change, no ratio
    ratios: tuple[str, ...]  # "workload metric 0.9512 [0.9401, 0.9620]", the largest changes first


@dataclass(frozen=True)
class PatchRow:
    branch: str
    head: str
    subject: str
    links: tuple[str, ...]
    job: Job  # the newest head's job
    measured: Job | None  # the newest finished (done) job of the branch: what the verdict is of
    measured_head: str  # that job's head ("" without one)
    verdict: Verdict | None
    top: tuple[str, ...]  # "function +1,234/query self" of the measured job's differential profile


def verdict(job: Job) -> Verdict:
    """improvement / regression / no change for side B of a done job, from the cells of its page (jobs.rows):
    a regression in any workload is the patch's verdict, then an improvement; the same everywhere is no change."""
    cells = [(r, r.cells[0]) for r in jobs.rows(job) if r.cells and r.cells[0] is not None]
    words = {c.verdict for _r, c in cells}
    word = (
        "regression"
        if "regression" in words
        else "improvement"
        if "improvement" in words
        else "no change"
        if "same" in words
        else "no ratio"
    )
    ranked = sorted(
        ((r, c) for r, c in cells if c.problem is None),
        # what made the verdict first (a small regression before larger improvements), then by the size of the move
        key=lambda rc: (
            rc[1].verdict != word,
            rc[1].verdict == "same",
            -abs(math.log(rc[1].ratio)) if rc[1].ratio > 0 else 0.0,
        ),
    )
    ratios = tuple(
        f"{r.workload} {r.metric} {c.ratio:.4f} [{c.low:.4f}, {c.high:.4f}]"
        + ("" if c.verdict == "same" else f" {c.verdict}")
        for r, c in ranked[:SHOWN]
    )
    return Verdict(word, ratios)


def top_functions(job: Job) -> tuple[str, ...]:
    """The functions whose self cost per query moved most, from the first differential profile the job's page shows."""
    for _workload, _label, e in jobs.explanations(job):
        rows = [r for r in e.diff.rows if r.delta_self != 0]  # type: ignore[attr-defined]
        return tuple(f"{visible(r.name)} {r.delta_self:+,.0f}/query" for r in rows[:SHOWN])  # the patch names them
    return ()


def patch_rows(pairs: list[tuple[Job, store.jobs.CfbotHead | None]]) -> list[PatchRow]:
    """One row per branch from cfbot jobs newest first: the branch's newest job, its newest done one."""
    newest: dict[str, tuple[Job, str, str, tuple[str, ...]]] = {}
    done: dict[str, tuple[Job, str]] = {}
    for job, head in pairs:
        if head is not None:
            branch, sha, subject, links = head.branch, head.head, head.subject, head.links
        elif (parsed := cfbot.parse_requested_by(job.requested_by)) is not None:
            (branch, sha), subject, links = parsed, "", ()
        else:
            continue
        newest.setdefault(branch, (job, sha, subject, tuple(x for x in links if safe_link(x))))
        if job.state == "done" and job.result and branch not in done:
            done[branch] = (job, sha)
    out = []
    for branch, (job, sha, subject, links) in newest.items():  # in the order of their newest job: newest first
        measured, measured_head = done.get(branch, (None, ""))
        out.append(
            PatchRow(
                branch,
                sha,
                subject,
                links,
                job,
                measured,
                measured_head,
                verdict(measured) if measured else None,
                top_functions(measured) if measured else (),
            )
        )
    return out


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    pairs = store.jobs.requested_with_prefix(ctx.conn, cfbot.PREFIX + " ", LIST_LIMIT)
    rows = patch_rows(pairs)
    w.write("patches.html", render("patches.html", root="", title="Patches", rows=rows, file=jobs.job_file))
