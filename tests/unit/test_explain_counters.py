"""Which exact counters changed between two sides (master/explain): named with their size, ranked, and never a
change the samples do not show. The store path (a culprit against its parent) runs on a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from master import store
from master.explain import counters, report
from master.explain.counters import Side

Q = "syscalls/query"


def _side(**metrics: list[float]) -> Side:
    units = {"wal_bytes": "bytes/tx", "wal_fpi": "fpi/tx", "wal_records": "records/tx"}
    return Side({m.replace("__", "."): (units.get(m, Q), v) for m, v in metrics.items()})


# PostgreSQL 15.18's instr-point-select (recipes/pg/counters.py on this VM), then one open and close per query more
PARENT = _side(syscalls=[4.1, 4.1], syscalls__lseek=[2.001, 2.001], syscalls__openat=[0.015, 0.015])
CULPRIT = _side(
    syscalls=[6.1, 6.1], syscalls__lseek=[2.001, 2.001], syscalls__openat=[1.015, 1.015], syscalls__close=[1.0, 1.0]
)


def test_the_system_calls_a_commit_adds_are_named_first_with_their_size() -> None:
    got = counters.changed("instr-point-select", PARENT, CULPRIT)
    assert [c.metric for c in got] == ["syscalls.close", "syscalls.openat"]  # the total is not listed beside them
    assert [round(c.delta, 6) for c in got] == [1.0, 1.0]
    assert got[0].text() == "+1.00 close per query (+24.4% of system calls)"
    line = counters.summary(got)
    assert line == (
        "instr-point-select: +1.00 close per query (+24.4% of system calls), "
        "+1.00 openat per query (+24.4% of system calls)"
    )


def test_overlapping_samples_are_never_a_change() -> None:
    noisy_a = _side(syscalls=[4.0, 4.2], syscalls__read=[1.0, 1.2])
    noisy_b = _side(syscalls=[4.1, 4.3], syscalls__read=[1.1, 1.3])
    assert counters.changed("w", noisy_a, noisy_b) == []
    assert counters.summary([]) == ""
    # the same counts on both sides: nothing changed, and the table says so
    assert counters.changed("w", PARENT, PARENT) == []
    assert "no exact counter changed" in counters.table([])


def test_a_change_under_the_floor_is_not_listed() -> None:
    a = _side(syscalls=[1000.0, 1000.0], syscalls__read=[500.0, 500.0])
    b = _side(syscalls=[1001.0, 1001.0], syscalls__read=[501.0, 501.0])  # +0.1% of system calls
    assert counters.changed("w", a, b) == []


def test_kinds_are_ranked_by_their_change_relative_to_their_own_total() -> None:
    a = _side(syscalls=[8.0, 8.0], wal_bytes=[1000.0, 1000.0], wal_fpi=[1.0, 1.0], wal_records=[5.0, 5.0])
    b = _side(syscalls=[8.0, 8.0], wal_bytes=[1812.0, 1812.0], wal_fpi=[1.9, 1.9], wal_records=[5.0, 5.0])
    got = counters.changed("instr-simple-update", a, b)
    assert [c.metric for c in got] == ["wal_fpi", "wal_bytes"]  # +90% of its kind before +81.2%
    assert got[0].text() == "+0.90 full-page images per tx (+90.0% of full-page images)"
    assert got[1].text() == "+812.00 WAL bytes per tx (+81.2% of WAL bytes)"


def test_a_side_that_did_not_count_says_nothing() -> None:
    older = Side({"instructions": ("instructions/query", [56884.0, 56884.0])})
    assert counters.changed("w", older, CULPRIT) == []
    assert report.compare({"w": older.metrics}, {"w": CULPRIT.metrics}) is None
    r = report.compare({"w": PARENT.metrics}, {"w": CULPRIT.metrics})
    assert r is not None and r.summary.startswith("w: +1.00 close per query")
    assert "openat per query" in r.table and "0.015" in r.table and "1.015" in r.table


def _run(conn, sha: str, metrics: dict[str, tuple[str, list[float]]], run_id: int) -> None:
    conn.execute(
        "INSERT INTO runs (id, sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, config_hash, "
        "status, source, log_excerpt, host_checks, noisy, ingested_at, result) VALUES (?, ?, ?, 'master', 'b', 'w', "
        "'m-1', 'pg-quick', 1, 'c', 'ok', 'bisect', '', '{}', 0, 0, '{}')",
        (run_id, sha, sha),
    )
    for metric, (unit, samples) in metrics.items():
        conn.execute(
            "INSERT INTO measurements (run_id, workload, metric, unit, direction, samples, flags) "
            "VALUES (?, 'instr-point-select', ?, ?, 'lower', ?, '[]')",
            (run_id, metric, unit, json.dumps(samples)),
        )


def test_a_culprit_is_explained_by_the_counters_of_its_and_its_parents_runs(tmp_path: Path) -> None:
    from types import SimpleNamespace

    conn = store.connect(tmp_path / "results.db")
    with store.transaction(conn):
        conn.execute("INSERT INTO machines (id, fingerprint, first_seen) VALUES ('m-1', '{}', 0)")
        _run(conn, "a" * 40, {m: (u, list(v)) for m, (u, v) in PARENT.metrics.items()}, 1)
        _run(conn, "b" * 40, {m: (u, list(v)) for m, (u, v) in CULPRIT.metrics.items()}, 2)
    b = SimpleNamespace(state="culprit", culprit="b" * 40, parent="a" * 40, machine_id="m-1", recipe="pg-quick")
    r = report.for_bisection(conn, b)
    assert r is not None and [c.metric for c in r.changes] == ["syscalls.close", "syscalls.openat"]
    assert report.for_bisection(conn, SimpleNamespace(**{**vars(b), "state": "running"})) is None
    conn.close()


def test_one_event_in_a_whole_run_is_not_a_change_of_every_query() -> None:
    """Seen on 15.18 with one open and close per query injected: buffers dirtied went 0.002 -> 0.001 per query (one
    hint bit fewer in 1,000 queries), -50% of itself; it must neither be listed nor outrank the system calls."""
    a = Side({**PARENT.metrics, "buffers_hit": ("buffers/query", [2.006] * 2), "buffers_read": ("b", [1.053] * 2)})
    a = Side({**a.metrics, "buffers_dirtied": ("buffers/query", [0.002, 0.002])})
    b = Side({**CULPRIT.metrics, "buffers_hit": ("buffers/query", [2.006] * 2), "buffers_read": ("b", [1.053] * 2)})
    b = Side({**b.metrics, "buffers_dirtied": ("buffers/query", [0.001, 0.001])})
    assert [c.metric for c in counters.changed("w", a, b)] == ["syscalls.close", "syscalls.openat"]
    more = Side({**b.metrics, "buffers_dirtied": ("buffers/query", [1.002, 1.002])})
    (dirtied,) = [c for c in counters.changed("w", a, more) if c.metric == "buffers_dirtied"]
    assert dirtied.text() == "+1.00 buffers dirtied per query (+32.7% of buffers accessed)"


def test_one_wal_record_in_a_whole_run_is_not_a_change_of_every_query_in_bytes_either() -> None:
    """Seen on 18.6 with a buffer access per row injected (tests/benchmarks/pg_explain_accuracy.py): one WAL record
    more in the 1,000-query run, 0.003 -> 0.004 records per query (under the floor, not listed), was also +0.044 WAL
    bytes per query, +29.7% of a read-only workload's few bytes: listed, and ranked just under the +33.4% of the
    buffer hits. A byte counter's floor is one event per 100 queries of its smallest event (a WAL record's header,
    a temp block), not one byte."""
    buffers = {"buffers_read": ("buffers/query", [1.053])}
    a = Side({**buffers, "buffers_hit": ("buffers/query", [2.006])})
    b = Side({**buffers, "buffers_hit": ("buffers/query", [3.028])})
    a = Side({**a.metrics, "wal_records": ("records/query", [0.003]), "wal_bytes": ("bytes/query", [0.148])})
    b = Side({**b.metrics, "wal_records": ("records/query", [0.004]), "wal_bytes": ("bytes/query", [0.192])})
    assert [c.metric for c in counters.changed("instr-point-select", a, b)] == ["buffers_hit"]
    # one 30-byte record more per transaction is listed, in bytes as in records
    a = Side({"wal_records": ("records/tx", [4.933]), "wal_bytes": ("bytes/tx", [390.68])})
    b = Side({"wal_records": ("records/tx", [5.933]), "wal_bytes": ("bytes/tx", [420.68])})
    assert [c.metric for c in counters.changed("instr-simple-update", a, b)] == ["wal_records", "wal_bytes"]
    # a temp block more in the run (+100% of the one it wrote) is not listed; a block more per query is
    a = Side({"temp_bytes": ("bytes/query", [8.192])})
    assert counters.changed("w", a, Side({"temp_bytes": ("bytes/query", [16.384])})) == []
    assert [c.metric for c in counters.changed("w", a, Side({"temp_bytes": ("bytes/query", [8200.192])}))] == [
        "temp_bytes"
    ]


def test_a_jobs_page_says_which_counters_each_side_changed() -> None:
    """Issue #29: a job (a try patch, a release comparison) shows each side's changed counters against A, escaped."""
    from types import SimpleNamespace

    from master.publish.pages.jobs import counter_reports

    def side(metrics: Side, extra: dict) -> dict:
        ms = [{"name": m, "unit": u, "samples": list(v)} for m, (u, v) in {**metrics.metrics, **extra}.items()]
        return {"workloads": [{"name": "instr-point-select", "metrics": ms}]}

    job = SimpleNamespace(
        result={"sides": [side(PARENT, {}), side(CULPRIT, {"syscalls.<i>x": (Q, [1.0, 1.0])})]},
        sides=[SimpleNamespace(label="A"), SimpleNamespace(label="B")],
    )
    ((label, r),) = counter_reports(job)
    assert label == "B" and r.summary.startswith("instr-point-select: +1.00 ")
    assert {c.metric for c in r.changes} == {"syscalls.close", "syscalls.openat", "syscalls.<i>x"}
    assert counter_reports(SimpleNamespace(result={"sides": [side(PARENT, {})]}, sides=[])) == []
