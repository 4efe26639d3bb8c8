"""`perffarm compare A B C ...`: argument checks and the N-version table (the measurement itself is tested on real
PostgreSQL in tests/integration/test_pg_releases.py)."""

from __future__ import annotations

import pytest

from master import compare
from recipes import ab
from recipes.api import HIGHER, LOWER, Metric, WorkloadResult


def results(tps: list[float], instr: list[float]) -> list[WorkloadResult]:
    return [
        WorkloadResult("ro", (Metric("tps", "tx/s", HIGHER, tuple(tps)),)),
        WorkloadResult("instr", (Metric("instructions", "instructions/query", LOWER, tuple(instr)),)),
    ]


def test_three_versions_are_each_compared_with_the_first():
    a = results([100, 101, 99, 100, 100], [1000.0] * 5)
    b = results([90, 90.9, 89.1, 90, 90], [1100.0] * 5)
    c = results([120, 121.2, 118.8, 120, 120], [900.0] * 5)
    vs = {"B": ab.compare(a, b), "C": ab.compare(a, c)}
    table = ab.format_versions("ABC", {"A": "13.16", "B": "15.18", "C": "18.6"}, vs)
    lines = table.splitlines()
    assert lines[0].split() == [
        "workload",
        "metric",
        "version",
        "median",
        "ratio",
        "to",
        "A",
        "95%",
        "CI",
        "+-",
        "verdict",
    ]
    tps = [line for line in lines if "13.16" in line or "15.18" in line or "18.6" in line][:3]
    assert "A 13.16" in tps[0] and tps[0].rstrip().endswith("base")
    assert "B 15.18" in tps[1] and "0.9000" in tps[1] and tps[1].rstrip().endswith("regression")
    assert "C 18.6" in tps[2] and "1.2000" in tps[2] and tps[2].rstrip().endswith("improvement")
    instr = lines[-2:]
    assert "1.1000" in instr[0] and instr[0].rstrip().endswith("regression")  # more instructions: worse
    assert "0.9000" in instr[1] and instr[1].rstrip().endswith("improvement")


@pytest.mark.parametrize("revisions", [["A"], [str(i) for i in range(9)]])
def test_too_few_or_too_many_revisions_is_a_usage_error(revisions, capsys, tmp_path):
    assert compare.main(["--repo", str(tmp_path), "--work", str(tmp_path / "w"), *revisions]) == compare.EXIT_USAGE
    assert "give 2 to 8 revisions" in capsys.readouterr().err
