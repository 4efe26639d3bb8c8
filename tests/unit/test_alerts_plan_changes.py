"""Plan changes in the alert channels (issue #27 item 2): an alert names the plan changes of its queries at its
commit or culprit ("tpch-q17: Hash Join → Nested Loop at <sha>"), and a plan change no alert names is a message of
its own (event `plan-change`), once per (query series, commit), to the channels that list it in `kinds`.

Results of the pg-quick recipe carrying `plans` go through the real ingest path into a real SQLite store (as
tests/unit/test_site_plans.py does); change points are written as analysis writes them (tests/alerts_support.py).
Plan text is a worker's output: the hostile cases check it is inert and bounded in every channel.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from master import ingest, plans, store
from master.alerts import kinds, messages, neutralise
from master.alerts.config import AlertConfigError, AlertSettings, ChannelConfig
from master.alerts.delivery import deliver_once
from master.alerts.messages import PlanSnapshot, PlanView
from master.alerts.sync import alert_view, sync
from master.settings import Settings, load_settings
from master.store.connection import _statements
from master.store.migrations import MIGRATIONS
from recipes import registry
from recipes.pg.plans import shape
from tests.harness import GitRepo, make_repo
from tests.unit.test_alerts_messages import CULPRIT, PREV, SHA, check_golden, commit, view
from tests.unit.test_pg_plans import Q17, Q17_NO_HASHJOIN
from tests.unit.test_result_schema import MACHINE_ID, good
from tests.unit.test_store_ingest import put, run_ctx

QUICK = registry.get("pg-quick")
HASH, NESTLOOP = shape(Q17.splitlines()), shape(Q17_NO_HASHJOIN.splitlines())
SUMMARY = "Hash Join → Nested Loop"
# what a message shows of a shape: each node inert (a worker wrote it; `_` becomes a look-alike, as in subjects)
SHOWN_HASH, SHOWN_NESTLOOP = ("\n".join(messages.shape_lines(x)) for x in (HASH, NESTLOOP))
HOSTILE_PLAN = (
    "Hash Join\n  `evil` <!channel> @here *b* Join\n  Seq Scan on <!channel>_*bold*_@here\n  Hash\n    Seq Scan on `x`|[y](http://evil.example)\u202e\n"
    + "".join(f"    {'  ' * (i % 5)}Seq Scan on t{i}{'x' * 300}\n" for i in range(80))
)


def result(sha: str, plan: str, instructions: float = 7e6) -> dict:
    doc = good()
    doc["commit"] = {"sha": sha, "ref": "master"}
    doc["recipe"] = {"name": "pg-quick", "version": QUICK.version, "config_hash": QUICK.config_hash()}
    doc["workloads"] = [
        {
            "name": name,
            "metrics": [
                {
                    "name": "instructions",
                    "unit": "instructions/query",
                    "direction": "lower",
                    "samples": [instructions, instructions],
                },
                {"name": "tps", "unit": "tps", "direction": "higher", "samples": [10.0, 10.0]},
            ],
            "config_hash": QUICK.workload_hash(name),
        }
        for name in ("tpch-q17", "tpch-q01")
    ]
    doc["plans"] = {"tpch-q17": plan, "tpch-q01": "Sort\n  HashAggregate\n    Seq Scan on lineitem"}
    return doc


def ingest_plans(tmp_path: Path, shapes: list[str]) -> tuple[Settings, list[str]]:
    """One measured commit per shape, stored through the farm's ingest path (tpch-q17's plan is `shapes[i]`)."""
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    shas = []
    for i, plan in enumerate(shapes):
        sha = repo.bench_commit(f"c{i}", i)
        shas.append(sha)
        ingest.ingest_file(settings, put(settings, result(sha, plan), f"b-{i}.json"), run_ctx(i + 1, sha), "pg-quick")
    return settings, shas


def channels(*, plan_changes: bool = True) -> tuple[ChannelConfig, ...]:
    wanted = ("regression", "plan-change") if plan_changes else ("regression",)
    return (
        ChannelConfig("hook", "webhook", url_secret="hook-url", kinds=wanted),
        ChannelConfig("chat", "slack", url_secret="chat-url", kinds=wanted),
        ChannelConfig("mail", "email", mail_from="f@x.example", mail_to=("t@x.example",), kinds=wanted),
        ChannelConfig("alerts-only", "webhook", url_secret="other-url"),
    )


def outbox(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    return conn.execute("SELECT * FROM alert_outbox ORDER BY id").fetchall()


def change_point(conn: sqlite3.Connection, sha: str, prev_sha: str, metric: str = "instructions") -> int:
    """A regression of tpch-q17's `metric` series at `sha`, written as analysis writes it."""
    pos = {r[0]: r[1] for r in conn.execute("SELECT sha, position FROM branch_commits WHERE branch = 'master'")}
    unit, direction = ("instructions/query", "lower") if metric == "instructions" else ("tps", "higher")
    conn.execute(
        "INSERT OR IGNORE INTO series (machine_id, recipe, recipe_version, config_hash, workload, metric, branch, "
        "unit, direction) VALUES (?, 'pg-quick', ?, ?, 'tpch-q17', ?, 'master', ?, ?)",
        (MACHINE_ID, QUICK.version, QUICK.workload_hash("tpch-q17"), metric, unit, direction),
    )
    (sid,) = conn.execute("SELECT id FROM series WHERE workload = 'tpch-q17' AND metric = ?", (metric,)).fetchone()
    ratio = 1.2 if direction == "lower" else 0.8
    return conn.execute(
        "INSERT INTO change_points (series_id, first_sha, sha, prev_sha, position, prev_position, kind, ratio, "
        "ci_low, ci_high, pvalue, first_seen, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'regression', ?, ?, ?, 1e-6, 0, 0) "
        "RETURNING id",
        (sid, sha, sha, prev_sha, pos[sha], pos[prev_sha], ratio, ratio * 0.99, ratio * 1.01),
    ).fetchone()[0]


