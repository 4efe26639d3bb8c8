"""Series assembly and change-point persistence on a real SQLite database."""

from __future__ import annotations

import random

import numpy as np
import pytest

from master import analysis, store
from master.detect.config import DetectionSettings
from master.store import CommitInfo, RunContext
from tests.unit.test_result_schema import good

DEFAULTS = DetectionSettings()


def sha(i: int) -> str:
    return f"{i:040x}"


@pytest.fixture
def conn(tmp_path):
    c = store.connect(tmp_path / "r.sqlite")
    yield c
    c.close()


def add_commits(conn, n, start=0):
    commits = [
        CommitInfo(sha(i), f"commit {i}", "A <a@x>", 1_700_000_000 + i, 1_700_000_000 + i, (sha(i - 1),) if i else ())
        for i in range(start, start + n)
    ]
    with store.transaction(conn):
        store.append_branch(conn, "master", commits, start)


def add_run(conn, i, samples, build_id, status="ok"):
    doc = good()
    doc["commit"] = {"sha": sha(i), "ref": "master"}
    doc["workloads"][0]["metrics"][0]["samples"] = samples
    if status != "ok":
        doc.update(status=status, workloads=[], log_excerpt="boom")
    with store.transaction(conn):
        return store.insert_run(conn, doc, RunContext("fixture@local", "local", "poll", build_id))


def values(i, rng, step_at=None, ratio=0.9):
    base = 1000.0 * (ratio if step_at is not None and i >= step_at else 1.0)
    return [base * (1 + rng.gauss(0, 0.01)) for _ in range(5)]


def test_series_follows_branch_order_not_build_order(conn):
    add_commits(conn, 6)
    rng = random.Random(1)
    order = [5, 0, 3, 1, 4, 2]  # forced / bisection runs arrive out of order
    for build_id, i in enumerate(order, 1):
        run_id = add_run(conn, i, values(i, rng), build_id)
    add_run(conn, 3, [1.0, 2.0], 99)  # a second run of commit 3 adds samples
    add_run(conn, 4, [], 100, status="build-failed")  # failures are not points
    [sid] = store.series.ensure_for_run(conn, run_id)
    data = analysis.load_series(conn, sid)
    assert data.series.commits == tuple(sha(i) for i in range(6))
    assert data.positions == tuple(range(6))
    assert list(data.series.counts) == [5, 5, 5, 7, 5, 5]


def test_a_step_is_found_at_its_commit_and_keeps_its_identity_as_data_arrives(conn):
    rng = random.Random(7)
    add_commits(conn, 60)
    for i in range(60):
        run_id = add_run(conn, i, values(i, rng, step_at=40), i + 1)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert [(e.action, e.kind, e.sha) for e in events] == [("new", "regression", sha(40))]
    row = conn.execute("SELECT * FROM change_points").fetchone()
    assert row["prev_sha"] == sha(39) and row["position"] == 40 and row["prev_position"] == 39
    assert 0.88 < row["ratio"] < 0.92 and row["ci_low"] < row["ratio"] < row["ci_high"]
    # more commits arrive: the same change point, not a second one
    add_commits(conn, 30, start=60)
    for i in range(60, 90):
        run_id = add_run(conn, i, values(i, rng, step_at=40), i + 1)
        analysis.analyse_run(conn, run_id, DEFAULTS)
    rows = conn.execute("SELECT first_sha, sha, state FROM change_points").fetchall()
    assert [tuple(r) for r in rows] == [(sha(40), sha(40), "active")]


def test_untested_commits_widen_the_suspect_range(conn):
    rng = random.Random(3)
    add_commits(conn, 80)
    tested = [i for i in range(80) if not 41 <= i <= 44]  # commits 41..44 were never measured
    for n, i in enumerate(tested, 1):
        run_id = add_run(conn, i, values(i, rng, step_at=42), n)
    analysis.analyse_run(conn, run_id, DEFAULTS)
    row = conn.execute("SELECT prev_sha, sha, prev_position, position FROM change_points").fetchone()
    assert tuple(row) == (sha(40), sha(45), 40, 45)  # (40, 45]: a range for bisection


