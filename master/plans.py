"""Plan changes (issue #27, item 2): where the plan an analytic query ran with changed along a branch.

A worker captures each analytic query's plan shape per run (recipes/pg/plans.py); the store keeps one row per
(run, workload) and reads them per series in first-parent order (`store.series.plan_points`). A **plan change**
is a measured commit whose shape differs from the shape at the series' previous measured commit: an event of its
own, whether or not the count moved, so that a commit that turns Q9's hash join into a nested loop is named even
when the new plan happens to cost the same. The site marks it on the query's chart, lists it on the commit page
and in the alerts page and feed, headed like "tpch-q09: Hash Join → Nested Loop at 1a2b3c4d5e6f".

Pure: no SQL, no Buildbot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from recipes.pg.plans import summary


@dataclass(frozen=True)
class PlanChange:
    """One plan change of one series: the commit it is first seen at and the measured commit before it."""

    workload: str
    position: int
    sha: str
    prev_position: int
    prev_sha: str
    before: str
    after: str

    @property
    def summary(self) -> str:
        return summary(self.before, self.after)

    @property
    def headline(self) -> str:
        return f"{self.workload}: {self.summary} at {self.sha[:12]}"


@dataclass(frozen=True)
class PlanSpan:
    """One plan a series ran with over consecutive measured commits (first to last, inclusive)."""

    first_position: int
    first_sha: str
    last_position: int
    last_sha: str
    commits: int
    shape: str


def changes(workload: str, points: Sequence[tuple[int, str, str]]) -> list[PlanChange]:
    """The plan changes of a series from its (position, sha, shape) points, oldest first."""
    out = []
    ordered = sorted(points)
    for (p0, s0, before), (p1, s1, after) in zip(ordered, ordered[1:]):
        if before != after:
            out.append(PlanChange(workload, p1, s1, p0, s0, before, after))
    return out


T = TypeVar("T")


def named_by_alert(
    changes_at: Mapping[str, Sequence[T]], shas: Iterable[str | None], held: Callable[[T], bool]
) -> list[T]:
    """The plan changes an alert names: of a series the alert holds (`held`), first seen at its commit or its culprit
    (`shas`; the query that got slower also changed plan there). `changes_at` maps a sha to the plan changes first
    seen there; the site's alert pages and the alert channels' messages both ask this."""
    return [r for sha in sorted({s for s in shas if s}) for r in changes_at.get(sha, []) if held(r)]


def spans(points: Sequence[tuple[int, str, str]]) -> list[PlanSpan]:
    """The plan history of a series: each run of consecutive measured commits with one plan, oldest first."""
    out: list[PlanSpan] = []
    for position, sha, shape in sorted(points):
        if out and out[-1].shape == shape:
            last = out[-1]
            out[-1] = PlanSpan(last.first_position, last.first_sha, position, sha, last.commits + 1, shape)
        else:
            out.append(PlanSpan(position, sha, position, sha, 1, shape))
    return out
