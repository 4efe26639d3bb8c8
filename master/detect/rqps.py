"""rQPS: relative throughput of a commit against a base, as a median ratio with a bootstrap CI.

Follows the Insert Benchmark reports' convention (new/base, red <= 0.97, green >= 1.03, grey between),
with the bands as settings. The CI is a percentile bootstrap of the ratio of medians (Efron &
Tibshirani 1993, ch. 13), resampling base and new samples independently.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from master.detect.model import Direction, Series


class Colour(enum.Enum):
    """Report colour of an rQPS value."""

    RED = "red"
    GREY = "grey"
    GREEN = "green"


@dataclass(frozen=True)
class Bands:
    """Colour thresholds on the goodness ratio: red at or below ``red``, green at or above ``green``."""

    red: float = 0.97
    green: float = 1.03

    def __post_init__(self) -> None:
        if not 0 < self.red <= 1.0 <= self.green:
            raise ValueError(f"bands need 0 < red <= 1 <= green, got red={self.red} green={self.green}")


@dataclass(frozen=True)
class MedianRatio:
    """The ratio of two sides' medians, new/base, with a confidence interval (NaN bounds when a side has one
    sample). Unpaired; recipes.stats.PairedRatio is the ratio of paired samples."""

    ratio: float
    low: float
    high: float
    confidence: float
    n_base: int
    n_new: int


def median_ratio(
    base: Sequence[float] | np.ndarray,
    new: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> MedianRatio:
    """Median(new)/median(base) with a percentile-bootstrap CI; deterministic for a given seed."""
    b = np.asarray(base, dtype=float)
    x = np.asarray(new, dtype=float)
    if len(b) == 0 or len(x) == 0:
        raise ValueError("median_ratio needs at least one base and one new sample")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mb, mx = float(np.median(b)), float(np.median(x))
    if not mb > 0.0:
        raise ValueError(f"base median is {mb:g}, not above 0; a ratio is undefined")
    ratio = mx / mb
    if not (mx >= 0.0 and math.isfinite(ratio)):
        raise ValueError(f"new median {mx:g} over base median {mb:g} is not a ratio")
    if len(b) < 2 or len(x) < 2:
        return MedianRatio(ratio, math.nan, math.nan, confidence, len(b), len(x))
    rng = np.random.default_rng(seed)
    boot_b = np.median(b[rng.integers(0, len(b), size=(n_boot, len(b)))], axis=1)
    boot_x = np.median(x[rng.integers(0, len(x), size=(n_boot, len(x)))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_x / boot_b
    tail = (1.0 - confidence) / 2.0
    low, high = np.nanquantile(ratios, [tail, 1.0 - tail])
    return MedianRatio(ratio, float(low), float(high), confidence, len(b), len(x))


def goodness(ratio: float, direction: Direction) -> float:
    """Turn new/base into 'higher is better' so one set of bands serves both directions."""
    return ratio if direction is Direction.HIGHER else 1.0 / ratio


def colour(ratio: float, direction: Direction = Direction.HIGHER, bands: Bands | None = None) -> Colour:
    """Colour band of a new/base ratio: red is worse by the red margin, green better by the green one."""
    bands = bands or Bands()
    g = goodness(ratio, direction)
    if g <= bands.red:
        return Colour.RED
    if g >= bands.green:
        return Colour.GREEN
    return Colour.GREY


def rqps(series: Series, commit: str, base: str | None = None, confidence: float = 0.95) -> MedianRatio:
    """rQPS of ``commit`` against ``base`` (a commit or a tag already resolved to one; default: the parent)."""
    try:
        i = series.commits.index(commit)
    except ValueError:
        raise ValueError(f"commit {commit!r} is not in the series") from None
    if base is None:
        if i == 0:
            raise ValueError(f"commit {commit!r} is the first of the series and has no parent in it")
        j = i - 1
    else:
        try:
            j = series.commits.index(base)
        except ValueError:
            raise ValueError(f"base {base!r} is not in the series") from None
    return median_ratio(series.samples(j, j + 1), series.samples(i, i + 1), confidence)


def _binom_sf(m: int, n: int, p: np.ndarray) -> np.ndarray:
    """P(Bin(n, p) >= m) for an array of p (exact sum; n is a sample count, small)."""
    total = np.zeros_like(p, dtype=float)
    for k in range(m, n + 1):
        total += math.comb(n, k) * p**k * (1.0 - p) ** (n - k)
    return total


@functools.lru_cache(maxsize=64)
def _median_support(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact bootstrap distribution of the median of n resampled values: (i, j, p) over sorted indices.

    The resampled median is (x_(i) + x_(j)) / 2 with probability p (i == j for odd n). Odd n, m = (n+1)/2:
    P(med* = x_(k)) = P(Bin(n, k/n) >= m) - P(Bin(n, (k-1)/n) >= m). Even n, a = n/2, 1-based i < j:
    P = C(n, a) [(i/n)^a - ((i-1)/n)^a] [((n-j+1)/n)^(n-a) - ((n-j)/n)^(n-a)]  (a draws at or below x_(i), at
    least one equal to it; the rest at or above x_(j), at least one equal); P(i, i) = P(x*_(a) = x_(i)) minus
    the i < j terms. This is the B -> infinity limit of the resampling median_ratio does (Efron & Tibshirani
    1993, ch. 13: the "ideal" bootstrap).
    """
    k = np.arange(1, n + 1)
    if n % 2:
        m = (n + 1) // 2
        tail = _binom_sf(m, n, k / n) - _binom_sf(m, n, (k - 1) / n)
        return k - 1, k - 1, tail
    a = n // 2
    pa = _binom_sf(a, n, k / n) - _binom_sf(a, n, (k - 1) / n)  # P(x*_(a) = x_(i))
    low = (k / n) ** a - ((k - 1) / n) ** a
    high = ((n - k + 1) / n) ** (n - a) - ((n - k) / n) ** (n - a)
    comb = math.comb(n, a)
    ii, jj, pp = [], [], []
    for i in range(1, n + 1):
        off = [comb * low[i - 1] * high[j - 1] for j in range(i + 1, n + 1)]
        ii.append(i - 1)
        jj.append(i - 1)
        pp.append(pa[i - 1] - sum(off))
        for j, p in zip(range(i + 1, n + 1), off):
            ii.append(i - 1)
            jj.append(j - 1)
            pp.append(p)
    return np.array(ii), np.array(jj), np.clip(np.array(pp), 0.0, None)


