"""Stable identity for reported change points: a re-run matches and updates, it never duplicates.

Identity is (series key, commit first reported). A new detection of the same direction within
``window`` commits of a reported one is the same change moved by more data; pairs are matched
closest-first, one to one. A withdrawn report (more data took its evidence away) still matches:
if the change comes back, the old identity is reactivated rather than a second one created.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from master.detect.model import ChangePoint


@dataclass(frozen=True)
class Reported:
    """A change point already reported; ``first_commit`` is its identity within ``series_key``."""

    series_key: str
    first_commit: str
    current: ChangePoint
    active: bool = True

    @property
    def identity(self) -> tuple[str, str]:
        """The stable key used by alerts and the site."""
        return (self.series_key, self.first_commit)


@dataclass(frozen=True)
class Reconciliation:
    """Outcome of matching one detection round against what was reported before."""

    unchanged: tuple[Reported, ...]
    updated: tuple[Reported, ...]
    new: tuple[Reported, ...]
    unmatched_old: tuple[Reported, ...]
    withdrawn: tuple[Reported, ...] = ()

    @property
    def all(self) -> tuple[Reported, ...]:
        """Every report to keep (withdrawn ones too, so they can be matched again), in commit order."""
        items = self.unchanged + self.updated + self.new + self.unmatched_old + self.withdrawn
        return tuple(sorted(items, key=lambda r: r.current.index))


def reconcile(
    series_key: str, reported: Sequence[Reported], detected: Sequence[ChangePoint], window: int = 5
) -> Reconciliation:
    """Match ``detected`` to ``reported`` (same kind, |Δindex| <= window, closest first).

    A matched withdrawn report comes back as ``updated`` and active. Deciding whether an unmatched
    report is withdrawn is the caller's job (``Tracker.observe``, ``analysis``); here it stays in
    ``unmatched_old`` as it was.
    """
    if window < 0:
        raise ValueError("window must be >= 0")
    pairs = sorted(
        (abs(r.current.index - d.index), i, j)
        for i, r in enumerate(reported)
        for j, d in enumerate(detected)
        if r.current.kind is d.kind and abs(r.current.index - d.index) <= window
    )
    used_old: set[int] = set()
    used_new: set[int] = set()
    unchanged: list[Reported] = []
    updated: list[Reported] = []
    for _, i, j in pairs:
        if i in used_old or j in used_new:
            continue
        used_old.add(i)
        used_new.add(j)
        old, det = reported[i], detected[j]
        if det == old.current and old.active:
            unchanged.append(old)
        else:
            updated.append(replace(old, current=det, active=True))
    new = [Reported(series_key, d.commit, d) for j, d in enumerate(detected) if j not in used_new]
    stale = [r for i, r in enumerate(reported) if i not in used_old]
    return Reconciliation(tuple(unchanged), tuple(updated), tuple(new), tuple(stale))
