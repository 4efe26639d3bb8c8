"""The coverage figure (issue 27, item 3): which backend functions the instruction workloads exercise
(recipes/pg/coverage.py), carried in a result's `coverage` member and shown on coverage.html."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from recipes import callgrind
from recipes.pg import coverage
from recipes.result import ResultError, validate
from tests.unit.test_result_schema import MACHINE_ID, good
from tests.unit.test_site_operations import farm, result


def coverage_doc() -> dict:
    functions = {"ExecScanHashBucket": "executor", "ExecSort": "executor", "btbuild": "access/nbtree", "x": "other"}
    return coverage.report({"executor": {"ExecScanHashBucket", "btbuild"}, "oltp": {"ExecSort"}}, functions)


def with_coverage(sha: str, stale_op: bool = False) -> dict:
    doc = result(sha, stale_op)
    doc["coverage"] = coverage_doc()
    return doc


def test_the_coverage_page_shows_the_newest_runs_figure_before_and_after(tmp_path: Path) -> None:
    site = farm(tmp_path, with_coverage)
    page = (site / "coverage.html").read_text()
    assert f">{MACHINE_ID}</span> · pg-quick v1" in page
    # all instruction workloads: 3 of 4 functions; the oltp group alone (before the suite): 1 of 4
    assert "<b>3</b> of 4 (75.0%)" in page and "1 of 4 (25.0%)" in page
    assert "<code>ExecScanHashBucket</code>" in page and "<code>btbuild</code>" in page
    assert 'href="coverage.html"' in (site / "index.html").read_text()


def test_coverage_counts_functions_by_their_inclusive_share_and_maps_clones_to_their_function(tmp_path: Path) -> None:
    assert coverage.base_name("ExecHashJoin.constprop.0.isra.0") == "ExecHashJoin"
    assert coverage.base_name("text_length.part.0") == "text_length"
    assert coverage.base_name("hash_search [dynahash.c]") == "hash_search"
    assert coverage.area_of("src/backend/executor/nodeHash.c") == "executor"
    assert coverage.area_of("src/backend/access/nbtree/nbtinsert.c") == "access/nbtree"
    assert coverage.area_of("src/backend/utils/adt/numeric.c") == "utils/adt"
    assert coverage.area_of("src/common/pg_lzcompress.c") == "common"
    assert coverage.area_of("contrib/x/y.c") is None
    root = tmp_path / "src/backend/executor"
    root.mkdir(parents=True)
    source = "static void\nExecHashIncreaseNumBatches(HashJoinTable t,\n\tint n)\n{\n}\n\nvoid\nf(void);\n"
    (root / "nodeHash.c").write_text(source)
    assert coverage.definitions(tmp_path) == {"ExecHashIncreaseNumBatches": "executor"}  # f(void); declares
    profile = callgrind.Profile(
        "Ir",
        100_000,
        {
            "main": callgrind.FunctionCost("main", "", 0, 0, 100_000),
            "big": callgrind.FunctionCost("big", "", 0, 99_990, 99_990),
            "tiny.cold": callgrind.FunctionCost("tiny.cold", "", 0, 10, 10),  # exactly 0.01%: counts
            "tinier": callgrind.FunctionCost("tinier", "", 0, 0, 9),
        },
        {},
    )
    assert coverage.exercised(profile) == {"main", "big", "tiny"}


def test_every_named_function_is_listed_once() -> None:
    names = coverage.listed()
    assert len(names) == len(set(names)) >= 49


def test_a_result_carries_its_coverage_figure_and_a_malformed_one_is_refused_with_its_path() -> None:
    doc = good()
    doc["coverage"] = coverage_doc()
    assert validate(doc)["coverage"]["groups"]["all"]["functions"] == [3, 4]
    for change, where in (
        (lambda c: c["groups"]["all"].update(functions=[5, 4]), r"\$\.coverage\.groups\.all\.functions"),
        (lambda c: c.update(version=2), r"\$\.coverage\.version"),
        (lambda c: c["groups"]["all"]["areas"].update(executor=[1]), r"\$\.coverage\.groups\.all\.areas\.executor"),
        (lambda c: c["groups"]["all"].update(listed=["x"] * 1000), r"\$\.coverage\.groups\.all\.listed"),
        (lambda c: c.update(rule=2), r"\$\.coverage\.rule"),
    ):
        bad = copy.deepcopy(doc)
        change(bad["coverage"])
        with pytest.raises(ResultError, match=where):
            validate(json.loads(json.dumps(bad)))