# ------------------------------------------------------------------------------------------------ messages


def plan_view(before: str = HASH, after: str = NESTLOOP) -> PlanView:
    change = plans.PlanChange("tpch-q17", 12, SHA, 11, PREV, before, after)
    return PlanView(change, "m-7f3a", "dandelion", "pg-quick", "master")


def plan_snapshot(**kw) -> PlanSnapshot:
    base = dict(
        id="p-0123456789ab",
        plan=plan_view(),
        commit=commit("Teach the planner about nested loops"),
        link=f"https://perf.example.org/commit.html?c={SHA}",
    )
    return PlanSnapshot(**{**base, **kw})


HEADLINE = f"tpch-q17: {SUMMARY} at {SHA[:12]}"


def _strings(data) -> list[str]:
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return [data] if isinstance(data, str) else []


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_an_alert_names_the_plan_change_of_its_query_in_every_channel(kind: str) -> None:
    payload = kinds.build_message(view(**CULPRIT, plan_changes=(plan_view(),)), kind, "updated", "k", "c")
    assert HEADLINE in "\n".join(_strings(payload))
    if kind == "webhook":
        [named] = payload["alert"]["plan_changes"]
        assert (named["workload"], named["sha"], named["prev_sha"], named["summary"]) == (
            "tpch-q17",
            SHA,
            PREV,
            SUMMARY,
        )
        assert (named["before"], named["after"]) == (SHOWN_HASH, SHOWN_NESTLOOP)
        assert named["machine"] == "m-7f3a" and named["machine_name"] == "dandelion"
    if kind == "email":
        assert "    before (at 0a1b2c3d4e5f):\n      Aggregate\n" in payload["text"]
    plain = kinds.build_message(view(**CULPRIT), kind, "updated", "k", "c")
    assert "plan" not in json.dumps(plain).lower()  # none: no line, no key (the golden files are unchanged)


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_a_plan_change_of_its_own_matches_its_golden_file(kind: str) -> None:
    view = plan_snapshot()
    check_golden(f"{kind}-plan-change", kinds.build_plan_message(view, kind, f"{view.id}/{kind}/plan-change", kind))


