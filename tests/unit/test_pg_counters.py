"""The exact counters beside instructions (recipes/pg/counters.py): what is read from strace, pg_waldump and
single-user mode's output. The strace tests trace a real process; the PostgreSQL outputs are real ones, kept in
tests/golden/counters/ (captured from 13.16, 15.18 and 18.6 running one pgbench -N transaction between the
markers, tests/benchmarks/pg_counters.py); the whole count on real PostgreSQL is in
tests/integration/test_pg_counters.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.pg import counters

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "counters"
needs_strace = pytest.mark.skipif(
    shutil.which("strace") is None, reason="strace is not on PATH (apt-get install strace)"
)

# opens and closes /dev/null `n` times between the markers; a child process does the same, and must not count
PROGRAM = f"""
import os, sys
n = int(sys.argv[1])
os.path.exists({counters.BEGIN!r})
for _ in range(n):
    os.close(os.open("/dev/null", os.O_RDONLY))
pid = os.fork()
if pid == 0:
    for _ in range(5):
        os.close(os.open("/dev/null", os.O_RDONLY))
    os._exit(0)
os.waitpid(pid, 0)
os.path.exists({counters.END!r})
"""


def _trace(tmp_path: Path, n: int) -> str:
    out = tmp_path / "trace.txt"
    argv = ["strace", "-f", "-qq", "-s", "48", "-o", str(out), sys.executable, "-c", PROGRAM, str(n)]
    subprocess.run(argv, check=True)
    return out.read_text()


@needs_strace
def test_system_calls_between_the_markers_of_one_process_are_counted_by_name(tmp_path: Path) -> None:
    three, seven = counters.syscalls_between(_trace(tmp_path, 3)), counters.syscalls_between(_trace(tmp_path, 7))
    # exactly the difference the program makes: +4 openat and +4 close, nothing else, the child's never
    diff = {k: seven[k] - three[k] for k in set(three) | set(seven) if seven[k] != three[k]}
    assert diff == {"openat": 4, "close": 4}, diff
    assert three["openat"] == 3 and three["close"] == 3, three


@needs_strace
def test_a_trace_without_its_end_marker_is_an_error(tmp_path: Path) -> None:
    text = _trace(tmp_path, 1)
    with pytest.raises(ValueError, match="pf-counters-end"):
        counters.syscalls_between(text.replace(counters.END, "/elsewhere"))
    with pytest.raises(ValueError, match="pf-counters-begin"):
        counters.syscalls_between(text.replace(counters.BEGIN, "/elsewhere"))


@pytest.mark.parametrize(
    "major,records,fpi",
    [(13, 6, 4), (15, 5, 3), (18, 7, 5)],
)
def test_wal_records_bytes_and_full_page_images_from_pg_waldump(major: int, records: int, fpi: int) -> None:
    text = (GOLDEN / f"pg{major}-waldump.txt").read_text()
    got = counters.wal_of(text)
    lengths = [int(ln.split("(rec/tot):")[1].split(",")[0].split("/")[1]) for ln in text.splitlines() if "rmgr:" in ln]
    assert got == {"wal_records": records, "wal_bytes": sum(lengths), "wal_fpi": fpi}
    # the bytes are the WAL between the two markers less what is not a record: a 24-byte header per 8 kB WAL page
    # and each record's alignment to 8 bytes
    (a, b), _ = counters.markers_in((GOLDEN / f"pg{major}-single-user.txt").read_text())
    span = int(b.split("/")[1], 16) - int(a.split("/")[1], 16)
    assert got["wal_bytes"] <= span <= got["wal_bytes"] + 24 * (span // 8192 + 1) + 7 * records


@pytest.mark.parametrize("major", [13, 15, 18])
def test_buffers_of_every_plan_and_its_planning_are_summed(major: int) -> None:
    text = (GOLDEN / f"pg{major}-single-user.txt").read_text()
    (_, _), block = counters.markers_in(text)
    assert block == 8192
    got = counters.buffers_of(text, block)
    # two plans (the UPDATE and the SELECT): each one's top node and planning, never a child node twice
    assert got["buffers_hit"] + got["buffers_read"] > 0 and got["temp_bytes"] == 0, got
    assert set(got) == set(counters.BUFFER_METRICS)


def test_buffers_count_the_top_node_and_planning_only() -> None:
    plan = (
        '[{"Plan": {"Shared Hit Blocks": 5, "Shared Read Blocks": 1, "Temp Written Blocks": 2, '
        '"Plans": [{"Shared Hit Blocks": 4}]}, "Planning": {"Shared Hit Blocks": 3, "Shared Dirtied Blocks": 1}}]'
    )
    out = f'\t 1: QUERY PLAN = "{plan}"\t(typeid = 114, len = -1, typmod = -1, byval = f)\n' * 2
    got = counters.buffers_of(out, 8192)
    assert got == {
        "buffers_hit": 16,
        "buffers_read": 2,
        "buffers_dirtied": 2,
        "buffers_written": 0,
        "temp_bytes": 4 * 8192,
    }


def test_only_statements_explain_can_run_are_wrapped() -> None:
    lines = counters.explained(
        ["PREPARE ps(int) AS SELECT 1;", "EXECUTE ps(3);", "BEGIN; UPDATE t SET a = 1; SELECT a FROM t; END;"]
    )
    e = counters.EXPLAIN
    assert lines == [
        "PREPARE ps(int) AS SELECT 1;",
        f"{e}EXECUTE ps(3);",
        f"BEGIN; {e}UPDATE t SET a = 1; {e}SELECT a FROM t; END;",
    ]


def test_markers_without_two_wal_positions_are_an_error() -> None:
    with pytest.raises(ValueError, match="two marker rows"):
        counters.markers_in('pg_current_wal_insert_lsn = "0/1"\ncurrent_setting = "8192"')
