"""Which exact counters changed between two sides (a culprit and its parent, a job's sides, `perffarm compare`).

The instruction workloads also count system calls by name, WAL records, bytes and full-page images, and shared
buffers and temp bytes per query (recipes/pg/counters.py). Like instructions they repeat exactly, so a change is
a fact, not an estimate: a counter is listed only when its samples on the two sides do not overlap (each side's
range lies wholly above or below the other's) and the change is at least `MIN_SHARE` of that kind of counter.

Ranking: by the change relative to the parent side's total of its kind (system calls by name against all system
calls per query, buffers hit, read, dirtied or written against the buffers accessed, WAL bytes against WAL bytes,
...), largest first; a change under one event per 100 queries (`MIN_DELTA`; for bytes, of the smallest record or
block: `EVENT_BYTES`) is not listed. "+1.00 openat per query" on a workload making 4.10 system calls per query is
+24% of its system calls. That is the size of the
change in the counter's own terms. It is not a share of the time: no cost per system call or per WAL byte is
assumed, so nothing here says how much of a slowdown a counter explains, and a change the counters do not show is
not blamed on them.
Pure: no Buildbot, no store (docs/explain.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SYSCALL_PREFIX = "syscalls."
TOTALS = ("syscalls", "wal_records", "wal_bytes", "wal_fpi", "temp_bytes")
BUFFERS = ("buffers_hit", "buffers_read", "buffers_dirtied", "buffers_written")
MIN_SHARE = 0.005  # a change under 0.5% of its kind is not listed (the detection floor of steady series)
# nor one under one event per 100 queries: a single hint bit set or catalog file opened once in a 1,000-query run
# is a real difference of 0.001 per query, but says nothing about what every query does
MIN_DELTA = 0.01
# A byte counter's event is not one byte: its floor is MIN_DELTA of its smallest event, a WAL record's header
# (SizeOfXLogRecord, 24 bytes on 13, 15 and 18) or one temp block (8 kB, the default BLCKSZ). One WAL record more
# in a 1,000-query run is +0.04 bytes per query, and of a read-only workload's few WAL bytes a large share.
EVENT_BYTES = {"wal_bytes": 24.0, "temp_bytes": 8192.0}
LABELS = {
    "syscalls": "system calls",
    "wal_records": "WAL records",
    "wal_bytes": "WAL bytes",
    "wal_fpi": "full-page images",
    "temp_bytes": "temp bytes",
    "buffers_hit": "shared buffer hits",
    "buffers_read": "shared buffer reads",
    "buffers_dirtied": "buffers dirtied",
    "buffers_written": "buffers written",
}


def is_counter(metric: str) -> bool:
    """An exact counter of recipes/pg/counters.py (not instructions, not a wall-clock metric)."""
    return metric in TOTALS or metric in BUFFERS or metric.startswith(SYSCALL_PREFIX)


def label(metric: str) -> str:
    return metric[len(SYSCALL_PREFIX) :] if metric.startswith(SYSCALL_PREFIX) else LABELS.get(metric, metric)


@dataclass(frozen=True)
class Side:
    """One side's samples of one workload's metrics: metric -> (unit, samples)."""

    metrics: Mapping[str, tuple[str, Sequence[float]]]

    def values(self, metric: str) -> Sequence[float]:
        return self.metrics.get(metric, ("", ()))[1]


@dataclass(frozen=True)
class Change:
    workload: str
    metric: str
    unit: str
    before: float  # median per query (or transaction) on side A
    after: float  # on side B
    share: float  # (after - before) / side A's total of its kind: the ranking key

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def per(self) -> str:
        return self.unit.split("/", 1)[1] if "/" in self.unit else self.unit

    def text(self) -> str:
        """`+1.00 openat per query (+24.4% of system calls)`."""
        kind = "system calls" if self.metric.startswith(SYSCALL_PREFIX) else label(self.metric)
        if self.metric in BUFFERS:
            kind = "buffers accessed"
        size = f"{self.delta:+,.2f}" if abs(self.delta) < 1000 else f"{self.delta:+,.0f}"
        return f"{size} {label(self.metric)} per {self.per} ({self.share:+.1%} of {kind})"


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _base(metric: str, a: Side, b: Side) -> float:
    """The total of the metric's kind on side A (on side B when A has none of it)."""
    kinds = ("syscalls",) if metric.startswith(SYSCALL_PREFIX) else (metric,)
    if metric in BUFFERS:  # buffers dirtied or written are a share of the buffers accessed (hit + read)
        kinds = ("buffers_hit", "buffers_read")
    for side in (a, b):
        total = sum(_median(side.values(k)) for k in kinds if side.values(k))
        if total > 0:
            return total
    return 0.0


