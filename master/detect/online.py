"""Online gate: are the newest commits different from the recent stable baseline?

A distribution-free one-sided Mann-Whitney test (exact tail for the few new samples) of the newest
``h`` commits against up to ``baseline_max`` commits since the last known change, for every run length
``h`` from ``persistence`` to ``max_run`` (Bonferroni over the run lengths that can reach the level,
Tarone 1990). Persistence rule: every
one of the ``h`` commits must sit on the same side of the baseline median, so one noisy run cannot
alert. Tiers: warn at ``warn_alpha``; critical when also significant at ``critical_alpha`` and the
median moved by at least ``critical_effect`` (the rQPS red/green band).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

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
    baseline_max: int = 300
    persistence: int = 2
    max_run: int = 5
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
    runs = [h for h in range(settings.persistence, settings.max_run + 1) if n - h >= settings.baseline_min]
    # Tarone (1990): a run length whose smallest achievable p-value (every new sample beyond every
    # baseline one) cannot reach warn_alpha can never alert, so it does not share the Bonferroni budget.
    feasible = []
    for h in runs:
        start = n - h
        lo = max(stable_from, start - settings.baseline_max)
        if start - lo < settings.baseline_min:
            continue
        n_new = int(series.offsets[n] - series.offsets[start])
        n_base = int(series.offsets[start] - series.offsets[lo])
        log_min_p = math.log(2.0) - (math.lgamma(n_new + n_base + 1) - math.lgamma(n_new + 1) - math.lgamma(n_base + 1))
        if log_min_p <= math.log(settings.warn_alpha):
            feasible.append((h, start, lo))
    deff: float | None = None
    best: tuple[float, int, float] | None = None
    for h, start, lo in feasible:
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
        p = min(1.0, (p ** (1.0 / deff)) * len(feasible))
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


def level_aligned(series: Series, cuts: Sequence[int]) -> Series:
    """The series with every segment between ``cuts`` rescaled to the level of the last segment.

    Under the usual multiplicative model (a change scales throughput), dividing each segment by its
    median and multiplying by the newest segment's median makes all past commits exchangeable with
    the current ones, so the gate can use a long baseline (more evidence per new commit) even right
    after a change. Ranks keep a misplaced cut from doing more than adding a few mild outliers.
    """
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(series)), len(series)]
    if len(bounds) == 2:
        return series
    values = series.values.astype(float).copy()
    last = float(np.median(series.samples(bounds[-2], bounds[-1])))
    for lo, hi in pairwise(bounds):
        s0, s1 = int(series.offsets[lo]), int(series.offsets[hi])
        med = float(np.median(values[s0:s1]))
        if med != 0.0 and last != 0.0 and (med > 0) == (last > 0):
            values[s0:s1] *= last / med
    return Series(series.commits, values, series.offsets)


def gate_with_history(
    series: Series,
    direction: Direction = Direction.HIGHER,
    settings: OnlineSettings | None = None,
    cuts: Sequence[int] = (),
) -> GateResult:
    """Gate the newest commits against a long baseline aligned across known change points.

    Cuts among the newest ``max_run + 1`` commits are ignored so that a fresh shift is judged by the
    gate, not normalised away.
    """
    settings = settings or OnlineSettings()
    n = len(series)
    old = [c for c in cuts if c < n - settings.max_run - 1]
    return gate(level_aligned(series, old), direction, settings, stable_from=0)