def test_flat_noise_reports_nothing(conn):
    rng = random.Random(11)
    add_commits(conn, 120)
    for i in range(120):
        run_id = add_run(conn, i, values(i, rng), i + 1)
    assert analysis.analyse_run(conn, run_id, DEFAULTS) == []
    assert conn.execute("SELECT COUNT(*) FROM change_points").fetchone()[0] == 0


def test_a_change_point_whose_evidence_goes_away_is_retracted_then_returns_under_its_identity(conn):
    rng = random.Random(5)
    add_commits(conn, 80)
    build = iter(range(1, 1000))
    for i in range(70):
        run_id = add_run(conn, i, values(i, rng, step_at=60, ratio=0.95), next(build))
    assert [(e.action, e.sha) for e in analysis.analyse_run(conn, run_id, DEFAULTS)] == [("new", sha(60))]
    # Re-runs of 60..69 measure them at the old level (the first runs hit a bad stretch of the
    # machine), and newer commits agree: the change is gone, and the row says so.
    for i in range(60, 70):
        add_run(conn, i, values(i, rng) + values(i, rng) + values(i, rng), next(build))
    for i in range(70, 80):
        run_id = add_run(conn, i, values(i, rng), next(build))
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert [(e.action, e.kind, e.sha) for e in events] == [("retracted", "regression", sha(60))]
    assert [tuple(r) for r in conn.execute("SELECT first_sha, state FROM change_points")] == [(sha(60), "retracted")]
    assert analysis.analyse_run(conn, run_id, DEFAULTS) == []  # nothing left to say: no repeated retraction
    # More runs show the slowdown after all: the same row comes back, not a second change point.
    for i in range(60, 70):
        run_id = add_run(conn, i, [s * 0.95 for s in values(i, rng) * 5], next(build))
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert ("updated", "regression", sha(60)) in [(e.action, e.kind, e.sha) for e in events]
    rows = conn.execute("SELECT first_sha, state FROM change_points WHERE kind = 'regression'").fetchall()
    assert [tuple(r) for r in rows] == [(sha(60), "active")]


def _borderline_series(conn):
    """8 + 8 commits, 5 samples each, a 1 % step at 0.5 % noise: the detector's p is about 4e-5."""
    rng = np.random.default_rng(11)
    add_commits(conn, 16)
    for i in range(16):
        level = 1000.0 if i < 8 else 990.0
        run_id = add_run(conn, i, [float(v) for v in level * (1 + 0.005 * rng.standard_normal(5))], i + 1)
    return run_id


def _more_series(conn, count):
    conn.execute("INSERT OR IGNORE INTO machines (id) SELECT machine_id FROM runs LIMIT 1")
    with store.transaction(conn):
        for j in range(count):
            conn.execute(
                "INSERT INTO series (machine_id, recipe, recipe_version, config_hash, workload, metric, branch, "
                "unit, direction) SELECT machine_id, recipe, recipe_version, config_hash, ?, 'tps', 'master', "
                "'tps', 'higher' FROM runs LIMIT 1",
                (f"other-{j}",),
            )


def test_a_borderline_change_is_kept_on_a_small_farm(conn):
    run_id = _borderline_series(conn)
    _more_series(conn, 20)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert [(e.action, e.sha) for e in events] == [("new", sha(8))]
    assert 1e-5 < conn.execute("SELECT pvalue FROM change_points").fetchone()[0] <= 1e-4


def test_a_borderline_change_does_not_survive_fdr_across_a_thousand_series(conn):
    run_id = _borderline_series(conn)
    _more_series(conn, 999)  # Benjamini-Hochberg at 0.01 over 1000 series: a lone point needs p <= 1e-5
    assert analysis.analyse_run(conn, run_id, DEFAULTS) == []
    assert conn.execute("SELECT COUNT(*) FROM change_points").fetchone()[0] == 0
