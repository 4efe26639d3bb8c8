"""Untrusted text reaches a terminal only as visible escapes: the function, and every CLI verb on a real farm DB."""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest

from master import ingest, store
from master.cli import main
from master.settings import load_settings
from master.textsafe import visible
from tests.alerts_support import Farm as AlertsFarm
from tests.harness import make_repo
from tests.unit.test_gitmirror import hostile_commit
from tests.unit.test_store_ingest import put, result_for, run_ctx

# ESC sequences that clear the screen, set the window title, hide text; BEL; a C1 CSI; CR; bidi overrides
SUBJECT = "fix \x1b[2J\x1b]0;pwned\x07 \x9b31m \rgone \u202eevil\u202c \u2066iso\u2069 \u200fmark zw\u200bsp"
AUTHOR = "Mal\x1b[8mlory \u202e"
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\u202c", "\u2066", "\u2069", "\u200f", "\u200b")


def test_visible_shows_controls_and_bidi_as_escapes():
    assert visible(SUBJECT) == (
        "fix \\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m \\rgone \\u202eevil\\u202c \\u2066iso\\u2069 \\u200fmark zw\\u200bsp"
    ).replace("\\rgone", "\\x0dgone")
    assert visible("tab\there\nnew\x7fdel\x00nul\ud800") == "tab\\x09here\\x0anew\\x7fdel\\x00nul\\ud800"
    assert visible("\U000e0041tag") == "\\U000e0041tag"
    for ok in ("plain ASCII", "caf\u00e9 na\u00efve \u65e5\u672c \U0001f600", "a\\x1b literal backslash", ""):
        assert visible(ok) == ok
    assert visible(None) == "" and visible(42) == "42"


def test_every_control_format_and_separator_character_is_escaped():
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            assert visible(ch) != ch and visible(ch).isascii() and visible(ch).isprintable(), hex(cp)


def assert_inert(text: str) -> None:
    for ch in RAW:
        assert ch not in text, f"raw {ch!r} reached the terminal: {text!r}"


