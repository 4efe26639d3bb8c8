"""Per-function diff of two callgrind profiles, per query: which functions' instructions grew or shrank.

Both sides ran a fixed number of identical, seeded queries, possibly a different number per side, so every cost
is divided by its side's query count before comparing. Functions a side's profile does not list count as 0 there;
after `Profile.to_json` that includes functions below its threshold (the row says which side listed it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from master.textsafe import visible
from recipes.callgrind import Profile

NAME_WIDTH = 60  # longer names (C++ templates) are cut in the terminal table


@dataclass(frozen=True)
class DiffRow:
    """One function's self and inclusive cost per query on each side, and where it is defined."""

    name: str
    file: str
    line: int
    self_a: float
    self_b: float
    inclusive_a: float
    inclusive_b: float
    in_a: bool  # listed by profile A (else its costs there are 0 or below A's JSON threshold)
    in_b: bool

    @property
    def delta_self(self) -> float:
        return self.self_b - self.self_a

    @property
    def delta_inclusive(self) -> float:
        return self.inclusive_b - self.inclusive_a

    @property
    def where(self) -> str:
        """file:line, or the file alone when the profile had no line numbers."""
        if not self.file:
            return "?"
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class Reconciliation:
    """Relative errors of the profiles' totals per query against separately measured counts per query."""

    error_a: float  # (profile - measured) / measured
    error_b: float
    tolerance: float

    @property
    def ok(self) -> bool:
        """Both sides within the tolerance: the profiles saw the same work as the measurement."""
        return abs(self.error_a) <= self.tolerance and abs(self.error_b) <= self.tolerance


@dataclass(frozen=True)
class ProfileDiff:
    """Totals and the top functions by change of self cost, all per query."""

    event: str
    queries_a: int
    queries_b: int
    total_a: float
    total_b: float
    rows: tuple[DiffRow, ...]  # sorted by |delta self|, largest first
    compared: int  # functions listed by either side
    unlisted_a: float  # self cost per query of functions A's JSON left out (in total_a, in no row)
    unlisted_b: float

    @property
    def delta_total(self) -> float:
        return self.total_b - self.total_a

    @property
    def change(self) -> float:
        """Relative change of the total per query (NaN when side A counted nothing)."""
        return self.delta_total / self.total_a if self.total_a else math.nan

    def reconcile(self, measured_a: float, measured_b: float, tolerance: float = 0.001) -> Reconciliation:
        """Whether the totals per query match instruction counts per query measured without the profiler's
        output (the instruction workload's own counts): a mismatch means the profile is not of that work."""
        if not (measured_a > 0 and measured_b > 0):
            raise ValueError(f"measured counts per query must be positive, not {measured_a!r} and {measured_b!r}")
        return Reconciliation(
            (self.total_a - measured_a) / measured_a, (self.total_b - measured_b) / measured_b, tolerance
        )


def diff(a: Profile, b: Profile, queries_a: int, queries_b: int, top: int = 20) -> ProfileDiff:
    """Profile B against profile A per query: the `top` functions by |change of self cost|, and the totals."""
    for label, queries in (("queries_a", queries_a), ("queries_b", queries_b)):
        if isinstance(queries, bool) or not isinstance(queries, int) or queries <= 0:
            raise ValueError(f"{label} must be a positive number of queries, not {queries!r}")
    if top < 0:
        raise ValueError(f"top must not be negative, not {top!r}")
    if a.event != b.event:
        raise ValueError(f"profiles of different events: {a.event!r} and {b.event!r}")
    rows = []
    for name in sorted(a.functions.keys() | b.functions.keys()):
        fa, fb = a.functions.get(name), b.functions.get(name)
        listed = [f for f in (fb, fa) if f is not None]
        where = next((f for f in listed if f.file), listed[0])  # B's file:line unless only A knows it
        rows.append(
            DiffRow(
                name,
                where.file,
                where.line,
                fa.self_cost / queries_a if fa else 0.0,
                fb.self_cost / queries_b if fb else 0.0,
                fa.inclusive_cost / queries_a if fa else 0.0,
                fb.inclusive_cost / queries_b if fb else 0.0,
                fa is not None,
                fb is not None,
            )
        )
    rows.sort(key=lambda r: (-abs(r.delta_self), -abs(r.delta_inclusive), r.name))
    return ProfileDiff(
        a.event,
        queries_a,
        queries_b,
        a.total / queries_a,
        b.total / queries_b,
        tuple(rows[:top]),
        len(rows),
        a.dropped_self / queries_a,
        b.dropped_self / queries_b,
    )


def format_table(d: ProfileDiff) -> str:
    """The diff as an aligned table for a terminal (names with control characters shown as escapes)."""
    label = _label(d.event)
    lines = [
        f"{label} per query: A {d.total_a:,.1f} ({d.queries_a} queries)  B {d.total_b:,.1f} "
        f"({d.queries_b} queries)  delta {d.delta_total:+,.1f} ({_percent(d.total_a, d.total_b)})"
    ]
    header = ("function", "self A", "self B", "delta self", "self %", "incl A", "incl B", "delta incl", "where")
    table = [header]
    for r in d.rows:
        table.append(
            (
                _cut(visible(r.name)),
                f"{r.self_a:,.1f}",
                f"{r.self_b:,.1f}",
                f"{r.delta_self:+,.1f}",
                _percent(r.self_a, r.self_b),
                f"{r.inclusive_a:,.1f}",
                f"{r.inclusive_b:,.1f}",
                f"{r.delta_inclusive:+,.1f}",
                visible(r.where),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:-1], widths[1:-1])]
        cells.append(row[-1])
        lines.append("  ".join(cells).rstrip())
    lines.append(f"{len(d.rows)} of {d.compared} functions, by |delta self|; costs are {label} per query")
    if d.unlisted_a or d.unlisted_b:
        lines.append(
            f"not listed by the profiles (below their JSON threshold): self A {d.unlisted_a:,.1f}, "
            f"self B {d.unlisted_b:,.1f} per query"
        )
    return "\n".join(lines) + "\n"


def summary(d: ProfileDiff) -> str:
    """One line for an alert: the change of the total per query and the function whose self cost moved most."""
    head = f"{_percent(d.total_a, d.total_b, 1)} {_label(d.event)}/query"
    if not d.rows or d.rows[0].delta_self == 0:
        return f"{head}; no function's self cost changed"
    top = d.rows[0]
    return f"{head}; top: {visible(top.name)} {top.delta_self:+,.0f}/query self"


def _label(event: str) -> str:
    return "instructions" if event == "Ir" else visible(event)


def _percent(a: float, b: float, digits: int = 2) -> str:
    if a == 0:
        return "new" if b else "0%"
    return f"{(b - a) / a * 100:+.{digits}f}%"


def _cut(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + "..."
