"""index.html and overview/<machine>.html: the farm's machines, then one machine's series.

index.html lists every machine with its series count, open alerts and how many series are below or above the
previous release (the rQPS colour bands), linking to overview/<machine>.html: that machine's series (sparkline,
latest value, rQPS vs the previous release, open alerts) with branch and workload filters. One page used to hold
every series of the farm (3.5 MB for 20 machines x 100 series, docs/scale.md); a page now holds one machine's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from master.machines import MachineView
from master.publish import isolate, workloads
from master.publish.context import Context
from master.publish.names import digest, safe_name
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter


@dataclass(frozen=True)
class MachineRow:
    machine_id: str
    file: str  # overview/<file>.html
    series: int
    branches: tuple[str, ...]
    recipes: tuple[str, ...]
    open_alerts: int  # open alerts with at least one of its series
    red: int  # series whose latest point is in the red band vs the previous release
    green: int
    sla_miss: int


def machine_file(machine_id: str) -> str:
    """The machine's overview page under overview/ (and its archaeology page under archaeology/)."""
    return safe_name(machine_id)


def open_by_sid(ctx: Context) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in ctx.alerts:
        if a.is_open:
            for sid in a.sids:
                out[sid] = out.get(sid, 0) + 1
    return out


def by_machine(summaries: list[Summary]) -> dict[str, list[Summary]]:
    out: dict[str, list[Summary]] = {}
    for s in summaries:
        out.setdefault(s.machine_id, []).append(s)
    return dict(sorted(out.items()))


def machines_view(ctx: Context, summaries: list[Summary]) -> dict[str, Any]:
    """index.html: one row per machine."""
    machine_of = {s.sid: s.machine_id for s in summaries}
    alerts: dict[str, int] = {}
    for a in ctx.alerts:
        if a.is_open:
            for m in {machine_of[sid] for sid in a.sids if sid in machine_of}:
                alerts[m] = alerts.get(m, 0) + 1
    rows = []
    for m, ss in by_machine(summaries).items():
        rows.append(
            MachineRow(
                m,
                machine_file(m),
                len(ss),
                tuple(sorted({s.branch for s in ss}, key=lambda b: (b != "master", b))),
                tuple(sorted({f"{s.recipe} v{s.recipe_version}" for s in ss})),
                alerts.get(m, 0),
                sum(1 for s in ss if s.vs_tag is not None and s.vs_tag.colour == "red"),
                sum(1 for s in ss if s.vs_tag is not None and s.vs_tag.colour == "green"),
                sum(1 for s in ss if s.sla_miss),
            )
        )
    return {
        "machines": rows,
        "series": len(summaries),
        "bands": ctx.bands,
        "open_alerts": [a for a in ctx.alerts if a.is_open][:20],
    }


@dataclass(frozen=True)
class Group:
    """The series of one group (subsystem: executor, copy, oltp, ...) on a machine's page."""

    name: str
    about: str
    rows: tuple[Summary, ...]


def grouped(rows: list[Summary]) -> list[Group]:
    """The rows under their workloads' groups, in the recipes' order of groups; each group's rows in their order."""
    order = workloads.group_order()
    by: dict[str, list[Summary]] = {}
    for s in rows:
        by.setdefault(workloads.info(s.recipe, s.recipe_version, s.config_hash, s.workload).group, []).append(s)
    names = sorted(by, key=lambda g: (list(order).index(g) if g in order else len(order), g))
    return [Group(g, order.get(g, ""), tuple(by[g])) for g in names]


def view(ctx: Context, summaries: list[Summary], opened: dict[str, int] | None = None) -> dict[str, Any]:
    """overview/<machine>.html: one machine's series (`summaries`), listed by group."""
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
    groups = grouped(rows)
    return {
        "rows": rows,
        "groups": groups,
        "open_by_sid": open_by_sid(ctx) if opened is None else opened,
        "bands": ctx.bands,
        "branches": sorted({s.branch for s in rows}),
        "workloads": sorted({s.workload for s in rows}),
        "group_names": [g.name for g in groups],
    }


def key(machine: str, v: dict[str, Any], about: MachineView | None = None) -> str:
    """A digest of what a machine's page renders: its view, of the open alerts only its series' counts, and how
    the machine is named (workers.about)."""
    rows = v["rows"]
    opened = {s.sid: v["open_by_sid"][s.sid] for s in rows if s.sid in v["open_by_sid"]}
    layout = [(g.name, [s.sid for s in g.rows]) for g in v["groups"]]
    return digest(repr((machine, about, rows, opened, v["bands"], v["branches"], v["workloads"], layout)), 20)


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    """index.html and every machine's page. A publish that builds on the live version renders the machine pages
    whose view's digest differs from the last publish's (ctx.page_keys: a run changes its machine's series, a
    triage any machine's alert counts) and writes them where their bytes changed."""
    w.write(
        "index.html",
        render(
            "index.html", root="", title="perffarm", machines_about=ctx.machine_views, **machines_view(ctx, summaries)
        ),
    )
    opened = open_by_sid(ctx)
    old = ctx.page_keys if w.incremental else None
    pages = set()
    for m, ss in by_machine(summaries).items():
        rel = f"overview/{machine_file(m)}.html"
        pages.add(rel)
        with isolate.page(w, "overview", rel, f"{m} · overview"):  # one machine's page
            v = view(ctx, ss, opened)
            about = ctx.machine_views[m]
            k = ctx.new_page_keys[rel] = key(m, v, about)
            if old is not None and old.get(rel) == k:
                continue  # the live version's page, hard-linked into this one
            w.write_changed(
                rel,
                render(
                    "overview.html",
                    root="../",
                    title=f"{about.label()} · overview",
                    machine_id=m,
                    machines_about={m: about},
                    **v,
                ),
            )
    w.keep_only("overview", pages)
