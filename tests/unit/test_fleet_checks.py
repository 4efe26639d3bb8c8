"""The fleet benchmark's checks (tests/benchmarks/fleet_scale.py) on hand-made windows: the lock test in
tests/integration/test_fleet.py is only as good as the overlap arithmetic it relies on."""

from __future__ import annotations

import json

from tests.benchmarks.fleet_scale import bench_window, max_concurrency, overlaps


def _run(finished_at: str, bench_seconds: float | None) -> dict:
    timings = {} if bench_seconds is None else {"bench_seconds": bench_seconds, "build_seconds": 9.0}
    return {"finished_at": finished_at, "result": json.dumps({"timings": timings})}


def test_a_runs_window_ends_at_finished_at_and_lasts_its_bench_seconds():
    start, end = bench_window(_run("2026-11-25T20:00:10.500+00:00", 2.25))
    assert end - start == 2.25 and end % 60 == 10.5
    assert bench_window(_run("2026-11-25T20:00:10+00:00", None)) is None  # a build that never measured
    assert bench_window({"finished_at": None, "result": "{}"}) is None


def test_overlaps_finds_every_overlapping_pair_and_only_those():
    windows = [
        ("h0:a", (0.0, 2.0)),
        ("h0:b", (2.0, 3.0)),  # touches a: the lock passed on, no overlap
        ("h1:c", (1.5, 4.0)),  # overlaps a by 0.5 and b by 1.0
        ("h1:d", (10.0, 11.0)),
    ]
    found = {(a, b): round(s, 3) for a, b, s in overlaps(windows)}
    assert found == {("h0:a", "h1:c"): 0.5, ("h1:c", "h0:b"): 1.0}


def test_max_concurrency_counts_hosts_not_windows():
    windows = [("h0:a", (0.0, 5.0)), ("h0:b", (1.0, 2.0)), ("h1:c", (1.5, 3.0)), ("h2:d", (6.0, 7.0))]
    assert max_concurrency(windows) == 2
    assert max_concurrency([]) == 0
