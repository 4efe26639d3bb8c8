"""Alert messages as plain data, one shape per channel (golden-file tested); senders only serialise them.

`AlertSnapshot` is everything a message shows; `build(view, channel_kind, event, key)` returns a JSON-able dict:
Slack/Mattermost incoming-webhook JSON (legacy attachments, which both accept), the documented generic JSON
webhook document (`perffarm.alert/1`, see docs/alerts.md), or an email (subject, text body, headers). Every
untrusted string goes through `neutralise` for the channel it is headed to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from master.alerts import neutralise

SCHEMA = "perffarm.alert/1"
EVENTS = ("opened", "updated")
COLOURS = {"red": "#d0021b", "grey": "#9b9b9b", "green": "#2eb886"}


@dataclass(frozen=True)
class CommitView:
    """A commit as shown in a message (subject and author are untrusted)."""

    sha: str
    subject: str
    author: str


@dataclass(frozen=True)
class LineView:
    """One workload's change inside an alert."""

    workload: str
    metric: str
    unit: str
    direction: str
    machine_id: str
    recipe: str
    kind: str
    severity: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    colour: str  # red | grey | green: the rQPS band of the goodness ratio
    sha: str
    prev_sha: str | None

    @property
    def change_pct(self) -> float:
        """Signed change of the metric in percent (after/before - 1)."""
        return (self.ratio - 1.0) * 100.0


@dataclass(frozen=True)
class AlertSnapshot:
    """An alert as of one message version: what every channel's message is built from."""

    id: str
    message_version: int
    kind: str
    severity: str
    state: str
    active: bool
    branch: str
    prev_sha: str | None
    sha: str
    commits: int | None  # commits in the range; 1 = one commit named
    commit: CommitView | None  # the commit when the range is one commit
    culprit: CommitView | None
    bisection_state: str | None
    link: str
    lines: tuple[LineView, ...]
    changes: tuple[str, ...] = ()  # what changed since the last message, for 'updated'
    explained: str | None = None  # the culprit's per-function summary (master/profiles), e.g. "+1.3% ...; top: f"
    # the exact counters that changed from the culprit's parent (master/explain), e.g. "w: +1.00 openat per query ..."
    counters: str | None = None


