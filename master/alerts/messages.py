"""Alert messages as plain data, one shape per channel (golden-file tested); senders only serialise them.

`AlertSnapshot` is everything a message shows; `build(view, channel_kind, event, key)` returns a JSON-able dict:
Slack/Mattermost incoming-webhook JSON (legacy attachments, which both accept), the documented generic JSON
webhook document (`perffarm.alert/1`, see docs/alerts.md), or an email (subject, text body, headers). Every
untrusted string goes through `neutralise` for the channel it is headed to.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from master.alerts import neutralise
from master.machines import MachineView
from master.plans import PlanChange
from master.textsafe import safe_link

SCHEMA = "perffarm.alert/1"
EVENTS = ("opened", "updated")
PLAN_EVENT = "plan-change"  # a plan change no alert names (plan_slack, plan_webhook, plan_email)
SHAPE_LINES = 40  # lines of a plan shown per side in a message; the rest is counted
SHAPE_LINE_LEN = 160  # characters of one plan line (a node with its relation or index)
COLOURS = {"red": "#d0021b", "grey": "#9b9b9b", "green": "#2eb886"}


@dataclass(frozen=True)
class CommitView:
    """A commit as shown in a message (subject, author, committer and links are untrusted)."""

    sha: str
    subject: str
    author: str
    committer: str = ""  # "" when unknown (stored before schema 21) or the same as the author
    url: str | None = None  # its web page (alerts.commit_url)
    discussion: tuple[str, ...] = ()  # the message's `Discussion:` threads

    def links(self) -> tuple[str, ...]:
        """The discussion links that are still safe to show (checked again: the database may be older)."""
        return tuple(x for x in map(safe_link, self.discussion) if x)


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
    machine: str = ""  # the machine's name (workers.about), "" when it has none: the id is shown

    @property
    def shown_machine(self) -> str:
        return self.machine or self.machine_id

    @property
    def change_pct(self) -> float:
        """Signed change of the metric in percent (after/before - 1)."""
        return (self.ratio - 1.0) * 100.0


@dataclass(frozen=True)
class PlanView:
    """A plan change (master/plans.py) of one analytic query on one machine, as a message shows it. The shapes and
    so the summary are a worker's output: untrusted, escaped per channel and capped (`SHAPE_LINES`)."""

    change: PlanChange
    machine_id: str
    machine: str = ""  # the machine's name (workers.about), "" when it has none
    recipe: str = ""
    branch: str = ""

    @property
    def shown_machine(self) -> str:
        return self.machine or self.machine_id


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
    # where the backends waited, culprit against parent, where both were sampled and a share moved (master/explain:
    # "w: LWLock:WALWrite 6% → 45%, CPU 90% → 50%")
    waits: str | None = None
    reproduce: tuple[str, ...] = ()  # argv of `perffarm compare` on the change's two ends, () when none applies
    machines: tuple[MachineView, ...] = ()  # the lines' machines with their names, owners and descriptions
    # the plan changes of its series first seen at its commit or culprit (master/plans.py `named_by_alert`)
    plan_changes: tuple[PlanView, ...] = ()


@dataclass(frozen=True)
class PlanSnapshot:
    """A plan change that no alert names, as its own message (event `plan-change`) shows it."""

    id: str  # p- + 12 hex digits: stable for the (query series, commit)
    plan: PlanView
    commit: CommitView | None  # the commit the new plan is first seen at
    link: str  # the commit's page on the site, which lists its plan changes


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
        f"{esc(line.workload)} {esc(line.metric)} on {esc(line.shown_machine)}: rQPS {line.ratio:.3f}{ci} "
        f"{line.colour} ({line.change_pct:+.1f}%, {line.severity})"
    )


def reproduce_text(argv: tuple[str, ...]) -> str:
    """The reproduce command as one shell line (every word quoted as the shell needs)."""
    return " ".join(shlex.quote(a) for a in argv)


def _reproduce_lines(argv: tuple[str, ...]) -> list[str]:
    """The reproduce command for a plain-text mail: an option and its value per line, continued with
    backslashes, so it stays narrow and still pastes into a shell as it is."""
    words = [shlex.quote(a) for a in argv]
    groups: list[str] = []
    i = 0
    while i < len(words):
        takes_value = words[i].startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("-")
        groups.append(" ".join(words[i : i + 2]) if takes_value else words[i])
        i += 2 if takes_value else 1
    first = " ".join(groups[:3])  # perffarm compare --profile NAME
    rest = groups[3:]
    return [f"  {first}" + (" \\" if rest else "")] + [
        f"      {g}" + (" \\" if i < len(rest) - 1 else "") for i, g in enumerate(rest)
    ]


