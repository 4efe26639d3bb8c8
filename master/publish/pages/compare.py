"""compare.html and commit.html (static shells whose scripts read data/commits/<sha>.js) and data/refs.js: the
tags, the series and the recently tested commits they offer."""

from __future__ import annotations

from typing import Any

from master.publish.context import Context
from master.publish.render import js_call, render
from master.publish.views import Summary, tag_order
from master.publish.writer import SiteWriter


def view(ctx: Context, summaries: list[Summary]) -> dict[str, Any]:
    """data/refs.js's object."""
    series = {
        s.sid: {
            "label": s.label,
            "branch": s.branch,
            "machine": s.machine_id,
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
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write("data/refs.js", js_call("refs", view(ctx, summaries)))
    w.write(
        "compare.html",
        render("compare.html", root="", title="Compare commits", tags=tag_order(ctx.tags, {}), bands=ctx.bands),
    )
    w.write("commit.html", render("commit.html", root="", title="Commit", bands=ctx.bands))
