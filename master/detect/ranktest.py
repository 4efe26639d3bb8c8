"""Rank statistics shared by the detectors: tie-broken ranks, Mann-Whitney scans and their p-values.

Ranks make every test distribution-free: skewed or bimodal noise and wild outliers change nothing
about the null distribution, which depends only on how many samples sit on each side of a split.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr, ndtri

# One fixed generator for tie-breaking: ties are broken in an order unrelated to time, so quantised
# values (integer TPS) cannot fake a trend, and the same input always gives the same answer.
_TIE_SEED = 0x5EED


def tie_broken_ranks(values: np.ndarray) -> np.ndarray:
    """0-based ranks of ``values`` with ties broken by a fixed pseudo-random order (no time bias)."""
    n = len(values)
    # Without ties every sort gives the same order, so the fastest one will do.
    order = np.argsort(values)
    ordered = values[order]
    if n > 1 and bool(np.any(ordered[1:] == ordered[:-1])):
        # Ties only: the fixed permutation decides their order (without ties the result is the same).
        key = np.random.default_rng(_TIE_SEED).permutation(n)
        order = np.lexsort((key, values))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n)
    return ranks


def normal_scores(ranks: np.ndarray) -> np.ndarray:
    """Van der Waerden scores of 0-based ranks: robust values on a Gaussian scale."""
    n = len(ranks)
    return ndtri((ranks + 0.5) / n)


def design_effect(scores: np.ndarray, offsets: np.ndarray) -> float:
    """Variance inflation of commit means when samples of one commit share a run effect (>= 1).

    Samples of one commit come from one build and one run, so they are correlated (Kish's design effect
    1 + (k-1)·ICC). Between-commit variance is estimated robustly from first differences of commit means
    (MAD; steps and outliers barely move it), within-commit variance by pooling; tests on samples divide
    their z by sqrt(effect) so a commit-level random effect cannot pass for a change point.
    """
    counts = np.diff(offsets)
    if len(counts) < 8 or counts.max() < 2:
        return 1.0
    sums = np.add.reduceat(scores, offsets[:-1])
    means = sums / counts
    sq = np.add.reduceat(scores * scores, offsets[:-1])
    multi = counts >= 2
    within = (sq[multi] - counts[multi] * means[multi] ** 2).sum() / (counts[multi] - 1).sum()
    if within <= 0:
        return 1.0
    diffs = np.diff(means)
    mad = np.median(np.abs(diffs - np.median(diffs)))
    var_mean = (1.4826 * mad) ** 2 / 2.0
    k_harm = len(counts) / np.sum(1.0 / counts)
    return float(max(1.0, var_mean / (within / k_harm)))


def serial_factor(scores: np.ndarray, offsets: np.ndarray, lag: int = 4) -> float:
    """Long-run variance inflation when commit means are serially dependent (>= 1; 1 for white noise).

    Variance-ratio idea (Lo & MacKinlay 1988) made robust, as a ratio of robust variograms (median
    absolute differences, Genton 1998): the typical size of lag-``lag`` differences over that of
    lag-1 differences is 1 for independent noise, whatever the steps (only a few differences straddle
    one), and grows with autocorrelation or a smooth trend. The differences are not centred: centring
    on their median would subtract lag·slope and hide a steady trend, the very case where splitting
    into steps is wrong (a series trending faster than its noise, like a population count, has lag-4
    differences four times its lag-1 ones). Under independence the log of the squared ratio is about
    N(0, 3²/n); only the excess over the one-sided 99 % point is applied, so white noise keeps full
    power while wandering, trending series stop producing a change point every few points.
    """
    counts = np.diff(offsets)
    means = np.add.reduceat(scores, offsets[:-1]) / counts
    n = len(means)
    if n < 4 * lag:
        return 1.0

    def mad(d: np.ndarray) -> float:
        return float(np.median(np.abs(d)))

    short = mad(np.diff(means))
    long = mad(means[lag:] - means[:-lag])
    if short <= 0.0:
        return 1.0 if long <= 0.0 else 1e6
    log_ratio = 2.0 * math.log(max(long, 1e-300) / short)
    excess = log_ratio - 2.33 * 3.0 / math.sqrt(n)
    return float(math.exp(excess)) if excess > 0 else 1.0


def scan_pvalue(z: np.ndarray | float, frac_lo: np.ndarray | float) -> np.ndarray:
    """P(max standardized two-sample statistic over a split scan >= |z|), two-sided.

    Siegmund's approximation for the supremum of a standardized Brownian bridge over [u0, 1-u0]
    (James, James & Siegmund 1987; Worsley 1986): c·φ(c)·(1 - 1/c²)·log((1-u0)²/u0²) + 4·φ(c)/c.
    It corrects a Mann-Whitney p-value for having chosen the split that maximizes it.
    """
    c = np.maximum(np.abs(np.asarray(z, dtype=float)), 1e-9)
    u0 = np.clip(np.asarray(frac_lo, dtype=float), 1e-6, 0.5 - 1e-9)
    phi = np.exp(-0.5 * c * c) / math.sqrt(2.0 * math.pi)
    span = np.log(((1.0 - u0) / u0) ** 2)
    p = c * phi * (1.0 - 1.0 / (c * c)) * span + 4.0 * phi / c
    p = np.where(c < 1.5, 1.0, p)
    return np.clip(p, 0.0, 1.0)


def scan_pvalue_one(z: float, frac_lo: float) -> float:
    """``scan_pvalue`` for one split, in plain floats (the pruning loop calls it thousands of times)."""
    c = max(abs(z), 1e-9)
    if c < 1.5:
        return 1.0
    u0 = min(max(frac_lo, 1e-6), 0.5 - 1e-9)
    phi = math.exp(-0.5 * c * c) / math.sqrt(2.0 * math.pi)
    p = c * phi * (1.0 - 1.0 / (c * c)) * math.log(((1.0 - u0) / u0) ** 2) + 4.0 * phi / c
    return min(max(p, 0.0), 1.0)


def point_pvalue(z: np.ndarray | float) -> np.ndarray:
    """Two-sided normal p-value of a standardized statistic."""
    return 2.0 * ndtr(-np.abs(np.asarray(z, dtype=float)))


def mann_whitney_z(left: np.ndarray, right: np.ndarray) -> float:
    """Standardized Mann-Whitney statistic (positive when ``right`` is larger), ties broken as above."""
    n1, n2 = len(left), len(right)
    if n1 == 0 or n2 == 0:
        return 0.0
    ranks = tie_broken_ranks(np.concatenate([left, right])) + 1.0
    n = n1 + n2
    r2 = ranks[n1:].sum()
    mean = n2 * (n + 1) / 2.0
    sd = math.sqrt(n1 * n2 * (n + 1) / 12.0)
    return float((r2 - mean) / sd)


def split_scan(ranks: np.ndarray, offsets: np.ndarray, lo: int, hi: int, min_seg: int) -> tuple[int, float]:
    """Best split of commits [lo, hi) by standardized Mann-Whitney on within-range ranks: (index, z).

    ``ranks`` are global ranks; re-ranking within the range keeps the test exact for that range.
    Returns index -1 when the range is too short for two segments of ``min_seg`` commits.
    """
    if hi - lo < 2 * min_seg:
        return -1, 0.0
    s0, s1 = int(offsets[lo]), int(offsets[hi])
    n = s1 - s0
    local = np.empty(n)
    local[np.argsort(ranks[s0:s1])] = np.arange(1.0, n + 1.0)
    cum = np.concatenate([[0.0], np.cumsum(local)])
    cuts = np.arange(lo + min_seg, hi - min_seg + 1)
    n1 = (offsets[cuts] - s0).astype(float)
    n2 = n - n1
    r1 = cum[(offsets[cuts] - s0)]
    z = (n1 * (n + 1) / 2.0 - r1) / np.sqrt(n1 * n2 * (n + 1) / 12.0)
    best = int(np.argmax(np.abs(z)))
    return int(cuts[best]), float(z[best])
