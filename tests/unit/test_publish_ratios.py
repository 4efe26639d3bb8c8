"""The site's vectorised rQPS: the same ratio as median_ratio, and the exact percentile-bootstrap CI it approximates."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from master.detect.rqps import _median_support, median_ratio, median_ratio_block, median_ratio_many


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 9, 10])
def test_the_resampled_median_distribution_is_exact(n):
    i, j, p = _median_support(n)
    assert abs(p.sum() - 1.0) < 1e-12 and (p >= 0).all()
    rng = np.random.default_rng(n)
    draws = np.sort(rng.integers(0, n, size=(200_000, n)), axis=1)
    lo, hi = draws[:, (n - 1) // 2], draws[:, n // 2]
    freq = np.bincount(lo * n + hi, minlength=n * n) / len(draws)
    assert max(abs(freq[a * n + b] - q) for a, b, q in zip(i, j, p)) < 0.005


def test_ratio_is_median_ratio_and_bounds_are_bootstrap_percentiles():
    rng = random.Random(3)
    gen = np.random.default_rng(4)
    pairs = [
        ([rng.gauss(1000, 25) for _ in range(nb)], [rng.gauss(980, 25) for _ in range(nx)])
        for nb, nx in [(5, 5), (3, 8), (10, 4), (2, 2), (7, 5), (6, 6)]
    ]
    got = median_ratio_many(pairs)
    for (b, x), (r, lo, hi) in zip(pairs, got):
        assert r == median_ratio(b, x).ratio
        # the bounds are the 2.5% / 97.5% points of the bootstrap distribution (checked by resampling a lot)
        bb, xx = np.array(b), np.array(x)
        boot = np.median(xx[gen.integers(0, len(xx), (100_000, len(xx)))], axis=1) / np.median(
            bb[gen.integers(0, len(bb), (100_000, len(bb)))], axis=1
        )
        for bound, level in ((lo, 0.025), (hi, 0.975)):
            assert np.mean(boot <= bound + 1e-12) >= level - 0.003
            assert np.mean(boot < bound - 1e-12) <= level + 0.003
        approx = median_ratio(b, x)  # 2000 seeded resamples: the same interval up to resampling noise
        assert abs(approx.low - lo) < 0.25 * (hi - lo) + 1e-9 and abs(approx.high - hi) < 0.25 * (hi - lo) + 1e-9


def test_undefined_cases_are_nan_not_errors():
    got = median_ratio_many([([1000.0], [990.0, 995.0]), ([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]), ([5.0, 5.0], [5.0, 5.0])])
    assert got[0][0] == 0.9925 and math.isnan(got[0][1]) and math.isnan(got[0][2])
    assert np.isnan(got[1]).all()
    assert list(got[2]) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="at least one base and one new sample"):
        median_ratio_many([([], [1.0])])


def test_block_and_many_agree_and_batches_do_not_change_results():
    gen = np.random.default_rng(7)
    B, X = gen.normal(1000, 20, (500, 5)), gen.normal(990, 20, (500, 5))
    a = median_ratio_block(B, X)
    b = median_ratio_block(B, X, batch=100)  # 4 pairs per batch
    c = median_ratio_many(list(zip(B.tolist(), X.tolist())))
    assert np.array_equal(a, b) and np.array_equal(a, c)
