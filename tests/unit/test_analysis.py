"""Series assembly and change-point persistence on a real SQLite database."""

from __future__ import annotations

import collections
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


def add_run(conn, i, samples, build_id, status="ok", ratio=False):
    """A run of commit i; `ratio`: its samples (/ 1000) are a paired ratio series' (`tps.rqps`), where a commit's
    every run against the same reference counts, not only its first (issue #28)."""
    doc = good()
    doc["commit"] = {"sha": sha(i), "ref": "master"}
    doc["workloads"][0]["metrics"][0]["samples"] = samples
    if ratio:
        m = doc["workloads"][0]["metrics"][0]
        m.update(name="tps.rqps", unit="ratio", samples=[x / 1000 for x in samples])
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
    add_run(conn, 3, [1.0, 2.0], 99)  # a second run of commit 3: kept, but another moment of the machine
    add_run(conn, 4, [], 100, status="build-failed")  # failures are not points
    [sid] = store.series.ensure_for_run(conn, run_id)
    data = analysis.load_series(conn, sid)
    assert data.series.commits == tuple(sha(i) for i in range(6))
    assert data.positions == tuple(range(6))
    assert list(data.series.counts) == [5, 5, 5, 5, 5, 5]  # a commit's first run only (issue #28)


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
    # a paired ratio series: re-measuring a commit against the same reference is drift-free evidence, so re-runs
    # count (an absolute series counts a commit's first run only: test_series_follows_branch_order_not_build_order)
    rng = random.Random(5)
    add_commits(conn, 80)
    build = iter(range(1, 1000))
    for i in range(70):
        run_id = add_run(conn, i, values(i, rng, step_at=60, ratio=0.95), next(build), ratio=True)
    assert [(e.action, e.sha) for e in analysis.analyse_run(conn, run_id, DEFAULTS)] == [("new", sha(60))]
    # Re-runs of 60..69 measure them at the old level (the first runs hit a bad stretch of the
    # machine), and newer commits agree: the change is gone, and the row says so.
    for i in range(60, 70):
        add_run(conn, i, values(i, rng) + values(i, rng) + values(i, rng), next(build), ratio=True)
    for i in range(70, 80):
        run_id = add_run(conn, i, values(i, rng), next(build), ratio=True)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert [(e.action, e.kind, e.sha) for e in events] == [("retracted", "regression", sha(60))]
    assert [tuple(r) for r in conn.execute("SELECT first_sha, state FROM change_points")] == [(sha(60), "retracted")]
    assert analysis.analyse_run(conn, run_id, DEFAULTS) == []  # nothing left to say: no repeated retraction
    # More runs show the slowdown after all: the same row comes back, not a second change point.
    for i in range(60, 70):
        run_id = add_run(conn, i, [s * 0.95 for s in values(i, rng) * 5], next(build), ratio=True)
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


# ------------------------------------------------------------------ the write lock: held to write, not to detect


def _other_connection(tmp_path):
    """A second connection to the same file that gives up at once on a held write lock (no 30 s busy wait)."""
    c = store.connect(tmp_path / "r.sqlite")
    c.execute("PRAGMA busy_timeout = 0")
    return c


def _stepped_history(conn, n, step_at=40, start=0, rng=None):
    rng = rng or random.Random(7)
    add_commits(conn, n, start=start)
    for i in range(start, start + n):
        run_id = add_run(conn, i, values(i, rng, step_at=step_at), 1000 + i)
    return run_id


def test_another_run_is_stored_while_a_pass_detects(conn, tmp_path, monkeypatch):
    """Before: analyse_run held BEGIN IMMEDIATE from the first series loaded to the last change point written, so
    another machine's result stored meanwhile failed with "database is locked" (after the 30 s busy timeout)."""
    run_id = _stepped_history(conn, 60)
    other = _other_connection(tmp_path)
    stored, propose = [], analysis.propose

    def propose_while_another_run_is_stored(c, series_id, detection):
        prop = propose(c, series_id, detection)
        if c is conn and not stored:  # the pass is between reading its series and writing its outcome
            add_commits(other, 1, start=60)
            stored.append(add_run(other, 60, values(60, random.Random(1)), 5000))
        return prop

    monkeypatch.setattr(analysis, "propose", propose_while_another_run_is_stored)
    # what runs while the pass holds the write lock: statements between BEGIN IMMEDIATE and COMMIT
    locked, held = [], [False]

    def trace(sql):
        word = sql.split(None, 1)[0].upper()
        if sql.upper().startswith("BEGIN IMMEDIATE"):
            held[0] = True
        elif word in ("COMMIT", "ROLLBACK"):
            held[0] = False
        elif held[0]:
            locked.append(sql)

    conn.set_trace_callback(trace)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    conn.set_trace_callback(None)
    other.close()
    assert len(stored) == 1 and conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 61
    assert [(e.action, e.sha) for e in events] == [("new", sha(40))]
    # no series' samples are read under the write lock (before: every series of the pass was)
    assert [q for q in locked if "JOIN measurements" in q] == []


