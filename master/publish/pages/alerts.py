"""alerts.html and alerts/alert-<id>.html: the alerts (triage state, lines, range or culprit, bisection), the
channels failing delivery, and one detail page per alert (alerts.link_template points there).

An alert's page is a function of its view model (views.AlertPage): a publish that builds on the live version
renders the pages whose view model's digest differs from the last publish's (ctx.page_keys); the others stay the
hard links they are. Every alert's page was rendered again after each run: 2 x 1,000 alerts at 60,000 commits."""

from __future__ import annotations

from typing import Any

from master import plans as plan_changes
from master.publish import isolate
from master.publish.context import Context
from master.publish.names import digest
from master.publish.render import render
from master.publish.source import PlanChangeRow
from master.publish.views import AlertPage, Summary
from master.publish.writer import SiteWriter

PLAN_CHANGES_LISTED = 200  # the newest plan changes alerts.html lists (the feed carries as many)


def view(ctx: Context) -> dict[str, Any]:
    return {
        "alerts": ctx.alerts,
        "failing": [c for c in ctx.channels() if c.status != "ok"],
        "plan_changes": newest_plan_changes(ctx),
    }


def newest_plan_changes(ctx: Context) -> list[PlanChangeRow]:
    """Plan changes, newest commit first (by branch position; master/plans.py)."""
    rows = sorted(ctx.plan_changes, key=lambda r: (r.change.position, r.branch, r.change.workload), reverse=True)
    return rows[:PLAN_CHANGES_LISTED]


def plan_changes_of(ctx: Context, a: AlertPage) -> list[PlanChangeRow]:
    """The plan changes an alert names: of a series the alert holds, first seen at its commit or its culprit (the
    query that got slower also changed plan there)."""
    sids = set(a.sids)
    return plan_changes.named_by_alert(ctx.plan_changes_at, (a.sha, a.culprit), lambda r: r.sid in sids)


def key(a: AlertPage, plans: list[PlanChangeRow] | None = None, named: dict[str, Any] | None = None) -> str:
    """A digest of what an alert's page renders (the page is its view model through the template, with the plan
    changes it names; a new version of the code renders every page afresh with the full publish at start)."""
    return digest(repr((a, plans, named)) if plans else repr(a), 20)


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write_changed(
        "alerts.html", render("alerts.html", root="", title="Alerts", machines_about=ctx.machine_views, **view(ctx))
    )
    old = ctx.page_keys if w.incremental else None
    for a in ctx.alerts:
        rel = f"alerts/{a.file}.html"
        with isolate.page(w, "alerts", rel, f"Alert {a.id}"):  # one alert's page
            plans = plan_changes_of(ctx, a)
            named = {r.machine_id: ctx.machine_views[r.machine_id] for r in plans}
            k = ctx.new_page_keys[rel] = key(a, plans, named)
            if old is not None and old.get(rel) == k:
                continue  # the live version's page, hard-linked into this one
            w.write(
                rel,
                render("alert.html", root="../", title=f"Alert {a.id}", a=a, plan_changes=plans, machines_about=named),
            )
