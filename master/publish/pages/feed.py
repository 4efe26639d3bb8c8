"""alerts.atom, the Atom feed of alerts: stable entry ids (the alert's id never changes), newest first."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from master.machines import MachineView
from master.publish import source
from master.publish.context import Context
from master.publish.pages.alerts import newest_plan_changes
from master.publish.render import render
from master.publish.source import PlanChangeRow
from master.publish.views import AlertPage, Summary
from master.publish.writer import SiteWriter


def iso(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts or 0, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry_id(alert: AlertPage) -> str:
    """A stable, globally unique id: the same alert keeps it across publishes and state changes."""
    return f"urn:perffarm:alert:{alert.file}"


def plan_entry_id(row: PlanChangeRow) -> str:
    """A plan change's entry id: its series and the commit it is first seen at, stable across publishes."""
    return f"urn:perffarm:plan:{row.sid}:{row.change.sha}"


def view(
    alerts: Sequence[AlertPage],
    plans: Sequence[PlanChangeRow] = (),
    seen: Mapping[str, float] | None = None,
    named: Mapping[str, MachineView] | None = None,
) -> dict[str, Any]:
    """The feed: alerts (newest 200), then plan changes (newest 200), each dated by its commit's time (`seen`), the
    machines by name (`named`: workers.about) and id."""

    def label(machine_id: str) -> str:
        m = (named or {}).get(machine_id)
        return m.label() if m is not None else machine_id

    seen = seen or {}
    entries = sorted(alerts, key=lambda a: (a.updated or 0, a.id), reverse=True)[:200]
    updated = max([a.updated or 0 for a in entries] + [seen.get(r.change.sha, 0) for r in plans], default=0) or 0
    return {
        "updated": iso(updated),
        "entries": [
            {
                "id": entry_id(a),
                "title": f"[{a.state}] {a.title}",
                "updated": iso(a.updated),
                "link": f"alerts/{a.file}.html",
                "summary": f"{a.kind} {a.sha or ''} state {a.state}"
                + (f", culprit {a.culprit}" if a.culprit else "")
                + "".join(f", tracked in {u}" for u in a.links),
                "related": a.links,
            }
            for a in entries
        ]
        + [
            {
                "id": plan_entry_id(r),
                "title": f"[plan] {r.change.headline}",
                "updated": iso(seen.get(r.change.sha)),
                "link": f"series/{r.sid}.html",
                "related": (),
                "summary": f"{label(r.machine_id)} {r.branch}: the plan of {r.change.workload} changed after "
                f"{r.change.prev_sha[:12]} ({r.change.summary})",
            }
            for r in plans
        ],
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    plans = newest_plan_changes(ctx)
    seen = {sha: float(c.authored_at) for sha, c in source.commits(ctx.conn, {r.change.sha for r in plans}).items()}
    w.write("alerts.atom", render("alerts.atom", **view(ctx.alerts, plans, seen, ctx.machine_views)))
