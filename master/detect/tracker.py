"""One series as the service sees it: re-detect on every new commit and keep alert identities stable.

Each round runs the retrospective detector on the whole history and the online gate on the newest
commits (baseline: up to ``baseline_max`` commits, levels aligned across the retrospective change
points); retrospective points are
alerted live only below ``live_alpha``. The round is then reconciled with
what was already reported, so a change point that moves as data arrives is updated, never reported
twice.
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
    live_alpha: float = 1e-5
    reported: list[Reported] = field(default_factory=list)

    def detections(self, series: Series) -> list[ChangePoint]:
        """Retrospective change points plus the gate's verdict on the newest commits."""
        listed = offline.detect(series, self.direction, self.offline_settings)
        # A live alert needs stronger evidence than a line in the retrospective list: the detector is
        # re-run on every commit, so each run is another chance for a borderline split to appear.
        found = [cp for cp in listed if cp.pvalue <= self.live_alpha]
        verdict = online.gate_with_history(series, self.direction, self.online_settings, [cp.index for cp in listed])
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
