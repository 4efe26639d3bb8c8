"""health.html: last result age per branch, unmeasured commits among the newest 100, results and failures per
worker, worker logins the master refused, results refused for the machine they named, alert channel health, hosts
flagged noisy."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from master import store
from master.publish.context import Context
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter


def view(ctx: Context) -> dict[str, Any]:
    now = ctx.now
    last = store.runs.last_result_per_branch(ctx.conn)
    missing = store.runs.untested_counts(ctx.conn)
    branches = [
        {
            "branch": b,
            "age": now - t if t else None,
            "head": head,
            "tested": tested,
            "missing": missing.get(b, 0),
            "last": t,
        }
        for b, (t, head, tested) in sorted(last.items())
    ]
    workers = [dataclasses.asdict(r) for r in store.runs.run_health(ctx.conn)]
    for wk in workers:
        wk["age"] = now - wk["last"] if wk["last"] else None
    noisy = []
    for mid in store.runs.machines(ctx.conn):
        row = store.runs.last_noisy_run(ctx.conn, mid)
        if row:
            try:
                reasons = json.loads(row.host_checks).get("noisy_reasons", [])
            except (ValueError, AttributeError):
                reasons = []
            noisy.append(
                {
                    "machine": mid,
                    "reasons": [str(r) for r in reasons] if isinstance(reasons, list) else [],
                    "last": row.ingested_at,
                }
            )
    refused = [dataclasses.asdict(r) for r in store.workers.refused_logins(ctx.conn)]
    refused_results = [dataclasses.asdict(r) for r in store.machines.refusals(ctx.conn)]
    return {
        "branches": branches,
        "workers": workers,
        "refused": refused,
        "refused_results": refused_results,
        "noisy": noisy,
        "now": now,
        "channels": ctx.channels(),
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write(
        "health.html",
        render("health.html", root="", title="Farm health", machines_about=ctx.machine_views, **view(ctx)),
    )
