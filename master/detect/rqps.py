"""rQPS: relative throughput of a commit against a base, as a median ratio with a bootstrap CI.

Follows the Insert Benchmark reports' convention (new/base, red <= 0.97, green >= 1.03, grey between),
with the bands as settings. The CI is a percentile bootstrap of the ratio of medians (Efron &
Tibshirani 1993, ch. 13), resampling base and new samples independently.
"""

from __future__ import annotations

import enum
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
class RatioEstimate:
    """Median ratio new/base with a confidence interval (NaN bounds when a side has one sample)."""

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
) -> RatioEstimate:
    """Median(new)/median(base) with a percentile-bootstrap CI; deterministic for a given seed."""
    b = np.asarray(base, dtype=float)
    x = np.asarray(new, dtype=float)
    if len(b) == 0 or len(x) == 0:
        raise ValueError("median_ratio needs at least one base and one new sample")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mb = float(np.median(b))
    if mb == 0.0:
        raise ValueError("base median is zero; a ratio is undefined")
    ratio = float(np.median(x)) / mb
    if len(b) < 2 or len(x) < 2:
        return RatioEstimate(ratio, math.nan, math.nan, confidence, len(b), len(x))
    rng = np.random.default_rng(seed)
    boot_b = np.median(b[rng.integers(0, len(b), size=(n_boot, len(b)))], axis=1)
    boot_x = np.median(x[rng.integers(0, len(x), size=(n_boot, len(x)))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_x / boot_b
    tail = (1.0 - confidence) / 2.0
    low, high = np.nanquantile(ratios, [tail, 1.0 - tail])
    return RatioEstimate(ratio, float(low), float(high), confidence, len(b), len(x))


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


def rqps(series: Series, commit: str, base: str | None = None, confidence: float = 0.95) -> RatioEstimate:
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
