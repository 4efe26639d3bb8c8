"""Paired wall clock per analytic query (issue #27): pgbench `-r` output read into one latency per query, and the
`pgbench-tpch` workload's result workloads, identities and groups.

The pgbench outputs are real, captured from 13.16, 15.18 and 18.6 (tests/golden/pgbench-r/README.md says how).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recipes import registry
from recipes.api import BenchFailed
from recipes.pg import pgbench, queries
from recipes.pg.procstat import Usage
from recipes.pg.profile import (
    _record,
    identities,
    is_selected,
    load_profile,
    result_names,
    workload_groups,
    workload_info,
    workload_slices,
    workloads,
)
from recipes.result import ResultError, validate
from tests.unit.test_result_schema import good

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pgbench-r"
VERSIONS = ("13.16", "15.18", "18.6")
QUERIES = [f"q{i:02d}" for i in range(1, 23)]


def _entry(profile: str = "quick") -> dict:
    return next(e for e in load_profile(profile)["workloads"] if e["name"] == "pgbench-tpch")


def _reported(text: str) -> list[float]:
    """The latencies as printed, read independently of the parser: the first number of each indented line after
    the header."""
    block = text.split("statement latencies in milliseconds", 1)[1].splitlines()[1:]
    return [float(line.split()[0]) for line in block if re.match(r"^\s+[0-9]", line)]


@pytest.mark.parametrize("version", VERSIONS)
def test_each_querys_mean_latency_is_read_from_real_pgbench_r_output(version: str) -> None:
    text = (GOLDEN / f"tpch-{version}.txt").read_text()
    got = pgbench.statement_latencies(text, QUERIES)
    assert len(got) == 22 and got == tuple(_reported(text))
    assert got[0] == {"13.16": 4.380, "15.18": 4.389, "18.6": 4.253}[version]  # Q1, the first line
    assert pgbench.parse_output(text).transactions > 0


@pytest.mark.parametrize("version", VERSIONS)
def test_a_query_that_aborts_the_run_is_named_in_a_one_line_error(version: str) -> None:
    # line 4 of the script is SELECT 1/0: every client aborts on its first transaction
    names = [*QUERIES[:3], "bad", *QUERIES[3:]]
    text = (GOLDEN / f"aborted-{version}.txt").read_text()
    with pytest.raises(BenchFailed) as e:
        pgbench.statement_latencies(text, names)
    assert e.value.message == "bad (line 4 of the script) aborted a pgbench client: ERROR: division by zero"
    assert "\n" not in e.value.message


@pytest.mark.parametrize("version", VERSIONS)
def test_a_run_aborted_part_way_is_refused_though_its_report_looks_whole(version: str) -> None:
    # clients aborted after some transactions: pgbench still prints tps and every line's latency
    names = [*QUERIES[:3], "sometimes-bad", *QUERIES[3:]]
    text = (GOLDEN / f"aborted-partly-{version}.txt").read_text()
    assert len(_reported(text)) == 23 and pgbench.parse_output(text).tps > 0
    with pytest.raises(BenchFailed, match=r"^sometimes-bad \(line 4 of the script\) aborted a pgbench client"):
        pgbench.statement_latencies(text, names)
    without_client_lines = "\n".join(ln for ln in text.splitlines() if "aborted in command" not in ln)
    with pytest.raises(BenchFailed, match="the run was aborted: its per-statement latencies are incomplete"):
        pgbench.statement_latencies(without_client_lines, names)


def test_failed_executions_and_a_report_that_does_not_match_the_script_are_refused() -> None:
    text = (GOLDEN / "tpch-15.18.txt").read_text()
    # the failures column (15+) of Q9's line, edited from 0 to 3: what a serialization failure would print
    lines = text.splitlines()
    q9 = next(i for i, ln in enumerate(lines) if "sum_profit" in ln)
    lines[q9] = re.sub(r"^(\s+[0-9.]+\s+)0 ", r"\g<1>3 ", lines[q9])
    with pytest.raises(BenchFailed, match=r"^q09: 3 executions failed"):
        pgbench.statement_latencies("\n".join(lines), QUERIES)
    with pytest.raises(BenchFailed, match="reported 22 statement latencies for a script of 21 statements"):
        pgbench.statement_latencies(text, QUERIES[:21])
    no_r = text.split("statement latencies")[0]
    with pytest.raises(BenchFailed, match=r"no per-statement latencies \(was -r given\?\)"):
        pgbench.statement_latencies(no_r, QUERIES)


def _sample(tx: int, statements: tuple[float, ...]) -> pgbench.Sample:
    out = pgbench.PgbenchOutput(tps=tx / 1.0, latency_avg_ms=1.0, transactions=tx, failed=0)
    return pgbench.Sample(out, None, None, Usage(0.1, 0.01, 10, 1000, 1.0), (), statements)


def test_slices_combine_into_each_statements_mean_over_all_their_executions() -> None:
    combined = pgbench.combine([_sample(10, (1.0, 4.0)), _sample(30, (2.0, 8.0))])
    assert combined.statements_ms == pytest.approx((1.75, 7.0))
    assert pgbench.combine([_sample(10, (1.0, 4.0)), _sample(30, ())]).statements_ms == ()


def test_the_argv_asks_for_per_statement_latencies_in_the_workloads_database(tmp_path: Path) -> None:
    class Srv:
        def bin(self, name: str) -> Path:
            return Path("/pg/bin") / name

    argv = pgbench._argv(Srv(), ["-M", "simple"], 6, tmp_path / "s", tmp_path, None, None, True, "perffarm_tpch_wall")
    assert argv[:5] == ["/pg/bin/pgbench", "-n", "-M", "simple", "-r"] and argv[-1] == "perffarm_tpch_wall"
    assert "-r" not in pgbench._argv(Srv(), ["-S"], 6, None, tmp_path, None, None)


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_pgbench_tpch_reports_one_result_workload_per_query_each_with_its_own_identity(profile: str) -> None:
    prof = load_profile(profile)
    (w,) = [w for w in workloads(prof) if w.name == "pgbench-tpch"]
    names = result_names(w)
    assert names == ["pgbench-tpch", *(f"pgbench-tpch-{q}" for q in QUERIES)]
    groups = workload_groups(prof)
    assert {groups[n] for n in names} == {"analytic"}
    recipe = registry.get(f"pg-{profile}")
    hashes = {n: recipe.workload_hash(n) for n in names}
    assert len(set(hashes.values())) == 23 and recipe.config_hash() not in hashes.values()
    # every query's series covers the whole script and data set: the statements share one connection and sample
    found = identities(prof, recipe.config["build"])
    assert found["pgbench-tpch-q05"]["files"] == found["pgbench-tpch"]["files"]
    assert {"sql/tpch-data.sql", "sql/tpch/q01.sql", "sql/tpch/q22.sql"} <= set(found["pgbench-tpch"]["files"])
    # a bisection of one query's series selects the workload by the query's result name
    assert is_selected(w, {"pgbench-tpch-q09"}) and not is_selected(w, {"tpch-q09"})
    assert "nation, o_year" in workload_info(prof, "pgbench-tpch-q09")["sql"]


def test_the_script_is_one_query_a_line_and_the_database_runs_them_serially() -> None:
    entry = _entry()
    lines = queries.script(entry).splitlines()
    assert len(lines) == 22 and all(ln.endswith(";") and not ln.startswith("\\") for ln in lines)
    assert lines[8].startswith("SELECT nation, o_year, sum(amount)")  # Q9
    assert queries.settings(entry) == {"max_parallel_workers_per_gather": "0"}
    assert entry["database"] != "perffarm_tpch"  # its own: the instruction counts' database is left as it was
    for bad, says in (
        ({"statements": []}, "`statements` must be a non-empty list"),
        ({"statements": ["q01", "q01"]}, "listed twice"),
        ({"statements": ["Q 1"]}, "must be a name like q01"),
        ({"set": {"work_mem": "1; DROP"}}, "expected a setting name and a plain value"),
        ({"database": "tpch"}, "`database` must look like perffarm_tpch"),
        ({"script": "txid.sql"}, "`statements` make its script; drop `script`"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            queries.statements({**entry, **bad})


def test_a_sample_records_each_querys_latency_under_its_own_result_workload() -> None:
    from recipes.pg.profile import Collected, Target

    (w,) = [w for w in workloads(load_profile("quick")) if w.name == "pgbench-tpch"]
    t = Target("run", None, None)  # type: ignore[arg-type]  # _record reads neither install nor server
    _record(t, w, _sample(30, tuple(float(i) for i in range(1, 23))))
    got = {r.name: r for r in t.collected.results()}
    q22 = got["pgbench-tpch-q22"].metrics
    assert [(m.name, m.unit, m.direction, m.samples) for m in q22] == [("latency_avg", "ms", "lower", (22.0,))]
    assert "tps" in {m.name for m in got["pgbench-tpch"].metrics}
    with pytest.raises(BenchFailed, match="no latency for each of its 22 lines"):
        _record(Target("run", None, None, collected=Collected()), w, _sample(30, (1.0,)))  # type: ignore[arg-type]


def test_the_master_refuses_a_bad_per_query_latency_with_its_path() -> None:
    # the per-query results are ordinary workloads: the validator the master gates on checks their samples
    doc = good()
    doc["workloads"] = [
        {"name": "pgbench-tpch-q05", "flags": ["paired:order-balanced"], "metrics": [
            {"name": "latency_avg", "unit": "ms", "direction": "lower", "samples": [1.2, 1.3]},
            {"name": "latency_avg.ratio", "unit": "ratio", "direction": "lower", "samples": [0.0]}]}
    ]  # fmt: skip
    with pytest.raises(ResultError, match=r"^\$\.workloads\[0\]\.metrics\[1\]\.samples\[0\]: 0\.0 ratio"):
        validate(doc)


def test_pgbench_tpch_takes_short_samples_in_fewer_slices_to_fit_the_quick_budget() -> None:
    # a slice lasts at least 1 s (pgbench -T): 6 slices would make its 2-s sample 6 s long (docs: Budget)
    quick = {w.name: w for w in workloads(load_profile("quick"))}
    assert quick["pgbench-tpch"].duration_s == 2
    assert workload_slices(quick["pgbench-tpch"], 6) == 2 and workload_slices(quick["pgbench-tpch"], 1) == 1
    assert workload_slices(quick["pgbench-ro-prepared-c1"], 6) == 6  # every other workload as before
    full = {w.name: w for w in workloads(load_profile("full"))}
    assert workload_slices(full["pgbench-tpch"], 1) == 1 and full["pgbench-tpch"].duration_s is None
