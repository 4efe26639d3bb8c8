"""Identity reconciliation, Benjamini-Hochberg control and the exact Mann-Whitney tail."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from master.detect.exact import lower_tail, one_sided_p
from master.detect.fdr import benjamini_hochberg, per_series_alpha
from master.detect.identity import Reported, reconcile
from master.detect.model import ChangePoint, Kind


def _cp(index: int, kind: Kind = Kind.REGRESSION, ratio: float = 0.9) -> ChangePoint:
    return ChangePoint(commit=f"c{index}", index=index, ratio=ratio, kind=kind, pvalue=1e-6)


def test_moved_change_point_is_updated_not_duplicated() -> None:
    old = [Reported("s", "c100", _cp(100))]
    result = reconcile("s", old, [_cp(102, ratio=0.91)])
    assert not result.new
    (upd,) = result.updated
    assert upd.identity == ("s", "c100")
    assert upd.current.index == 102


def test_far_or_opposite_detection_is_new() -> None:
    old = [Reported("s", "c100", _cp(100))]
    result = reconcile("s", old, [_cp(120), _cp(101, Kind.IMPROVEMENT, 1.1)])
    assert {r.first_commit for r in result.new} == {"c120", "c101"}
    assert result.unmatched_old == tuple(old)
    assert len(result.all) == 3


def test_unchanged_detection_is_unchanged() -> None:
    old = [Reported("s", "c100", _cp(100))]
    result = reconcile("s", old, [_cp(100)])
    assert result.unchanged == tuple(old) and not result.updated and not result.new


def test_benjamini_hochberg_known_example() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    assert benjamini_hochberg(p, 0.05).tolist() == [True, True, True, True, False]
    assert benjamini_hochberg([0.03, 0.9], 0.05).tolist() == [False, False]
    assert benjamini_hochberg([0.02, 0.9], 0.05).tolist() == [True, False]
    with pytest.raises(ValueError):
        benjamini_hochberg(p, 0.0)


def test_per_series_alpha_is_a_bonferroni_share() -> None:
    assert per_series_alpha(0.01, 100) == pytest.approx(1e-4)
    with pytest.raises(ValueError):
        per_series_alpha(0.01, 0)


def test_exact_tail_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    for n1, n2 in [(2, 30), (3, 10), (5, 8), (10, 40)]:
        x, y = rng.normal(1, 1, n1), rng.normal(0, 1, n2)
        expected = mannwhitneyu(x, y, alternative="greater", method="exact").pvalue
        assert one_sided_p(x, y, greater=True) == pytest.approx(expected, rel=1e-9)
    assert lower_tail(0, 3, 60) == pytest.approx(1 / math.comb(63, 3))


def test_benjamini_hochberg_over_a_family_larger_than_the_p_values_given() -> None:
    # 1000 series, one new point at p = 3e-5: a lone point needs p <= q/m = 1e-5.
    assert benjamini_hochberg([3e-5], 0.01, m=1000).tolist() == [False]
    # Three series change in the same pass: the k-th smallest needs p <= q·k/m.
    assert benjamini_hochberg([2.9e-5, 1e-6, 1.9e-5], 0.01, m=1000).tolist() == [True, True, True]
    assert benjamini_hochberg([3e-5], 0.01, m=100).tolist() == [True]
    with pytest.raises(ValueError):
        benjamini_hochberg([0.1, 0.2], 0.05, m=1)


def test_exact_tail_table_path_matches_a_direct_count() -> None:
    # Counts of arrangements with U' = k by the recurrence c(k; a, b) = c(k; a, b-1) + c(k-b; a-1, b),
    # compared with lower_tail on both sides of its table shortcut (u < 2·n2 + 3) and beyond it.
    from functools import cache

    @cache
    def count(k: int, a: int, b: int) -> int:
        if k < 0:
            return 0
        if a == 0 or b == 0:
            return int(k == 0)
        return count(k, a, b - 1) + count(k - b, a - 1, b)

    for a, b in [(3, 5), (5, 5), (4, 9), (7, 12), (12, 12)]:
        total = math.comb(a + b, a)
        for u in range(0, a * b + 1):
            expected = sum(count(k, a, b) for k in range(u + 1)) / total
            assert lower_tail(u, a, b) == pytest.approx(expected, rel=1e-12), (u, a, b)
