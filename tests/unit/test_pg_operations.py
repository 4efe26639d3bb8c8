"""The operation suite as data (recipes/pg/operations.py, profiles/*.json, sql/ops/): every operation has its SQL,
every group is known, the session is one line per operation, and the data set is sized and seeded as the docs say.
Running it on real PostgreSQL: tests/integration/test_pg_operations.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recipes.pg import operations
from recipes.pg.profile import (
    group_of,
    is_selected,
    load_profile,
    needs_valgrind,
    profile_names,
    result_names,
    selected_names,
    workload_cpus,
    workload_groups,
    workloads,
)

REPO = Path(__file__).resolve().parents[2]
SQL = REPO / "recipes/pg/sql"
GROUPS = json.loads((REPO / "recipes/pg/groups.json").read_text())["groups"]


def op_entries() -> list[tuple[str, dict]]:
    return [(p, e) for p in profile_names() for e in load_profile(p)["workloads"] if e["kind"] == "operations"]


def test_the_quick_profile_carries_the_operation_suite_with_every_subsystem_the_issue_lists() -> None:
    [entry] = [e for p, e in op_entries() if p == "quick" and e["name"] == "op"]
    names = {o.name for o in operations.operations(entry)}
    # issue 27, item 1: at least these, by the names the site and alerts show (op-<name>)
    for wanted in (
        "scan-seq scan-index scan-index-only scan-bitmap join-nestloop join-hash join-merge sort-memory "
        "sort-external agg-hash agg-group window-rank cte-materialized cte-recursive subplan-correlated "
        "setop-union distinct limit-topn partition-prune plan-join-many plan-partitions insert-multirow "
        "insert-on-conflict update-non-hot delete trigger-row fk-check plpgsql-loop copy-from-text copy-from-csv "
        "copy-from-binary copy-to-text copy-to-csv copy-to-binary index-btree index-hash index-gin index-gist "
        "index-brin index-spgist vacuum analyze numeric-arith numeric-agg float-arith float-agg text-like "
        "text-regex text-collate jsonb-in jsonb-out jsonb-ops array-ops timestamp-ops fts-parse fts-match "
        "toast-compress toast-detoast"
    ).split():
        assert wanted in names, wanted
    assert [w.name for w in workloads(load_profile("quick")) if w.name.startswith("pgbench-parallel")] == [
        "pgbench-parallel-agg-c1"
    ]


def test_every_operation_has_its_sql_and_every_sql_file_of_the_suite_is_an_operation() -> None:
    used: dict[str, set[str]] = {}
    for profile, entry in op_entries():
        for op in operations.operations(entry):
            path = SQL / op.script
            assert path.is_file(), f"{profile}: op-{op.name} has no {path.relative_to(REPO)}"
            used.setdefault(op.folder, set()).add(path.name)
        assert (SQL / entry["data"]).is_file() and (SQL / entry["session"]).is_file()
    assert set(used) == {operations.OP_DIR, "tpch"}
    for folder, names in used.items():
        assert {p.name for p in (SQL / folder).glob("*")} == names, folder


def test_every_workload_and_operation_names_a_known_group() -> None:
    for name in profile_names():
        profile = load_profile(name)
        found = workload_groups(profile)
        assert set(found) >= {n for w in workloads(profile) for n in result_names(w)}
        unknown = {w: g for w, g in found.items() if g not in GROUPS}
        assert unknown == {}, f"profile {name}: groups not in recipes/pg/groups.json: {unknown}"
    quick = load_profile("quick")
    assert group_of(quick, "op-join-hash") == "executor"
    assert group_of(quick, "op-copy-from-csv") == "copy"
    assert group_of(quick, "pgbench-parallel-agg-c1") == "parallel"
    assert group_of(load_profile("full"), "insert-benchmark-qp100") == "insert-benchmark"  # a step: its entry's
    assert group_of(quick, "no-such-workload") == ""


def test_the_session_is_one_line_per_operation_as_a_single_user_backend_reads_it() -> None:
    for _, entry in op_entries():
        ops = operations.operations(entry)
        lines = operations.session(entry)
        assert len(lines) == 1 + len(ops)  # the session's set-up line, then one per operation (callgrind dumps)
        for op, line in zip(ops, lines[1:]):
            assert "\n" not in line and line.endswith(";"), op.name
            assert "--" not in line, f"{op.name}: a comment left inside the line"
            assert not re.search(r"\brandom\(", line, re.I), f"{op.name}: random() is not deterministic"
        assert operations.session(entry, 3) == lines[:4]


@pytest.mark.parametrize("data", ["ops-data.sql", "tpch-data.sql"])
def test_the_data_set_is_deterministic_and_small_enough_for_callgrind_and_a_full_analyze_sample(data) -> None:
    text = "\n".join(ln for ln in (SQL / data).read_text().splitlines() if not ln.startswith("--"))
    assert not re.search(r"\brandom\(", text, re.I)
    # ANALYZE reads every row of a table of at most 300 x default_statistics_target (100) rows: the planner's
    # statistics (and with them plans and hash table sizes) are then the same on every run
    sizes = [int(n) for n in re.findall(r"generate_series\(1, (\d+)\)", text)]
    assert sizes and max(sizes) <= 30_000
    if data == "ops-data.sql":
        for var in operations.COPY_FILES:
            assert f":'{var}'" in text


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda e: e.update(operations=[]), "non-empty list"),
        (lambda e: e["operations"].append({"op": "Bad Name", "group": "executor"}), "needs an `op` name"),
        (lambda e: e["operations"].append({"op": "no-group"}), "needs a `group`"),
        (lambda e: e["operations"].append(dict(e["operations"][0])), "listed twice"),
        (lambda e: e.update(database="postgres"), "`database` must look like perffarm_tpch"),
        (lambda e: e.update(database="perffarm_x; DROP"), "`database` must look like perffarm_tpch"),
        (lambda e: e.update(dir="../conf"), "`dir` must be a folder name"),
    ],
)
def test_a_malformed_operation_list_is_refused_with_the_entry_named(change, says) -> None:
    entry = json.loads(json.dumps(op_entries()[0][1]))
    change(entry)
    assert entry["name"] == "op"
    with pytest.raises(ValueError, match=says) as e:
        operations.operations(entry)
    assert "'op'" in str(e.value)


def test_selecting_one_operation_selects_the_suite_and_reports_that_operation_only() -> None:
    quick = load_profile("quick")
    suite = next(w for w in workloads(quick) if w.name == "op")
    assert is_selected(suite, {"op-join-hash"}) and is_selected(suite, {"op"}) and is_selected(suite, set())
    assert not is_selected(suite, {"instr-point-select"})
    assert selected_names(quick, {"workloads": "op-join-hash,instr-point-select"}) == [
        "instr-point-select",
        "op-join-hash",
    ]
    assert len(selected_names(quick, {"workloads": "op"})) == len(suite.spec["operations"])
    assert needs_valgrind(quick, {"op-vacuum"}) and not needs_valgrind(quick, {"pgbench-ro-simple-c1"})


def test_the_parallel_workload_is_never_pinned_to_one_cpu() -> None:
    quick = load_profile("quick")
    by_name = {w.name: w for w in workloads(quick)}
    assert workload_cpus(by_name["pgbench-ro-simple-c1"], "auto", [0, 1]) == [1]
    assert workload_cpus(by_name["pgbench-parallel-agg-c1"], "auto", [0, 1]) is None  # its workers need the others
