"""alerts.html and alerts/alert-<id>.html: the alerts (triage state, lines, range or culprit, bisection), the
channels failing delivery, and one detail page per alert (alerts.link_template points there)."""

from __future__ import annotations

from typing import Any

from master.publish.context import Context
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter


def view(ctx: Context) -> dict[str, Any]:
    return {"alerts": ctx.alerts, "failing": [c for c in ctx.channels() if c.status != "ok"]}


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write("alerts.html", render("alerts.html", root="", title="Alerts", **view(ctx)))
    for a in ctx.alerts:
        w.write(f"alerts/{a.file}.html", render("alert.html", root="../", title=f"Alert {a.id}", a=a))
