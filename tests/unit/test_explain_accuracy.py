"""How tests/benchmarks/pg_explain_accuracy.py reads what the farm named first from `perffarm compare --json`."""

from __future__ import annotations

from typing import Any

from tests.benchmarks.pg_explain_accuracy import KINDS, judge

KIND = {k.name: k for k in KINDS}


def counter(metric: str, share: float, workload: str = "instr-point-select") -> dict[str, Any]:
    return {"workload": workload, "metric": metric, "share": share, "text": f"{metric} {share:+.1%}"}


def wait(name: str, before: float, after: float) -> dict[str, Any]:
    return {"workload": "pgbench-ro-prepared-c2", "wait": name, "before": before, "after": after, "text": name}


def doc(counters=(), waits=(), instructions: float | None = None) -> dict[str, Any]:
    comparisons = [] if instructions is None else [{"metric": "instructions", "ratio": instructions}]
    return {"counters": {"B": list(counters)}, "waits": {"B": list(waits)}, "comparisons": comparisons}


def test_the_counter_with_the_largest_share_is_named_first_whatever_the_list_order() -> None:
    # compare lists workloads in name order: the first of the list is not the farm's first (its summary's)
    d = doc([counter("syscalls.pread64", 0.05, "instr-a"), counter("buffers_hit", 0.33, "instr-b")])
    v = judge(KIND["buffer"], d)
    assert (v.first, v.verdict) == ("buffers_hit", "correct")
    assert v.also == ("instr-a: syscalls.pread64 +5.0%",)
    assert judge(KIND["syscall"], d).verdict == "misnamed"


def test_a_counter_comes_before_any_wait_and_nothing_named_is_a_miss() -> None:
    d = doc([counter("syscalls.clock_nanosleep", 0.2)], [wait("LWLock:AutovacuumSchedule", 0.0, 0.9)])
    assert judge(KIND["lock"], d).verdict == "misnamed"
    assert judge(KIND["wal"], doc()).verdict == "missed"


def test_a_wait_is_named_only_when_it_rose_and_cpu_never() -> None:
    lock = judge(KIND["lock"], doc(waits=[wait("CPU", 0.5, 0.1), wait("LWLock:AutovacuumSchedule", 0.0, 0.8)]))
    assert (lock.first, lock.verdict) == ("LWLock:AutovacuumSchedule", "correct")
    # a busy loop keeps backends on CPU longer: the client wait falls; that is not a cause blamed
    fell = doc(waits=[wait("Client:ClientRead", 0.44, 0.30), wait("CPU", 0.54, 0.70)], instructions=1.19)
    cpu = judge(KIND["cpu"], fell)
    assert (cpu.first, cpu.verdict) == ("", "correct")
    assert cpu.also == ("pgbench-ro-prepared-c2: Client:ClientRead",)
    assert judge(KIND["lock"], fell).verdict == "missed"


def test_the_control_is_missed_when_instructions_did_not_rise_and_misnamed_when_anything_is_named() -> None:
    assert judge(KIND["cpu"], doc(instructions=1.001)).verdict == "missed"
    assert judge(KIND["cpu"], doc([counter("wal_records", 0.2)], instructions=1.2)).verdict == "misnamed"
    rose = doc(waits=[wait("LWLock:BufferContent", 0.0, 0.1)], instructions=1.2)
    assert judge(KIND["cpu"], rose).verdict == "misnamed"
