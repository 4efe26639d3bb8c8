"""The exact counters that changed, as pages, messages and `perffarm compare` show them (master/explain/counters)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from master.explain import waits
from master.explain.counters import Change, Side, changed_all, is_counter, summary, table

Measured = Mapping[str, Mapping[str, tuple[str, Sequence[float]]]]  # workload -> metric -> (unit, samples)


@dataclass(frozen=True)
class CounterReport:
    """Side B against side A: the counters that changed, ranked, as one line and as a table."""

    summary: str  # "" when no counter changed
    table: str
    changes: tuple[Change, ...]


def _sides(measured: Measured) -> dict[str, Side]:
    return {
        w: Side({m: v for m, v in metrics.items() if is_counter(m)})
        for w, metrics in measured.items()
        if any(is_counter(m) for m in metrics)
    }


def compare(a: Measured, b: Measured) -> CounterReport | None:
    """The report of B against A; None when no workload counted on both sides (nothing to say either way)."""
    sa, sb = _sides(a), _sides(b)
    if not set(sa) & set(sb):
        return None
    changes = changed_all(sa, sb)
    return CounterReport(summary(changes), table(changes), tuple(changes))


def for_bisection(conn: sqlite3.Connection, b: Any) -> CounterReport | None:
    """The culprit's counters against its parent's, from every ok run of either commit on the bisection's machine
    and recipe (its probes, and the commits' own runs, which count every instruction workload)."""
    from master import store

    if b.state != "culprit" or not b.culprit or not b.parent:
        return None
    culprit = store.runs.metrics_of(conn, b.culprit, b.machine_id, b.recipe)
    parent = store.runs.metrics_of(conn, b.parent, b.machine_id, b.recipe)
    return compare(parent, culprit)


@dataclass(frozen=True)
class WaitReport:
    """Side B's sampled waits against side A's: the shares that moved beyond their noise, as a line and a table."""

    summary: str  # "" when no share moved
    table: str
    changes: tuple[waits.WaitChange, ...]


def compare_waits(a: waits.Sampled, b: waits.Sampled) -> WaitReport | None:
    """The waits report of B against A; None when no workload was sampled on both sides."""
    judged = waits.compare(a, b)
    if judged is None:
        return None
    return WaitReport(waits.summary(judged.changes), waits.table(judged), judged.changes)


def waits_for_bisection(conn: sqlite3.Connection, b: Any) -> WaitReport | None:
    """The culprit's waits against its parent's: every sample of every ok run of either commit on the bisection's
    machine and recipe, each commit's own side (a paired run's reference is another commit)."""
    from master import store

    if b.state != "culprit" or not b.culprit or not b.parent:
        return None
    culprit = store.runs.waits_of(conn, b.culprit, b.machine_id, b.recipe)
    parent = store.runs.waits_of(conn, b.parent, b.machine_id, b.recipe)
    return compare_waits(parent, culprit)
