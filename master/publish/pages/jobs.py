"""jobs.html and jobs/<id>.html: every job (release archaeology, try-jobs) and, per finished job, each side's ratio
to side A with its 95% CI, all sides measured interleaved in one build (master/jobs). Written by a full publish
and when a job finishes (`when=JOBS`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from master import store
from master.jobs import core
from master.publish import isolate
from master.publish.context import Context
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter
from master.store.jobs import Job

LIST_LIMIT = 500


@dataclass(frozen=True)
class Cell:
    ratio: float
    low: float
    high: float
    verdict: str
    n: int
    problem: str | None = None  # the samples form no ratio: why (the numbers above are then NaN)


@dataclass(frozen=True)
class Row:
    workload: str
    metric: str
    unit: str
    direction: str
    base: float  # side A's median
    cells: tuple[Cell | None, ...]  # one per side after A


def job_file(job_id: int) -> str:
    return f"jobs/{job_id}.html"


def rows(job: Job) -> list[Row]:
    """One row per (workload, metric) of side A: its median, and each other side's ratio to it."""
    per_side = core.comparisons(job)
    base: dict[tuple[str, str], tuple[str, str, float]] = {}
    cells: dict[tuple[str, str], list[Cell | None]] = {}
    for k, sc in enumerate(per_side):
        for c in sc.comparisons:
            key = (c.workload, c.metric)
            if key not in base:
                base[key] = (c.unit, c.direction, statistics.median(c.a))
                cells[key] = [None] * len(per_side)
            e = c.estimate
            if e is None:
                cells[key][k] = Cell(math.nan, math.nan, math.nan, c.verdict, 0, c.problem)
            else:
                cells[key][k] = Cell(e.ratio, e.low, e.high, c.verdict, e.n)
    return [Row(w, m, *base[(w, m)], tuple(cells[(w, m)])) for (w, m) in base]


UNMOVED = 1e-4  # per query, as master/compare.py: a side that counted the same work as A gets no flame graph


def _moved(a: dict, b: dict) -> bool:
    """Whether two stored profiles' instructions per query differ by UNMOVED or more (unreadable: shown)."""
    try:
        per_a = a["profile"]["total"] / a["queries"]
        per_b = b["profile"]["total"] / b["queries"]
    except (KeyError, TypeError, ZeroDivisionError):
        return True
    return per_a <= 0 or abs(per_b / per_a - 1) >= UNMOVED


def explanations(job: Job) -> list[tuple[str, str, object]]:
    """(workload, side label, StoredExplanation) for each side after A whose instruction workloads kept
    callgrind profiles on both sides and counted different work: where the instructions went, per function."""
    from master.profiles import report

    sides = (job.result or {}).get("sides", [])
    if len(sides) < 2:
        return []
    base = sides[0].get("callgrind", {})
    out = []
    for side, stored in zip(job.sides[1:], sides[1:]):
        for workload, prof in sorted(stored.get("callgrind", {}).items()):
            if workload in base and _moved(base[workload], prof):
                a = base[workload]
                e = report.from_stored(
                    workload,
                    f"A {job.sides[0].revision}",
                    (a["queries"], a["profile"]),
                    f"{side.label} {side.revision}" + (" + patch" if side.patched else ""),
                    (prof["queries"], prof["profile"]),
                )
                if e is not None:
                    out.append((workload, side.label, e))
    return out


def counter_reports(job: Job) -> list[tuple[str, object]]:
    """(side label, master.explain.report.CounterReport) for each side after A that counted system calls, WAL and
    buffers, as A did: the exact counters that changed (docs/explain.md)."""
    from master.explain import report

    def measured(side: dict) -> dict[str, dict[str, tuple[str, list[float]]]]:
        return {
            str(w.get("name")): {
                str(m.get("name")): (str(m.get("unit")), list(m.get("samples", []))) for m in w.get("metrics", [])
            }
            for w in side.get("workloads", [])
        }

    sides = (job.result or {}).get("sides", [])
    if len(sides) < 2:
        return []
    base = measured(sides[0])
    out = []
    for side, stored in zip(job.sides[1:], sides[1:]):
        r = report.compare(base, measured(stored))
        if r is not None:
            out.append((side.label, r))
    return out


def wait_reports(job: Job) -> list[tuple[str, object]]:
    """(side label, master.explain.report.WaitReport) for each side after A whose throughput samples were
    sampled for wait events, as A's were (the result's `sides[].waits`): where the backends waited, and what moved
    beyond the samples' noise (docs/explain.md)."""
    from master.explain import report

    sides = (job.result or {}).get("sides", [])
    if len(sides) < 2 or not isinstance(sides[0].get("waits"), dict):
        return []
    out = []
    for side, stored in zip(job.sides[1:], sides[1:]):
        sampled = stored.get("waits")
        if isinstance(sampled, dict):
            r = report.compare_waits(sides[0]["waits"], sampled)
            if r is not None:
                out.append((side.label, r))
    return out


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    jobs = store.jobs.newest_first(ctx.conn, limit=LIST_LIMIT)
    w.write("jobs.html", render("jobs.html", root="", title="Jobs", jobs=jobs, file=job_file))
    for job in jobs:
        title = f"{job.kind} job {job.id}"
        with isolate.page(w, "jobs", job_file(job.id), title):  # one job's stored result never stops the others
            w.write(
                job_file(job.id),
                render(
                    "job.html",
                    root="../",
                    title=title,
                    job=job,
                    machines_about=ctx.machine_views,
                    rows=rows(job) if job.result and job.state == "done" else [],
                    explained=explanations(job) if job.result and job.state == "done" else [],
                    counters=counter_reports(job) if job.result and job.state == "done" else [],
                    waits=wait_reports(job) if job.result and job.state == "done" else [],
                ),
            )
    w.keep_only("jobs", {job_file(j.id) for j in jobs})
