"""Deriving alerts from change points: grouping, identity, coalescing, updates, triage silence, retraction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from master.alerts.config import AlertSettings, ChannelConfig
from master.alerts.ids import AlertNotFound
from master.alerts.lifecycle import LifecycleError
from master.alerts.sync import alert_view, record_bisection, set_state, sync
from master.store import alerts as adb
from master.store.alerts import alert_for_change_point
from tests.alerts_support import Farm

CHANNELS = (
    ChannelConfig("chat", "slack", url_secret="alerts-slack-url"),
    ChannelConfig("hook", "webhook", url_secret="alerts-hook-url", kinds=("regression", "improvement")),
    ChannelConfig("pager", "webhook", url_secret="alerts-pager-url", min_severity="critical"),
)
SETTINGS = AlertSettings(settle_seconds=60, channels=CHANNELS)


@pytest.fixture
def farm(tmp_path: Path) -> Farm:
    return Farm(tmp_path / "results.sqlite")


def rows(farm: Farm, channel: str | None = None) -> list[dict]:
    return [dict(r) for r in farm.outbox() if channel is None or r["channel"] == channel]


def test_one_commit_changing_three_workloads_is_one_alert_with_three_lines(farm: Farm) -> None:
    for w in ("ro", "rw", "insert"):
        farm.change_point(farm.series(w), 10, 0.94)
    farm.change_point(farm.series("ro", machine="m-2"), 10, 0.95)
    events = sync(farm.conn, SETTINGS, now=100)
    assert [(e.action, e.message_version) for e in events] == [("opened", 1)]
    assert set(events[0].queued) == {"chat", "hook"}  # warn: not for the critical-only pager
    view = alert_view(farm.conn, SETTINGS, events[0].alert_id)
    assert len(view.lines) == 4 and view.commits == 1 and view.commit.sha == farm.shas[10]
    assert [r["available_at"] for r in rows(farm)] == [160, 160]  # settle time from creation
    assert sync(farm.conn, SETTINGS, now=101) == []  # idempotent
    assert len(rows(farm)) == 2


def test_below_threshold_or_not_significant_makes_no_alert(farm: Farm) -> None:
    farm.change_point(farm.series("a"), 10, 0.985)
    farm.change_point(farm.series("b"), 20, 0.90, pvalue=0.2)
    farm.change_point(farm.series("c"), 30, 0.90, ci=(0.8, 1.02))
    assert sync(farm.conn, SETTINGS, now=1) == []
    assert farm.conn.execute("SELECT COUNT(*) FROM alerts").fetchone()[0] == 0


def test_lines_arriving_during_settle_refresh_the_unsent_message(farm: Farm) -> None:
    farm.change_point(farm.series("ro"), 10, 0.94)
    (e,) = sync(farm.conn, SETTINGS, now=100)
    farm.change_point(farm.series("rw"), 10, 0.93)
    (u,) = sync(farm.conn, SETTINGS, now=120)
    assert (u.alert_id, u.action, u.message_version) == (e.alert_id, "updated", 2)
    chat = rows(farm, "chat")
    assert len(chat) == 1 and chat[0]["event"] == "opened" and chat[0]["message_version"] == 2
    assert chat[0]["available_at"] == 160 and chat[0]["idempotency_key"] == f"{e.alert_id}/chat/r2"
    assert "2 workloads" in json.loads(chat[0]["payload"])["text"]


def test_a_line_after_sending_gives_an_update_not_a_second_alert(farm: Farm) -> None:
    farm.change_point(farm.series("ro"), 10, 0.94)
    (e,) = sync(farm.conn, SETTINGS, now=100)
    for r in rows(farm):
        adb.mark_sent(farm.conn, r["id"], 200)
    farm.change_point(farm.series("rw"), 10, 0.80)  # critical now
    (u,) = sync(farm.conn, SETTINGS, now=300)
    assert u.changes == ("1 more workload: rw", "severity warn -> critical")
    assert [(r["event"], r["state"]) for r in rows(farm, "chat")] == [("opened", "sent"), ("updated", "pending")]
    assert [r["event"] for r in rows(farm, "pager")] == ["opened"]  # first message there: it just got critical
    assert rows(farm, "chat")[1]["available_at"] == 300


def test_a_moved_change_point_keeps_its_alert(farm: Farm) -> None:
    sid = farm.series("ro")
    farm.change_point(sid, 10, 0.94)
    (e,) = sync(farm.conn, SETTINGS, now=100)
    farm.change_point(sid, 11, 0.93, first=10, prev=10)  # more data moved it by one commit
    assert sync(farm.conn, SETTINGS, now=200) == []
    a = adb.alert(farm.conn, e.alert_id)
    assert a is not None and (a.position, a.sha) == (11, farm.shas[11])
    assert farm.conn.execute("SELECT COUNT(*) FROM alerts").fetchone()[0] == 1


def test_triaged_alerts_are_never_notified_again(farm: Farm) -> None:
    farm.change_point(farm.series("ro"), 10, 0.94)
    (e,) = sync(farm.conn, SETTINGS, now=100)
    assert set_state(farm.conn, e.alert_id[:6], "ack", by="alice", note="looking", now=110) == ("new", "acknowledged")
    assert {r["state"] for r in rows(farm)} == {"cancelled"}  # acked before it went out: nothing goes out
    farm.change_point(farm.series("rw"), 10, 0.80)
    record_bisection(farm.conn, e.alert_id, "culprit", farm.shas[10], now=120)
    (u,) = sync(farm.conn, SETTINGS, now=130)
    assert u.queued == () and u.message_version == 2
    assert {r["state"] for r in rows(farm)} == {"cancelled"}
    assert adb.alert(farm.conn, e.alert_id).state == "acknowledged"
    hist = [(h.old_state, h.new_state, h.by) for h in adb.history(farm.conn, e.alert_id)]
    assert hist == [(None, "new", "perffarm"), ("new", "acknowledged", "alice")]


def test_culprit_found_updates_the_sent_alert(farm: Farm) -> None:
    sid = farm.series("ro")
    cp = farm.change_point(sid, 15, 0.90, prev=8)  # a range of 7 untested commits
    (e,) = sync(farm.conn, SETTINGS, now=100)
    assert alert_for_change_point(farm.conn, cp) == e.alert_id
    for r in rows(farm):
        adb.mark_sent(farm.conn, r["id"], 200)
    assert record_bisection(farm.conn, e.alert_id, "running", now=210) == "bisecting"
    assert sync(farm.conn, SETTINGS, now=220) == []  # bisecting alone is not worth a message
    assert record_bisection(farm.conn, e.alert_id, "culprit", farm.shas[12], now=230) == "culprit-found"
    (u,) = sync(farm.conn, SETTINGS, now=240)
    assert u.changes == (f"culprit found: {farm.shas[12][:10]}",)
    upd = [r for r in rows(farm, "hook") if r["event"] == "updated"]
    body = json.loads(upd[0]["payload"])
    assert body["alert"]["culprit"]["sha"] == farm.shas[12] and body["alert"]["state"] == "culprit-found"
    assert body["alert"]["id"] == e.alert_id and body["changes"] == [f"culprit found: {farm.shas[12][:10]}"]


def test_improvements_are_a_separate_quieter_kind(farm: Farm) -> None:
    farm.change_point(farm.series("ro"), 10, 1.20)
    farm.change_point(farm.series("rw"), 10, 0.80)
    events = sync(farm.conn, SETTINGS, now=100)
    kinds = {adb.alert(farm.conn, e.alert_id).kind: e.queued for e in events}
    assert kinds == {"improvement": ("hook",), "regression": ("chat", "hook", "pager")}


def test_retraction_cancels_unsent_and_follows_up_on_sent(farm: Farm) -> None:
    a_cp = farm.change_point(farm.series("a"), 10, 0.9)
    b_cp = farm.change_point(farm.series("b"), 30, 0.9)
    ea, eb = sync(farm.conn, SETTINGS, now=100)
    for r in rows(farm):
        if r["alert_id"] == ea.alert_id:
            adb.mark_sent(farm.conn, r["id"], 200)
    farm.retract(a_cp)
    farm.retract(b_cp)
    sync(farm.conn, SETTINGS, now=300)
    a_rows = [(r["event"], r["state"]) for r in rows(farm) if r["alert_id"] == ea.alert_id and r["channel"] == "chat"]
    assert a_rows == [("opened", "sent"), ("updated", "pending")]
    assert {r["state"] for r in rows(farm) if r["alert_id"] == eb.alert_id} == {"cancelled"}
    assert "retracted" in json.loads(rows(farm, "chat")[-1]["payload"])["attachments"][0]["text"]


def test_cli_style_errors(farm: Farm) -> None:
    farm.change_point(farm.series("ro"), 10, 0.94)
    (e,) = sync(farm.conn, SETTINGS, now=100)
    with pytest.raises(AlertNotFound):
        set_state(farm.conn, "a-zzz", "fixed", by="x")
    with pytest.raises(LifecycleError):
        set_state(farm.conn, e.alert_id, "bisecting", by="x")


def test_disabled_alerts_are_derived_but_not_sent(farm: Farm) -> None:
    farm.change_point(farm.series("ro"), 10, 0.9)
    (e,) = sync(farm.conn, AlertSettings(enabled=False, channels=CHANNELS), now=1)
    assert e.queued == () and rows(farm) == []


def _range(farm: Farm, alert_id: str) -> tuple[int | None, int, str | None, str]:
    a = adb.alert(farm.conn, alert_id)
    assert a is not None
    return a.prev_position, a.position, a.prev_sha, a.sha


def test_an_alerts_range_is_that_of_its_live_lines_never_a_retracted_ones(farm: Farm) -> None:
    # issue #28: an rQPS line over the push (8, 24] and a line of a drifting series over (16, 20], which a later
    # pass retracts; the culprit, 12, is in the first line's range only
    rqps = farm.change_point(farm.series("ro", metric="tps.rqps"), 24, 0.87, prev=8)
    drift = farm.change_point(farm.series("ro", metric="latency_p99", direction="lower"), 20, 1.4, prev=16)
    (e,) = sync(farm.conn, SETTINGS, now=100)
    assert _range(farm, e.alert_id)[:2] == (16, 20)  # both live: the commits they share
    farm.retract(drift)
    sync(farm.conn, SETTINGS, now=200)
    assert _range(farm, e.alert_id) == (8, 24, farm.shas[8], farm.shas[24])
    view = alert_view(farm.conn, SETTINGS, e.alert_id)
    assert view.commits == 16 and [x.metric for x in view.lines] == ["tps.rqps"]
    # every line retracted: the alert keeps the range its live lines last gave, never a retracted line's
    farm.retract(rqps)
    farm.change_point(farm.series("ro", metric="latency_p99", direction="lower"), 20, 1.4, prev=18, first=20)
    farm.retract(drift)
    sync(farm.conn, SETTINGS, now=300)
    assert _range(farm, e.alert_id) == (8, 24, farm.shas[8], farm.shas[24])


def test_an_alerts_range_holds_every_live_lines_change_when_they_no_longer_overlap(farm: Farm) -> None:
    a = farm.change_point(farm.series("ro", metric="tps.rqps"), 24, 0.87, prev=8)
    b = farm.change_point(farm.series("rw", metric="tps.rqps"), 22, 0.88, prev=10)
    (e,) = sync(farm.conn, SETTINGS, now=100)
    assert _range(farm, e.alert_id)[:2] == (10, 22)
    # more data moves both: ro's to (8, 12], rw's to (14, 22]; they share no commit now
    farm.change_point(farm.series("ro", metric="tps.rqps"), 12, 0.87, prev=8, first=24)
    farm.change_point(farm.series("rw", metric="tps.rqps"), 22, 0.88, prev=14, first=22)
    sync(farm.conn, SETTINGS, now=200)
    low, high, _, _ = _range(farm, e.alert_id)
    for line_low, line_high in ((8, 12), (14, 22)):
        assert low <= line_low and line_high <= high  # neither line's change is outside the alert's range
    assert (a, b) and (low, high) == (8, 22)


def test_the_view_links_the_culprit_names_its_committer_and_reproduces_it_against_its_parent(farm: Farm) -> None:
    """Issue #31: what the history sync stored of the culprit (committer, Discussion: links) reaches the message,
    with git.postgresql.org's commit page for a postgres.git repository and `perffarm compare` on the culprit
    and its first parent, not on the alert's whole range."""
    farm.change_point(farm.series("pgbench-ro"), 14, 0.90, prev=9)
    farm.conn.execute("UPDATE series SET recipe = 'pg-quick'")
    culprit, parent = farm.shas[12], farm.shas[11]
    farm.conn.execute(
        "UPDATE commits SET committer = 'Carol <carol@postgresql.org>', discussion = ? WHERE sha = ?",
        ("https://postgr.es/m/abc@example.org", culprit),
    )
    settings = AlertSettings(repository="https://git.postgresql.org/git/postgresql.git")
    (e,) = sync(farm.conn, settings, now=100)
    before = alert_view(farm.conn, settings, e.alert_id)
    assert before.culprit is None and before.reproduce[-2:] == (farm.shas[9], farm.shas[14])  # the range's ends
    record_bisection(farm.conn, e.alert_id, "culprit", culprit, now=120)
    view = alert_view(farm.conn, settings, e.alert_id)
    assert view.culprit is not None
    assert view.culprit.committer == "Carol <carol@postgresql.org>"
    assert view.culprit.discussion == ("https://postgr.es/m/abc@example.org",)
    assert view.culprit.url == f"https://git.postgresql.org/pg/commitdiff/{culprit}"
    assert view.reproduce == (
        "perffarm",
        "compare",
        "--profile",
        "quick",
        "--repo",
        "https://git.postgresql.org/git/postgresql.git",
        "--option",
        "workloads=pgbench-ro",
        parent,
        culprit,
    )
    other = AlertSettings(repository="/srv/mine.git")
    assert alert_view(farm.conn, other, e.alert_id).culprit.url is None  # type: ignore[union-attr]
    farm.conn.execute("UPDATE series SET recipe = 'fixture'")
    assert alert_view(farm.conn, settings, e.alert_id).reproduce == ()  # compare measures PostgreSQL only