def test_a_pass_does_not_write_over_what_a_newer_pass_wrote_meanwhile(conn, tmp_path, monkeypatch):
    """Pass 1 reads 60 commits; meanwhile 30 more are stored and their pass reports the step at 40 with its
    figures from 90 commits. Pass 1 must not report it again from its older read, nor put its figures over them."""
    rng = random.Random(7)
    run_id = _stepped_history(conn, 60, rng=rng)
    other = _other_connection(tmp_path)
    newer: list[analysis.ChangeEvent] = []
    calls, propose = [], analysis.propose

    def another_pass_meanwhile(c, series_id, detection):
        prop = propose(c, series_id, detection)
        if c is conn:
            calls.append(series_id)
            if len(calls) == 1:
                newest = _stepped_history(other, 30, start=60, rng=rng)
                newer.extend(analysis.analyse_run(other, newest, DEFAULTS))
        return prop

    monkeypatch.setattr(analysis, "propose", another_pass_meanwhile)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    other.close()
    assert [(e.action, e.sha) for e in newer] == [("new", sha(40))]
    assert events == []  # read again: the newer pass already said it all
    assert len(calls) == 2  # the series was read and detected again, once
    rows = conn.execute("SELECT first_sha, ratio, ci_low, ci_high FROM change_points").fetchall()
    assert len(rows) == 1 and rows[0]["ratio"] == newer[0].ratio


def test_a_pass_that_keeps_losing_the_race_ends_under_the_lock(conn, tmp_path, monkeypatch):
    run_id = _stepped_history(conn, 60)
    other = _other_connection(tmp_path)
    calls, propose = [], analysis.propose

    def written_by_another_pass_every_time(c, series_id, detection):
        prop = propose(c, series_id, detection)
        calls.append(c.in_transaction)
        if not c.in_transaction:
            with store.transaction(other):
                store.series.mark_analysed(other, series_id, float(len(calls)))
        return prop

    monkeypatch.setattr(analysis, "propose", written_by_another_pass_every_time)
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    other.close()
    assert [(e.action, e.sha) for e in events] == [("new", sha(40))]
    # read once, again in each of the rounds outside the lock, and a last time under it
    assert calls == [False] * (1 + analysis.WRITE_ROUNDS) + [True]


def test_a_change_points_ci_is_computed_once_for_the_same_segments(conn, monkeypatch):
    """Every pass re-detects the whole history; the bootstrap CI (2,000 resamples) of a change point whose
    segments no new data touched is the one computed before, not computed again."""
    from master.detect import rqps

    monkeypatch.setattr(analysis, "_ci_cache", collections.OrderedDict(), raising=False)
    rng = random.Random(7)
    run_id = _stepped_history(conn, 100, rng=rng)
    boots, median_ratio = [], rqps.median_ratio
    monkeypatch.setattr(rqps, "median_ratio", lambda b, a: boots.append(1) or median_ratio(b, a))
    analysis.analyse_run(conn, run_id, DEFAULTS)
    assert len(boots) == 1
    first = tuple(conn.execute("SELECT ratio, ci_low, ci_high FROM change_points").fetchone())
    run_id = add_run(conn, 99, values(99, rng, step_at=40), 5000)  # 59 commits after it: outside its segments
    analysis.analyse_run(conn, run_id, DEFAULTS)
    assert len(boots) == 1  # before: 2
    assert tuple(conn.execute("SELECT ratio, ci_low, ci_high FROM change_points").fetchone()) == first
    data = analysis.load_series(conn, conn.execute("SELECT id FROM series").fetchone()[0])
    est = median_ratio(data.series.samples(0, 40), data.series.samples(40, 90))
    assert first == (est.ratio, est.low, est.high)


def _long_history(conn, n, steps, rng, start=0):
    """``n`` commits from ``start``, one run each, stored in one transaction (fast); each commit of ``steps``
    lowers the level by 10 % from there on."""
    add_commits(conn, n, start=start)
    doc = good()
    with store.transaction(conn):
        for i in range(start, start + n):
            level = 0.9 ** sum(i >= s for s in steps)
            doc["commit"] = {"sha": sha(i), "ref": "master"}
            doc["workloads"][0]["metrics"][0]["samples"] = [x * level for x in values(i, rng)]
            run_id = store.insert_run(conn, doc, RunContext("fixture@local", "local", "poll", 10_000 + i))
    return run_id


def _detected_lengths(monkeypatch):
    lengths: list[int] = []
    detections = analysis.Tracker.detections

    def spy(self, series, boundaries=()):
        lengths.append(len(series))
        return detections(self, series, boundaries)

    monkeypatch.setattr(analysis.Tracker, "detections", spy)
    return lengths


