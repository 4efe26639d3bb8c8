"""With 66 instruction workloads, `perffarm compare` and a job's page explain (per-function diff, flame graph) only
those whose instructions per query moved by at least 0.01% (docs/explain.md)."""

from __future__ import annotations

from master import compare
from master.publish.pages import jobs
from recipes.ab import Comparison


def comparison(workload: str, a: float, b: float, metric: str = "instructions") -> Comparison:
    return Comparison(workload, metric, "instructions/op", "lower", (a, a), (b, b), None)


def test_compare_explains_the_workloads_whose_counts_moved_only() -> None:
    rows = [
        comparison("op-join-hash", 34_357_840, 35_457_840),  # +3.2%
        comparison("op-scan-seq", 8_542_479, 8_542_480),  # one instruction: the same work
        comparison("op-sort-external", 64_913_972, 64_913_940),
    ]
    assert [w for w in ("op-join-hash", "op-scan-seq", "op-sort-external") if compare._moved(rows, w)] == [
        "op-join-hash"
    ]
    assert compare._moved([comparison("op-x", 100_000, 100_020)], "op-x")  # 2e-4: moved
    assert not compare._moved([comparison("op-x", 1, 2, metric="tps")], "op-x")  # not an instruction count


def test_a_jobs_page_explains_the_sides_that_counted_different_work_only() -> None:
    def stored(total: int, queries: int = 1) -> dict:
        return {"queries": queries, "profile": {"total": total}}

    assert jobs._moved(stored(1_000_000), stored(1_010_000))
    assert not jobs._moved(stored(1_000_000), stored(1_000_050))
    assert not jobs._moved(stored(94_797_206, 1000), stored(94_797_300, 1000))  # per query
    assert jobs._moved({"queries": 1}, stored(5))  # unreadable: shown rather than hidden
