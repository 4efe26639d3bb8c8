"""Per-function diff of two profiles per query: hand-made profiles, and two real builds whose leaf() differs by a
known number of loop iterations."""

from __future__ import annotations

import math
import re

import pytest

from master.profiles.diff import diff, format_table, summary
from recipes.callgrind import EdgeCost, FunctionCost, Profile, parse
from tests.callgrind_support import CALLS, QUERIES, build, callgrind, requires_valgrind


def profile(functions: dict[str, tuple[int, int]], edges=(), event="Ir", dropped_self=0) -> Profile:
    """A profile from {name: (self, inclusive)} and (caller, callee, calls, inclusive) edges."""
    return Profile(
        event,
        sum(s for s, _ in functions.values()) + dropped_self,
        {n: FunctionCost(n, f"src/{n}.c", 10 + i, s, inc) for i, (n, (s, inc)) in enumerate(sorted(functions.items()))},
        {(c, e): EdgeCost(k, inc) for c, e, k, inc in edges},
        dropped_functions=1 if dropped_self else 0,
        dropped_self=dropped_self,
    )


A = profile({"main": (100, 10_000), "ExecScan": (4_000, 9_900), "heap_fetch": (5_000, 5_000), "old_path": (800, 800)})
B = profile(
    {"main": (200, 21_800), "ExecScan": (8_000, 21_500), "heap_fetch": (11_000, 11_000), "new_path": (2_500, 2_500)}
)


def test_costs_are_per_query_and_rows_sorted_by_self_change():
    d = diff(A, B, queries_a=10, queries_b=20)  # B ran twice the queries
    assert (d.total_a, d.total_b) == (990.0, 1_085.0)
    assert d.delta_total == pytest.approx(95.0)
    assert d.change == pytest.approx(95 / 990)
    assert [r.name for r in d.rows] == ["new_path", "old_path", "heap_fetch", "main", "ExecScan"]
    new, old, heap, main, scan = d.rows
    assert (new.self_a, new.self_b, new.delta_self, new.in_a, new.in_b) == (0.0, 125.0, 125.0, False, True)
    assert (old.self_a, old.self_b, old.delta_self, old.in_a, old.in_b) == (80.0, 0.0, -80.0, True, False)
    assert (heap.self_a, heap.self_b, heap.delta_self) == (500.0, 550.0, 50.0)
    assert (scan.delta_self, scan.inclusive_a, scan.inclusive_b, scan.delta_inclusive) == (0.0, 990.0, 1_075.0, 85.0)
    assert scan.where == "src/ExecScan.c:10"
    assert (main.delta_self, main.delta_inclusive) == (0.0, 90.0)  # ties on self: larger inclusive change first
    assert d.compared == 5


def test_top_limits_rows():
    d = diff(A, B, 10, 20, top=2)
    assert [r.name for r in d.rows] == ["new_path", "old_path"]
    assert d.compared == 5


@pytest.mark.parametrize(("qa", "qb"), [(0, 1), (1, -3), (True, 1), (1.5, 1)])
def test_query_counts_must_be_positive_integers(qa, qb):
    with pytest.raises(ValueError, match="must be a positive number of queries"):
        diff(A, B, qa, qb)


def test_profiles_of_different_events_are_refused():
    with pytest.raises(ValueError, match="different events"):
        diff(A, profile({"main": (1, 1)}, event="Dr"), 1, 1)


def test_reconcile_reports_relative_errors():
    d = diff(A, B, 10, 20)
    good = d.reconcile(measured_a=990.5, measured_b=1_084.0)
    assert good.ok
    assert good.error_a == pytest.approx(-0.5 / 990.5)
    assert good.error_b == pytest.approx(1 / 1_084)
    bad = d.reconcile(measured_a=990.0, measured_b=1_087.0)  # 0.18% off on B
    assert not bad.ok
    assert bad.error_a == 0.0
    assert bad.error_b == pytest.approx(-2 / 1_087)
    assert d.reconcile(990.0, 1_087.0, tolerance=0.002).ok
    with pytest.raises(ValueError, match="must be positive"):
        d.reconcile(0, 1)


