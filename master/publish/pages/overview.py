"""index.html: every series (sparkline, latest value, rQPS vs the previous release, open alerts), with filters."""

from __future__ import annotations

from typing import Any

from master.publish.context import Context
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter


def view(ctx: Context, summaries: list[Summary]) -> dict[str, Any]:
    open_by_sid: dict[str, int] = {}
    for a in ctx.alerts:
        if a.is_open:
            for sid in a.sids:
                open_by_sid[sid] = open_by_sid.get(sid, 0) + 1
    rows = sorted(
        summaries,
        key=lambda s: (
            s.branch != "master",
            s.branch,
            s.workload,
            s.metric,
            s.machine_id,
            s.recipe,
            -s.recipe_version,
            s.sid,
        ),
    )
    return {
        "rows": rows,
        "open_by_sid": open_by_sid,
        "bands": ctx.bands,
        "branches": sorted({s.branch for s in rows}),
        "machines": sorted({s.machine_id for s in rows}),
        "workloads": sorted({s.workload for s in rows}),
        "open_alerts": [a for a in ctx.alerts if a.is_open][:20],
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write("index.html", render("index.html", root="", title="perffarm", **view(ctx, summaries)))