def _f(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def _short(sha: str | None) -> str:
    return (sha or "")[:10]


def _who(view: AlertSnapshot) -> CommitView | None:
    return view.culprit or view.commit


def _headline(view: AlertSnapshot, esc=neutralise.plain) -> str:
    """Kind, severity, branch (escaped), where, how many workloads: no commit subject."""
    n = len(view.lines)
    what = f"{n} workload{'s' if n != 1 else ''}"
    if view.culprit:
        where = f"culprit {_short(view.culprit.sha)} changed {what}"
    elif view.commit:
        where = f"commit {_short(view.commit.sha)} changed {what}"
    else:
        size = f"{view.commits} commits" if view.commits else "an open range"
        where = f"{what} changed in {_short(view.prev_sha)}..{_short(view.sha)} ({size})"
    return f"{view.severity} {view.kind} on {esc(view.branch)}: {where}"


def _bisection(view: AlertSnapshot, esc=neutralise.plain) -> str | None:
    if view.culprit and view.explained:  # function names come from a worker's profile: escaped like any text
        return f"where the instructions went: {esc(view.explained)}"
    if view.culprit or view.commit:
        return None
    return f"bisection: {view.bisection_state or 'not started'}"


def _line_text(line: LineView, esc=neutralise.ident) -> str:
    ci = ""
    if line.ci_low is not None and line.ci_high is not None:
        ci = f" [{_f(line.ci_low):.3f}, {_f(line.ci_high):.3f}]"
    return (
        f"{esc(line.workload)} {esc(line.metric)} on {esc(line.machine_id)}: rQPS {line.ratio:.3f}{ci} "
        f"{line.colour} ({line.change_pct:+.1f}%, {line.severity})"
    )


def _status(view: AlertSnapshot) -> str:
    return "retracted: the change points no longer hold" if not view.active else f"state: {view.state}"


# ------------------------------------------------------------------------------------------------ chat


def slack(view: AlertSnapshot, event: str) -> dict[str, Any]:
    """Slack / Mattermost incoming-webhook JSON: a one-line `text` plus one attachment with every line."""
    esc = neutralise.chat
    prefix = "Update: " if event == "updated" else ""
    icon = ":chart_with_downwards_trend:" if view.kind == "regression" else ":chart_with_upwards_trend:"
    body: list[str] = []
    who = _who(view)
    if who:
        label = "culprit" if view.culprit else "commit"
        body.append(f"{label} {_short(who.sha)} {esc(who.subject)} ({esc(who.author)})")
    bis = _bisection(view, esc)
    if bis:
        body.append(bis)
    if view.culprit and view.counters:
        body.append(f"what the exact counters say: {esc(view.counters)}")
    body.extend(f"\u2022 {_line_text(x, neutralise.chat_ident)}" for x in view.lines)
    if event == "updated" and view.changes:
        body.append("changed: " + "; ".join(neutralise.chat_ident(c) for c in view.changes))
    body.append(_status(view))
    worst = "red" if any(x.colour == "red" for x in view.lines) else view.lines[0].colour if view.lines else "grey"
    headline = _headline(view, neutralise.chat_ident)
    return {
        "text": f"{icon} {prefix}{headline}",
        "attachments": [
            {
                "fallback": f"{prefix}{headline}",
                "color": COLOURS[worst],
                "title": f"perffarm alert {view.id}",
                "title_link": view.link,
                "text": "\n".join(body),
                "footer": f"perffarm {view.id} r{view.message_version}",
                "mrkdwn_in": [],
            }
        ],
    }


# ------------------------------------------------------------------------------------------------ webhook


def _commit_json(c: CommitView | None) -> dict[str, str] | None:
    if c is None:
        return None
    return {"sha": c.sha, "subject": neutralise.inert(c.subject), "author": neutralise.inert(c.author)}


def webhook(view: AlertSnapshot, event: str, key: str) -> dict[str, Any]:
    """The generic JSON webhook document, schema `perffarm.alert/1` (documented in docs/alerts.md)."""
    esc = neutralise.ident
    return {
        "schema": SCHEMA,
        "delivery_id": key,
        "event": event,
        "changes": [esc(c) for c in view.changes] if event == "updated" else [],  # farm-written text
        "alert": {
            "id": view.id,
            "message_version": view.message_version,  # as `alerts show --format json`, the outbox and the database
            "revision": view.message_version,  # the same, under the name receivers of perffarm.alert/1 parse
            "kind": view.kind,
            "severity": view.severity,
            "state": view.state,
            "active": view.active,
            "branch": esc(view.branch),
            "summary": _headline(view, esc),
            "range": {"prev_sha": view.prev_sha, "sha": view.sha, "commits": view.commits},
            "commit": _commit_json(view.commit),
            "culprit": _commit_json(view.culprit),
            "bisection_state": view.bisection_state,
            **({"explained": esc(view.explained)} if view.explained else {}),
            **({"counters": esc(view.counters)} if view.counters and view.culprit else {}),
            "link": view.link,
            "lines": [
                {
                    "workload": esc(x.workload),
                    "metric": esc(x.metric),
                    "unit": esc(x.unit),
                    "direction": x.direction,
                    "machine": esc(x.machine_id),
                    "recipe": esc(x.recipe),
                    "kind": x.kind,
                    "severity": x.severity,
                    "ratio": _f(x.ratio, 4),
                    "ci_low": _f(x.ci_low, 4),
                    "ci_high": _f(x.ci_high, 4),
                    "colour": x.colour,
                    "change_pct": _f(x.change_pct, 2),
                    "sha": x.sha,
                    "prev_sha": x.prev_sha,
                }
                for x in view.lines
            ],
        },
    }


# ------------------------------------------------------------------------------------------------ email


def thread_id(alert_id: str, channel: str) -> str:
    """Message-ID of an alert's first mail on a channel; updates reply to it so clients thread them."""
    return f"<{alert_id}.{channel}@perffarm.alerts>"


def email(view: AlertSnapshot, event: str, key: str, channel: str) -> dict[str, Any]:
    """A plain-text email as data: subject, body, and threading/idempotency headers (From/To added on send)."""
    esc = neutralise.inert
    who = _who(view)
    subject = f"[perffarm] {'Update: ' if event == 'updated' else ''}{_headline(view)}"
    if who:
        subject += f" - {esc(who.subject)}"
    lines = [_headline(view), ""]
    if who:
        label = "Culprit" if view.culprit else "Commit"
        lines += [f"{label}:  {who.sha}", f"Subject: {esc(who.subject)}", f"Author:  {esc(who.author)}", ""]
        if view.culprit and view.counters:
            lines += [f"What the exact counters say: {esc(view.counters)}", ""]
        if view.culprit and view.explained:
            lines += [f"Where the instructions went: {esc(view.explained)}", ""]
    else:
        lines += [f"Range:   {view.prev_sha or '(start)'}..{view.sha}", f"Commits: {view.commits or '?'}"]
        lines += [f"Bisection: {view.bisection_state or 'not started'}", ""]
    lines.append("Workloads:")
    lines += [f"  - {_line_text(x)}" for x in view.lines]
    if event == "updated" and view.changes:
        lines += ["", "Changed since the last message: " + "; ".join(neutralise.ident(c) for c in view.changes)]
    lines += [
        "",
        _status(view).capitalize(),
        f"Details: {view.link}",
        "",
        f"perffarm alert {view.id} r{view.message_version}",
    ]
    root = thread_id(view.id, channel)
    headers = {"Message-ID": root, "X-Perffarm-Alert": view.id, "X-Perffarm-Idempotency-Key": key}
    if event == "updated":
        headers.update(
            {
                "Message-ID": f"<{view.id}.{channel}.r{view.message_version}@perffarm.alerts>",
                "In-Reply-To": root,
                "References": root,
            }
        )
    return {"subject": neutralise.header(subject), "text": "\n".join(lines) + "\n", "headers": headers}