def test_summary_line():
    assert summary(diff(A, B, 10, 20)) == "+9.6% instructions/query; top: new_path +125/query self"
    assert summary(diff(B, A, 20, 10)) == "-8.8% instructions/query; top: new_path -125/query self"
    assert summary(diff(A, A, 10, 10)) == "+0.0% instructions/query; no function's self cost changed"


def test_table_is_aligned_with_signed_deltas_and_percentages():
    text = format_table(diff(A, B, 10, 20))
    lines = text.splitlines()
    assert lines[0] == ("instructions per query: A 990.0 (10 queries)  B 1,085.0 (20 queries)  delta +95.0 (+9.60%)")
    header, rows = lines[1], lines[2:7]
    titles = ("function", "self A", "self B", "delta self", "self %", "incl A", "incl B", "delta incl", "where")
    assert [header.index(t) for t in titles] == sorted(header.index(t) for t in titles)
    # every numeric column ends where its header ends
    for title in titles[1:-1]:
        end = header.index(title) + len(title)
        for row in rows:
            assert row[end - 1] != " " and (len(row) == end or row[end] == " "), (title, row)
    heap = next(r for r in rows if r.startswith("heap_fetch"))
    assert re.search(r"500\.0\s+550\.0\s+\+50\.0\s+\+10\.00%\s+500\.0\s+550\.0\s+\+50\.0\s+src/heap_fetch\.c:11$", heap)
    assert re.search(r"\s-80\.0\s+-100\.00%\s", next(r for r in rows if r.startswith("old_path")))
    assert re.search(r"\s\+125\.0\s+new\s", next(r for r in rows if r.startswith("new_path")))
    assert lines[7] == "5 of 5 functions, by |delta self|; costs are instructions per query"


def test_table_shows_control_characters_in_names_as_escapes_and_unlisted_costs():
    hostile = profile({"evil\x1b[2J\u202ename": (10, 10)}, dropped_self=5)
    text = format_table(diff(profile({"main": (1, 1)}), hostile, 1, 1))
    assert "\x1b" not in text and "\u202e" not in text
    assert "evil\\x1b[2J\\u202ename" in text
    assert "not listed by the profiles (below their JSON threshold): self A 0.0, self B 5.0 per query" in text


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Runs of three builds: leaf() with 0, N and 2N extra iterations per call (tests using it skip first
    when valgrind is missing)."""
    work = tmp_path_factory.mktemp("diff")
    return {extra: callgrind(build(work, f"p{extra}", extra=extra), work / f"p{extra}.out") for extra in (0, 50, 100)}


@requires_valgrind
def test_real_diff_finds_the_injected_instructions(builds):
    a, b, c = (parse(builds[extra].out) for extra in (0, 50, 100))
    # the cost of one loop iteration, from the two builds that differ by 50 more iterations per call
    per_iteration = (c.functions["leaf"].self_cost - b.functions["leaf"].self_cost) / (50 * CALLS * QUERIES)
    assert 2 <= per_iteration <= 10
    injected = 50 * CALLS * per_iteration  # per query (call of work)
    d = diff(a, b, QUERIES, QUERIES)
    top = d.rows[0]
    assert top.name == "leaf"
    assert top.delta_self == pytest.approx(injected, rel=0.05)
    assert top.where.startswith(str(builds[0].out.parent / "p50.c") + ":")
    assert d.delta_total == pytest.approx(injected, rel=0.05)
    work = next(r for r in d.rows if r.name == "work")
    assert work.delta_inclusive == pytest.approx(injected, rel=0.05)
    assert abs(work.delta_self) < 0.01 * injected
    rec = d.reconcile(builds[0].summary / QUERIES, builds[50].summary / QUERIES)
    assert rec.ok
    assert (rec.error_a, rec.error_b) == (0.0, 0.0)  # callgrind counts are exact
    assert d.reconcile(builds[0].collected / QUERIES, builds[50].collected / QUERIES).ok  # valgrind's own count
    assert not d.reconcile(builds[0].summary / QUERIES, builds[100].summary / QUERIES).ok
    assert re.fullmatch(rf"\+{d.change * 100:.1f}% instructions/query; top: leaf \+[\d,]+/query self", summary(d))
    assert math.isclose(d.total_b * QUERIES, builds[50].summary)
