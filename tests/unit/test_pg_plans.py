"""The analytic queries and their plans as data (issue 27, item 2): the TPC-H-derived entry, plan shapes from real
EXPLAIN output, what a change between two shapes is called, and the result's `plans` member. Capturing plans on
real PostgreSQL, and a plan change found: tests/integration/test_pg_operations.py."""

from __future__ import annotations

import copy
import re

import pytest

from recipes.pg import operations, plans
from recipes.pg.profile import LABELS, identities, load_profile, workload_groups
from recipes.result import validate
from tests.unit.test_result_schema import good

# psql -X -A -t of EXPLAIN (COSTS OFF) of tpch-q17 on 15.18 with the farm's data set, and with enable_hashjoin off
Q17 = """Aggregate
  ->  Hash Join
        Hash Cond: (lineitem.l_partkey = part.p_partkey)
        Join Filter: (lineitem.l_quantity < (SubPlan 1))
        ->  Seq Scan on lineitem
        ->  Hash
              ->  Seq Scan on part
                    Filter: ((p_brand = 'Brand#23'::text) AND (p_container = 'MED PACK'::text))
        SubPlan 1
          ->  Aggregate
                ->  Bitmap Heap Scan on lineitem lineitem_1
                      Recheck Cond: (l_partkey = part.p_partkey)
                      ->  Bitmap Index Scan on lineitem_part
                            Index Cond: (l_partkey = part.p_partkey)
"""
Q17_NO_HASHJOIN = """Aggregate
  ->  Nested Loop
        ->  Seq Scan on part
              Filter: ((p_brand = 'Brand#23'::text) AND (p_container = 'MED PACK'::text))
        ->  Bitmap Heap Scan on lineitem
              Recheck Cond: (l_partkey = part.p_partkey)
              Filter: (l_quantity < (SubPlan 1))
              ->  Bitmap Index Scan on lineitem_part
                    Index Cond: (l_partkey = part.p_partkey)
              SubPlan 1
                ->  Aggregate
                      ->  Bitmap Heap Scan on lineitem lineitem_1
                            Recheck Cond: (l_partkey = part.p_partkey)
                            ->  Bitmap Index Scan on lineitem_part
                                  Index Cond: (l_partkey = part.p_partkey)
"""


def tpch() -> dict:
    return next(e for e in load_profile("quick")["workloads"] if e["name"] == "tpch")


def test_a_shape_keeps_the_nodes_and_their_depth_and_drops_conditions_aliases_and_costs() -> None:
    assert plans.shape(Q17.splitlines()) == (
        "Aggregate\n"
        "  Hash Join\n"
        "    Seq Scan on lineitem\n"
        "    Hash\n"
        "      Seq Scan on part\n"
        "    SubPlan\n"
        "      Aggregate\n"
        "        Bitmap Heap Scan on lineitem\n"
        "          Bitmap Index Scan on lineitem_part"
    )
    # the same plan printed by another major (InitPlan/SubPlan labels, aliases) has the same shape
    other = Q17.replace("SubPlan 1", "SubPlan 1 (returns $0)").replace(" lineitem_1", " l2")
    assert plans.shape(other.splitlines()) == plans.shape(Q17.splitlines())


def test_a_plan_change_is_named_by_the_nodes_that_went_and_came() -> None:
    a, b = plans.shape(Q17.splitlines()), plans.shape(Q17_NO_HASHJOIN.splitlines())
    assert plans.summary(a, b) == "Hash Join → Nested Loop"
    assert plans.summary(a, a + "\n  Sort") == "+Sort"
    assert plans.summary(a, a.replace("Hash Join", "Merge Join") + "\n  Sort") == "Hash Join → Merge Join"
    assert plans.summary(a + "\n  Sort\n  Sort", a) == "−2× Sort"
    swapped = a.replace("Seq Scan on lineitem", "Seq Scan on X").replace("Seq Scan on part", "Seq Scan on lineitem")
    assert plans.summary(a, swapped) == "same nodes, new shape"