def _link(url: str | None, chat: bool = False) -> str | None:
    """A checked link; in chat `@` is percent-encoded (no mention can hide in it) and `&` escaped for Slack."""
    url = safe_link(url)
    if url is None or not chat:
        return url
    return url.replace("@", "%40").replace("&", "&amp;")


def _status(view: AlertSnapshot) -> str:
    return "retracted: the change points no longer hold" if not view.active else f"state: {view.state}"


def plan_headline(p: PlanView, esc=neutralise.plain, name=neutralise.ident) -> str:
    """`tpch-q09: Hash Join → Nested Loop at 1a2b3c4d5e6f` (issue #27's words; master/plans.py `headline`), with
    the workload and the summary escaped for the channel (the summary names nodes of a worker's plan)."""
    c = p.change
    return f"{name(c.workload)}: {esc(c.summary)} at {c.sha[:12]}"


def shape_lines(shape: str, esc=neutralise.inert) -> list[str]:
    """A plan shape as message lines: each node escaped for the channel with its indentation kept, at most
    SHAPE_LINES lines of SHAPE_LINE_LEN characters (a worker wrote it; the result check allows 16,000 characters)."""
    rows = [x for x in shape.splitlines() if x.strip()]
    out = []
    for x in rows[:SHAPE_LINES]:
        depth = min(len(x) - len(x.lstrip(" ")), 40)
        out.append(" " * depth + esc(x.strip(), limit=SHAPE_LINE_LEN))
    if len(rows) > SHAPE_LINES:
        out.append(f"\u2026 {len(rows) - SHAPE_LINES} more lines")
    return out


def _plan_json(p: PlanView) -> dict[str, Any]:
    c = p.change
    return {
        "workload": neutralise.ident(c.workload),
        "machine": neutralise.ident(p.machine_id),
        "machine_name": neutralise.ident(p.machine) or None,
        "sha": c.sha,
        "prev_sha": c.prev_sha,
        "summary": neutralise.inert(c.summary),
        "headline": plan_headline(p, neutralise.inert),
        "before": "\n".join(shape_lines(c.before)),
        "after": "\n".join(shape_lines(c.after)),
    }


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
        by = esc(who.author) + (f", committed by {esc(who.committer)}" if _committer(who) else "")
        body.append(f"{label} {_short(who.sha)} {esc(who.subject)} ({by})")
        if url := _link(who.url, chat=True):
            body.append(url)
        body += [f"discussion: {x}" for x in (_link(x, chat=True) for x in who.links()) if x]
    bis = _bisection(view, esc)
    if bis:
        body.append(bis)
    if view.culprit and view.counters:
        body.append(f"what the exact counters say: {esc(view.counters)}")
    if view.culprit and view.waits:
        body.append(f"where the backends waited: {esc(view.waits)}")
    body.extend(f"\u2022 {_line_text(x, neutralise.chat_ident)}" for x in view.lines)
    for p in view.plan_changes:  # the summary names nodes of a worker's plan: escaped like a commit subject
        on = neutralise.chat_ident(p.shown_machine)
        body.append(f"plan change: {plan_headline(p, neutralise.chat, neutralise.chat_ident)} on {on}")
    if event == "updated" and view.changes:
        body.append("changed: " + "; ".join(neutralise.chat_ident(c) for c in view.changes))
    if view.reproduce:
        body.append("reproduce: " + neutralise.chat_ident(reproduce_text(view.reproduce), limit=2000))
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


def _committer(c: CommitView) -> bool:
    """Whether the committer is worth a line: known, and not the author."""
    return bool(c.committer) and c.committer != c.author


def _email_commit(label: str, who: CommitView, esc: Callable[[str], str]) -> list[str]:
    """An email's block for one commit (an alert's commit or culprit, a plan change's commit), 72 columns wide."""
    lines = [f"{label + ':':<11}{who.sha}"]
    if url := safe_link(who.url):
        lines.append(f"{'':<11}{url}")
    lines += [f"Subject:   {esc(who.subject)}", f"Author:    {esc(who.author)}"]
    if _committer(who):
        lines.append(f"Committer: {esc(who.committer)}")
    return [*lines, *(f"Discussion: {x}" for x in who.links()), ""]


