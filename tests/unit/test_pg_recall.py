"""The recall benchmark's proportional model (tests/benchmarks/pg_recall.py): a function's weight in a workload
read from a real callgrind profile, and the busy-loop rounds that make the function a given share slower."""

from __future__ import annotations

from pathlib import Path

from recipes.callgrind import parse
from tests.benchmarks.pg_recall import ROUND_COST, rounds_for, weights
from tests.callgrind_support import CALLS, PROGRAM, QUERIES, RECURSIVE, build, callgrind, requires_valgrind


@requires_valgrind
def test_weights_count_calls_from_other_functions_and_inclusive_cost(tmp_path: Path) -> None:
    profile = parse(callgrind(build(tmp_path, "prog", PROGRAM), tmp_path / "prog.out").out)
    w = weights(profile, {"work", "leaf", "absent"})
    assert set(w) == {"work", "leaf"}  # a function the workload never calls has no weight
    assert w["work"]["calls"] == QUERIES
    assert w["leaf"]["calls"] == w["leaf"]["activations"] == QUERIES * CALLS
    assert w["work"]["inclusive"] == profile.functions["work"].inclusive_cost
    assert w["work"]["total"] == profile.total
    assert w["leaf"]["inclusive"] < w["work"]["inclusive"]


@requires_valgrind
def test_a_recursive_functions_calls_are_the_outer_ones_only(tmp_path: Path) -> None:
    profile = parse(callgrind(build(tmp_path, "rec", RECURSIVE), tmp_path / "rec.out").out)
    w = weights(profile, {"rec"})
    assert w["rec"]["calls"] == 3  # work calls rec three times; rec's calls of itself are inside those
    assert w["rec"]["activations"] == 3 * 6  # but an injected loop runs in every one: rec(5) ... rec(0)
    assert w["rec"]["inclusive"] == profile.functions["rec"].inclusive_cost


def test_rounds_are_sized_in_the_workload_where_the_function_weighs_most() -> None:
    per_workload = {
        "op-a": {"inclusive": 1_000_000, "calls": 10, "activations": 10, "total": 100_000_000},  # 1% of op-a
        "op-b": {"inclusive": 8_000_000, "calls": 2, "activations": 2, "total": 10_000_000},  # 80%: sized here
    }
    rounds, where = rounds_for(per_workload, 0.10)
    assert where == "op-b"
    assert rounds == round(0.10 * 4_000_000 / ROUND_COST)
    # a cheap function still gets a round
    assert rounds_for({"op-c": {"inclusive": 3, "calls": 1, "activations": 1, "total": 10}}, 0.10) == (1, "op-c")
    # a function that calls itself pays the loop in every activation: sized per activation
    nested = {"op-d": {"inclusive": 9_000_000, "calls": 30, "activations": 90, "total": 10_000_000}}
    assert rounds_for(nested, 0.10)[0] == round(0.10 * 100_000 / ROUND_COST)
