"""Online gate: are the newest commits different from the recent stable baseline?

A distribution-free one-sided Mann-Whitney test (exact tail for the few new samples) of the newest
``h`` commits against up to ``baseline_max`` commits since the last known change, for every run length
``h`` from ``persistence`` to ``max_run`` (Bonferroni over the run lengths). Persistence rule: every
one of the ``h`` commits must sit on the same side of the baseline median, so one noisy run cannot
alert. Tiers: warn at ``warn_alpha``; critical when also significant at ``critical_alpha`` and the
median moved by at least ``critical_effect`` (the rQPS red/green band).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from master.detect.exact import one_sided_p
from master.detect.model import ChangePoint, Direction, Kind, Series
from master.detect.ranktest import design_effect, normal_scores, tie_broken_ranks


class Tier(enum.Enum):
    """Alert level of the online gate."""

    NONE = "none"
    WARN = "warn"
    CRITICAL = "critical"


@dataclass(frozen=True)
class OnlineSettings:
    """Knobs of the online gate; defaults keep live false alerts near 0.01 per 1000 commits."""

    baseline_min: int = 20
    baseline_max: int = 200
    persistence: int = 2
    max_run: int = 4
    warn_alpha: float = 1e-5
    critical_alpha: float = 1e-6
    min_effect: float = 0.005
    critical_effect: float = 0.03


@dataclass(frozen=True)
class GateResult:
    """Verdict on the newest commits; ``change`` is where the shifted run starts (None if quiet)."""

    tier: Tier
    change: ChangePoint | None
    run_length: int


QUIET = GateResult(Tier.NONE, None, 0)


def gate(
    series: Series,
    direction: Direction = Direction.HIGHER,
    settings: OnlineSettings | None = None,
    stable_from: int = 0,
) -> GateResult:
    """Test the newest commits of ``series`` against the baseline that starts at ``stable_from``."""
    settings = settings or OnlineSettings()
    n = len(series)
    runs = range(settings.persistence, settings.max_run + 1)
    deff: float | None = None
    best: tuple[float, int, float] | None = None
    for h in runs:
        start = n - h
        lo = max(stable_from, start - settings.baseline_max)
        if start - lo < settings.baseline_min:
            break
        base = series.samples(lo, start)
        base_median = float(np.median(base))
        medians = np.array([np.median(series.samples(i, i + 1)) for i in range(start, n)])
        up = bool(np.all(medians > base_median))
        down = bool(np.all(medians < base_median))
        if not (up or down):
            continue
        new = series.samples(start, n)
        ratio = float(np.median(new)) / base_median if base_median != 0 else math.inf
        if not (ratio > 0 and abs(math.log(ratio)) >= math.log1p(settings.min_effect)):
            continue
        if deff is None:
            window = series.samples(lo, n)
            local_offsets = series.offsets[lo : n + 1] - series.offsets[lo]
            deff = design_effect(normal_scores(tie_broken_ranks(window)), local_offsets)
        p = 2.0 * one_sided_p(new, base, greater=up)
        p = min(1.0, (p ** (1.0 / deff)) * len(runs))
        if best is None or p < best[0]:
            best = (p, start, ratio)
    if best is None or best[0] > settings.warn_alpha:
        return QUIET
    p, start, ratio = best
    strong = p <= settings.critical_alpha and abs(math.log(ratio)) >= math.log1p(settings.critical_effect)
    change = ChangePoint(
        commit=series.commits[start], index=start, ratio=ratio, kind=Kind.of(ratio, direction), pvalue=p
    )
    return GateResult(Tier.CRITICAL if strong else Tier.WARN, change, n - start)
