"""Alert payloads as plain data: golden files per channel, and hostile commit text made inert everywhere."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from master.alerts import kinds, neutralise
from master.alerts.messages import AlertSnapshot, CommitView, LineView
from tests.alerts_support import HOSTILE_AUTHOR, HOSTILE_SUBJECT

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "alerts"
UPDATE = os.environ.get("PERFFARM_UPDATE_GOLDEN") == "1"

SHA = "3f1c2a9b7d5e4f60718293a4b5c6d7e8f9012345"
PREV = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"


def line(workload: str, ratio: float, colour: str, severity: str, direction: str = "higher") -> LineView:
    return LineView(
        workload=workload,
        metric="tps",
        unit="tps",
        direction=direction,
        machine_id="m-7f3a",
        recipe="pg_quick",
        kind="regression",
        severity=severity,
        ratio=ratio,
        ci_low=ratio - 0.012,
        ci_high=ratio + 0.011,
        colour=colour,
        sha=SHA,
        prev_sha=PREV,
    )


def view(**kw) -> AlertSnapshot:
    base = dict(
        id="a-5d41402abc4b",
        message_version=1,
        kind="regression",
        severity="critical",
        state="new",
        active=True,
        branch="master",
        prev_sha=PREV,
        sha=SHA,
        commits=1,
        commit=CommitView(SHA, HOSTILE_SUBJECT, HOSTILE_AUTHOR),
        culprit=None,
        bisection_state=None,
        link="https://perf.example.org/alerts/a-5d41402abc4b.html",
        lines=(line("pgbench-ro-prepared-c2", 0.874, "red", "critical"), line("pgbench-rw-c2", 0.962, "red", "warn")),
    )
    base.update(kw)
    return AlertSnapshot(**base)


RANGE = dict(commits=7, commit=None, bisection_state="running", state="bisecting")
CULPRIT = dict(
    message_version=3,
    state="culprit-found",
    commits=7,
    commit=None,
    bisection_state="culprit",
    culprit=CommitView(SHA, HOSTILE_SUBJECT, HOSTILE_AUTHOR),
    changes=("culprit found: 3f1c2a9b7d",),
)
CASES = {"opened": ("opened", {}), "range": ("opened", RANGE), "culprit": ("updated", CULPRIT)}


def check_golden(name: str, data: dict) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with PERFFARM_UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name} differs from {path} (PERFFARM_UPDATE_GOLDEN=1 rewrites it)"


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_payload_matches_golden(kind: str, case: str) -> None:
    event, changes = CASES[case]
    v = view(**changes)
    check_golden(f"{kind}-{case}", kinds.build_message(v, kind, event, f"{v.id}/{kind}/r{v.message_version}", kind))


ACTIVE = [
    re.compile(r"<!?[a-z@#]"),  # Slack control sequences and HTML tags
    re.compile(r"@(here|channel|everyone|all)\b"),  # mentions in Slack, Mattermost, Teams
    re.compile(r"\[[^\]]*\]\("),  # markdown links
    re.compile(r"\*[^*\s][^*]*\*"),  # bold
    re.compile(r"`"),  # code
    re.compile(r"[\r\n\u202e]"),  # line breaks (header injection), bidi override
]


def _strings(data) -> list[str]:
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return [data] if isinstance(data, str) else []


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_hostile_subject_is_inert_in_every_channel(kind: str) -> None:
    v = view(**CULPRIT)
    payload = kinds.build_message(v, kind, "updated", "k", "c")
    fields = _strings(payload)
    if kind == "email":  # the body is plain text: only untrusted fragments matter; the subject header is one line
        fields = [payload["subject"]] + [ln for ln in payload["text"].splitlines() if "FREE" in ln or "Mallory" in ln]
    joined = "\n".join(f for f in fields if "FREE" in f or "Mallory" in f)
    assert "FREE" in joined and "Mallory" in joined, "the subject and author must still be shown"
    for f in fields:
        if "FREE" not in f and "Mallory" not in f:
            continue
        for pattern in ACTIVE:
            assert not pattern.search(f.replace("\n", " ") if kind != "email" else f), (kind, pattern.pattern, f)
    assert "Bcc: victim" not in payload.get("subject", "") or "\n" not in payload.get("subject", "")


def test_neutralise_keeps_words_and_bounds_length() -> None:
    text = neutralise.plain("Fix <b>bug</b> for @alice\tin\x00 parser\u202e" + "x" * 500)
    assert text.startswith("Fix \u2039b\u203abug\u2039/b\u203a for @\u200balice in parser")
    assert len(text) == neutralise.MAX_LEN and text.endswith("\u2026")
    assert neutralise.chat("A & B <!here>") == "A &amp; B \u2039\uff01here\u203a"
    assert neutralise.plain(None) == ""
    for f in (neutralise.plain, neutralise.inert):  # applying twice changes nothing
        once = f(HOSTILE_SUBJECT)
        assert f(once) == once


def test_unknown_channel_kind_or_event_is_an_error() -> None:
    with pytest.raises(ValueError, match="channel kind"):
        kinds.build_message(view(), "pager", "opened", "k", "c")
    with pytest.raises(ValueError, match="event"):
        kinds.build_message(view(), "slack", "closed", "k", "c")


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_the_culprits_explanation_is_in_every_channel_and_its_function_names_are_inert(kind: str) -> None:
    """Issue #16: an alert whose culprit has a per-function diff says where the instructions went; the function
    names come from a worker's profile, so they are escaped like a commit subject."""
    explained = "instr-point-select: +1.3% instructions/query; top: standard_ExecutorRun +736/query self <!channel>"
    payload = kinds.build_message(view(**CULPRIT, explained=explained), kind, "updated", "k", "c")
    text = "\n".join(_strings(payload))
    assert "ExecutorRun +736/query self" in text and "+1.3% instructions/query" in text
    assert "<!channel>" not in text
    plain = kinds.build_message(view(**CULPRIT), kind, "updated", "k", "c")
    assert "instructions/query" not in "\n".join(_strings(plain))  # no profile: no line (golden files unchanged)


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_the_culprits_counters_are_in_every_channel_and_escaped(kind: str) -> None:
    """Issue #29: an alert whose culprit changed exact counters says which, with their size; the names come from a
    worker's result (a system call's name), so they are escaped like any text."""
    said = "instr-point-select: +1.00 close per query (+24.4% of system calls), +1.00 <!channel> per query"
    payload = kinds.build_message(view(**CULPRIT, counters=said), kind, "updated", "k", "c")
    text = "\n".join(_strings(payload))
    assert "+1.00 close per query (+24.4% of system calls)" in text
    assert "<!channel>" not in text
    plain = kinds.build_message(view(**CULPRIT), kind, "updated", "k", "c")
    assert "per query" not in "\n".join(_strings(plain))  # no counters: no line (golden files unchanged)
