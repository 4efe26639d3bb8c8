"""Alert payloads as plain data: golden files per channel, and hostile commit text made inert everywhere."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from master.alerts import kinds, neutralise
from master.alerts.messages import AlertSnapshot, CommitView, LineView
from master.machines import MachineView
from tests.alerts_support import HOSTILE_AUTHOR, HOSTILE_SUBJECT

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "alerts"
UPDATE = os.environ.get("PERFFARM_UPDATE_GOLDEN") == "1"

SHA = "3f1c2a9b7d5e4f60718293a4b5c6d7e8f9012345"
PREV = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
REPO = "https://git.postgresql.org/git/postgresql.git"
COMMIT_URL = f"https://git.postgresql.org/pg/commitdiff/{SHA}"
# what the history sync stores from a commit message's trailers; the last two could act if shown
DISCUSSION = (
    "https://postgr.es/m/CAH2-Wz=abc+d@mail.gmail.com",
    "https://evil.example/x|click<!channel>",
    "javascript:alert(1)",
)
HOSTILE_COMMITTER = "Eve <@here> *bold* <eve@example.com>"


def commit(subject: str = HOSTILE_SUBJECT) -> CommitView:
    return CommitView(SHA, subject, HOSTILE_AUTHOR, HOSTILE_COMMITTER, COMMIT_URL, DISCUSSION)


def reproduce(workloads: str = "pgbench-ro-prepared-c2,pgbench-rw-c2") -> tuple[str, ...]:
    argv = ("perffarm", "compare", "--profile", "quick", "--repo", REPO, "--option", f"workloads={workloads}")
    return (*argv, PREV, SHA)


def line(workload: str, ratio: float, colour: str, severity: str, direction: str = "higher") -> LineView:
    return LineView(
        workload=workload,
        metric="tps",
        unit="tps",
        direction=direction,
        machine_id="m-7f3a",
        recipe="pg-quick",
        kind="regression",
        severity=severity,
        ratio=ratio,
        ci_low=ratio - 0.012,
        ci_high=ratio + 0.011,
        colour=colour,
        sha=SHA,
        prev_sha=PREV,
        machine="dandelion",
    )


DANDELION = MachineView(
    "m-7f3a", "dandelion", "Alice Example <alice@example.org>", "Xeon E-2288G, 8 cores, 64 GiB, Debian 12, gcc 12", "w1"
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
        commit=commit(),
        culprit=None,
        bisection_state=None,
        link="https://perf.example.org/alerts/a-5d41402abc4b.html",
        lines=(line("pgbench-ro-prepared-c2", 0.874, "red", "critical"), line("pgbench-rw-c2", 0.962, "red", "warn")),
        reproduce=reproduce(),
        machines=(DANDELION,),
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
    culprit=commit(),
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
        fields = [payload["subject"]] + [
            ln for ln in payload["text"].splitlines() if "FREE" in ln or "Mallory" in ln or "Eve" in ln
        ]
    joined = "\n".join(f for f in fields if "FREE" in f or "Mallory" in f or "Eve" in f)
    assert "FREE" in joined and "Mallory" in joined and "Eve" in joined, "subject, author, committer still shown"
    assert "https://evil.example" not in json.dumps(payload) and "javascript" not in json.dumps(payload)
    for f in fields:
        if "FREE" not in f and "Mallory" not in f and "Eve" not in f:
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


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_where_the_culprits_backends_waited_is_in_every_channel_and_escaped(kind: str) -> None:
    """Issue #29: an alert whose culprit moved the sampled wait events says where the backends waited; wait names
    come from a worker's result, so they are escaped like any text."""
    said = "pgbench-ro-prepared-c2: LWLock:WALWrite 5.7% → 45%, <!channel> 0% → 3%, CPU 90% → 50%"
    payload = kinds.build_message(view(**CULPRIT, waits=said), kind, "updated", "k", "c")
    text = "\n".join(_strings(payload))
    assert "WALWrite 5.7% → 45%" in text and "CPU 90% → 50%" in text  # chat text defuses the colons
    assert "<!channel>" not in text
    plain = kinds.build_message(view(**CULPRIT), kind, "updated", "k", "c")
    assert "WALWrite" not in "\n".join(_strings(plain))  # no waits: no line (golden files unchanged)
    assert "WALWrite" not in "\n".join(_strings(kinds.build_message(view(waits=said), kind, "opened", "k", "c")))