def test_captured_output_is_parsed_by_step_and_a_missing_plan_is_an_error() -> None:
    script = plans.script("SET x = 1; SELECT 1;", [("q01", "SELECT 1;"), ("q17", "SELECT 2;")])
    assert script.splitlines() == [
        "SET x = 1; SELECT 1;",
        "\\echo '@@perffarm-plan q01'",
        "EXPLAIN (COSTS OFF) SELECT 1;",
        "\\echo '@@perffarm-plan q17'",
        "EXPLAIN (COSTS OFF) SELECT 2;",
    ]
    out = "1\n@@perffarm-plan q01\nResult\n@@perffarm-plan q17\n" + Q17
    assert plans.parse(out, ["q01", "q17"]) == {"q01": "Result", "q17": plans.shape(Q17.splitlines())}
    with pytest.raises(ValueError, match="no plan printed for q17"):
        plans.parse("@@perffarm-plan q01\nResult\n", ["q01", "q17"])


def test_the_analytic_queries_are_the_22_tpch_derived_ones_in_a_database_of_their_own_with_plans() -> None:
    entry = tpch()
    ops = operations.operations(entry)
    assert [o.name for o in ops] == [f"q{n:02d}" for n in range(1, 23)]
    assert operations.database(entry) == "perffarm_tpch" != operations.database({"name": "op"})
    assert entry["plans"] is True and "plans" in LABELS  # capturing plans changes no count: in no identity
    assert set(workload_groups(load_profile("quick"))[f"tpch-{o.name}"] for o in ops) == {"analytic"}
    for line in operations.session(entry)[1:]:
        assert re.match(r"^(SELECT|WITH) ", line) and line.count(";") == 1, line  # one query EXPLAIN can plan
    assert "not comparable to any published TPC result" in operations.sql_text("tpch-data.sql")
    for name in ("quick", "full"):  # the same queries in both profiles
        assert next(e for e in load_profile(name)["workloads"] if e["name"] == "tpch") == entry


def test_turning_plan_capture_off_or_on_keeps_every_series() -> None:
    profile = load_profile("quick")
    before = identities(profile, {})
    changed = copy.deepcopy(profile)
    next(e for e in changed["workloads"] if e["name"] == "tpch")["plans"] = False
    assert identities(changed, {}) == before


def _result(plans_member: object) -> dict:
    doc = good()
    doc["plans"] = plans_member
    return doc


def test_a_result_carries_plans_and_the_master_refuses_malformed_ones_with_the_member_named() -> None:
    shapes = {"tpch-q17": plans.shape(Q17.splitlines())}
    assert validate(_result(shapes))["plans"] == shapes
    for bad, says in (
        ({"tpch-q17": ""}, "expected a plan's shape"),
        ({"tpch-q17": 3}, "expected a plan's shape"),
        ({"tpch-q17": "Aggregate\x1b[31m"}, "control character"),
        ({"bad name!": "Result"}, "workload name"),
        ({"tpch-q17": "x" * 16_001}, "expected a plan's shape"),
        ([], "expected"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)) as e:
            validate(_result(bad))
        assert "$.plans" in str(e.value)


def test_a_job_result_carries_each_sides_plans_from_the_worker_and_the_master_checks_them(tmp_path) -> None:
    """A release job's sides each ran the analytic queries on their own release: the job-bench phase puts each
    side's shapes (recipes/pg/profile.py plans_file) in that side, and validate_job refuses malformed ones as
    validate does a run's (before, the job result dropped them and a release's plan was nowhere)."""
    import json
    from types import SimpleNamespace

    from recipes.api import Context
    from recipes.result import validate_job
    from recipes.runner import captured_plans
    from tests.unit.test_jobs import result_for as job_result

    ctx = Context(tmp_path / "src", tmp_path / "work", tmp_path / "state", "a" * 40, "job", {})
    (ctx.state_dir / "plans").mkdir(parents=True)
    shapes = {"tpch-q17": plans.shape(Q17.splitlines())}
    (ctx.state_dir / "plans" / "B.json").write_text(json.dumps(shapes))
    (ctx.state_dir / "plans" / "C.json").write_text("{not json")
    assert captured_plans(ctx, "B") == shapes
    assert captured_plans(ctx, "A") == {}  # no plans captured: no member
    assert captured_plans(ctx, "C") == {} and "the plans of C are unreadable" in ctx.tail()

    sides = [SimpleNamespace(label=x, sha=x.lower() * 40, patched=False) for x in "AB"]
    doc = job_result(SimpleNamespace(id=7, sides=sides))
    doc["sides"][1]["plans"] = shapes
    assert validate_job(doc)["sides"][1]["plans"] == shapes
    doc["sides"][1]["plans"] = {"tpch-q17": "Aggregate\x1b[31m"}
    with pytest.raises(ValueError, match=re.escape('$.sides[1].plans["tpch-q17"]: a plan\'s shape holds a control')):
        validate_job(doc)