@pytest.mark.parametrize("kind", ["slack", "webhook", "email"])
def test_a_workers_plan_text_is_inert_and_bounded_in_every_channel(kind: str) -> None:
    hostile = plan_view(after=HOSTILE_PLAN)
    own = kinds.build_plan_message(plan_snapshot(plan=hostile), kind, "k", "c")
    named = kinds.build_message(view(**CULPRIT, plan_changes=(hostile,)), kind, "updated", "k", "c")
    for payload in (own, named):
        text = "\n".join(_strings(payload))
        assert "evil" in text and "Join" in text  # the summary names the worker's node, still readable
        for active in ("<!channel>", "@here", "*bold*", "`x`", "](http", "|[y]", "\u202e"):
            assert active not in text, (kind, active)
        assert len(text) < 20_000, len(text)  # the shape may be 16,000 characters; a message shows 40 lines
    text = "\n".join(_strings(own))
    assert "Seq Scan on t1" in text and "x" * messages.SHAPE_LINE_LEN not in text and "80 more lines" not in text
    nodes = len([x for x in HOSTILE_PLAN.splitlines() if x.strip()])
    assert f"{nodes - messages.SHAPE_LINES} more lines" in text
    if kind == "slack":
        assert "&amp;" not in text or "&" not in text.replace("&amp;", "")  # Slack's &-escaping
    if kind == "email":
        assert "\n" not in own["subject"]
        assert "\n" + " " * 12 + "Seq Scan on t2x" in own["text"]  # 4 + the node's 8: nodes by depth, kept


def test_shape_lines_keep_depth_and_escape_each_node() -> None:
    lines = messages.shape_lines("Hash Join\n  Seq Scan on <a>\n  Hash\n    Index Scan on *b*", neutralise.chat)
    assert lines == ["Hash Join", "  Seq Scan on \u2039a\u203a", "  Hash", "    Index Scan on \u2217b\u2217"]


def test_a_channel_may_ask_for_plan_changes_and_a_wrong_kind_names_the_choices() -> None:
    assert ChannelConfig("h", "webhook", url_secret="u", kinds=("plan-change",)).wants_plan_changes
    assert not ChannelConfig("h", "webhook", url_secret="u").wants_plan_changes  # regressions only, by default
    with pytest.raises(AlertConfigError, match=r"kinds: need a non-empty subset of .*'plan-change'.*'plans'"):
        ChannelConfig("h", "webhook", url_secret="u", kinds=("plans",))
    parsed = AlertSettings.from_mapping(
        {"channels": [{"name": "h", "kind": "slack", "url_secret": "u", "kinds": ["regression", "plan-change"]}]}
    )
    assert parsed.channels[0].wants_plan_changes


# ------------------------------------------------------------------------------------------------ sync


def test_a_plan_change_no_alert_names_is_queued_once_per_channel_that_wants_it(tmp_path: Path) -> None:
    settings, shas = ingest_plans(tmp_path, [HASH, HASH, NESTLOOP, NESTLOOP])
    alerting = AlertSettings(settle_seconds=0, channels=channels())
    conn = store.connect(settings.results_db)
    try:
        events = sync(conn, alerting, now=10)
        [event] = [e for e in events if e.action == "plan-change"]
        assert event.changes == (f"tpch-q17: {SUMMARY} at {shas[2][:12]}",)
        assert event.queued == ("hook", "chat", "mail")  # not "alerts-only": it lists regressions only
        rows = outbox(conn)
        assert {(r["channel"], r["event"], r["alert_id"], r["plan_change_id"]) for r in rows} == {
            (ch, "plan-change", None, event.alert_id) for ch in ("hook", "chat", "mail")
        }
        hook = json.loads(next(r["payload"] for r in rows if r["channel"] == "hook"))
        assert hook["event"] == "plan-change" and "alert" not in hook
        p = hook["plan_change"]
        assert (p["workload"], p["sha"], p["prev_sha"], p["summary"]) == ("tpch-q17", shas[2], shas[1], SUMMARY)
        assert (p["before"], p["after"]) == (SHOWN_HASH, SHOWN_NESTLOOP)
        assert p["link"].endswith(f"commit.html?c={shas[2]}") and p["commit"]["subject"] == "c2"
        assert sync(conn, alerting, now=20) == [] and len(outbox(conn)) == 3  # a re-sync queues nothing
    finally:
        conn.close()
    conn = store.connect(settings.results_db)  # as a restarted master does
    try:
        assert sync(conn, alerting, now=30) == [] and len(outbox(conn)) == 3
    finally:
        conn.close()