def _text(kind: str, v: AlertSnapshot) -> str:
    return "\n".join(_strings(kinds.build_message(v, kind, "opened", "k", "c")))


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_every_channel_links_the_commit_and_its_thread_and_names_the_committer(kind: str) -> None:
    """Issue #31: a PostgreSQL hacker reads the commit's git.postgresql.org page, its Discussion: thread and its
    committer in every channel; a discussion value that is not a plain https link is never shown."""
    text = _text(kind, view())
    assert COMMIT_URL in text
    thread = DISCUSSION[0].replace("@", "%40") if kind == "slack" else DISCUSSION[0]  # no mention hides in a link
    assert thread in text
    assert "Eve" in text and "https://evil.example" not in text and "javascript" not in text
    bare = _text(kind, view(commit=CommitView(SHA, "plain", "A <a@x>", "A <a@x>")))
    assert "committed by" not in bare and "Committer" not in bare  # the author committing is said once
    assert "postgr.es" not in bare and "commitdiff" not in bare


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_every_channel_carries_a_command_that_reproduces_the_finding(kind: str) -> None:
    payload = kinds.build_message(view(), kind, "opened", "k", "c")
    if kind == "webhook":
        assert payload["alert"]["reproduce"] == list(reproduce())
        return
    text = payload["text"] if kind == "email" else payload["attachments"][0]["text"]
    if kind == "slack":
        command = next(ln for ln in text.splitlines() if ln.startswith("reproduce: ")).removeprefix("reproduce: ")
    else:
        start = text.index("  perffarm compare")
        command = text[start : text.index("\n\n", start)].replace("\\\n", " ")
    assert shlex.split(command) == list(reproduce())  # pasted into a shell, it runs exactly this
    assert "reproduce" not in _text(kind, view(reproduce=())).lower()


def test_the_email_table_fits_72_columns_whatever_the_names() -> None:
    long = line("instr-point-select-prepared-with-a-very-long-name", 1.2345, "green", "warn")
    other = LineView(**{**long.__dict__, "machine_id": "m-0123456789ab" * 8, "workload": "w"})
    text = kinds.build_message(view(lines=(*view().lines, long, other)), "email", "opened", "k", "c")["text"]
    body = text.splitlines()
    start = body.index("On dandelion (m-7f3a), Alice Example \u2039alice@\u200bexample.org\u203a:")
    table = body[start : body.index("", body.index("", start) + 1)]
    assert table[1] == "  Xeon E-2288G, 8 cores, 64 GiB, Debian 12, gcc 12"  # the machine, as its operator says
    assert len(table) == 12 and table[2].split()[:4] == ["workload", "(metric)", "rQPS", "95%"]
    assert all(len(ln) <= 72 for ln in table), [ln for ln in table if len(ln) > 72]
    assert max(len(ln) for ln in table) == 72
    assert "pgbench-ro-prepared-c2 (tps)" in text and "0.874" in text and "0.862-0.885" in text and "-12.6%" in text
    assert any(ln.startswith("instr-point-select-prepared-w\u2026") for ln in table)
    body = kinds.build_message(view(), "email", "opened", "k", "c")["text"].splitlines()
    start = next(i for i, ln in enumerate(body) if ln.startswith("Reproduce"))
    command = body[start + 1 : body.index("", start)]
    assert len(command) == 5 and all(len(ln) <= 72 for ln in command)  # one option per line, as the sample shows


def test_commit_url_defaults_to_git_postgresql_org_for_postgres_git() -> None:
    from master.alerts.config import AlertConfigError, AlertSettings

    for repo in (REPO, "git://git.postgresql.org/git/postgresql.git", "https://github.com/postgres/postgres.git"):
        assert AlertSettings(repository=repo).commit_link(SHA) == COMMIT_URL
    assert AlertSettings(repository="/srv/other.git").commit_link(SHA) is None
    assert AlertSettings(repository=REPO, commit_url="none").commit_link(SHA) is None
    mine = AlertSettings(repository="/srv/other.git", commit_url="https://git.example.org/c/{sha}")
    assert mine.commit_link(SHA) == f"https://git.example.org/c/{SHA}"
    assert mine.commit_link("not-a-sha") is None
    for bad in ("http://git.example.org/c/{sha}", "https://git.example.org/c/", "https://x.org/{sha} <x>"):
        with pytest.raises(AlertConfigError, match="alerts.commit_url"):
            AlertSettings(commit_url=bad)


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_every_channel_names_the_machine_not_only_its_fingerprint(kind: str) -> None:
    """Issue #31: "on m-7f3a…" told a reader nothing; the operator's name for the machine is shown (the id stays
    next to it where there is room), and an unnamed machine still shows its id."""
    text = _text(kind, view())
    assert "dandelion" in text
    unnamed = tuple(LineView(**{**x.__dict__, "machine": ""}) for x in view().lines)
    plain = _text(kind, view(lines=unnamed, machines=()))
    assert "dandelion" not in plain and "m-7f3a" in plain


def test_the_sample_pgsql_hackers_email_matches_its_golden_file() -> None:
    """The closing note's alert email as a reader sees it (docs/alerts.md quotes it): a culprit with ordinary
    commit text, so the golden file reads as the mail does; the hostile cases above keep their own files."""
    pg = CommitView(
        SHA,
        "Speed up hash joins with many batches",
        "Alice Example <alice@example.org>",
        "Carol Committer <carol@postgresql.org>",
        COMMIT_URL,
        (DISCUSSION[0],),
    )
    v = view(**{**CULPRIT, "culprit": pg})
    mail = kinds.build_message(v, "email", "updated", f"{v.id}/email/r{v.message_version}", "pgsql-hackers")
    text = f"Subject: {mail['subject']}\n\n{mail['text']}"
    path = GOLDEN / "email-pgsql-hackers.txt"
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs (PERFFARM_UPDATE_GOLDEN=1 rewrites it)"
    wrappable = [ln for ln in mail["text"].splitlines() if "://" not in ln and not ln.startswith("Subject")]
    assert all(len(ln) <= 72 for ln in wrappable), [ln for ln in wrappable if len(ln) > 72]  # links, subject: as is
