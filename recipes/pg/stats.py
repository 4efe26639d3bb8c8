"""Small, distribution-free statistics for A/B runs in pure stdlib: median ratio with a bootstrap 95% CI.

Why paired ratios: A and B samples are interleaved (ABAB...), so sample i of A and sample i of B ran under the
same neighbour load; the ratio B_i/A_i cancels slow drift on a shared machine, and the median of those ratios
resists the occasional sample that a neighbour ruined. The CI is a percentile bootstrap of that median
(Efron & Tibshirani, "An Introduction to the Bootstrap", ch. 13), seeded so a report is reproducible.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def cv(samples: Sequence[float]) -> float:
    """Coefficient of variation (stdev / mean); 0 for fewer than two samples."""
    if len(samples) < 2:
        return 0.0
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean else math.inf


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (0 <= q <= 100) of already sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class RatioEstimate:
    """Median of paired ratios B/A with a bootstrap confidence interval."""

    ratio: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        """Half the CI width, relative to the ratio (0.02 means +-2%)."""
        return (self.high - self.low) / 2 / self.ratio if self.ratio else math.inf

    def excludes_one(self) -> bool:
        """True when the CI does not contain 1.0: A and B are separated at this confidence."""
        return self.low > 1.0 or self.high < 1.0


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    if len(a) != len(b):
        raise ValueError(f"paired samples need equal counts, got {len(a)} and {len(b)}")
    return [y / x for x, y in zip(a, b) if x > 0]


class NoRatio(ValueError):
    """Paired samples B/A that cannot form a finite ratio (a results database may hold a throughput of 0 or -5 from
    before the validator refused them, recipes/result.py). `why` names the sides {a} and {b} and the metric
    {metric}: `describe` fills them in, e.g. 'side A has no positive samples of tps: cannot form a ratio'."""

    def __init__(self, why: str) -> None:
        self.why = why
        super().__init__(self.describe())

    def describe(self, a: str = "side A", b: str = "side B", metric: str = "the metric") -> str:
        return self.why.format(a=a, b=b, metric=metric) + ": cannot form a ratio"


def ratio_problem(a: Sequence[float], b: Sequence[float]) -> NoRatio | None:
    """Why the paired samples give no finite ratio B/A (None: they do). Rounds where A is not above 0 are left
    out of the ratios (as paired_ratios does); what is left must be finite and B not negative."""
    for side, xs in (("a", a), ("b", b)):
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs):
            return NoRatio("{" + side + "} has samples of {metric} that are not finite numbers")
    kept = [(x, y) for x, y in zip(a, b) if x > 0]
    if not kept:
        return NoRatio("{a} has no positive samples of {metric}")
    if any(y < 0 for _, y in kept):
        return NoRatio("{b} has negative samples of {metric}")
    if not all(math.isfinite(y / x) for x, y in kept):
        return NoRatio("the ratios of {b} to {a} of {metric} overflow (samples of implausible magnitude)")
    return None


def median_rank_interval(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the distribution-free CI for a median: [x_(k), x_(n-k+1)] with the largest k
    whose binomial tail P(Bin(n, 1/2) < k) is within (1 - confidence) / 2; (0, n - 1) when n is too small."""
    if n < 1:
        raise ValueError("an interval needs at least one value")
    alpha, k, below = (1 - confidence) / 2, 0, 0.0  # below = P(Bin(n, 1/2) <= k - 1)
    while k < n // 2:
        nxt = below + math.comb(n, k) / 2**n
        if nxt > alpha:
            break
        below, k = nxt, k + 1
    k = max(k, 1)
    return k - 1, n - k


def bootstrap_median_ratio(
    a: Sequence[float], b: Sequence[float], resamples: int = 5000, confidence: float = 0.95, seed: int = 1
) -> RatioEstimate:
    """Median of B_i/A_i and its 95% CI: the percentile bootstrap (deterministic for a seed), never narrower than
    the distribution-free order-statistic interval of the median. NoRatio (a ValueError) when the samples form
    no finite ratio (ratio_problem).

    Why both: with the 5-20 paired samples of an A/B job the percentile bootstrap of a median is too narrow
    (it can only pick sample values, and few of them); measured here, A-vs-A runs of pgbench -S simple gave
    0.982 and then 1.020, each with a bootstrap CI of about +-1%. The order-statistic interval [x_(k), x_(n-k+1)]
    covers the median with at least the stated confidence whatever the distribution (for n = 10: x_(2)..x_(9)).
    """
    problem = ratio_problem(a, b)
    if problem is not None:
        raise problem
    ratios = paired_ratios(a, b)
    rng = random.Random(seed)
    n = len(ratios)
    medians = sorted(statistics.median(rng.choices(ratios, k=n)) for _ in range(resamples))
    tail = (1 - confidence) / 2 * 100
    ordered = sorted(ratios)
    lo, hi = median_rank_interval(n, confidence)
    return RatioEstimate(
        statistics.median(ratios),
        min(percentile(medians, tail), ordered[lo]),
        max(percentile(medians, 100 - tail), ordered[hi]),
        n,
    )


def interleaved_order(rounds: int, labels: Sequence[str] = ("A", "B"), seed: int = 1) -> list[str]:
    """ABBA-style order: each round runs every label once, alternating direction so neither side goes first.

    A fixed A-then-B order would hand any systematic "second run is warmer" effect to B; alternating rounds
    (AB, BA, AB, ...) cancels it in the paired ratios. A seed adds a shuffle for more than two labels.
    """
    order: list[str] = []
    rng = random.Random(seed)
    for r in range(rounds):
        labs = list(labels)
        if len(labs) > 2:
            rng.shuffle(labs)
        elif r % 2:
            labs.reverse()
        order.extend(labs)
    return order
