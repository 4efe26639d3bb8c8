"""Paired throughput in the store (issue #14): the run's reference is the master's word, checked against the
result; ratio series are segmented where the reference changes; the reference's own samples and a paired run's
absolute throughput are kept but not searched for changes. Real SQLite files and a real git repository."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import pytest

from master import analysis, ingest, store
from master.detect.config import DetectionSettings
from master.store import RunContext
from tests.unit.test_analysis import add_commits, sha
from tests.unit.test_result_schema import good
from tests.unit.test_store_ingest import db_at_schema, env, put, result_for  # noqa: F401 - env is a fixture

DEFAULTS = DetectionSettings()
REF_A, REF_B = "a" * 40, "b" * 40


def paired_doc(sha_: str, reference: str | None, tps: list[float], rqps: list[float]) -> dict:
    doc = good()
    doc["commit"] = {"sha": sha_, "ref": "master"}
    if reference is not None:
        doc["recipe"]["options"] = {"reference": reference}
    metrics = [{"name": "tps", "unit": "tx/s", "direction": "higher", "samples": tps}]
    if rqps:
        reference_tps = [t / r for t, r in zip(tps, rqps)]
        metrics += [
            {"name": "tps.reference", "unit": "tx/s", "direction": "higher", "samples": reference_tps},
            {"name": "tps.rqps", "unit": "ratio", "direction": "higher", "samples": rqps},
        ]
    doc["workloads"] = [{"name": "ro", "metrics": metrics}]
    return doc


def ctx(build_id: int, sha_: str | None = None, reference: str | None = None) -> RunContext:
    return RunContext("fixture@local", "local", "poll", build_id, got_revision=sha_, reference=reference)


@pytest.mark.parametrize(
    ("claimed", "asked", "says"),
    [
        (REF_B, REF_A, "measured against reference bbbbbbbbbbbb but the master asked for aaaaaaaaaaaa"),
        (REF_A, None, "but the master asked for none (an unpaired run)"),
        (None, REF_A, "measured against reference none but the master asked for aaaaaaaaaaaa"),
    ],
)
def test_a_result_paired_with_another_reference_than_asked_is_rejected(env, claimed, asked, says):  # noqa: F811
    repo, settings = env
    head = repo.head()
    path = put(settings, paired_doc(head, claimed, [100.0, 101.0], [1.0, 1.01] if claimed else []))
    with pytest.raises(ingest.IngestRejected, match=re.escape(says)):
        ingest.ingest_file(settings, path, ctx(3, head, asked), "fixture")
    conn = store.connect(settings.results_db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_paired_metrics_in_a_run_nobody_paired_are_rejected(env):  # noqa: F811
    repo, settings = env
    head = repo.head()
    doc = paired_doc(head, None, [100.0, 101.0], [1.0, 1.01])  # ratios, but no reference anywhere
    with pytest.raises(ingest.IngestRejected, match=r"tps.reference.*did not pair with a reference"):
        ingest.ingest_file(settings, put(settings, doc), ctx(4, head), "fixture")


def test_the_reference_the_master_asked_for_is_stored_with_the_run(env):  # noqa: F811
    repo, settings = env
    head = repo.head()
    ingest.ingest_file(settings, put(settings, paired_doc(head, REF_A, [100.0], [1.0])), ctx(5, head, REF_A), "fixture")
    conn = store.connect(settings.results_db)
    assert [tuple(r) for r in conn.execute("SELECT sha, reference FROM runs")] == [(head, REF_A)]


def test_migration_8_takes_each_stored_runs_reference_from_its_result(tmp_path):
    path = tmp_path / "r.sqlite"
    conn = db_at_schema(path, 7)
    conn.execute("INSERT INTO machines VALUES ('m', '{}', 0)")
    for run_id, result in ((1, paired_doc("c" * 40, REF_A, [1.0], [1.0])), (2, good()), (3, {"recipe": {}})):
        conn.execute(
            "INSERT INTO runs (id, sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, "
            "config_hash, status, source, log_excerpt, host_checks, noisy, ingested_at, result) "
            "VALUES (?, 'c', 'c', 'master', 'b', 'w', 'm', 'r', 1, 'h', 'ok', 'poll', '', '{}', 0, 0, ?)",
            (run_id, json.dumps(result)),
        )
    conn.commit()
    conn.close()
    conn = store.connect(path)
    assert [tuple(r) for r in conn.execute("SELECT id, reference FROM runs ORDER BY id")] == [
        (1, REF_A),
        (2, None),
        (3, None),
    ]


@pytest.fixture
def conn(tmp_path):
    c = store.connect(tmp_path / "r.sqlite")
    yield c
    c.close()


def add_paired(conn, i: int, reference: str, level: float, build_id: int, rng: random.Random, tps: float = 1000.0):
    rqps = [level * (1 + rng.gauss(0, 0.005)) for _ in range(5)]
    doc = paired_doc(sha(i), reference, [tps * r for r in rqps], rqps)
    with store.transaction(conn):
        return store.insert_run(conn, doc, ctx(build_id, reference=reference))


def series_id(conn, metric: str) -> int:
    with store.transaction(conn):
        for (run_id,) in conn.execute("SELECT id FROM runs").fetchall():
            store.series.ensure_for_run(conn, run_id)
    return conn.execute("SELECT id FROM series WHERE metric = ?", (metric,)).fetchone()[0]


def test_a_rebase_is_a_segment_boundary_not_a_change(conn):
    # 40 commits against reference A at rQPS 1.00, then the branch is rebased onto reference B, against which
    # the same code is 8% slower: the ratio series jumps at the rebase, and that is not the code's change
    rng = random.Random(3)
    add_commits(conn, 80)
    for i in range(40):
        run_id = add_paired(conn, i, REF_A, 1.0, i + 1, rng)
    for i in range(40, 80):
        run_id = add_paired(conn, i, REF_B, 0.92, i + 1, rng)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert events == []
    data = analysis.load_series(conn, series_id(conn, "tps.rqps"))
    assert data.rebases == (40,)
    # without the boundary the same samples are a change at the rebase: the test can fail
    tracker = analysis.Tracker.configured("x", data.direction, DEFAULTS)
    assert [cp.index for cp in tracker.detections(data.series)] == [40]


def test_a_real_step_inside_a_segment_is_found_at_its_commit(conn):
    rng = random.Random(5)
    add_commits(conn, 90)
    for i in range(30):
        add_paired(conn, i, REF_A, 1.0, i + 1, rng)
    for i in range(30, 90):  # rebased at 30; the code regresses 4% at 60
        run_id = add_paired(conn, i, REF_B, 0.95 if i < 60 else 0.95 * 0.96, i + 1, rng)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    sid = series_id(conn, "tps.rqps")
    assert [(e.series_id, e.action, e.kind, e.sha) for e in events] == [(sid, "new", "regression", sha(60))]
    row = conn.execute("SELECT ratio, ci_low, ci_high FROM change_points").fetchone()
    assert 0.95 < row["ci_low"] <= row["ratio"] <= row["ci_high"] < 0.97  # measured within the segment


def test_a_commit_measured_again_after_a_rebase_keeps_its_first_references_samples(conn):
    rng = random.Random(9)
    add_commits(conn, 3)
    add_paired(conn, 0, REF_A, 1.0, 1, rng)
    add_paired(conn, 1, REF_A, 1.0, 2, rng)
    add_paired(conn, 1, REF_B, 0.5, 3, rng)  # a probe of commit 1 against the new reference
    add_paired(conn, 2, REF_B, 0.5, 4, rng)
    points = store.series.branch_samples(conn, analysis.load_series(conn, series_id(conn, "tps.rqps")).key)
    assert points.references == [REF_A, REF_A, REF_B]
    assert [len(s) for s in points.samples] == [5, 5, 5] and max(points.samples[1]) < 1.1
    # the absolute throughput of commit 1 keeps its first run's samples: a later run is another moment of the
    # machine (issue #28), whatever its reference
    tps = store.series.branch_samples(conn, analysis.load_series(conn, series_id(conn, "tps")).key)
    assert [len(s) for s in tps.samples] == [5, 5, 5]


def test_a_paired_runs_reference_and_absolute_series_are_kept_but_not_searched(conn):
    # the machine drifts 10% down half way: the absolute and reference series move, the ratio does not
    rng = random.Random(11)
    add_commits(conn, 60)
    for i in range(60):
        run_id = add_paired(conn, i, REF_A, 1.0, i + 1, rng, tps=1000.0 if i < 30 else 900.0)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert events == []
    for metric in ("tps", "tps.reference"):
        data = analysis.load_series(conn, series_id(conn, metric))
        assert analysis.not_searched(conn, data.key) is not None
        tracker = analysis.Tracker.configured("x", data.direction, DEFAULTS)
        assert [cp.index for cp in tracker.detections(data.series)] == [30]  # what searching them would report
    assert analysis.not_searched(conn, analysis.load_series(conn, series_id(conn, "tps.rqps")).key) is None


def test_a_bisection_of_a_ratio_series_compares_only_ratios_to_one_reference(conn):
    from master.bisection import state

    rng = random.Random(13)
    add_commits(conn, 5)
    with store.transaction(conn):
        store.upsert_commits(
            conn,
            [store.CommitInfo(sha(i), f"c{i}", "A <a@x>", 1, 1, (sha(i - 1),) if i else ()) for i in range(5)],
        )
    add_paired(conn, 0, REF_A, 1.0, 1, rng)
    add_paired(conn, 4, REF_A, 0.9, 2, rng)
    with store.transaction(conn):
        bid = state.create(conn, good=sha(0), bad=sha(4), workload="ro", metric="tps.rqps")
    b = state.get(conn, bid)
    obs = state.observations(conn, b)
    assert [len(obs.samples[sha(i)]) for i in range(5)] == [5, 0, 0, 0, 5]
    # drift-free levels from the series around the ends stand for the ends (issue #28): no end is measured again
    assert obs.levels == (obs.samples[sha(0)], obs.samples[sha(4)])
    assert state.decide(b.commits, obs, state.Policy()) == state.Measure(sha(2), "bisect")
    # a probe is measured with one order-balanced block of rounds, the bisected workload only
    from master.bisection.service import probe_options

    assert probe_options(b, state.Policy()) == ["workloads=ro", "callgrind=1", "samples=2"]
    assert probe_options(dataclasses.replace(b, metric="tps"), state.Policy()) == ["workloads=ro", "callgrind=1"]
    # the branch is rebased mid-bisection: a probe of commit 2 is measured against reference B
    probe = add_paired(conn, 2, REF_B, 0.5, 3, rng)
    with store.transaction(conn):
        conn.execute("INSERT INTO bisection_runs (bisection_id, run_id) VALUES (?, ?)", (bid, probe))
    obs = state.observations(conn, b)
    # the ends' ratios to A no longer count: they are measured again against B, never mixed with the probe's
    assert [len(obs.samples[sha(i)]) for i in range(5)] == [0, 0, 5, 0, 0]
    assert dict(obs.fresh_rounds) == {sha(2): 1} and obs.levels is None  # the levels are A's: not comparable
    assert state.decide(b.commits, obs, state.Policy()).reason == "re-measure the ends to confirm the change"


def test_the_site_marks_rebases_and_says_which_series_is_searched(tmp_path):
    from master.publish import publish_all
    from master.publish.source import sid_of
    from tests.site_support import settings_for

    settings = settings_for(tmp_path / "data", tmp_path / "no-repo")
    conn = store.connect(settings.results_db)
    rng = random.Random(17)
    add_commits(conn, 12)
    for i in range(12):
        add_paired(conn, i, REF_A if i < 7 else REF_B, 1.0, i + 1, rng)
    with store.transaction(conn):
        for (run_id,) in conn.execute("SELECT id FROM runs").fetchall():
            store.series.ensure_for_run(conn, run_id)
    keys = {s.key.metric: s.key for s in (store.series.get(conn, i) for i in range(1, 4))}
    conn.close()
    publish_all(settings, now=1_800_000_000.0)
    page = {m: (settings.site_dir / "series" / f"{sid_of(k)}.html").read_text() for m, k in keys.items()}
    meta = json.loads(re.search(r'<script type="application/json" id="meta">(.*?)</script>', page["tps.rqps"]).group(1))
    assert [m for m in meta["markers"] if m["kind"] == "rebase"] == [
        {"pos": 7, "kind": "rebase", "label": "rebased onto bbbbbbbbbbbb"}
    ]
    assert "Change detection searches this series" in page["tps.rqps"]
    ratio_link = f'<a href="{sid_of(keys["tps.rqps"])}.html">rQPS series</a>'
    assert "Unpaired: this commit" in page["tps"] and ratio_link in page["tps"]
    assert "The reference build's own throughput" in page["tps.reference"] and ratio_link in page["tps.reference"]
    assert not any(
        m["kind"] == "rebase"
        for m in json.loads(re.search(r'id="meta">(.*?)</script>', page["tps"]).group(1))["markers"]
    )


def test_a_change_point_that_moves_gets_a_bisection_of_its_new_range(conn):
    """Seen on the farm: a change point first placed a commit early was bisected over a range with no change in it
    ("not reproducible"), and when more commits moved it to its real place nothing searched the new range."""
    from master.bisection import state

    rng = random.Random(17)
    add_commits(conn, 12)
    for i in (0, 4, 8, 11):
        add_paired(conn, i, REF_A, 1.0 if i < 8 else 0.9, i + 1, rng)
    sid = series_id(conn, "tps.rqps")
    first = store.changes.Placement(sha(4), sha(0), 4, 0, "regression", 0.95, 0.9, 0.99, 1e-4)
    with store.transaction(conn):
        cp = store.changes.report(conn, sid, sha(4), first, 1.0)
        old = state.auto_create(conn, cp)
    assert old is not None and state.get(conn, old).commits == tuple(sha(i) for i in range(5))
    with store.transaction(conn):
        assert state.auto_create(conn, cp) is None  # the same range: already searched
        store.changes.move(
            conn, sid, sha(4), dataclasses.replace(first, sha=sha(8), prev_sha=sha(4), position=8, prev_position=4), 2.0
        )
        new = state.auto_create(conn, cp)
        assert new is not None and state.get(conn, new).commits == tuple(sha(i) for i in range(4, 9))
        assert state.auto_create(conn, cp) is None
        # only the newest bisection of a change point reports to its alert
        assert state.report_to_alert(conn, old, None) is None


def wall_doc(sha_: str, reference: str | None, level: float, drift: float, rng: random.Random) -> dict:
    """A run of one workload as the pg recipes store it (issue #28): the absolute tps and latency, measured on a
    machine `drift` times slower than usual, and, when paired, both metrics' reference samples and ratios per
    order-balanced block (recipes/paired.py merge)."""
    from recipes import paired as pairing
    from recipes.api import Metric, WorkloadResult

    tps = [1000.0 * level / drift * (1 + rng.gauss(0, 0.005)) for _ in range(6)]
    run = WorkloadResult(
        "ro",
        (
            Metric("tps", "tx/s", "higher", tuple(tps)),
            Metric("latency_avg", "ms", "lower", tuple(1000 / t for t in tps)),
        ),
    )
    if reference is not None:
        ref = [1000.0 / drift * (1 + rng.gauss(0, 0.005)) for _ in range(6)]
        base = WorkloadResult(
            "ro",
            (
                Metric("tps", "tx/s", "higher", tuple(ref)),
                Metric("latency_avg", "ms", "lower", tuple(1000 / t for t in ref)),
            ),
        )
        (run,) = pairing.merge([run], [base])
    doc = good()
    doc["commit"] = {"sha": sha_, "ref": "master"}
    if reference is not None:
        doc["recipe"]["options"] = {"reference": reference}
    doc["workloads"] = [run.to_json()]
    return doc


@pytest.mark.parametrize("reference", [REF_A, None], ids=["paired", "unpaired"])
def test_drift_between_a_commits_first_measurement_and_a_later_probe_never_alerts(conn, reference):
    """Issue #28: bisection probes re-measured baseline commits 10-40 minutes later, on a machine that had drifted;
    the absolute latency of comment-only commits read as a critical regression, alerted, and started bisections.
    A paired run's absolute values are not searched (its ratios are), and a re-measurement of a commit never adds
    the machine's drift to any series."""
    from master.alerts import config as alert_config
    from master.alerts import sync as alerts

    rng = random.Random(23)
    add_commits(conn, 30)
    build = iter(range(1, 1000))
    for i in range(30):
        with store.transaction(conn):
            store.insert_run(conn, wall_doc(sha(i), reference, 1.0, 1.0, rng), ctx(next(build), reference=reference))
    # probes of commits 18..29 later, on a machine 30% slower; the code is the same
    for i in range(18, 30):
        with store.transaction(conn):
            run_id = store.insert_run(
                conn,
                wall_doc(sha(i), reference, 1.0, 1.3, rng),
                dataclasses.replace(ctx(next(build), reference=reference), source="bisect"),
            )
    assert analysis.analyse_all(conn, DEFAULTS) == []
    assert conn.execute("SELECT COUNT(*) FROM change_points").fetchone()[0] == 0
    assert alerts.sync(conn, alert_config.AlertSettings()) == []
    latency = analysis.load_series(conn, series_id(conn, "latency_avg"))
    if reference is not None:
        assert analysis.not_searched(conn, latency.key) == "measured paired: changes are searched on latency_avg.ratio"
        ratio = analysis.load_series(conn, series_id(conn, "latency_avg.ratio"))
        assert analysis.not_searched(conn, ratio.key) is None and ratio.direction.value == "lower"
        assert [len(ratio.series.samples(i, i + 1)) for i in (0, 29)] == [3, 6]  # same reference: both runs
    else:
        assert analysis.not_searched(conn, latency.key) is None
    # only a commit's first run counts in an absolute series: the drifted probe is kept, not added
    assert [len(latency.series.samples(i, i + 1)) for i in (0, 29)] == [6, 6]
    assert run_id


def test_the_order_balanced_method_starts_a_new_segment_like_a_rebase(tmp_path):
    """Issue #28: ratios stored per round before the fix carried the order bias of an odd number of rounds (here
    +3%); runs of the fixed method store one ratio per order-balanced block and flag it. Same reference, same
    code: where the method changes is a segment boundary with a mark on the site, never a change."""
    from master.publish import publish_all
    from master.publish.source import sid_of
    from tests.site_support import settings_for

    settings = settings_for(tmp_path / "data", tmp_path / "no-repo")
    conn = store.connect(settings.results_db)
    rng = random.Random(29)
    add_commits(conn, 60)
    for i in range(60):
        doc = paired_doc(
            sha(i), REF_A, [1000.0] * 5, [(1.03 if i < 30 else 1.0) * (1 + rng.gauss(0, 0.004)) for _ in range(5)]
        )
        if i >= 30:
            doc["workloads"][0]["flags"] = ["paired:order-balanced"]  # recipes.paired.BALANCED_FLAG
        with store.transaction(conn):
            run_id = store.insert_run(conn, doc, ctx(i + 1, reference=REF_A))
    assert analysis.analyse_run(conn, run_id, DEFAULTS) == []
    sid = series_id(conn, "tps.rqps")
    data = analysis.load_series(conn, sid)
    assert data.rebases == (30,)
    tracker = analysis.Tracker.configured("x", data.direction, DEFAULTS, ratio=True)
    assert [cp.index for cp in tracker.detections(data.series)] == [30]  # without the boundary: a change
    key = data.key
    conn.close()
    publish_all(settings, now=1_800_000_000.0)
    page = (settings.site_dir / "series" / f"{sid_of(key)}.html").read_text()
    meta = json.loads(re.search(r'<script type="application/json" id="meta">(.*?)</script>', page).group(1))
    assert [m for m in meta["markers"] if m["kind"] == "rebase"] == [
        {"pos": 30, "kind": "rebase", "label": "rebased onto aaaaaaaaaaaa, order-balanced ratios"}
    ]


def test_two_alerts_over_one_range_start_one_bisection(conn):
    """Issue #28: each line of an alert started its own bisection, all sharing one worker. A change point whose range
    lies inside a running bisection's (same builder and branch) shares it, and both alerts hear its culprit."""
    from master.alerts import config as alert_config
    from master.alerts import sync as alerts
    from master.bisection import state

    rng = random.Random(31)
    add_commits(conn, 14)
    with store.transaction(conn):
        store.upsert_commits(
            conn,
            [store.CommitInfo(sha(i), f"c{i}", "A <a@x>", 1, 1, (sha(i - 1),) if i else ()) for i in range(14)],
        )
    for i in (0, 12, 13):
        doc = paired_doc(
            sha(i), REF_A, [1000.0] * 6, [(1.0 if i < 12 else 0.88) * (1 + rng.gauss(0, 0.003)) for _ in range(6)]
        )
        rw = json.loads(json.dumps(doc["workloads"][0]))
        rw["name"] = "rw"
        for m in rw["metrics"]:
            if m["name"] == "tps.rqps":
                m["samples"] = [x / 0.88 * 1.1 if i >= 12 else x for x in m["samples"]]  # rw got faster
        doc["workloads"].append(rw)
        with store.transaction(conn):
            store.insert_run(conn, doc, ctx(i + 1, reference=REF_A))
    with store.transaction(conn):
        for (run_id,) in conn.execute("SELECT id FROM runs").fetchall():
            store.series.ensure_for_run(conn, run_id)
    ids = {
        (r["workload"], r["metric"]): r["id"]
        for r in conn.execute("SELECT id, workload, metric FROM series WHERE metric = 'tps.rqps'")
    }
    slower = store.changes.Placement(sha(12), sha(0), 12, 0, "regression", 0.88, 0.87, 0.89, 1e-8)
    faster = dataclasses.replace(slower, kind="improvement", ratio=1.1, ci_low=1.09, ci_high=1.11)
    with store.transaction(conn):
        a = store.changes.report(conn, ids[("ro", "tps.rqps")], sha(12), slower, 1.0)
        b = store.changes.report(conn, ids[("rw", "tps.rqps")], sha(12), faster, 1.0)
        first, second = state.auto_create(conn, a), state.auto_create(conn, b)
    assert first is not None and second is None
    assert conn.execute("SELECT COUNT(*) FROM bisections").fetchone()[0] == 1
    assert state.sharing(conn, b) == first
    settings = alert_config.AlertSettings()
    assert len(alerts.sync(conn, settings)) == 2  # a regression alert and an improvement alert, one range
    with store.transaction(conn):
        store.bisections.record_culprit(conn, first, sha(7), sha(6), 0.88, 0.87, 0.89, 2.0)
    state.report_to_alert(conn, first, settings)
    assert {(r["kind"], r["culprit_sha"]) for r in conn.execute("SELECT kind, culprit_sha FROM alerts")} == {
        ("regression", sha(7)),
        ("improvement", sha(7)),
    }
    # a later change point over a range that holds the culprit shares the finished bisection
    other = conn.execute("SELECT id FROM series WHERE workload = 'rw' AND metric = 'tps'").fetchone()[0]
    narrower = dataclasses.replace(slower, prev_sha=sha(4), prev_position=4)
    with store.transaction(conn):
        c = store.changes.report(conn, other, sha(12), narrower, 3.0)
        assert state.auto_create(conn, c) is None and state.sharing(conn, c) == first


# issue #28's open/close culprit through a real farm (tests/benchmarks/contention_farm.py, 2026-11-26, load 10-15):
# pgbench-ro-prepared-c1's rQPS per order-balanced block of 11 measured commits, then the push's head and one more
RQPS_OPEN_CLOSE = [
    [1.107, 0.9758, 0.9147],
    [0.9319, 1.2277, 1.1284],
    [1.2249, 0.8804, 0.9718],
    [0.893, 1.0931, 1.0976],
    [0.9076, 0.9938, 0.9382],
    [1.0832, 0.9179, 0.9973],
    [0.9878, 1.0355, 1.005],
    [0.9933, 1.0755, 0.981],
    [1.0378, 1.0371, 0.988],
    [0.9556, 1.0408, 1.0107],
    [1.016, 1.0392, 1.0028],
    [0.8275, 0.8103, 0.77],
    [0.7738, 0.8933, 0.8792],
]


def test_series_never_searched_are_not_in_the_false_discovery_family(conn):
    """Issue #28's culprit on a loaded box: the paired gate found the rQPS drop at the push's head (p = 0.0011) and
    the farm reported nothing, because Benjamini-Hochberg counted every series of the farm, 18 here, most of them
    a paired run's `.reference` and absolute series that are never searched (0.01 / 18 < 0.0011). The family is
    the series detection searches: `tps.rqps` and the five `.ratio` series."""
    rng = random.Random(28)
    others = ("latency_avg", "latency_p95", "cpu_per_tx", "server_cpu_per_tx", "ctx_switches_per_tx")
    add_commits(conn, len(RQPS_OPEN_CLOSE))
    for i, rqps in enumerate(RQPS_OPEN_CLOSE):
        doc = paired_doc(sha(i), REF_A, [1000.0 * r for r in rqps], rqps)
        for name in others:
            ratios = [1 + rng.gauss(0, 0.003) for _ in rqps]
            doc["workloads"][0]["metrics"] += [
                {"name": name, "unit": "ms", "direction": "lower", "samples": [1.0] * 3},
                {"name": name + ".reference", "unit": "ms", "direction": "lower", "samples": [1 / r for r in ratios]},
                {"name": name + ".ratio", "unit": "ratio", "direction": "lower", "samples": ratios},
            ]
        with store.transaction(conn):
            run_id = store.insert_run(conn, doc, ctx(i + 1, reference=REF_A))
        events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert (store.series.count(conn), store.series.searched_count(conn)) == (18, 6)
    searched = [
        k
        for k in (analysis.load_series(conn, sid).key for (sid,) in conn.execute("SELECT id FROM series"))
        if analysis.not_searched(conn, k) is None
    ]
    assert len(searched) == store.series.searched_count(conn)  # the same rule as not_searched
    assert [(e.action, e.kind, e.sha) for e in events] == [("new", "regression", sha(11))], events
    assert 0.80 < events[0].ratio < 0.84


def test_a_latency_ratio_is_judged_by_the_rank_gate_not_the_paired_gate(conn):
    """Issue #28's figures on a loaded box: the paired gate, sized for rQPS, read the noise of latency and CPU ratios
    (one run's `latency_p95.ratio` blocks: 0.30, 1.11, 2.04) as changes, 12-26 false alerts per 1000 commits per
    series. A `.ratio` series is segmented by reference like rQPS but judged by the rank gate and the unpaired
    thresholds. This A-vs-A history (block ratios with a 35 % log spread, seed 3) makes the paired gate report a
    point; the farm reports none."""
    from master.alerts import config as alert_config
    from master.alerts import sync as alerts

    rng = random.Random(3)
    history = [[rng.lognormvariate(0, 0.35) for _ in range(3)] for _ in range(40)]
    noise = random.Random(4)
    add_commits(conn, len(history))
    for i, ratios in enumerate(history):
        rqps = [1 + noise.gauss(0, 0.003) for _ in ratios]
        doc = paired_doc(sha(i), REF_A, [1000.0 * r for r in rqps], rqps)
        doc["workloads"][0]["metrics"] += [
            {"name": "latency_p95", "unit": "ms", "direction": "lower", "samples": [1.0] * 3},
            {"name": "latency_p95.reference", "unit": "ms", "direction": "lower", "samples": [1 / r for r in ratios]},
            {"name": "latency_p95.ratio", "unit": "ratio", "direction": "lower", "samples": ratios},
        ]
        with store.transaction(conn):
            run_id = store.insert_run(conn, doc, ctx(i + 1, reference=REF_A))
        assert analysis.analyse_run(conn, run_id, DEFAULTS) == [], i
    assert conn.execute("SELECT COUNT(*) FROM change_points").fetchone()[0] == 0
    assert alerts.sync(conn, alert_config.AlertSettings()) == []
    settings = alert_config.AlertSettings()
    assert settings.metric_kind("latency_p95.ratio", "ratio") == "unpaired"
    assert settings.metric_kind("tps.rqps", "ratio") == "paired"


def test_a_shared_bisection_follows_the_rqps_line_not_a_noisier_ratio(tmp_path):
    """Issue #28: the lines of one regression share one bisection, started by the first of them; when that was
    `latency_avg.ratio`, whose blocks are noisier than rQPS's, three of its four probes took 7-10 rounds to clear
    the midpoint. What the master runs after an ingest (pipeline.after_ingest) starts it on the `.rqps` line."""
    from master import pipeline
    from master.settings import load_settings

    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path)})
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    conn = store.connect(settings.results_db)
    rng = random.Random(5)
    add_commits(conn, 20)
    for build, i in enumerate([*range(12), *range(14, 20)], 1):  # 12 and 13 untested: a range to bisect
        slower = i >= 14
        rqps = [(0.88 if slower else 1.0) * (1 + rng.gauss(0, 0.003)) for _ in range(3)]
        doc = paired_doc(sha(i), REF_A, [1000.0 * r for r in rqps], rqps)
        latency = [(1.14 if slower else 1.0) * (1 + rng.gauss(0, 0.003)) for _ in range(3)]
        doc["workloads"][0]["metrics"].insert(  # before rQPS: its series and change point come first
            0, {"name": "latency_avg.ratio", "unit": "ratio", "direction": "lower", "samples": latency}
        )
        with store.transaction(conn):
            run_id = store.insert_run(conn, doc, ctx(build, reference=REF_A))
    conn.close()
    out = pipeline.after_ingest(settings, run_id)
    assert not out.failed, out.messages
    conn = store.connect(settings.results_db)
    try:
        points = conn.execute(
            "SELECT s.metric FROM change_points cp JOIN series s ON s.id = cp.series_id ORDER BY cp.id"
        ).fetchall()
        assert [m for (m,) in points] == ["latency_avg.ratio", "tps.rqps"]
        assert [tuple(r) for r in conn.execute("SELECT workload, metric FROM bisections")] == [("ro", "tps.rqps")]
        assert conn.execute("SELECT COUNT(*) FROM bisection_shares").fetchone()[0] == 1
    finally:
        conn.close()
