"""alerts.atom, the Atom feed of alerts: stable entry ids (the alert's id never changes), newest first."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from master.publish.context import Context
from master.publish.render import render
from master.publish.views import AlertPage, Summary
from master.publish.writer import SiteWriter


def iso(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts or 0, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry_id(alert: AlertPage) -> str:
    """A stable, globally unique id: the same alert keeps it across publishes and state changes."""
    return f"urn:perffarm:alert:{alert.file}"


def view(alerts: Sequence[AlertPage]) -> dict[str, Any]:
    entries = sorted(alerts, key=lambda a: (a.updated or 0, a.id), reverse=True)[:200]
    updated = max((a.updated or 0 for a in entries), default=0) or 0
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
        ],
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write("alerts.atom", render("alerts.atom", **view(ctx.alerts)))
