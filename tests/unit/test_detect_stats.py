"""Building blocks: ranks, design effect, serial dependence, level alignment, exact positions."""

from __future__ import annotations

import numpy as np

from master.detect.model import Series
from master.detect.offline import detect
from master.detect.online import OnlineSettings, Tier, gate, level_aligned
from master.detect.ranktest import design_effect, normal_scores, serial_factor, tie_broken_ranks


def test_ties_are_not_broken_by_time() -> None:
    ranks = tie_broken_ranks(np.zeros(1000))
    first_half = ranks[:500].mean()
    assert abs(first_half - 499.5) < 40
    assert sorted(ranks.tolist()) == list(range(1000))


def test_commit_medians_vectorised() -> None:
    s = Series.from_samples([[3, 1, 2], [5], [4, 1], [9, 8, 7, 6]])
    assert s.commit_medians().tolist() == [2.0, 5.0, 2.5, 7.5]


def test_design_effect_sees_run_effects() -> None:
    rng = np.random.default_rng(0)
    iid = Series.from_samples(list(rng.normal(0, 1, (300, 5))))
    runs = Series.from_samples(list(rng.normal(0, 1, (300, 1)) + rng.normal(0, 1, (300, 5))))
    d_iid = design_effect(normal_scores(tie_broken_ranks(iid.values)), iid.offsets)
    d_runs = design_effect(normal_scores(tie_broken_ranks(runs.values)), runs.offsets)
    assert d_iid < 1.5
    assert d_runs > 3.0


def test_serial_factor_white_noise_vs_wander() -> None:
    rng = np.random.default_rng(1)
    white = Series.from_samples(list(rng.normal(0, 1, 400)))
    ar = np.zeros(400)
    for i in range(1, 400):
        ar[i] = 0.9 * ar[i - 1] + rng.normal()
    wander = Series.from_samples(list(ar))
    walk = Series.from_samples(list(np.cumsum(rng.normal(0, 1, 400))))
    f = [serial_factor(normal_scores(tie_broken_ranks(s.values)), s.offsets) for s in (white, wander, walk)]
    assert f[0] == 1.0
    assert f[1] > 2.0 and f[2] > 2.0


def test_random_walk_is_not_chopped_into_pieces() -> None:
    rng = np.random.default_rng(2)
    walk = 1000 + np.cumsum(rng.normal(0, 1, 500))
    assert len(detect(Series.from_samples(list(walk)))) <= 2


def test_large_step_lands_on_the_exact_commit() -> None:
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(20):
        x = rng.normal(100.0, 1.0, 300)
        at = int(rng.integers(40, 260))
        x[at:] *= 0.92
        hits += [cp.index for cp in detect(Series.from_samples(list(x)))] == [at]
    assert hits == 20


def test_level_alignment_joins_segments() -> None:
    x = Series.from_samples([10.0, 11.0, 10.0, 20.0, 22.0, 20.0])
    aligned = level_aligned(x, [3])
    assert np.allclose(aligned.values, [20.0, 22.0, 20.0, 20.0, 22.0, 20.0])


def test_single_sample_gate_needs_three_commits() -> None:
    x = [100.0 + (i % 7) * 0.1 for i in range(250)] + [150.0, 150.0]
    assert gate(Series.from_samples(x)).tier is Tier.NONE
    verdict = gate(Series.from_samples(x + [150.0]), settings=OnlineSettings())
    assert verdict.tier is not Tier.NONE
    assert verdict.change is not None and verdict.change.index == 250


def test_serial_factor_sees_a_steady_trend() -> None:
    # A ramp whose per-commit rise equals the noise: lag-4 differences are about twice the lag-1 ones
    # (4 ± 1.4 vs 1 ± 1.4), so the factor is ~4. Centring the differences on their median would
    # subtract the slope and report white noise (factor ~1), and the ramp would be cut into steps.
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = np.arange(300.0) + rng.standard_normal(300)
        s = Series.from_samples(list(x))
        assert serial_factor(normal_scores(tie_broken_ranks(s.values)), s.offsets) > 3.0