def _commit_json(c: CommitView | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "sha": c.sha,
        "subject": neutralise.inert(c.subject),
        "author": neutralise.inert(c.author),
        "committer": neutralise.inert(c.committer or None) or None,
        "url": safe_link(c.url),
        "discussion": list(c.links()),
    }


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
            **({"waits": esc(view.waits)} if view.waits and view.culprit else {}),
            **({"plan_changes": [_plan_json(p) for p in view.plan_changes]} if view.plan_changes else {}),
            "link": view.link,
            "reproduce": list(view.reproduce),
            "machines": [
                {"id": esc(m.id), "name": esc(m.name), "owner": esc(m.owner), "description": esc(m.description)}
                for m in view.machines
            ],
            "lines": [
                {
                    "workload": esc(x.workload),
                    "metric": esc(x.metric),
                    "unit": esc(x.unit),
                    "direction": x.direction,
                    "machine": esc(x.machine_id),
                    "machine_name": esc(x.machine) or None,
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


TABLE_WIDTH = 72  # the plain-text table fits a mail reader's (and pgsql-hackers' quoting) 72 columns
_HEAD = ("workload (metric)", "rQPS", "95% CI", "change", "severity")
_WIDTHS = (30, 6, 11, 7, 8)  # workload left-aligned, the rest right-aligned, two spaces apart: 72 in all


def _cell(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def email_table(lines: tuple[LineView, ...], machines: tuple[MachineView, ...] = ()) -> list[str]:
    """The workloads as a plain-text table, one block per machine (its name, owner and description first),
    every line at most TABLE_WIDTH columns."""
    known = {m.id: m for m in machines}

    def row(cells: tuple[str, ...]) -> str:
        first, *rest = (_cell(c, w) for c, w in zip(cells, _WIDTHS, strict=True))
        return "  ".join([first.ljust(_WIDTHS[0]), *(c.rjust(w) for c, w in zip(rest, _WIDTHS[1:], strict=True))])

    out: list[str] = []
    for machine in dict.fromkeys(x.machine_id for x in lines):
        m = known.get(machine)
        esc = neutralise.ident
        head = f"On {esc(m.name)} ({esc(machine)})" if m and m.named else f"On {esc(machine)}"
        out.append(_cell(head + (f", {esc(m.owner)}" if m and m.owner else "") + ":", TABLE_WIDTH))
        if m and m.description:
            out.append(_cell(f"  {esc(m.description)}", TABLE_WIDTH))
        out.append(row(_HEAD))
        out.append(row(tuple("-" * w for w in _WIDTHS)))
        for x in (x for x in lines if x.machine_id == machine):
            ci = "" if x.ci_low is None or x.ci_high is None else f"{_f(x.ci_low):.3f}-{_f(x.ci_high):.3f}"
            name = f"{neutralise.ident(x.workload)} ({neutralise.ident(x.metric)})"
            out.append(row((name, f"{x.ratio:.3f}", ci, f"{x.change_pct:+.1f}%", x.severity)))
        out.append("")
    return out


def email(view: AlertSnapshot, event: str, key: str, channel: str) -> dict[str, Any]:
    """A plain-text email as data: subject, body, and threading/idempotency headers (From/To added on send)."""
    esc = neutralise.inert
    who = _who(view)
    subject = f"[perffarm] {'Update: ' if event == 'updated' else ''}{_headline(view)}"
    if who:
        subject += f" - {esc(who.subject)}"
    lines = [_headline(view), ""]
    if who:
        lines += _email_commit("Culprit" if view.culprit else "Commit", who, esc)
        if view.culprit and view.counters:
            lines += [f"What the exact counters say: {esc(view.counters)}", ""]
        if view.culprit and view.waits:
            lines += [f"Where the backends waited: {esc(view.waits)}", ""]
        if view.culprit and view.explained:
            lines += [f"Where the instructions went: {esc(view.explained)}", ""]
    else:
        lines += [f"Range:     {view.prev_sha or '(start)'}..{view.sha}", f"Commits:   {view.commits or '?'}"]
        lines += [f"Bisection: {view.bisection_state or 'not started'}", ""]
    lines += email_table(view.lines, view.machines)
    if view.plan_changes:
        lines += ["Plan changes:"]
        for p in view.plan_changes:
            lines += [f"  {plan_headline(p, neutralise.inert)} on {neutralise.ident(p.shown_machine)}"]
            lines += _email_plans(p)
        lines.append("")
    if view.reproduce:
        lines += ["Reproduce it (builds both commits, measures them interleaved):"]
        lines += _reproduce_lines(view.reproduce) + [""]
    if event == "updated" and view.changes:
        lines += ["Changed since the last message: " + "; ".join(neutralise.ident(c) for c in view.changes), ""]
    lines += [
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


def _email_plans(p: PlanView, indent: str = "    ") -> list[str]:
    """The plan before and after, indented, for a plain-text mail."""
    c = p.change
    out = [f"{indent}before (at {c.prev_sha[:12]}):"]
    out += [f"{indent}  {x}" for x in shape_lines(c.before)]
    out += [f"{indent}after (at {c.sha[:12]}):"]
    out += [f"{indent}  {x}" for x in shape_lines(c.after)]
    return out


# ------------------------------------------------------------------------------------------------ plan changes


def _plan_where(p: PlanView) -> str:
    return f"on {neutralise.plain(p.branch)}, {neutralise.plain(p.recipe)} on {neutralise.plain(p.shown_machine)}"


def plan_slack(view: PlanSnapshot) -> dict[str, Any]:
    """A plan change no alert names, for Slack / Mattermost: the headline, the commit, the plans before and after."""
    p, c = view.plan, view.plan.change
    what = plan_headline(p, neutralise.chat, neutralise.chat_ident)
    headline = f"plan change {neutralise.chat_ident(_plan_where(p))}: {what}"
    body: list[str] = []
    if who := view.commit:
        by = neutralise.chat(who.author)
        if _committer(who):
            by += f", committed by {neutralise.chat(who.committer)}"
        body.append(f"commit {_short(who.sha)} {neutralise.chat(who.subject)} ({by})")
        if url := _link(who.url, chat=True):
            body.append(url)
        body += [f"discussion: {x}" for x in (_link(x, chat=True) for x in who.links()) if x]
    body.append(f"before (at {c.prev_sha[:12]}):")
    body += [f"  {x}" for x in shape_lines(c.before, neutralise.chat)]
    body.append(f"after (at {c.sha[:12]}):")
    body += [f"  {x}" for x in shape_lines(c.after, neutralise.chat)]
    return {
        "text": f":mag: {headline}",
        "attachments": [
            {
                "fallback": headline,
                "color": COLOURS["grey"],
                "title": f"perffarm plan change {view.id}",
                "title_link": view.link,
                "text": "\n".join(body),
                "footer": f"perffarm {view.id}",
                "mrkdwn_in": [],
            }
        ],
    }


def plan_webhook(view: PlanSnapshot, key: str) -> dict[str, Any]:
    """A plan change no alert names, as the generic JSON webhook document (event `plan-change`, no `alert`)."""
    p = view.plan
    return {
        "schema": SCHEMA,
        "delivery_id": key,
        "event": PLAN_EVENT,
        "changes": [],
        "plan_change": {
            "id": view.id,
            **_plan_json(p),
            "recipe": neutralise.ident(p.recipe),
            "branch": neutralise.ident(p.branch),
            "commit": _commit_json(view.commit),
            "link": view.link,
        },
    }


def plan_email(view: PlanSnapshot, key: str, channel: str) -> dict[str, Any]:
    """A plan change no alert names, as a plain-text email (subject, body, idempotency headers)."""
    esc = neutralise.inert
    p, c = view.plan, view.plan.change
    head = f"plan change {_plan_where(p)}: {plan_headline(p, esc)}"
    subject = f"[perffarm] {head}" + (f" - {esc(view.commit.subject)}" if view.commit else "")
    lines = [head, ""]
    if who := view.commit:
        lines += _email_commit("Commit", who, esc)
    else:
        lines += [f"Commit:    {c.sha}", ""]
    lines += ["The plan of the query (EXPLAIN (COSTS OFF), nodes by depth):"]
    lines += _email_plans(p, indent="  ")
    lines += ["", f"Details: {view.link}", "", f"perffarm plan change {view.id}"]
    headers = {
        "Message-ID": f"<{view.id}.{channel}@perffarm.alerts>",
        "X-Perffarm-Plan-Change": view.id,
        "X-Perffarm-Idempotency-Key": key,
    }
    return {"subject": neutralise.header(subject), "text": "\n".join(lines) + "\n", "headers": headers}
