"""Exact tail of the Mann-Whitney statistic for a few new samples against a baseline.

The count of arrangements with U' = k pairs out of order is the coefficient of q^k in the Gaussian
binomial [N choose n1]_q (Mann & Whitney 1947); only the small-k tail is needed, so it costs
O(n1·k). The normal approximation is far too timid there: 3 new commits above 60 baseline ones have
exact p = 1/C(63,3) ≈ 2.5e-5, not the 2e-3 the normal curve gives, which is what makes a
distribution-free online gate fast.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import ndtr

_EXACT_LIMIT = 1000
_EXACT_MAX_SMALL = 60


def lower_tail(u_small: int, n1: int, n2: int) -> float:
    """P(U' <= u_small) where U' counts (new, base) pairs with new below base, under exchangeability."""
    if u_small < 0:
        return 0.0
    if u_small >= n1 * n2:
        return 1.0
    if u_small > _EXACT_LIMIT or min(n1, n2) > _EXACT_MAX_SMALL:
        mean = n1 * n2 / 2.0
        sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
        return float(ndtr((u_small + 0.5 - mean) / sd))
    if n1 > n2:
        n1, n2 = n2, n1
    if u_small < 2 * n2 + 3:
        # Below degree 2·n2 + 3 the numerator prod (1 - q^(n2+i)) is 1 - sum_i q^(n2+i), so the count
        # is partitions of at most u_small into at most n1 parts minus those of u_small - n2 - i: table
        # look-ups instead of n1 polynomial divisions.
        table = _partition_table()[n1]
        shifted = u_small - n2 - np.arange(1, n1 + 1)
        count = float(table[u_small] - table[shifted[shifted >= 0]].sum())
        log_total = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
        return float(min(1.0, math.exp(math.log(count) - log_total))) if count > 0.0 else 0.0
    size = u_small + 1
    # Coefficients of prod_{i=1..n1} (1 - q^(n2+i)) / (1 - q^i), truncated at degree u_small.
    coef = np.zeros(size)
    coef[0] = 1.0
    for i in range(1, n1 + 1):
        shift = n2 + i
        if shift < size:
            coef[shift:] -= coef[: size - shift].copy()
        if i < size:
            pad = (-size) % i
            view = np.concatenate([coef, np.zeros(pad)]).reshape(-1, i)
            coef = np.cumsum(view, axis=0).reshape(-1)[:size]
    log_total = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
    count = float(coef.sum())
    if count <= 0.0:
        return 0.0
    return float(min(1.0, math.exp(math.log(count) - log_total)))


@functools.cache
def _partition_table() -> np.ndarray:
    """T[j, u]: partitions of 0..u (summed) into at most j parts, for j <= 60 and u <= 1000 (built once)."""
    size = _EXACT_LIMIT + 1
    table = np.zeros((_EXACT_MAX_SMALL + 1, size))
    coef = np.zeros(size)
    coef[0] = 1.0
    table[0] = np.cumsum(coef)
    for i in range(1, _EXACT_MAX_SMALL + 1):
        pad = (-size) % i
        view = np.concatenate([coef, np.zeros(pad)]).reshape(-1, i)
        coef = np.cumsum(view, axis=0).reshape(-1)[:size]
        table[i] = np.cumsum(coef)
    return table


def pairs_below(new: np.ndarray, base: np.ndarray) -> int:
    """U' = number of (new, base) pairs with new < base (ties count one half, rounded down)."""
    b = np.sort(base)
    below = len(b) - np.searchsorted(b, new, side="right")
    ties = np.searchsorted(b, new, side="right") - np.searchsorted(b, new, side="left")
    return int(below.sum() + ties.sum() // 2)


def one_sided_p(new: np.ndarray, base: np.ndarray, greater: bool) -> float:
    """Exact p that ``new`` is stochastically greater (or smaller) than ``base``."""
    if greater:
        return lower_tail(pairs_below(new, base), len(new), len(base))
    return lower_tail(pairs_below(-new, -base), len(new), len(base))
