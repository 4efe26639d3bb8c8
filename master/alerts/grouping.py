"""Grouping by commit range: change points whose ranges overlap on one branch, of one kind, are one alert.

A change point says "the change is in commits (prev_position, position] of this branch". Lines that share at
least one commit of that range are most likely one cause, so "commit X changed 6 workloads" is one alert with
six lines. Membership never changes once assigned: the alert's identity is its founding line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from master.alerts.rules import Line


@dataclass(frozen=True)
class Range:
    """Commits (prev_position, position] of a branch; prev_position None means 'from the start'."""

    branch: str
    kind: str
    prev_position: int | None
    position: int

    @property
    def low(self) -> int:
        return -1 if self.prev_position is None else self.prev_position

    def overlaps(self, other: Range) -> bool:
        return (self.branch, self.kind) == (other.branch, other.kind) and max(self.low, other.low) < min(
            self.position, other.position
        )

    def intersect(self, other: Range) -> Range:
        low = max(self.low, other.low)
        return Range(self.branch, self.kind, None if low < 0 else low, min(self.position, other.position))

    def hull(self, other: Range) -> Range:
        """The smallest range holding both."""
        low = min(self.low, other.low)
        return Range(self.branch, self.kind, None if low < 0 else low, max(self.position, other.position))

    @property
    def commits(self) -> int | None:
        """How many commits could be the cause (None when the range is open at the start)."""
        return None if self.prev_position is None else self.position - self.prev_position


def line_range(line: Line) -> Range:
    return Range(line.branch, line.kind, line.prev_position, line.position)


def alert_id(line: Line) -> str:
    """Stable id of an alert founded by `line`: its series key plus the change point's identity commit."""
    digest = hashlib.sha256(f"{line.series_key}\0{line.first_sha}".encode()).hexdigest()
    return f"a-{digest[:12]}"


@dataclass(frozen=True)
class OpenGroup:
    """An existing alert that new lines may join."""

    alert_id: str
    range: Range


def common_range(lines: Sequence[Line]) -> Range:
    """The commits every line's range shares; when they no longer share one (more data moved a line), the smallest
    range holding all of them: an alert's range always holds the change each of its lines reports, never just one
    line's range that leaves another's change out."""
    ranges = [line_range(x) for x in lines]
    out = ranges[0]
    for r in ranges[1:]:
        if not out.overlaps(r):
            whole = ranges[0]
            for other in ranges[1:]:
                whole = whole.hull(other)
            return whole
        out = out.intersect(r)
    return out


def assign(existing: Sequence[OpenGroup], new_lines: Sequence[Line]) -> dict[int, str]:
    """Map each new line's change point id to an alert id: an overlapping existing alert, or a new one.

    Deterministic: lines are taken in (branch, position, series key) order; the first overlapping group
    (existing ones oldest first, then groups founded in this call) wins and narrows to the shared range.
    """
    groups = [OpenGroup(g.alert_id, g.range) for g in existing]
    out: dict[int, str] = {}
    for line in sorted(new_lines, key=lambda x: (x.branch, x.position, x.series_key, x.change_point_id)):
        r = line_range(line)
        for i, g in enumerate(groups):
            if g.range.overlaps(r):
                out[line.change_point_id] = g.alert_id
                groups[i] = OpenGroup(g.alert_id, g.range.intersect(r))
                break
        else:
            aid = alert_id(line)
            groups.append(OpenGroup(aid, r))
            out[line.change_point_id] = aid
    return out
