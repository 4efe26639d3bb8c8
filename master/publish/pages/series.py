"""series/<sid>.html and data/series/<sid>/index.json: one series' page (chart, markers, change points, siblings)
and its index for tools. The chart's points are in the series' chunk files (series_data.py)."""

from __future__ import annotations

import hashlib
from typing import Any

from master import store
from master.publish import workloads
from master.publish.context import Context
from master.publish.names import safe_name
from master.publish.render import json_document, render
from master.publish.source import CHUNK
from master.publish.views import Marker, Summary, same_place
from master.publish.writer import SiteWriter


def view(ctx: Context, summ: Summary, siblings: list[Summary]) -> dict[str, Any]:
    """The page's change points, chart markers (release tags, other series of the workload starting, active
    change points), the series it can overlay and the chart's metadata."""
    overlays = [o for o in siblings if o.sid != summ.sid and o.unit == summ.unit]
    siblings = same_place(summ, siblings)
    changes = sorted(ctx.changes.get(summ.sid, []), key=lambda c: (c.position, c.id))
    tag_marks = []
    for name, sha in ctx.tags.items():
        pos = ctx.tag_positions.get(summ.branch, {}).get(sha)
        if pos is not None and summ.first_position <= pos <= summ.last_position:
            tag_marks.append(Marker(pos, "tag", name))
    config_marks = [
        Marker(
            o.first_position,
            "config",
            f"{ctx.machine_views[o.machine_id].name} {o.recipe} v{o.recipe_version} {o.config_hash[:8]} starts",
        )
        for o in siblings
        if o.sid != summ.sid and o.first_position > summ.first_position
    ]
    change_marks = [Marker(c.position, c.kind, f"{c.kind} ×{c.ratio:.3f}") for c in changes if c.state == "active"]
    rebase_marks = [
        Marker(pos, "rebase", label)
        for pos, label in ctx.rebases.get(summ.sid, [])
        if summ.first_position <= pos <= summ.last_position
    ]
    plan_changes = [r.change for r in ctx.plan_changes_of.get(summ.sid, [])]
    plan_marks = [Marker(c.position, "plan", f"plan: {c.summary}") for c in plan_changes]
    markers = sorted(
        tag_marks + config_marks + change_marks + rebase_marks + plan_marks,
        key=lambda m: (m.position, m.kind, m.label),
    )
    chunks = list(range(summ.first_position // CHUNK, summ.last_position // CHUNK + 1))
    meta = {
        "sid": summ.sid,
        "chunks": chunks,
        "chunk_size": CHUNK,
        "branch_dir": safe_name(summ.branch),
        "unit": summ.unit,
        "direction": summ.direction,
        "markers": [{"pos": m.position, "kind": m.kind, "label": m.label} for m in markers],
        "overlays": [_overlay(summ, o, chunks, ctx.machine_views[o.machine_id].name) for o in overlays],
    }
    about = workloads.info(summ.recipe, summ.recipe_version, summ.config_hash, summ.workload)
    return {
        "s": summ,
        "group": about.group,
        "group_href": f"../overview/{safe_name(summ.machine_id)}.html#group-{about.group}",
        "sql": about.sql,
        "plans": list(reversed(ctx.plan_spans.get(summ.sid, []))),  # newest first
        "plan_changes": list(reversed(plan_changes)),
        "pairing": _pairing(ctx, summ),
        "changes": changes,
        "markers": markers,
        "meta": meta,
        "chunks": chunks,
        "siblings": [o for o in siblings if o.sid != summ.sid],
        # how the page names its machine and its siblings' (workers.about): part of key()'s digest
        "machines_about": {
            m: ctx.machine_views[m] for m in sorted({summ.machine_id, *(o.machine_id for o in siblings)})
        },
    }


def _overlay(summ: Summary, o: Summary, chunks: list[int], machine: str = "") -> dict[str, Any]:
    """A series the chart can draw over this one: its id, what differs from this series (its label in the legend)
    and its chunks within this series' (the chart's x range). The chunk range moves once per CHUNK commits of the
    other series, not with each of its runs, so its runs seldom make this page new (key())."""
    differs = []
    if o.metric != summ.metric:
        differs.append("reference" if o.metric.endswith(store.series.REFERENCE_SUFFIX) else o.metric)
    if o.branch != summ.branch:
        differs.append(o.branch)
    if o.machine_id != summ.machine_id:
        differs.append(machine or o.machine_id)  # its name (workers.about), else its id
    if (o.recipe, o.recipe_version, o.config_hash) != (summ.recipe, summ.recipe_version, summ.config_hash):
        differs.append(f"{o.recipe} v{o.recipe_version} ({o.config_hash[:8]})")
    lo = max(o.first_position // CHUNK, chunks[0])
    hi = min(o.last_position // CHUNK, chunks[-1])
    return {"sid": o.sid, "label": " · ".join(differs) or o.label, "chunks": [lo, hi] if lo <= hi else []}


def _pairing(ctx: Context, summ: Summary) -> dict[str, str] | None:
    """How a paired workload's series relate (docs/throughput.md): which one is searched for changes."""
    if summ.sid in ctx.rebases:
        return {"role": "ratio"}
    ratio = ctx.ratio_of.get(summ.sid)
    if ratio is None:
        return None
    role = "reference" if summ.metric.endswith(store.series.REFERENCE_SUFFIX) else "unpaired"
    return {"role": role, "ratio_sid": ratio}


def key(ctx: Context, summ: Summary, siblings: list[Summary]) -> str:
    """A digest of what write() renders: the page and its index are a function of the view model (and of the
    templates, which a new version of the code renders afresh with the full publish at start). Of the siblings the
    page shows only who they are (the link and the config marks from their first positions): their latest values
    change with every run of their machine and must not make every page of the workload new."""
    v = view(ctx, summ, siblings)
    v["siblings"] = [(o.sid, o.machine_id, o.recipe, o.recipe_version, o.config_hash) for o in v["siblings"]]
    return hashlib.sha1(repr(v).encode()).hexdigest()[:20]


def file(summ: Summary, siblings: list[Summary]) -> str:
    """The series' page."""
    return f"series/{summ.sid}.html"


def write(w: SiteWriter, ctx: Context, summ: Summary, siblings: list[Summary]) -> None:
    v = view(ctx, summ, siblings)
    w.write(file(summ, siblings), render("series.html", root="../", title=f"{summ.label} · {summ.branch}", **v))
    w.write(
        f"data/series/{summ.sid}/index.json",
        json_document(
            "series",
            {
                "series": summ.to_json(),
                "chunks": v["chunks"],
                "chunk_size": CHUNK,
                "change_points": [c.__dict__ for c in v["changes"]],
                "markers": v["meta"]["markers"],
                "plan_changes": [
                    {"position": c.position, "sha": c.sha, "prev_sha": c.prev_sha, "summary": c.summary}
                    for c in v["plan_changes"]
                ],
            },
        ),
    )
