"""Plan changes as events of the alert channels (issue #27 item 2: "named in an alert ... whether or not the timing
moved").

A plan change (master/plans.py) at the commit of an alert or at its culprit, of a series the alert holds, is named
in that alert's message (`sync.alert_view`). One that no alert names — a plan can change at equal cost, so no
count crosses a threshold — is an event of its own: `sync_plan_changes` records every plan change it has not
seen in `plan_changes`, one row per (query series without its metric, commit): the plan is the workload's, and
each of a query's metrics is a series with the same plan. In the same transaction it queues one message (event
`plan-change`) per channel that lists "plan-change" in `kinds`, unless that channel already has the message of an
alert naming it. The row is the memory that makes it once: a re-sync or a restarted master finds it and queues
nothing. The plans are read again only when a run stored plans or a branch moved since the last look
(`plan_change_scan`, in the same transaction): sync runs every few seconds. The message waits `settle_seconds`,
like a new alert's; an alert that names the plan change meanwhile (its change point is found after the plan was
stored) carries it instead, and the plan change's untried message on that channel is cancelled.

No Buildbot, no Twisted: the store and the pure plan code only.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from master import machines, plans, store
from master.alerts import kinds, messages
from master.alerts.config import AlertSettings
from master.store.alerts import PlanChangeRecord
from master.store.series import SeriesKey


@dataclass(frozen=True)
class PlanEvent:
    """A plan change the sync saw for the first time, and the channels it queued a message for."""

    id: str
    headline: str
    queued: tuple[str, ...]


def plan_series(key: SeriesKey) -> str:
    """A query's series without its metric (machine/recipe@version/config/workload/branch): whose plan it is."""
    return "/".join(
        str(x) for x in (key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.branch)
    )


def plan_change_id(key: SeriesKey, sha: str) -> str:
    """`p-` + 12 hex digits of sha256(plan series + commit): stable, survives a rebuilt database."""
    return "p-" + hashlib.sha256(f"{plan_series(key)}@{sha}".encode()).hexdigest()[:12]


def site_link(settings: AlertSettings, sha: str) -> str:
    """The commit's page on the site: it lists the plan changes first seen at the commit."""
    return f"{settings.site_url}commit.html?c={sha}"


def sync_plan_changes(
    conn: sqlite3.Connection,
    settings: AlertSettings,
    now: float,
    commit_view: Callable[[str], messages.CommitView | None],
) -> list[PlanEvent]:
    """Record the plan changes not seen before and queue their messages; cancel the untried ones an alert now
    carries. The caller holds the transaction (sync does, after refreshing the alerts)."""
    found: dict[str, tuple[SeriesKey, plans.PlanChange]] = {}
    state = store.alerts.plan_scan_state(conn)
    if state != store.alerts.plan_scan_seen(conn):  # reading every plan on every pass grows with the history
        seen = store.alerts.plan_change_ids(conn)
        for key, points in store.series.plan_points(conn).items():
            for change in plans.changes(key.workload, points):
                pid = plan_change_id(key, change.sha)
                if pid not in seen:
                    found.setdefault(pid, (key, change))
        store.alerts.set_plan_scan_seen(conn, state)
    events = []
    for pid, (key, change) in sorted(found.items(), key=lambda kv: (kv[1][0].branch, kv[1][1].position, kv[0])):
        store.alerts.insert_plan_change(conn, _record(pid, key, change, now))
        queued: list[str] = []
        for ch in settings.channels if settings.enabled else ():
            if not ch.wants_plan_changes or not kinds.says_plan_changes(ch.kind):
                continue
            if _carried(conn, plan_series(key), change.sha, ch.name):
                continue  # the alert's message on this channel names it
            view = messages.PlanSnapshot(
                pid, _plan_view(conn, settings, key, change), commit_view(change.sha), site_link(settings, change.sha)
            )
            msg_key = f"{pid}/{ch.name}/plan-change"
            store.alerts.enqueue(
                conn,
                alert_id=None,
                plan_change_id=pid,
                channel=ch.name,
                event=messages.PLAN_EVENT,
                message_version=1,
                key=msg_key,
                payload=kinds.build_plan_message(view, ch.kind, msg_key, ch.name),
                available_at=now + settings.settle_seconds,
                now=now,
            )
            queued.append(ch.name)
        events.append(PlanEvent(pid, change.headline, tuple(queued)))
    for m in store.alerts.untried_plan_messages(conn):
        p = store.alerts.plan_change(conn, m.plan_change_id)
        if p is not None and _carried(conn, _record_series(p), p.sha, m.channel):
            store.alerts.cancel_message(conn, m.id)
    return events


def _record(pid: str, key: SeriesKey, c: plans.PlanChange, now: float) -> PlanChangeRecord:
    return PlanChangeRecord(
        pid,
        key.machine_id,
        key.recipe,
        key.recipe_version,
        key.config_hash,
        key.workload,
        key.branch,
        c.prev_sha,
        c.sha,
        c.position,
        c.before,
        c.after,
        now,
    )


def _record_series(p: PlanChangeRecord) -> str:
    return "/".join(str(x) for x in (p.machine_id, p.recipe, p.recipe_version, p.config_hash, p.workload, p.branch))


def _carried(conn: sqlite3.Connection, series: str, sha: str, channel: str) -> bool:
    """Whether an alert that names this plan change (master/plans.py `named_by_alert`: it holds one of the query's
    series and its commit or culprit is `sha`) has a message on `channel` that is not cancelled."""
    for a in store.alerts.alerts_at(conn, sha):
        lines = store.alerts.member_lines(conn, a.id).get(a.id, [])
        if not any(plan_series(x.change_point.key) == series for x in lines):
            continue
        if any(r.state != "cancelled" for r in store.alerts.outbox_rows(conn, a.id, channel)):
            return True
    return False


def _plan_view(
    conn: sqlite3.Connection, settings: AlertSettings, key: SeriesKey, change: plans.PlanChange
) -> messages.PlanView:
    bound = store.machines.bindings(conn, [key.machine_id]).get(key.machine_id)
    m = machines.view(
        key.machine_id, bound.worker if bound else None, bound.fingerprint if bound else {}, settings.machine_about
    )
    return messages.PlanView(change, key.machine_id, m.name if m.named else "", key.recipe, key.branch)
