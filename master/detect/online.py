"""Online gate: are the newest commits different from the recent stable baseline?

Two tiers, each with its own Bonferroni budget over its run lengths (Tarone 1990: run lengths that
cannot reach the level do not share it), so the gate's nominal level is twice ``warn_alpha``:

* **Rank tier** — a distribution-free one-sided Mann-Whitney test (exact tail for the few new samples)
  of the newest ``h`` commits against up to ``baseline_max`` commits since the last known change, for
  every run length ``h`` from ``persistence`` to ``max_run``. Exact whatever the noise, but capped by
  the baseline: with one sample per commit, two new commits can reach at best p = 2/C(302, 2) =
  4.4e-5, and one outlying baseline commit above the new ones costs it an order of magnitude.
* **Tail tier** — only where the rank tier lacks resolution, i.e. when the newest ``tail_run``
  commits have one sample each (with k samples a commit, 3k new samples leave the rank tier far more
  room than it needs, and the commit medians of bimodal noise cluster in ways its samples do not).
  The probability that every new commit lies at least as far out as the least extreme of them,
  with the baseline's tail beyond its top ``tail_share`` extrapolated by a generalised Pareto law
  (peaks over threshold, Pickands 1975) whose shape is raised to its one-sided 95 % bound and never
  below the exponential's, so the extrapolation errs towards calm on Gaussian, lognormal or
  bimodal noise and follows Student-t noise. New commits that are not beyond the threshold give
  no tail evidence (the rank tier owns the body of the distribution). Three commits, not two: two
  consecutive outlying runs are common enough on a farm (about 1e-4 per commit at a 1 % outlier
  rate) to look like a two-commit step to any test.

Persistence rule: every one of the ``h`` commits must sit on the same side of the baseline median,
so one noisy run cannot alert. Tiers: warn at ``warn_alpha``; critical when also significant at
``critical_alpha`` and the median moved by at least ``critical_effect`` (the rQPS red/green band).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from master.detect.config import MIN_EFFECT
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
    min_effect: float = MIN_EFFECT
    critical_effect: float = 0.03
    tail_run: int = 3
    tail_share: float = 0.1
    tail_min_exceed: int = 10
    tail_min_baseline: int = 30


@dataclass(frozen=True)
class GateResult:
    """Verdict on the newest commits; ``change`` is where the shifted run starts (None if quiet)."""

    tier: Tier
    change: ChangePoint | None
    run_length: int


QUIET = GateResult(Tier.NONE, None, 0)


def tail_pvalue(baseline: np.ndarray, new: np.ndarray, share: float = 0.1, min_exceed: int = 10) -> float:
    """One-sided p that every value of ``new`` lies this far above the median of ``baseline`` by chance.

    Peaks over threshold (Pickands 1975): with u the baseline value leaving the top k =
    max(``min_exceed``, ``share``·n) above it, the excesses over u follow a generalised Pareto law
    whose shape ξ and scale σ are fitted by probability-weighted moments (Hosking & Wallis 1987);
    ξ is raised to its one-sided 95 % bound (standard error √(4/(3k)) near ξ = 0) and never taken
    below 0, so the fitted tail is at least as heavy as an exponential one — heavier than Gaussian
    noise, as heavy as Student-t noise once ξ is estimated. With t the least extreme new value,
    S(t) = (k+1)/(n+1)·(1 + ξ(t-u)/σ)^(-1/ξ), within the baseline's range never below the empirical
    (count ≥ t + 1)/(n + 1), and
    p = S(t)^len(new) (independent commits, every one beyond t). Returns 1 when t is not beyond u
    (the body of the distribution is for the rank test), when the excesses have no spread, or when the
    baseline is too short to hold 2k values. Mirror both arrays to test the lower tail.
    """
    x = np.sort(baseline)
    nb = len(x)
    k = max(min_exceed, math.ceil(share * nb))
    if 2 * k > nb:
        return 1.0
    u = float(x[nb - k - 1])
    t = float(np.min(new))
    if t <= u or u < float(np.median(x)):
        return 1.0
    excess = x[nb - k :] - u
    a0 = float(np.mean(excess))
    a1 = float(np.mean(excess * (1.0 - (np.arange(1, k + 1) - 0.35) / k)))
    if a0 <= 0.0 or a0 <= 2.0 * a1:
        return 1.0
    xi_hat = 2.0 - a0 / (a0 - 2.0 * a1)
    sigma = 2.0 * a0 * a1 / (a0 - 2.0 * a1)
    xi = max(0.0, xi_hat + 1.645 * math.sqrt(4.0 / (3.0 * k)))
    z = (t - u) / sigma
    log_tail = -z if xi == 0.0 else -math.log1p(xi * z) / xi
    log_s = math.log((k + 1) / (nb + 1)) + log_tail
    beyond = nb - int(np.searchsorted(x, t, side="left"))
    if beyond:
        # Inside the baseline's range the data say how much lies beyond t: a compact cluster in the
        # tail (the slow mode of bimodal noise) fits a steep law that its own members would violate.
        log_s = max(log_s, math.log((beyond + 1) / (nb + 1)))
    return math.exp(len(new) * log_s)


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
    tests: list[tuple[str, int, int, int]] = []
    for h in runs:
        start = n - h
        lo = max(stable_from, start - settings.baseline_max)
        if start - lo < settings.baseline_min:
            continue
        n_new = int(series.offsets[n] - series.offsets[start])
        n_base = int(series.offsets[start] - series.offsets[lo])
        log_min_p = math.log(2.0) - (math.lgamma(n_new + n_base + 1) - math.lgamma(n_new + 1) - math.lgamma(n_base + 1))
        if log_min_p <= math.log(settings.warn_alpha):
            tests.append(("rank", h, start, lo))
        if h == settings.tail_run and start - lo >= settings.tail_min_baseline and n_new == h:
            tests.append(("tail", h, start, lo))
    deff: float | None = None
    medians: np.ndarray | None = None
    best: tuple[float, int, float] | None = None
    for kind, _h, start, lo in tests:
        base = series.samples(lo, start)
        base_median = float(np.median(base))
        if medians is None:
            first = min(t[3] for t in tests)
            medians = np.full(n, np.nan)
            medians[first:] = series.window(first, n).commit_medians()
        new_medians = medians[start:n]
        up = bool(np.all(new_medians > base_median))
        down = bool(np.all(new_medians < base_median))
        if not (up or down):
            continue
        new = series.samples(start, n)
        ratio = float(np.median(new)) / base_median if base_median != 0 else math.inf
        if not (ratio > 0 and abs(math.log(ratio)) >= math.log1p(settings.min_effect)):
            continue
        if kind == "rank":
            if deff is None:
                window = series.samples(lo, n)
                local_offsets = series.offsets[lo : n + 1] - series.offsets[lo]
                deff = design_effect(normal_scores(tie_broken_ranks(window)), local_offsets)
            p = (2.0 * one_sided_p(new, base, greater=up)) ** (1.0 / deff)
        else:
            sign = 1.0 if up else -1.0
            p = 2.0 * tail_pvalue(
                sign * medians[lo:start], sign * new_medians, settings.tail_share, settings.tail_min_exceed
            )
        p = min(1.0, p * sum(1 for t in tests if t[0] == kind))
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
