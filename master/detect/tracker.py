"""One series as the service sees it: re-detect on every new commit and keep alert identities stable.

Each round runs the retrospective detector on the whole history and the online gate on the newest
commits (baseline = everything since the last retrospective change point), then reconciles the
result with what was already reported, so a change point that moves as data arrives is updated,
never reported twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from master.detect import offline, online
from master.detect.identity import Reconciliation, Reported, reconcile
from master.detect.model import ChangePoint, Direction, Series


@dataclass
class Tracker:
    """Mutable per-series state of reported change points (one instance per series key)."""

    series_key: str
    direction: Direction = Direction.HIGHER
    offline_settings: offline.OfflineSettings = field(default_factory=offline.OfflineSettings)
    online_settings: online.OnlineSettings = field(default_factory=online.OnlineSettings)
    window: int = 5
    reported: list[Reported] = field(default_factory=list)

    def detections(self, series: Series) -> list[ChangePoint]:
        """Retrospective change points plus the gate's verdict on the newest commits."""
        found = offline.detect(series, self.direction, self.offline_settings)
        stable_from = found[-1].index if found else 0
        verdict = online.gate(series, self.direction, self.online_settings, stable_from)
        change = verdict.change
        if change is not None and not any(
            cp.kind is change.kind and abs(cp.index - change.index) <= self.window for cp in found
        ):
            found.append(change)
        return found

    def observe(self, series: Series) -> Reconciliation:
        """Run one round on the series as it is now and remember the reconciled reports."""
        result = reconcile(self.series_key, self.reported, self.detections(series), self.window)
        self.reported = list(result.all)
        return result
