"""Query plans the store relies on for speed (figures: docs/site.md, tests.benchmarks.site_figures). A plan is
deterministic for a schema, so these hold without a large database; the benchmarks show what each is worth."""

from __future__ import annotations

from master import store
from master.store.series import MeasureKey


def plan_of(conn, call) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    call()
    conn.set_trace_callback(None)
    (sql,) = [s for s in seen if s.lstrip().upper().startswith("SELECT")]
    # Lines on branch_indexing (the few branches being ordered, schema 15; every branch query leaves them out) are
    # not the plan's order over the large tables.
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql) if "branch_indexing" not in row[3]]


def test_the_previous_point_walks_the_branch_back_instead_of_reading_the_whole_series(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    key = MeasureKey("m1", "fixture", 1, "cfg", "loop", "throughput")
    steps = plan_of(conn, lambda: store.series.prev_point_position(conn, key, "master", 100))
    assert steps[0].startswith("SEARCH bc USING") and "position<?" in steps[0], steps
    assert not any("measurements_series" in s for s in steps), steps


def test_the_previous_point_finds_each_commits_run_by_its_sha(tmp_path):
    # with runs_series (schema 13) SQLite looked for the run among all of the machine's runs: 500x slower
    conn = store.connect(tmp_path / "r.sqlite")
    key = MeasureKey("m1", "fixture", 1, "cfg", "loop", "throughput")
    steps = plan_of(conn, lambda: store.series.prev_point_position(conn, key, "master", 100))
    assert steps[1].startswith("SEARCH r USING INDEX runs_sha (sha=?)"), steps


def test_the_paired_references_start_from_the_ratio_series_not_from_every_run(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    steps = plan_of(conn, lambda: store.series.references(conn))
    assert steps[0] == "SCAN s" and steps[1].startswith("SEARCH r USING INDEX runs_series"), steps


def test_a_series_tail_is_counted_and_read_from_the_branch_head_by_each_commits_runs(tmp_path):
    # with runs_series SQLite read every run of the machine for each commit of the tail: 17 s CPU instead of 2.7 s
    # for a 600-commit detection pass (docs/scale.md)
    conn = store.connect(tmp_path / "r.sqlite")
    key = store.series.SeriesKey("m1", "fixture", 1, "cfg", "loop", "throughput", "master")
    for call in (
        lambda: store.series.tail_positions(conn, key, 1250),
        lambda: store.series.branch_samples(conn, key, since=100),
    ):
        steps = plan_of(conn, call)
        assert steps[0].startswith("SEARCH bc USING") and "branch=?" in steps[0], steps
        assert any("USING INDEX runs_sha" in s for s in steps), steps
        assert not any("runs_series" in s or "measurements_series" in s for s in steps), steps