def test_plan_changes_are_remembered_even_when_no_channel_wants_them(tmp_path: Path) -> None:
    """A channel that starts listing plan-change later gets the new ones, not the history."""
    settings, shas = ingest_plans(tmp_path, [HASH, NESTLOOP])
    conn = store.connect(settings.results_db)
    try:
        [event] = sync(conn, AlertSettings(settle_seconds=0, channels=channels(plan_changes=False)), now=10)
        assert event.action == "plan-change" and event.queued == ()
        assert sync(conn, AlertSettings(settle_seconds=0, channels=channels()), now=20) == []
        assert outbox(conn) == []
    finally:
        conn.close()


def test_an_alert_at_the_plan_change_names_it_and_no_second_message_is_sent(tmp_path: Path) -> None:
    settings, shas = ingest_plans(tmp_path, [HASH, HASH, NESTLOOP, NESTLOOP])
    alerting = AlertSettings(settle_seconds=0, channels=channels())
    conn = store.connect(settings.results_db)
    try:
        change_point(conn, shas[2], shas[1])
        change_point(conn, shas[2], shas[1], metric="tps")  # two metrics of one query: the plan is named once
        events = sync(conn, alerting, now=10)
        [opened] = [e for e in events if e.action == "opened"]
        [planned] = [e for e in events if e.action == "plan-change"]
        assert planned.queued == ()  # every channel that wants it gets the alert's message, which names it
        rows = outbox(conn)
        assert {r["event"] for r in rows} == {"opened"}
        hook = json.loads(next(r["payload"] for r in rows if r["channel"] == "alerts-only"))
        [named] = hook["alert"]["plan_changes"]
        assert named["headline"] == f"tpch-q17: {SUMMARY} at {shas[2][:12]}"
        assert (named["before"], named["after"]) == (SHOWN_HASH, SHOWN_NESTLOOP)
        chat = json.loads(next(r["payload"] for r in rows if r["channel"] == "chat"))
        assert f"plan change: tpch-q17: {SUMMARY} at {shas[2][:12]}" in chat["attachments"][0]["text"]
        mail = json.loads(next(r["payload"] for r in rows if r["channel"] == "mail"))
        assert f"  tpch-q17: {SUMMARY} at {shas[2][:12]} on " in mail["text"]
        assert alert_view(conn, alerting, opened.alert_id).plan_changes[0].change.sha == shas[2]
    finally:
        conn.close()


def test_an_alert_on_another_query_or_commit_does_not_name_the_plan_change(tmp_path: Path) -> None:
    settings, shas = ingest_plans(tmp_path, [HASH, HASH, NESTLOOP, NESTLOOP])
    alerting = AlertSettings(settle_seconds=0, channels=channels())
    conn = store.connect(settings.results_db)
    try:
        change_point(conn, shas[3], shas[2])  # tpch-q17 got slower one commit after its plan changed
        events = sync(conn, alerting, now=10)
        [opened] = [e for e in events if e.action == "opened"]
        assert alert_view(conn, alerting, opened.alert_id).plan_changes == ()
        [planned] = [e for e in events if e.action == "plan-change"]
        assert planned.queued == ("hook", "chat", "mail")
    finally:
        conn.close()


def test_an_alert_found_while_the_plan_change_waits_carries_it_instead(tmp_path: Path) -> None:
    """The plan is stored with the run; its change point comes from the analysis after it. A plan change's
    message waits settle_seconds, and an alert naming it in that time cancels it on the channels it reaches."""
    settings, shas = ingest_plans(tmp_path, [HASH, HASH, NESTLOOP])
    alerting = AlertSettings(settle_seconds=300, channels=channels())
    conn = store.connect(settings.results_db)
    try:
        [planned] = sync(conn, alerting, now=10)
        assert planned.queued == ("hook", "chat", "mail")
        change_point(conn, shas[2], shas[1])
        sync(conn, alerting, now=20)
        states = {(r["channel"], r["event"]): r["state"] for r in outbox(conn)}
        assert states == {
            **{(ch, "plan-change"): "cancelled" for ch in ("hook", "chat", "mail")},
            **{(ch, "opened"): "pending" for ch in ("hook", "chat", "mail", "alerts-only")},
        }
    finally:
        conn.close()