@pytest.fixture
def farm(tmp_path, monkeypatch):
    """A real repo with a hostile commit, measured and stored through ingest; settings in the environment."""
    repo = make_repo(tmp_path / "repo")
    base = repo.head()
    evil = hostile_commit(repo, SUBJECT, author=AUTHOR)
    for k in [k for k in list(__import__("os").environ) if k.startswith("PERFFARM_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", str(repo.path))
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", "9")  # nothing listens: status says the master is not running
    settings = load_settings()
    settings.incoming_dir.mkdir(parents=True)
    for i, sha in enumerate((base, evil), start=1):
        ingest.ingest_file(settings, put(settings, result_for(sha), f"b-{i}.json"), run_ctx(i, sha), "fixture")
    return settings, base, evil


def test_results_list_and_status_show_escapes(farm, capsys):
    assert main(["results", "list"]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert "fix \\x1b[2J\\x1b]0;pwned\\x07" in out
    assert main(["status"]) == 1  # the master is not running: status exits 1 (a gate)
    out = capsys.readouterr().out
    assert_inert(out)
    assert "\\x1b[2J" in out
    assert main(["results", "list", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert "\x1b[2J" in json.loads(out)[0]["subject"]  # JSON keeps the text as stored, escaped by the encoder


def test_bisect_status_shows_the_culprits_subject_and_author_as_escapes(farm, capsys):
    settings, base, evil = farm
    from master.bisection import state

    conn = store.connect(settings.results_db)
    with store.transaction(conn):
        bid = state.create(conn, good=base, bad=evil, workload="loop")
        conn.execute(
            "UPDATE bisections SET state = 'culprit', culprit = ?, parent = ?, ratio = 0.9, ci_low = 0.88, "
            "ci_high = 0.92, reason = ? WHERE id = ?",
            (evil, base, "slower \x1b[5mblink", bid),
        )
    assert main(["bisect", "--status", str(bid)]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert "\\u202eevil" in out and "Mal\\x1b[8mlory" in out and "slower \\x1b[5mblink" in out
    assert main(["bisect", "--list"]) == 0
    assert_inert(capsys.readouterr().out)


def test_alerts_show_escapes_triage_notes_and_names(tmp_path, capsys):
    from master.alerts.config import AlertSettings, ChannelConfig
    from master.alerts.sync import sync

    farm = AlertsFarm(tmp_path / "results.sqlite", branch="REL_\u202e1_STABLE")
    farm.set_subject(10, SUBJECT, AUTHOR)
    farm.change_point(farm.series("ro"), 10, 0.9)
    (e,) = sync(farm.conn, AlertSettings(channels=(ChannelConfig("hook", "webhook", url_secret="u"),)), now=1)
    db = ["--db", str(farm.path)]
    assert main(["alerts", "ack", e.alert_id, "--by", "ev\x1b[8mil", "--note", "\x1b]0;title\x07 \u202edone", *db]) == 0
    assert main(["alerts", "show", e.alert_id, *db]) == 0
    assert main(["alerts", "list", "--all", *db]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert "ev\\x1b[8mil" in out and "\\x1b]0;title\\x07 \\u202edone" in out and "REL_\\u202e1_STABLE" in out


def test_the_site_shows_controls_and_bidi_as_escapes(farm, tmp_path):
    from master.publish import publish_all

    settings, base, evil = farm
    failed = result_for(evil)
    failed.update(
        status="build-failed", workloads=[], log_excerpt="cc: error \x1b[31mred\x1b[0m\n\u202eevil\u202c\tend"
    )
    ctx = store.RunContext(
        builder="fixture@local", worker="local", source="force", build_id=3, got_revision=evil, ref="REL_\u202e1"
    )
    ingest.ingest_file(settings, put(settings, failed, "b-3.json"), ctx, "fixture")
    out = tmp_path / "site"
    publish_all(settings, out, now=1_800_000_000.0, jobs=1)
    texts = {
        p.relative_to(out).as_posix(): p.read_text(encoding="utf-8")
        for p in out.rglob("*")
        if p.is_file() and p.suffix in (".html", ".js", ".json", ".atom")
    }
    assert any(k.startswith("data/commits/") for k in texts)
    for name, text in texts.items():
        for ch in RAW:
            assert ch not in text, f"{name}: raw {ch!r}"
        if name.endswith(".json"):
            assert "\\u202e" not in text.lower().replace("\\\\u202e", ""), name  # not even as a JSON escape
    joined = "".join(texts.values())
    # shown, visibly: in the JS data the backslash of the visible escape is itself JSON-escaped
    assert "\\\\u202eevil\\\\u202c" in joined and "Mal\\\\x1b[8mlory" in joined
    assert "\\\\x1b[31mred" in joined and "REL_\\\\u202e1" in joined


def test_templates_show_controls_and_bidi_as_escapes():
    from master.publish.render import render
    from master.publish.source import MachineViews

    page = render(
        "health.html",
        root="",
        title=SUBJECT,
        machines_about=MachineViews(),
        now=0,
        branches=[],
        workers=[],
        channels=[],
        refused=[
            {
                "name": "w\u202e9",
                "reason": "unknown-worker",
                "address": "",
                "attempts": 1,
                "first_seen": 0,
                "last_seen": 0,
            }
        ],
        refused_results=[
            {
                "machine_id": "m\u202e2",
                "worker": "w\x1b[2J3",
                "bound_worker": "local",
                "reason": "$.machine.id: claimed \u202e",
                "attempts": 2,
                "first_seen": 0,
                "last_seen": 0,
            }
        ],
        noisy=[{"machine": "m\u202e1", "last": 0, "reasons": ["load \x1b[5m high", "two\nlines"]}],
    )
    assert_inert(page)
    # a result's claim, as a worker sent it
    assert "<td>w\\x1b[2J3</td>" in page and '<td><span class="machine">m\\u202e2</span></td>' in page
    assert "fix \\x1b[2J" in page and "m\\u202e1" in page and "load \\x1b[5m high" in page
    assert "<td>w\\u202e9</td>" in page  # a refused worker's name, as a stranger sent it
    assert "two\nlines" in page  # newlines stay: harmless in HTML
    assert '<b><span class="machine">m\\u202e1</span></b>' in page  # the template's own markup is untouched
