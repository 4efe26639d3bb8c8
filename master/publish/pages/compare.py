"""compare.html and commit.html (static shells whose scripts read data/commits/<sha>.js) and data/refs.js: the
tags, the series and the recently tested commits they offer, and the statistics settings the compare page's
verdicts use (docs/site.md#compare)."""

from __future__ import annotations

from typing import Any

from master.publish.context import Context
from master.publish.pages.archaeology import SWEEP
from master.publish.render import js_call, render
from master.publish.views import Summary, tag_order
from master.publish.writer import SiteWriter
from recipes.ab import MIN_EFFECT

# The compare page's verdict (static/compare.js): the series' ratio with its exact-bootstrap 95% CI, as the commit
# data and the release tables compute it (master.detect.rqps.median_ratio_block); a series changed when its
# bootstrap p-value is a discovery of the Benjamini-Hochberg procedure at FDR_Q over the series compared (the
# family the detectors correct over too, master.detect.fdr), its CI excludes 1 and it moved by MIN_EFFECT or more
# (as a job's verdict, recipes.ab.MIN_EFFECT).
CONFIDENCE = 0.95
FDR_Q = 0.05


def family(workload: str) -> str:
    """A workload's family: its name without the client (and idle-connection) count of a sweep, pgbench-ro-c8 ->
    pgbench-ro, as the archaeology pages group sweeps; a workload that is no sweep is a family of its own."""
    m = SWEEP.match(workload)
    return m.group("base") if m else workload


def view(ctx: Context, summaries: list[Summary]) -> dict[str, Any]:
    """data/refs.js's object."""
    series = {
        s.sid: {
            "family": family(s.workload),
            "label": s.label,
            "branch": s.branch,
            "machine": ctx.machine_views[s.machine_id].label(),  # name (id): found by either, shown by name
            "recipe": f"{s.recipe} v{s.recipe_version}",
            "unit": s.unit,
            "direction": s.direction,
        }
        for s in summaries
    }
    tested = sorted({s.latest_sha for s in summaries})
    return {
        "tags": ctx.tags,
        "series": series,
        "bands": {"red": ctx.bands.red, "green": ctx.bands.green},
        "recent": tested,
        "stats": {"confidence": CONFIDENCE, "fdr_q": FDR_Q, "min_effect": MIN_EFFECT},
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write("data/refs.js", js_call("refs", view(ctx, summaries)))
    w.write(
        "compare.html",
        render(
            "compare.html",
            root="",
            title="Compare commits",
            tags=tag_order(ctx.tags, {}),
            bands=ctx.bands,
            stats={"confidence": CONFIDENCE, "fdr_q": FDR_Q, "min_effect": MIN_EFFECT},
        ),
    )
    w.write("commit.html", render("commit.html", root="", title="Commit", bands=ctx.bands))
