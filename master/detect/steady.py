"""Change points of deterministic series: instruction counts and other metrics that repeat exactly.

A distribution-free test knows nothing of magnitudes: on a series whose samples repeat to the last digit the
samples of one commit are perfectly correlated, the design effect makes every commit worth one observation,
and two new commits against twenty can never reach the rank tier's level (at best p = 1/C(22, 2) per run
length) — while a 4% jump in instructions per query is as certain as a measurement gets. rustc-perf, which
makes instruction counts its primary signal, judges them by magnitude against the benchmark's own history of
commit-to-commit changes; this module does the same.

A series is *steady* when every commit has at least two samples and each commit's samples agree within
``cv`` (relative range, default 1e-4; valgrind's counts repeat within 0.001%). Wall-clock series never are, so
the rank and tail detectors keep every other series.

A change is a commit whose median moves from the level of the commits before it by more than the threshold —
the larger of ``min_effect`` (the farm's ``[detection] min_effect``, 0.5% by default, as for the gate) and a
fence on the commit-to-commit changes within that level (its last ``baseline_max`` commits; Q3 + 3·IQR of their
absolute values, rustc-perf's significance rule) — and the next ``persistence - 1`` commits stay on that side
(a one-commit spike, say a reverted commit, is not a change). The level before must rest on at least
``baseline_min`` commits. The p-value is the normal tail of the step in units of the level's commit-to-commit
scatter (1.4826·MAD, never below ``cv``), floored at 1e-300: for deterministic counts it is the certainty the
magnitude gives, and it lets the farm's false-discovery control admit the point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from master.detect.config import MIN_EFFECT
from master.detect.model import ChangePoint, Direction, Kind, Series


@dataclass(frozen=True)
class SteadySettings:
    cv: float = 1e-4
    min_effect: float = MIN_EFFECT
    fence_iqr: float = 3.0
    persistence: int = 2
    baseline_min: int = 3
    baseline_max: int = 100  # commits of the current level whose scatter sets the fence


def _steady_medians(series: Series, settings: SteadySettings) -> np.ndarray | None:
    """The commit medians when every commit has >= 2 samples that agree within ``settings.cv``, else None."""
    if len(series) == 0 or int(series.counts.min()) < 2:
        return None
    starts = series.offsets[:-1]
    spread = np.maximum.reduceat(series.values, starts) - np.minimum.reduceat(series.values, starts)
    med = series.commit_medians()
    return med if bool(np.all(spread <= settings.cv * np.maximum(np.abs(med), np.finfo(float).tiny))) else None


def is_steady(series: Series, settings: SteadySettings = SteadySettings()) -> bool:
    """Every commit has >= 2 samples that agree within ``settings.cv`` (relative range)."""
    return _steady_medians(series, settings) is not None


def detect_if_steady(
    series: Series, direction: Direction, settings: SteadySettings = SteadySettings()
) -> list[ChangePoint] | None:
    """``detect`` for a steady series; None when the series is not steady (the rank detectors' case)."""
    m = _steady_medians(series, settings)
    return None if m is None else _detect(series, m, direction, settings)


def _scatter(medians: np.ndarray, settings: SteadySettings) -> tuple[float, float]:
    """(threshold, scale) from the commit-to-commit relative changes of a level's commits."""
    prev = medians[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.abs(medians[1:] / prev - 1.0)
    steps = steps[np.isfinite(steps)]
    if len(steps) < 4:
        return settings.min_effect, settings.cv
    q1, q3 = np.quantile(steps, [0.25, 0.75])
    fence = q3 + settings.fence_iqr * (q3 - q1)
    mad = float(np.median(np.abs(steps - np.median(steps))))
    return max(settings.min_effect, float(fence)), max(1.4826 * mad, settings.cv)


def detect(series: Series, direction: Direction, settings: SteadySettings = SteadySettings()) -> list[ChangePoint]:
    """Change points of a steady series (see the module docstring), oldest first."""
    return _detect(series, series.commit_medians(), direction, settings)


def _detect(series: Series, m: np.ndarray, direction: Direction, settings: SteadySettings) -> list[ChangePoint]:
    n = len(m)
    if n < settings.baseline_min + settings.persistence:
        return []
    w = settings.baseline_max
    # the median of the w commits before i, for every i >= w: used where the window lies inside the level
    rolling = np.median(np.lib.stride_tricks.sliding_window_view(m[:-1], w), axis=1) if n > w else None
    found: list[ChangePoint] = []
    seg_start = 0
    i = settings.baseline_min
    while i + settings.persistence <= n:
        start = max(seg_start, i - w)
        if i - seg_start < settings.baseline_min:
            i += 1
            continue
        level = float(rolling[i - w]) if rolling is not None and start == i - w else float(np.median(m[start:i]))
        # cheap test first: the threshold is never below min_effect
        if level == 0.0 or abs(m[i] / level - 1.0) <= settings.min_effect:
            i += 1
            continue
        threshold, scale = _scatter(m[start:i], settings)
        moved = m[i : i + settings.persistence] / level - 1.0
        up, down = bool(np.all(moved > threshold)), bool(np.all(moved < -threshold))
        if not (up or down):
            i += 1
            continue
        ratio = float(np.median(m[i : i + settings.persistence])) / level
        z = float(np.min(np.abs(moved))) / scale
        p = max(math.erfc(z / math.sqrt(2.0)), 1e-300)
        found.append(
            ChangePoint(commit=series.commits[i], index=i, ratio=ratio, kind=Kind.of(ratio, direction), pvalue=p)
        )
        seg_start = i
        i += settings.baseline_min
    return found
