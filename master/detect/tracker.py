"""One series as the service sees it: re-detect on every new commit and keep alert identities stable.

Each round runs the retrospective detector on the whole history and the online gate on the newest
commits (baseline: up to ``baseline_max`` commits, levels aligned across the retrospective change
points). Every retrospective point the detector lists (p <= ``OfflineSettings.alpha``, the same list
`perffarm detect` prints) is a detection; the gate adds the newest commits when they already differ.
The round is then reconciled with what was already reported, so a change point that moves as data
arrives is updated, never reported twice; a reported point the detector no longer lists is re-tested
where it is, and withdrawn only when the evidence is gone (``keep_alpha``, a looser level than the one
that reported it, so a borderline point does not flap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from master.detect import offline, online, paired, steady
from master.detect.config import KEEP_ALPHA, DetectionSettings
from master.detect.identity import Reconciliation, Reported, reconcile
from master.detect.model import ChangePoint, Direction, Kind, Series


def detector_settings(
    detection: DetectionSettings,
) -> tuple[offline.OfflineSettings, online.OnlineSettings, steady.SteadySettings]:
    """The three detectors' settings under the farm's ``[detection]`` section (the rest keep their defaults)."""
    return (
        offline.OfflineSettings(min_effect=detection.min_effect),
        online.OnlineSettings(min_effect=detection.min_effect),
        steady.SteadySettings(min_effect=detection.min_effect),
    )


def still_holds(
    series: Series,
    report: Reported,
    detections: Sequence[ChangePoint],
    direction: Direction,
    settings: offline.OfflineSettings | None = None,
    keep_alpha: float = KEEP_ALPHA,
    boundaries: Sequence[int] = (),
) -> bool:
    """Whether a reported change the detector stopped listing is still there, tested at its own commit.

    The split at the reported commit, between the nearest current detections (and segment ``boundaries``),
    must still be significant at ``keep_alpha`` and point the same way.
    """
    cp = report.current
    if not 0 < cp.index < len(series):
        return True  # outside the data we have: nothing to judge it by
    p, ratio = offline.support(series, cp.index, [*(d.index for d in detections), *boundaries], settings)
    return p <= keep_alpha and Kind.of(ratio, direction) is cp.kind


def review_unmatched(
    series: Series,
    result: Reconciliation,
    detections: Sequence[ChangePoint],
    direction: Direction,
    settings: offline.OfflineSettings | None = None,
    keep_alpha: float = KEEP_ALPHA,
    boundaries: Sequence[int] = (),
) -> Reconciliation:
    """Move active reports that no longer hold from ``unmatched_old`` to ``withdrawn`` (inactive)."""
    kept: list[Reported] = []
    withdrawn: list[Reported] = []
    for r in result.unmatched_old:
        if r.active and not still_holds(series, r, detections, direction, settings, keep_alpha, boundaries):
            withdrawn.append(replace(r, active=False))
        else:
            kept.append(r)
    return replace(result, unmatched_old=tuple(kept), withdrawn=tuple(withdrawn))


@dataclass
class Tracker:
    """Mutable per-series state of reported change points (one instance per series key)."""

    series_key: str
    direction: Direction = Direction.HIGHER
    offline_settings: offline.OfflineSettings = field(default_factory=offline.OfflineSettings)
    online_settings: online.OnlineSettings = field(default_factory=online.OnlineSettings)
    steady_settings: steady.SteadySettings = field(default_factory=steady.SteadySettings)
    window: int = 5
    keep_alpha: float = KEEP_ALPHA
    reported: list[Reported] = field(default_factory=list)
    # a paired ratio series (rQPS against a pinned reference): the newest commits are judged by the paired gate
    paired_settings: paired.PairedSettings | None = None

    @classmethod
    def configured(
        cls, series_key: str, direction: Direction, detection: DetectionSettings, window: int = 5, ratio: bool = False
    ) -> Tracker:
        """A tracker whose detectors and retraction level follow the farm's ``[detection]`` settings; ``ratio``:
        the series is paired rQPS (``<metric>.rqps``), whose newest commits the paired gate judges."""
        off, on, st = detector_settings(detection)
        pair = paired.PairedSettings(min_effect=detection.min_effect) if ratio else None
        return cls(
            series_key, direction, off, on, st, window=window, keep_alpha=detection.keep_alpha, paired_settings=pair
        )

    def detections(self, series: Series, boundaries: Sequence[int] = ()) -> list[ChangePoint]:
        """Retrospective change points plus the gate's verdict on the newest commits (for a steady series —
        instruction counts that repeat exactly — the magnitude rule of ``steady`` instead).

        ``boundaries`` cut the series into segments searched on their own (the commits where a paired series'
        reference changed: a rebase is a new baseline, never a change); the gate judges the newest segment.
        """
        cuts = sorted({b for b in boundaries if 0 < b < len(series)})
        if not cuts:
            return self._detections(series, gate=True)
        found: list[ChangePoint] = []
        edges = [0, *cuts, len(series)]
        for lo, hi in zip(edges, edges[1:]):
            part = self._detections(series.window(lo, hi), gate=hi == len(series))
            found.extend(replace(cp, index=cp.index + lo) for cp in part if cp.index > 0)
        return found

    def _detections(self, series: Series, gate: bool) -> list[ChangePoint]:
        found_steady = steady.detect_if_steady(series, self.direction, self.steady_settings)
        if found_steady is not None:
            return found_steady
        found = offline.detect(series, self.direction, self.offline_settings)
        if not gate:
            return found
        cuts = [cp.index for cp in found]
        if self.paired_settings is not None:
            verdict = paired.gate_with_history(series, self.direction, self.paired_settings, tuple(cuts))
        else:
            verdict = online.gate_with_history(series, self.direction, self.online_settings, cuts)
        change = verdict.change
        if change is not None and not any(
            cp.kind is change.kind and abs(cp.index - change.index) <= self.window for cp in found
        ):
            found.append(change)
            found.sort(key=lambda cp: cp.index)
        return found

    def observe(self, series: Series, boundaries: Sequence[int] = ()) -> Reconciliation:
        """Run one round on the series as it is now and remember the reconciled reports."""
        detected = self.detections(series, boundaries)
        result = reconcile(self.series_key, self.reported, detected, self.window)
        result = review_unmatched(
            series, result, detected, self.direction, self.offline_settings, self.keep_alpha, boundaries
        )
        self.reported = list(result.all)
        return result
