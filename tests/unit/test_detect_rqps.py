"""rQPS median ratio: CI covers the truth, bands are settings, direction handled."""

from __future__ import annotations

import math

import numpy as np
import pytest

from master.detect.model import Direction, Series
from master.detect.rqps import Bands, Colour, colour, median_ratio, rqps


def test_ci_covers_truth_on_synthetic_data() -> None:
    rng = np.random.default_rng(0)
    covered = 0
    trials = 100
    for _ in range(trials):
        base = 1000 * rng.lognormal(0.0, 0.03, 15)
        new = 970 * rng.lognormal(0.0, 0.03, 15)
        est = median_ratio(base, new, n_boot=500, seed=int(rng.integers(1 << 30)))
        covered += est.low <= 0.97 <= est.high
    assert covered >= 85
    assert est.low < est.ratio < est.high


def test_single_samples_give_ratio_without_ci() -> None:
    est = median_ratio([100.0], [103.0])
    assert est.ratio == pytest.approx(1.03)
    assert math.isnan(est.low) and math.isnan(est.high)


@pytest.mark.parametrize(
    ("ratio", "direction", "expected"),
    [
        (0.97, Direction.HIGHER, Colour.RED),
        (0.98, Direction.HIGHER, Colour.GREY),
        (1.03, Direction.HIGHER, Colour.GREEN),
        (1.05, Direction.LOWER, Colour.RED),
        (0.95, Direction.LOWER, Colour.GREEN),
    ],
)
def test_colour_bands(ratio: float, direction: Direction, expected: Colour) -> None:
    assert colour(ratio, direction) is expected


def test_bands_are_settings() -> None:
    assert colour(0.985, bands=Bands(red=0.99, green=1.01)) is Colour.RED
    with pytest.raises(ValueError):
        Bands(red=1.1, green=1.2)


def test_rqps_against_parent_and_base() -> None:
    s = Series.from_samples([[100.0, 101.0], [102.0, 103.0], [110.0, 111.0]], ["a", "b", "c"])
    assert rqps(s, "c").ratio == pytest.approx(110.5 / 102.5)
    assert rqps(s, "c", base="a").ratio == pytest.approx(110.5 / 100.5)
    with pytest.raises(ValueError, match="no parent"):
        rqps(s, "a")
    with pytest.raises(ValueError, match="not in the series"):
        rqps(s, "zzz")


def test_a_pair_without_a_finite_ratio_is_nan_not_inf_or_negative() -> None:
    """Samples a results database may hold from before the validator refused them (#26 item 4): a base of 0 or
    below, a new median below 0, 1e300 over 1e-300 (was inf, with a CI of nan). The site's rQPS is then NaN
    (shown as no ratio), never a number that breaks the JSON it is written to."""
    from master.detect.rqps import median_ratio_block

    base = np.array([[1e-300, 1e-300, 1e-300], [0.0, 0.0, 0.0], [-5.0, -5.0, -5.0], [1000.0, 1000.0, 1000.0]])
    new = np.array([[1e300, 1e300, 1e300], [900.0, 900.0, 900.0], [900.0, 900.0, 900.0], [-5.0, -5.0, -5.0]])
    got = median_ratio_block(base, new)
    assert np.isnan(got).all(), got
    healthy = median_ratio_block(np.array([[1000.0, 1010.0, 990.0]]), np.array([[900.0, 910.0, 890.0]]))
    assert healthy[0, 0] == pytest.approx(0.9) and np.isfinite(healthy).all()
    for b, x in ((base[0], new[0]), (base[2], new[2]), (base[3], new[3])):
        with pytest.raises(ValueError, match="ratio"):
            median_ratio(b, x)