def test_a_plan_changes_message_is_delivered_once_through_its_sender(tmp_path: Path) -> None:
    settings, shas = ingest_plans(tmp_path, [HASH, NESTLOOP])
    alerting = AlertSettings(settle_seconds=0, channels=channels()[:1])

    class Recorder:
        def __init__(self) -> None:
            self.sent: list[tuple[str, dict]] = []

        def send(self, row) -> None:
            self.sent.append((row.key, row.payload))

    recorder = Recorder()
    conn = store.connect(settings.results_db)
    try:
        [planned] = sync(conn, alerting, now=10)
        for t in (11.0, 12.0):
            deliver_once(conn, alerting, {"hook": recorder}, now=lambda t=t: t)
        [(key, payload)] = recorder.sent
        assert key == f"{planned.alert_id}/hook/plan-change" and payload["delivery_id"] == key
        assert [r["state"] for r in outbox(conn)] == ["sent"]
    finally:
        conn.close()


def test_schema_25_keeps_every_message_of_the_outbox(tmp_path: Path) -> None:
    """The outbox is copied into its new shape (alert or plan change): nothing queued or sent is lost."""
    conn = sqlite3.connect(tmp_path / "r.sqlite", isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    for version, script in enumerate(MIGRATIONS[:24], start=1):
        for statement in _statements(script):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={version}")
    conn.execute(
        "INSERT INTO alerts (id, branch, kind, severity, sha, position, signature, created_at, updated_at) "
        "VALUES ('a-1', 'master', 'regression', 'warn', 's', 1, '', 0, 0)"
    )
    for i, state in enumerate(("sent", "pending")):
        conn.execute(
            "INSERT INTO alert_outbox (alert_id, channel, event, message_version, idempotency_key, payload, state, "
            "attempts, available_at, lease_owner, created_at) VALUES ('a-1', 'hook', 'opened', ?, ?, '{}', ?, 2, 5, "
            "'h:1', 1)",
            (i + 1, f"a-1/hook/r{i + 1}", state),
        )
    before = [tuple(r) for r in conn.execute("SELECT * FROM alert_outbox ORDER BY id")]
    conn.close()
    conn = store.connect(tmp_path / "r.sqlite")
    try:
        after = [tuple(r)[:-1] for r in conn.execute("SELECT * FROM alert_outbox ORDER BY id")]
        assert after == before
        with pytest.raises(sqlite3.IntegrityError):  # a message is of an alert or of a plan change, not neither
            conn.execute(
                "INSERT INTO alert_outbox (channel, event, message_version, idempotency_key, payload, available_at, "
                "created_at) VALUES ('hook', 'plan-change', 1, 'k', '{}', 0, 0)"
            )
    finally:
        conn.close()


def test_the_plans_are_read_again_only_after_a_run_stored_plans(tmp_path: Path, monkeypatch) -> None:
    """sync runs every poll_interval; reading every plan of the history each time grew with it (1.1 s at 1,000
    commits x 22 queries: tests/benchmarks/alerts_plan_sync.py). A spy counts the reads; the real function runs."""
    settings, shas = ingest_plans(tmp_path, [HASH, HASH])
    alerting = AlertSettings(settle_seconds=0, channels=channels())
    reads: list[object] = []
    real = store.series.plan_points

    def counted(conn, workloads=None):
        reads.append(workloads)
        return real(conn, workloads)

    monkeypatch.setattr(store.series, "plan_points", counted)
    conn = store.connect(settings.results_db)
    try:
        assert sync(conn, alerting, now=10) == [] and reads == [None]
        assert sync(conn, alerting, now=20) == [] and reads == [None]  # nothing stored since: not read again
    finally:
        conn.close()
    sha = GitRepo(tmp_path / "repo").bench_commit("c2", 2)
    ingest.ingest_file(settings, put(settings, result(sha, NESTLOOP), "b-2.json"), run_ctx(3, sha), "pg-quick")
    conn = store.connect(settings.results_db)
    try:
        [event] = sync(conn, alerting, now=30)
        assert event.action == "plan-change" and reads == [None, None]
        assert event.changes == (f"tpch-q17: {SUMMARY} at {sha[:12]}",)
    finally:
        conn.close()