def test_lines_name_their_machine_from_workers_about_and_describe_it_from_its_fingerprint(farm: Farm) -> None:
    """Issue #31: a machine is read by its operator's name for the worker that reported it; without a
    description, its fingerprint (CPU, cores, memory, OS, compiler) describes it."""
    fp = {"cpu_model": "Xeon E-2288G", "cores": 8, "memory_bytes": 64 * 2**30, "os": "Debian 12", "compiler": "gcc 12"}
    farm.conn.execute("UPDATE machines SET worker = 'w1', fingerprint = ? WHERE id = 'm-1'", (json.dumps(fp),))
    farm.change_point(farm.series("ro"), 10, 0.90)
    farm.change_point(farm.series("ro", machine="m-2"), 10, 0.90)
    settings = AlertSettings(machine_about=(("w1", "dandelion", "Alice <alice@example.org>", ""),))
    (e,) = sync(farm.conn, settings, now=100)
    view = alert_view(farm.conn, settings, e.alert_id)
    assert {x.machine_id: x.machine for x in view.lines} == {"m-1": "dandelion", "m-2": ""}
    named = next(m for m in view.machines if m.id == "m-1")
    assert (named.name, named.owner) == ("dandelion", "Alice <alice@example.org>")
    assert named.description == "Xeon E-2288G, 8 cores, 64 GiB, Debian 12, gcc 12"
    assert next(m for m in view.machines if m.id == "m-2").label() == "m-2"
