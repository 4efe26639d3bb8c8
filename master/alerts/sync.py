"""Derive alerts from change points and queue their messages: idempotent, one transaction per call.

`sync` is what the master calls after each analysis round (and the delivery service calls it every pass, so a
missed call only delays an alert). It files new alerting change points into alerts grouped by commit range,
refreshes every alert (severity, range, still active?), and when an alert's notifiable content changed —
new, more workloads, more severe, culprit found, retracted — queues one message per interested channel. A
message nobody has tried to send is refreshed in place (so six lines arriving one by one during the settle
time still make one message); anything a receiver may have seen gets a follow-up 'updated' message, never a
second 'opened'. Triaged alerts are never notified again.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

from master import machines, plans, store
from master.alerts import grouping, kinds, lifecycle, messages, plan_events, rules
from master.alerts.config import AlertSettings
from master.alerts.ids import resolve
from master.alerts.links import check_link
from master.detect.model import Direction
from master.detect.rqps import Bands, colour
from master.store.alerts import AlertLine
from master.store.changes import StoredChangePoint


@dataclass(frozen=True)
class AlertEvent:
    """What one sync did to one alert: opened, updated (with what changed), and which channels got a message; or
    to a plan change no alert names (action plan-change, `alert_id` the plan change's `p-` id)."""

    alert_id: str
    action: str  # opened | updated | plan-change
    message_version: int
    changes: tuple[str, ...]
    queued: tuple[str, ...]  # channel names with a new or refreshed message


def sync(conn: sqlite3.Connection, settings: AlertSettings, now: float | None = None) -> list[AlertEvent]:
    """File new change points into alerts, refresh every alert, queue messages; safe to call any time."""
    now = time.time() if now is None else now
    with store.transaction(conn):
        existing = {a.id: a for a in store.alerts.alerts(conn)}
        groups = [
            grouping.OpenGroup(a.id, grouping.Range(a.branch, a.kind, a.prev_position, a.position))
            for a in existing.values()
        ]
        candidates = [(x, rules.severity(x, settings)) for x in map(_line, store.alerts.unassigned_change_points(conn))]
        alerting = {x.change_point_id: (x, sev) for x, sev in candidates if sev is not None}
        placed = grouping.assign(groups, [x for x, _ in alerting.values()])
        founders: dict[str, rules.Line] = {}
        for cp_id, alert_id in sorted(placed.items()):
            line, sev = alerting[cp_id]
            if alert_id not in existing and alert_id not in founders:
                founders[alert_id] = line
                _insert_placeholder(conn, alert_id, line, sev, now)
            store.alerts.add_line(conn, alert_id, cp_id, sev, now)
        events = []
        for alert_id, lines in store.alerts.member_lines(conn).items():
            event = _refresh(conn, settings, alert_id, _members(lines), is_new=alert_id in founders, now=now)
            if event is not None:
                events.append(event)
        # after the alerts: a plan change an alert names goes out in the alert's message, not on its own
        for p in plan_events.sync_plan_changes(conn, settings, now, lambda sha: _commit_view(conn, settings, sha)):
            events.append(AlertEvent(p.id, messages.PLAN_EVENT, 1, (p.headline,), p.queued))
        return events


def _line(cp: StoredChangePoint) -> rules.Line:
    """A stored change point as alerts see it."""
    k = cp.key
    return rules.Line(
        change_point_id=cp.id,
        series_key="/".join(
            str(x) for x in (k.machine_id, k.recipe, k.recipe_version, k.config_hash, k.workload, k.metric, k.branch)
        ),
        machine_id=k.machine_id,
        recipe=k.recipe,
        workload=k.workload,
        metric=k.metric,
        branch=k.branch,
        unit=cp.unit,
        direction=cp.direction,
        kind=cp.kind,
        first_sha=cp.first_sha,
        sha=cp.sha,
        prev_sha=cp.prev_sha,
        position=cp.position,
        prev_position=cp.prev_position,
        ratio=cp.ratio,
        ci_low=cp.ci_low,
        ci_high=cp.ci_high,
        pvalue=cp.pvalue,
        active=cp.state == "active",
    )


def _members(lines: list[AlertLine]) -> list[tuple[rules.Line, str]]:
    """An alert's lines with the severity stored for each."""
    return [(_line(x.change_point), x.severity) for x in lines]


def _insert_placeholder(conn: sqlite3.Connection, alert_id: str, line: rules.Line, sev: str, now: float) -> None:
    store.alerts.insert_alert(
        conn,
        {
            "id": alert_id,
            "branch": line.branch,
            "kind": line.kind,
            "severity": sev,
            "state": "new",
            "prev_sha": line.prev_sha,
            "sha": line.sha,
            "prev_position": line.prev_position,
            "position": line.position,
            "message_version": 0,
            "signature": "",
            "created_at": now,
            "updated_at": now,
        },
    )
    store.alerts.add_history(conn, alert_id, None, "new", "perffarm", None, now)


def _signature(line_ids: list[int], severity: str, culprit: str | None, active: bool) -> str:
    return json.dumps([sorted(line_ids), severity, culprit, active])


def _refresh(
    conn: sqlite3.Connection,
    settings: AlertSettings,
    alert_id: str,
    members: list[tuple[rules.Line, str]],
    *,
    is_new: bool,
    now: float,
) -> AlertEvent | None:
    a = store.alerts.alert(conn, alert_id)
    assert a is not None  # the alert of these members
    for line, stored in members:  # a line escalates with more data; it never silently de-escalates
        current = rules.severity(line, settings)
        if current is not None and current != stored and rules.max_severity([current, stored]) == current:
            store.alerts.set_line_severity(conn, line.change_point_id, current)
    severities = {x.change_point_id: s for x, s in members}
    for line, _ in members:
        cur = rules.severity(line, settings)
        if cur is not None:
            severities[line.change_point_id] = rules.max_severity([cur, severities[line.change_point_id]])
    active = [x for x, _ in members if x.active]
    shown = active or [x for x, _ in members]
    severity = rules.max_severity([severities[x.change_point_id] for x in shown])
    line_ids = [x.change_point_id for x, _ in members]
    signature = _signature(line_ids, severity, a.culprit_sha, bool(active))
    values: dict[str, object] = {"severity": severity, "active": 1 if active else 0}
    if active:
        # the range is its live lines' only: a retracted line's range (a drift the next pass took back) is no
        # evidence of where the change is; with no live line left, the alert keeps the range they last gave
        rng = grouping.common_range(active)
        by_pos = {x.position: x.sha for x in active} | {x.prev_position: x.prev_sha for x in active}
        values["prev_position"], values["position"] = rng.prev_position, rng.position
        values["sha"] = by_pos.get(rng.position, a.sha)
        values["prev_sha"] = by_pos.get(rng.prev_position) if rng.prev_position is not None else None
    if signature == a.signature:
        if any(values[k] != getattr(a, k) for k in values):
            store.alerts.update_alert(conn, alert_id, values)
        return None
    old = json.loads(a.signature) if a.signature else None
    message_version = a.message_version + 1
    changes = [] if old is None else _describe(old, line_ids, severity, a.culprit_sha, bool(active), members)
    history = json.loads(a.changes) + [[message_version, c] for c in changes]
    store.alerts.update_alert(
        conn,
        alert_id,
        {
            **values,
            "message_version": message_version,
            "signature": signature,
            "changes": json.dumps(history),
            "updated_at": now,
        },
    )
    queued = (
        ()
        if lifecycle.is_triaged(a.state) or not settings.enabled
        else _queue(conn, settings, alert_id, message_version, now)
    )
    return AlertEvent(alert_id, "opened" if is_new else "updated", message_version, tuple(changes), queued)


def _describe(
    old: list,
    line_ids: list[int],
    severity: str,
    culprit: str | None,
    active: bool,
    members: list[tuple[rules.Line, str]],
) -> list[str]:
    old_ids, old_sev, old_culprit, old_active = old
    out = []
    added = [x for x, _ in members if x.change_point_id not in set(old_ids)]
    if added:
        names = ", ".join(sorted({x.workload for x in added}))
        out.append(f"{len(added)} more workload{'s' if len(added) != 1 else ''}: {names}")
    if severity != old_sev:
        out.append(f"severity {old_sev} -> {severity}")
    if culprit != old_culprit and culprit:
        out.append(f"culprit found: {culprit[:10]}")
    if active != old_active:
        out.append("active again" if active else "retracted: the change no longer holds")
    return out


def _queue(
    conn: sqlite3.Connection, settings: AlertSettings, alert_id: str, message_version: int, now: float
) -> tuple[str, ...]:
    a = store.alerts.alert(conn, alert_id)
    assert a is not None  # just updated
    queued = []
    for ch in settings.channels:
        rows = store.alerts.outbox_rows(conn, alert_id, ch.name)
        maybe_seen = [r for r in rows if r.state == "sent" or r.attempts > 0 or r.lease_owner]
        fresh = next((r for r in rows if r.state == "pending" and r.attempts == 0 and r.lease_owner is None), None)
        if not a.active:
            store.alerts.cancel_unsent(conn, alert_id, ch.name)
            if not maybe_seen:
                continue
            fresh = None
        elif not ch.wants(a.kind, a.severity):
            continue
        event = fresh.event if fresh else ("updated" if maybe_seen else "opened")
        seen_rev = max((r.message_version for r in maybe_seen), default=0)
        view = alert_view(conn, settings, alert_id, since_version=seen_rev)
        key = f"{alert_id}/{ch.name}/r{message_version}"
        payload = kinds.build_message(view, ch.kind, event, key, ch.name)
        available = a.created_at + settings.settle_seconds if event == "opened" else now
        if fresh is not None and store.alerts.replace_unsent(
            conn, fresh.id, message_version=message_version, key=key, payload=payload, available_at=available
        ):
            queued.append(ch.name)
            continue
        store.alerts.enqueue(
            conn,
            alert_id=alert_id,
            channel=ch.name,
            event=event,
            message_version=message_version,
            key=key,
            payload=payload,
            available_at=available,
            now=now,
        )
        queued.append(ch.name)
    return tuple(queued)


# ------------------------------------------------------------------------------------------------ views


def _commit_view(conn: sqlite3.Connection, settings: AlertSettings, sha: str | None) -> messages.CommitView | None:
    if not sha:
        return None
    row = store.commits.commit(conn, sha)
    if row is None:
        return messages.CommitView(sha, "", "", url=settings.commit_link(sha))
    return messages.CommitView(sha, row.subject, row.author, row.committer, settings.commit_link(sha), row.discussion)


# The recipes `perffarm compare` can run: its profiles are the pg-* recipes' (recipes/pg_quick.py, ...).
_COMPARE_PROFILES = {"pg-quick": "quick", "pg-full": "full", "pg-sweeps": "sweeps"}


def reproduce_argv(
    settings: AlertSettings, before: str | None, after: str, lines: tuple[messages.LineView, ...]
) -> tuple[str, ...]:
    """`perffarm compare` on the change's two ends (the culprit and its parent, or the range's ends), measuring
    the alert's workloads of its first PostgreSQL recipe; () when there is no `before` or no such recipe."""
    recipe = next((x.recipe for x in lines if x.recipe in _COMPARE_PROFILES), None)
    if not before or recipe is None or not settings.repository:
        return ()
    workloads = ",".join(dict.fromkeys(x.workload for x in lines if x.recipe == recipe))
    return (
        "perffarm",
        "compare",
        "--profile",
        _COMPARE_PROFILES[recipe],
        "--repo",
        settings.repository,
        "--option",
        f"workloads={workloads}",
        before,
        after,
    )


def alert_view(
    conn: sqlite3.Connection, settings: AlertSettings, alert_id: str, since_version: int = 0
) -> messages.AlertSnapshot:
    """The alert as messages and the CLI show it, with the changes made after `since_version`."""
    a = store.alerts.alert(conn, alert_id)
    if a is None:
        raise KeyError(alert_id)
    member_lines = store.alerts.member_lines(conn, alert_id).get(alert_id, [])
    members = _members(member_lines)
    stored = {x.change_point_id: s for x, s in members}
    lines = [x for x, _ in members if x.active] or [x for x, _ in members]
    bands = Bands(settings.band_red, settings.band_green)
    ids = sorted({x.machine_id for x in lines})
    bound = store.machines.bindings(conn, ids)
    machine_views = {
        m: machines.view(m, b.worker if b else None, b.fingerprint if b else {}, settings.machine_about)
        for m in ids
        for b in [bound.get(m)]
    }
    views = tuple(
        messages.LineView(
            workload=x.workload,
            metric=x.metric,
            unit=x.unit,
            direction=x.direction,
            machine_id=x.machine_id,
            recipe=x.recipe,
            kind=x.kind,
            severity=stored[x.change_point_id],
            ratio=x.ratio,
            ci_low=x.ci_low,
            ci_high=x.ci_high,
            colour=colour(x.ratio, Direction.parse(x.direction), bands).value,
            sha=x.sha,
            prev_sha=x.prev_sha,
            machine=machine_views[x.machine_id].name if machine_views[x.machine_id].named else "",
        )
        for x in sorted(lines, key=lambda x: (x.workload, x.metric, x.machine_id, x.change_point_id))
    )
    commits = None if a.prev_position is None else a.position - a.prev_position
    if a.culprit_sha:  # the culprit against its parent on the branch (first parent)
        pos = store.commits.positions_on(conn, a.branch, [a.culprit_sha]).get(a.culprit_sha)
        before = store.commits.sha_at(conn, a.branch, pos - 1) if pos else None
        reproduce = reproduce_argv(settings, before, a.culprit_sha, views)
    else:
        reproduce = reproduce_argv(settings, a.prev_sha, a.sha, views)
    changes = tuple(c for rev, c in json.loads(a.changes) if rev > since_version)
    explained = counters = waited = None
    if a.culprit_sha:  # the exact counters (system calls, WAL, buffers) that changed from the culprit's parent
        from master.explain import report as counter_report

        for x, _ in members:
            found = store.bisections.of_change_point(conn, x.change_point_id)
            c = counter_report.for_bisection(conn, found[-1]) if found else None
            if c is not None and c.summary:
                counters = c.summary
                break
        for x, _ in members:  # and where the backends waited, where both commits' runs sampled it
            found = store.bisections.of_change_point(conn, x.change_point_id)
            w = counter_report.waits_for_bisection(conn, found[-1]) if found else None
            if w is not None and w.summary:
                waited = w.summary
                break
    if a.culprit_sha:  # where the instructions went, when the culprit's bisection kept callgrind profiles
        from master.profiles import report

        for x, _ in members:
            found = store.bisections.of_change_point(conn, x.change_point_id)
            e = report.for_bisection(conn, found[-1]) if found else None
            if e is not None:
                explained = f"{x.workload}: {e.summary}"
                break
    return messages.AlertSnapshot(
        id=a.id,
        message_version=a.message_version,
        kind=a.kind,
        severity=a.severity,
        state=a.state,
        active=bool(a.active),
        branch=a.branch,
        prev_sha=a.prev_sha,
        sha=a.sha,
        commits=commits,
        commit=_commit_view(conn, settings, a.sha) if commits == 1 else None,
        culprit=_commit_view(conn, settings, a.culprit_sha),
        bisection_state=a.bisection_state,
        link=settings.link_template.format(site_url=settings.site_url, alert_id=a.id),
        lines=views,
        changes=changes,
        explained=explained,
        counters=counters,
        waits=waited,
        reproduce=reproduce,
        machines=tuple(machine_views[m] for m in ids),
        plan_changes=_plan_changes(conn, a, member_lines, machine_views),
    )


def _plan_changes(
    conn: sqlite3.Connection,
    a: store.alerts.Alert,
    lines: list[AlertLine],
    machine_views: dict[str, machines.MachineView],
) -> tuple[messages.PlanView, ...]:
    """The plan changes the alert names (`plans.named_by_alert`, as its page on the site does): of its series, first
    seen at its commit or culprit; once per query and machine (each metric of a query is a series with its plan)."""
    held = {plan_events.plan_series(x.change_point.key) for x in lines}
    changes_at: dict[str, list[tuple[store.series.SeriesKey, plans.PlanChange]]] = {}
    workloads = sorted({x.change_point.key.workload for x in lines})
    for key, points in store.series.plan_points(conn, workloads).items() if workloads else ():
        for change in plans.changes(key.workload, points):
            changes_at.setdefault(change.sha, []).append((key, change))
    out: dict[str, messages.PlanView] = {}
    named = plans.named_by_alert(changes_at, (a.sha, a.culprit_sha), lambda r: plan_events.plan_series(r[0]) in held)
    for key, change in named:
        m = machine_views.get(key.machine_id)
        name = m.name if m is not None and m.named else ""
        out.setdefault(
            plan_events.plan_change_id(key, change.sha),
            messages.PlanView(change, key.machine_id, name, key.recipe, key.branch),
        )
    return tuple(out.values())


# ------------------------------------------------------------------------------------------------ state


def set_state(
    conn: sqlite3.Connection,
    alert_id: str,
    state: str,
    *,
    by: str,
    note: str | None = None,
    now: float | None = None,
    links: Sequence[str] = (),
) -> tuple[str, str]:
    """Triage by hand (ack, set-state); returns (old, new). A triaged alert's unsent messages are dropped. `links`
    (where the alert is tracked: a thread, a bug) are checked first (LinkError: nothing is changed), then kept."""
    now = time.time() if now is None else now
    wanted = lifecycle.parse_state(state)
    checked = [check_link(url) for url in links]
    with store.transaction(conn):
        aid = resolve(conn, alert_id)
        a = store.alerts.alert(conn, aid)
        assert a is not None  # resolved just now, in this transaction
        new = lifecycle.after_triage(a.state, wanted)
        if wanted == "new" and a.culprit_sha:
            new = "culprit-found"  # reopening keeps what bisection found
        store.alerts.update_alert(
            conn, aid, {"state": new, "state_changed_at": now, "state_by": by, "state_note": note}
        )
        store.alerts.add_history(conn, aid, a.state, new, by, note, now)
        for url in checked:
            store.alerts.add_link(conn, aid, url, by, now)
        if lifecycle.is_triaged(new):
            store.alerts.cancel_unsent(conn, aid)
    return a.state, new


def record_bisection(
    conn: sqlite3.Connection,
    alert_id: str,
    bisection_state: str,
    culprit_sha: str | None = None,
    *,
    by: str = "bisection",
    now: float | None = None,
) -> str:
    """Bisection's progress (issue #5): set its state and culprit; the next `sync` sends the update message."""
    now = time.time() if now is None else now
    with store.transaction(conn):
        aid = resolve(conn, alert_id)
        a = store.alerts.alert(conn, aid)
        assert a is not None  # resolved just now, in this transaction
        new = lifecycle.after_bisection(a.state, bisection_state, culprit_sha)
        store.alerts.update_alert(
            conn,
            aid,
            {
                "bisection_state": bisection_state,
                "culprit_sha": culprit_sha or a.culprit_sha,
                "state": new,
                "updated_at": now,
            },
        )
        if new != a.state:
            store.alerts.add_history(
                conn, aid, a.state, new, by, f"culprit {culprit_sha}" if culprit_sha else None, now
            )
    return new