def changed(workload: str, a: Side, b: Side, min_share: float = MIN_SHARE) -> list[Change]:
    """The counters of `workload` that changed from side A to side B, largest relative change first (see the
    module docstring). A system call one side never made counts as 0 there when that side counted system calls."""
    out: list[Change] = []
    names = {m for m in (*a.metrics, *b.metrics) if is_counter(m)}
    for metric in sorted(names):
        va, vb = list(a.values(metric)), list(b.values(metric))
        if metric.startswith(SYSCALL_PREFIX):  # absent on a side that counted system calls: it made none
            va = va or ([0.0] * len(a.values("syscalls")))
            vb = vb or ([0.0] * len(b.values("syscalls")))
        if not va or not vb:
            continue  # a side that did not count it says nothing
        if not (min(vb) > max(va) or max(vb) < min(va)):
            continue  # the samples overlap: no change the counts show
        base = _base(metric, a, b)
        if base <= 0:
            continue
        ma, mb = _median(va), _median(vb)
        share = (mb - ma) / base
        if abs(share) < min_share or abs(mb - ma) < MIN_DELTA * EVENT_BYTES.get(metric, 1.0):
            continue
        unit = a.metrics.get(metric, b.metrics.get(metric, ("", ())))[0] or b.metrics[metric][0]
        out.append(Change(workload, metric, unit, ma, mb, share))
    if any(c.metric.startswith(SYSCALL_PREFIX) for c in out):  # the names say more than their total
        out = [c for c in out if c.metric != "syscalls"]
    # equal sizes (an open and a close per query) in name order, not by the last bits of a division
    return sorted(out, key=lambda c: (-round(abs(c.share), 9), c.metric))


def changed_all(a: Mapping[str, Side], b: Mapping[str, Side], min_share: float = MIN_SHARE) -> list[Change]:
    """`changed` for every workload both sides measured, workloads in name order."""
    return [c for w in sorted(set(a) & set(b)) for c in changed(w, a[w], b[w], min_share)]


def summary(changes: Sequence[Change], top: int = 3) -> str:
    """One line: the largest changes of the workload with the largest one, e.g.
    `instr-point-select: +1.00 openat per query (+24.4% of system calls), +1.00 close per query (...)`."""
    if not changes:
        return ""
    first = max(changes, key=lambda c: abs(c.share))
    mine = [c for c in changes if c.workload == first.workload][:top]
    more = len({c.workload for c in changes}) - 1
    tail = f"; {more} more workload{'s' if more != 1 else ''} changed" if more else ""
    return f"{first.workload}: " + ", ".join(c.text() for c in mine) + tail


def table(changes: Sequence[Change]) -> str:
    """The changes as a fixed-width table, one row per counter, in the order given."""
    if not changes:
        return "no exact counter changed (system calls, WAL and buffers per query are the same on both sides)"
    rows = [("workload", "counter", "before", "after", "change", "of its kind")]
    for c in changes:
        rows.append(
            (
                c.workload,
                f"{label(c.metric)} per {c.per}",
                f"{c.before:,.3f}",
                f"{c.after:,.3f}",
                f"{c.delta:+,.3f}",
                f"{c.share:+.1%}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        lines.append("  ".join(x.ljust(w) if i < 2 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)