def median_ratio_many(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], confidence: float = 0.95, batch: int = 2_000_000
) -> np.ndarray:
    """median_ratio for many (base, new) pairs at once: an array of rows (ratio, low, high).

    The ratio is the same median(new)/median(base); the CI is the exact (ideal) percentile bootstrap that
    median_ratio approximates with 2000 seeded resamples, computed for all pairs of one sample-size pair with
    array operations instead of a Python loop (the site needs ~1M of these; median_ratio costs ~1 ms each).
    NaN bounds when a side has one sample, NaN everywhere when the pair has no ratio (median_ratio_block).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    out = np.full((len(pairs), 3), np.nan)
    groups: dict[tuple[int, int], list[int]] = {}
    for idx, (b, x) in enumerate(pairs):
        if len(b) == 0 or len(x) == 0:
            raise ValueError("median_ratio_many needs at least one base and one new sample per pair")
        groups.setdefault((len(b), len(x)), []).append(idx)
    for members in groups.values():
        rows = np.asarray(members)
        B = np.asarray([pairs[i][0] for i in members], dtype=float)
        X = np.asarray([pairs[i][1] for i in members], dtype=float)
        out[rows] = median_ratio_block(B, X, confidence, batch)
    return out


def median_ratio_block(
    B: np.ndarray, X: np.ndarray, confidence: float = 0.95, batch: int = 2_000_000, presorted: bool = False
) -> np.ndarray:
    """median_ratio_many for N pairs given as arrays: B is (N, n_base), X is (N, n_new); rows (ratio, low, high).
    presorted=True: each row of B and X is already in ascending order (saves two sorts). A row is NaN where the
    pair has no ratio: a base median not above 0 or a new one below 0 (a results database may hold such samples
    from before the validator refused them), or a ratio or bound that is not finite (1e300 over 1e-300)."""
    B = np.asarray(B, dtype=float)
    X = np.asarray(X, dtype=float)
    if not presorted:
        B, X = np.sort(B, axis=1), np.sort(X, axis=1)
    n_rows, nb = B.shape
    nx = X.shape[1]
    out = np.full((n_rows, 3), np.nan)
    mb, mx = np.median(B, axis=1), np.median(X, axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where((mb > 0.0) & (mx >= 0.0), mx / mb, np.nan)
    ratio[~np.isfinite(ratio)] = np.nan
    out[:, 0] = ratio
    if nb < 2 or nx < 2 or n_rows == 0:
        return out
    tail = (1.0 - confidence) / 2.0
    bi, bj, bp = _median_support(nb)
    xi, xj, xp = _median_support(nx)
    w = (xp[:, None] * bp[None, :]).ravel()
    step = max(1, batch // len(w))
    for s in range(0, n_rows, step):
        Bb, Xb = B[s : s + step], X[s : s + step]
        med_b = (Bb[:, bi] + Bb[:, bj]) / 2.0
        med_x = (Xb[:, xi] + Xb[:, xj]) / 2.0
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = (med_x[:, :, None] / med_b[:, None, :]).reshape(len(Bb), -1)
        # not a stable sort (the default is ~2x faster here): tied ratios are equal values, so whichever of them
        # the cumulative weight first reaches is the same bound; the order only moves sums by rounding, far
        # inside the 1e-12 slack below
        order = np.argsort(r, axis=1)
        rs = np.take_along_axis(r, order, axis=1)
        cw = np.cumsum(w[order], axis=1)
        cw /= cw[:, -1:]
        lo_i = np.argmax(cw >= tail - 1e-12, axis=1)
        hi_i = np.argmax(cw >= 1.0 - tail - 1e-12, axis=1)
        idx = np.arange(len(Bb))
        lo, hi = rs[idx, lo_i], rs[idx, hi_i]
        ok = ~np.isnan(ratio[s : s + step]) & np.isfinite(lo) & np.isfinite(hi)
        out[s : s + step, 1] = np.where(ok, lo, np.nan)
        out[s : s + step, 2] = np.where(ok, hi, np.nan)
    return out