@pytest.mark.parametrize("n", [2_000, 20_000])
def test_a_pass_detects_the_newest_window_whatever_the_history(conn, monkeypatch, n):
    """Before: every pass re-detected the whole history (2,000 and 20,000 commits here; ~6x the CPU per 10x)."""
    rng = random.Random(11)
    run_id = _long_history(conn, n, [n - 300], rng)
    lengths = _detected_lengths(monkeypatch)
    loaded, branch_samples = [], store.series.branch_samples
    monkeypatch.setattr(
        store.series, "branch_samples", lambda *a: loaded.append(len((got := branch_samples(*a)).commits)) or got
    )
    events = analysis.analyse_run(conn, run_id, DEFAULTS)
    assert lengths == [DEFAULTS.window]  # before: [n]
    assert loaded == [DEFAULTS.window * 5 // 4]  # read: the window and its snap range; before: [n]
    assert [(e.action, e.sha) for e in events] == [("new", sha(n - 300))]
    row = conn.execute("SELECT position, prev_position FROM change_points").fetchone()
    assert tuple(row) == (n - 300, n - 301)


def test_a_series_no_longer_than_the_window_is_detected_whole(conn, monkeypatch):
    rng = random.Random(11)
    run_id = _long_history(conn, 300, [120], rng)
    lengths = _detected_lengths(monkeypatch)
    analysis.analyse_run(conn, run_id, DetectionSettings(window=300))
    assert lengths == [300]


def test_change_points_older_than_the_window_are_kept_as_stored(conn):
    """A change point found while it was recent stays as it was stored once the window has moved past it: a
    windowed pass neither moves, re-reports nor retracts it; one the window still holds is matched as before."""
    rng = random.Random(5)
    window = DetectionSettings(window=400)
    run_id = _long_history(conn, 300, [150], rng)
    assert [(e.action, e.sha) for e in analysis.analyse_run(conn, run_id, window)] == [("new", sha(150))]
    stored = tuple(conn.execute("SELECT * FROM change_points").fetchone())
    # 700 commits later the step is 850 commits back: the window (the newest 400) starts well past it
    run_id = _long_history(conn, 700, [150], rng, start=300)
    lengths: list[int] = []
    detections = analysis.Tracker.detections

    def spy(self, series, boundaries=()):
        lengths.append(len(series))
        return detections(self, series, boundaries)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(analysis.Tracker, "detections", spy)
        assert analysis.analyse_run(conn, run_id, window) == []
    assert lengths == [400]
    assert [tuple(r) for r in conn.execute("SELECT * FROM change_points")] == [stored]


@pytest.mark.parametrize("offset", [0, 3, 20, 49, 52])
def test_a_change_point_at_the_windows_edge_is_neither_lost_nor_reported_twice(conn, offset):
    """The newest ``window`` commits start ``offset`` commits before a stored change point: it is kept (within
    the settled edge) or matched (past it), never retracted or reported again."""
    rng = random.Random(9)
    step = 500
    run_id = _long_history(conn, step + 100, [step], rng)
    assert [(e.action, e.sha) for e in analysis.analyse_run(conn, run_id, DetectionSettings(window=10**6))] == [
        ("new", sha(step))
    ]
    n = step + 300
    run_id = _long_history(conn, n - (step + 100), [step], rng, start=step + 100)
    events = analysis.analyse_run(conn, run_id, DetectionSettings(window=n - step + offset))
    assert [e.action for e in events] in ([], ["updated"])  # its p-value may move with the window's data
    rows = [tuple(r) for r in conn.execute("SELECT first_sha, sha, state FROM change_points")]
    assert rows == [(sha(step), sha(step), "active")]


def test_window_start(conn):
    def rep(i, active=True):
        cp = analysis.ChangePoint(sha(i), i, 0.9, analysis.Kind.REGRESSION, 1e-6)
        return analysis.Reported("1", sha(i), cp, active)

    assert analysis.window_start(1000, [rep(10)], 1000) == 0
    assert analysis.window_start(3000, [], 1000) == 2000
    # the newest active change point up to a quarter of the window before the edge starts the window
    assert analysis.window_start(3000, [rep(1700), rep(1800), rep(1900, active=False), rep(2100)], 1000) == 1800
    assert analysis.window_start(3000, [rep(1700)], 1000) == 2000


def test_reading_the_tail_proposes_what_reading_the_whole_history_would(conn, monkeypatch):
    rng = random.Random(13)
    run_id = _long_history(conn, 2_600, [400, 1_700, 2_450], rng)
    analysis.analyse_run(conn, run_id, DetectionSettings(window=10**6))
    run_id = _long_history(conn, 150, [400, 1_700, 2_450, 2_700], rng, start=2_600)
    window = DetectionSettings(window=1000)
    tail = analysis.propose(conn, 1, window)
    monkeypatch.setattr(analysis, "_since", lambda *a: None)
    whole = analysis.propose(conn, 1, window)
    assert len(tail.data.series) == len(whole.data.series) == 1_050  # from the stored point at 1,700
    assert (tail.data.series.commits, tail.data.positions) == (whole.data.series.commits, whole.data.positions)
    assert tail.result == whole.result
    assert [(r.first_commit, r.current.index) for r in tail.result.all] == [(sha(2_450), 750), (sha(2_700), 1_000)]


def test_analyse_all_rebuilds_over_the_whole_history(conn):
    rng = random.Random(3)
    _long_history(conn, 700, [100], rng)
    assert [(e.action, e.sha) for e in analysis.analyse_all(conn, DetectionSettings(window=200))] == [("new", sha(100))]
