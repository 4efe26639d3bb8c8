"""Paired wall clock per analytic query (issue #27): pgbench `-r` output read into one latency per query.

The pgbench outputs are real, captured from 13.16, 15.18 and 18.6 (tests/golden/pgbench-r/README.md says how).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recipes.api import BenchFailed
from recipes.pg import pgbench
from recipes.pg.procstat import Usage

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pgbench-r"
VERSIONS = ("13.16", "15.18", "18.6")
QUERIES = [f"q{i:02d}" for i in range(1, 23)]


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
