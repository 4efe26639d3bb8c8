"""Small, distribution-free statistics for paired A/B samples in pure stdlib (every recipe and the master use them:
recipes/paired.py, recipes/ab.py, master/jobs): median ratio with a bootstrap 95% CI, order-balanced ratios.

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
class PairedRatio:
    """A ratio B/A from paired samples (median of the pair ratios, or the geometric mean of order-balanced
    blocks) with its confidence interval. Not master.detect.rqps.MedianRatio, a ratio of two sides' medians."""

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
) -> PairedRatio:
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
    return PairedRatio(
        statistics.median(ratios),
        min(percentile(medians, tail), ordered[lo]),
        max(percentile(medians, 100 - tail), ordered[hi]),
        n,
    )


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (Numerical Recipes, 2nd ed., 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (0 < p < 1, df > 0), by bisection on its CDF:
    pure stdlib, because the recipes that form paired ratios run on workers without scipy."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p} df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    tail = 1.0 - p  # P(T > t) = I_{df / (df + t^2)}(df / 2, 1 / 2) / 2
    lo, hi = 0.0, 1.0
    while _betainc(df / 2.0, 0.5, df / (df + hi * hi)) / 2.0 > tail:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _betainc(df / 2.0, 0.5, df / (df + mid * mid)) / 2.0 > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def _round_logs(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[float]] | None:
    """log(B_i / A_i) of the rounds in which A took the first slot (even i) and in which B did (odd i); None when a
    round has no positive finite ratio (the balanced estimate needs logs of every round)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples need equal counts, got {len(a)} and {len(b)}")
    out: tuple[list[float], list[float]] = ([], [])
    for i, (x, y) in enumerate(zip(a, b)):
        if not (x > 0 and y > 0) or not math.isfinite(y / x) or y / x <= 0:
            return None
        out[i % 2].append(math.log(y / x))
    return out


def block_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """B/A per order-balanced block: the geometric mean of rounds 2j (A first) and 2j + 1 (B first), so an effect
    of going first cancels inside every block (docs/throughput.md, "The order bias"). A last round without its
    partner is left out, except when it is the only round: one round is all there is to give.

    The bench alternates which side takes a round's first slot by the round's parity, for every workload
    (recipes/pg/profile.py), so round i's order is known from i alone."""
    ratios = paired_ratios(a, b)
    if len(ratios) != len(a) or any(r <= 0 or not math.isfinite(r) for r in ratios):
        raise NoRatio("{a} or {b} has samples of {metric} that are not above 0")
    if len(ratios) == 1:
        return ratios
    return [math.sqrt(ratios[2 * j] * ratios[2 * j + 1]) for j in range(len(ratios) // 2)]


def balanced_ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> PairedRatio:
    """B/A as the order-balanced mean log ratio of paired rounds, with a t confidence interval.

    Round i ran A first when i is even and B first when i is odd. Whatever going first costs (a constant on the
    log scale, the same in every round of one order) cancels in the mean of the two orders' means,
    ``(mean(log r_even) + mean(log r_odd)) / 2``, even with an odd number of rounds; its standard error comes from
    the spread of each order's rounds around their own mean (n - 2 degrees of freedom), so the order effect does
    not widen the interval either. This is the two-group regression ``log r_i = mu + beta * order_i + e_i`` with
    ``mu`` the ratio (the balanced design of Cochran & Cox, "Experimental Designs", 1957, ch. 4: a period effect
    cancels in a cross-over). With rounds of one order only it is their mean log ratio (n - 1 degrees of freedom);
    with no degree of freedom left, the interval is the rounds' range. NoRatio when a round has no positive ratio.
    """
    logs = _round_logs(a, b)
    if logs is None or not (logs[0] or logs[1]):
        raise NoRatio("{a} or {b} has samples of {metric} that are not above 0")
    groups = [g for g in logs if g]
    means = [statistics.fmean(g) for g in groups]
    mu = statistics.fmean(means)
    n = sum(len(g) for g in groups)
    df = n - len(groups)
    ratios = sorted(math.exp(x) for g in groups for x in g)
    if df < 1:
        return PairedRatio(math.exp(mu), ratios[0], ratios[-1], n)
    ss = sum((x - m) ** 2 for g, m in zip(groups, means) for x in g)
    se = math.sqrt(ss / df) * math.sqrt(sum(1.0 / len(g) for g in groups)) / len(groups)
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    return PairedRatio(math.exp(mu), math.exp(mu - half), math.exp(mu + half), n)


def paired_estimate(a: Sequence[float], b: Sequence[float], confidence: float = 0.95, seed: int = 1) -> PairedRatio:
    """The ratio B/A of samples taken in paired rounds: the order-balanced estimate (balanced_ratio) when every
    round has a ratio above 0, otherwise the median ratio with its bootstrap CI (a metric that can read 0, e.g. a
    memory growth). NoRatio (a ValueError) when the samples form no ratio at all."""
    problem = ratio_problem(a, b)
    if problem is not None:
        raise problem
    try:
        return balanced_ratio(a, b, confidence)
    except NoRatio:
        return bootstrap_median_ratio(a, b, confidence=confidence, seed=seed)


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
