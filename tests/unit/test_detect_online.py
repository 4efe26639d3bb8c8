"""Online gate and tracker: persistence, tiers, delay, identity as data grows."""

from __future__ import annotations

import numpy as np

from master.detect.model import Direction, Kind, Series
from master.detect.online import OnlineSettings, Tier, gate, tail_pvalue
from master.detect.tracker import Tracker


def test_single_bad_run_does_not_alert() -> None:
    rng = np.random.default_rng(1)
    x = list(rng.normal(100.0, 1.0, (100, 5)))
    x[-1] = x[-1] * 0.8
    assert gate(Series.from_samples(x)).tier is Tier.NONE


def test_two_shifted_commits_alert_with_location() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(100.0, 1.0, (100, 5))
    x[98:] *= 0.9
    verdict = gate(Series.from_samples(list(x)))
    assert verdict.tier is Tier.CRITICAL
    assert verdict.change is not None
    assert verdict.change.index == 98
    assert verdict.change.kind is Kind.REGRESSION


def test_small_shift_is_warn_not_critical() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(100.0, 0.2, (150, 5))
    x[146:] *= 1.01
    verdict = gate(Series.from_samples(list(x)), Direction.LOWER)
    assert verdict.tier is Tier.WARN
    assert verdict.change is not None and verdict.change.kind is Kind.REGRESSION


def test_gate_needs_a_baseline() -> None:
    x = [100.0] * 5 + [50.0] * 3
    assert gate(Series.from_samples(x), settings=OnlineSettings(baseline_min=10)).tier is Tier.NONE


def test_gate_quiet_on_noise() -> None:
    rng = np.random.default_rng(4)
    x = 100 * rng.lognormal(0, 0.05, 2000)
    alerts = sum(gate(Series.from_samples(list(x[: n + 1]))).tier is not Tier.NONE for n in range(60, 2000))
    assert alerts == 0


def test_identity_kept_as_data_grows() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(100.0, 1.0, 160)
    x[100:] *= 0.96
    tracker = Tracker("pgbench/tps")
    created = []
    for n in range(30, 161):
        result = tracker.observe(Series.from_samples(list(x[:n])))
        created.extend(result.new)
    assert len(created) == 1
    assert created[0].identity == ("pgbench/tps", created[0].first_commit)
    assert abs(created[0].current.index - 100) <= 2
    (final,) = tracker.reported
    assert final.current.index == 100
    assert final.first_commit == created[0].first_commit


def test_tracker_detects_quickly_with_samples() -> None:
    rng = np.random.default_rng(6)
    x = rng.normal(100.0, 2.0, (140, 5))
    x[120:] *= 0.95
    tracker = Tracker("s")
    for n in range(40, 141):
        if tracker.observe(Series.from_samples(list(x[:n]))).new:
            break
    assert n - 1 - 120 <= 2
    assert tracker.reported[0].current.index == 120


def _noise_with_outliers(rng: np.random.Generator, n: int, cv: float) -> np.ndarray:
    """Benchmark-like noise: Gaussian core, 1 % outlying runs (mostly slow), as in the evaluation."""
    x = 1000.0 * (1.0 + cv * rng.standard_normal(n))
    bad = rng.random(n) < 0.01
    x[bad] *= np.where(rng.random(bad.sum()) < 0.7, rng.uniform(0.4, 0.85, bad.sum()), rng.uniform(1.2, 1.6, bad.sum()))
    return x


def test_tail_tier_alerts_on_third_single_sample_commit_where_ranks_cannot() -> None:
    # 40 baseline commits: three new commits beyond all of them reach at best p = 2/C(43, 3) = 1.6e-4
    # in a rank test, so only the tail tier can alert at the third commit (delay 2).
    hits = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        x = list(1000.0 * (1.0 + 0.01 * rng.standard_normal(43)))
        x[40:] = [v * 0.92 for v in x[40:]]
        verdict = gate(Series.from_samples(x))
        hits += verdict.change is not None and verdict.change.index == 40 and verdict.change.kind is Kind.REGRESSION
    assert hits >= 18


def test_tail_tier_sees_past_an_outlying_baseline_commit() -> None:
    # One outlying run (+30 %) in the baseline sits above a real +8 % step: a rank test of three
    # new commits then reaches at best 7/C(203, 3) one-sided, times 2 sides and 3 run lengths =
    # 3e-5, so it cannot alert; the baseline's fitted tail can.
    hits = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x = list(1000.0 * (1.0 + 0.01 * rng.standard_normal(200)))
        x[120] = 1300.0
        x += list(1080.0 * (1.0 + 0.01 * rng.standard_normal(3)))
        verdict = gate(Series.from_samples(x))
        hits += verdict.change is not None and verdict.change.index == 200 and verdict.change.kind is Kind.IMPROVEMENT
    assert hits == 20


def test_tail_pvalue_never_below_what_the_baseline_shows() -> None:
    # A tight cluster at the top of the baseline (the slow mode of bimodal noise, mirrored) fits a
    # steep tail; two baseline values lie beyond three new ones, so at least 3 of 301 baseline
    # values per new one are that extreme: p >= (3/301)^3, not the steep law's 4e-8.
    rng = np.random.default_rng(8)
    base = np.concatenate([rng.normal(0.0, 1.0, 268), rng.normal(5.0, 0.02, 30), [8.0, 8.5]])
    assert tail_pvalue(base, np.array([7.0, 7.2, 7.4])) >= (3 / 301) ** 3 * 0.999
    assert tail_pvalue(base, np.array([1.0, 1.5, 2.0])) == 1.0  # not in the tail at all


def test_tail_pvalue_is_calibrated_on_heavy_and_skewed_noise() -> None:
    # Three new values drawn like the baseline: P(p <= alpha) must stay near or below alpha. With 40
    # baseline values the fitted tail, not the data, decides from p ~ 0.02 down, so this checks the
    # extrapolation on tails heavier than the exponential floor (Student t2/t3, lognormal, outliers).
    rng = np.random.default_rng(9)
    draws = {
        "t2": lambda s: rng.standard_t(2, s),
        "t3": lambda s: rng.standard_t(3, s),
        "lognormal": lambda s: rng.lognormal(0.0, 0.8, s),
        "outliers": lambda s: rng.standard_normal(s) + (rng.random(s) < 0.01) * rng.uniform(10, 60, s),
    }
    reps = 5000
    for name, draw in draws.items():
        for size in (40, 300):
            p = np.array([tail_pvalue(draw(size), draw(3)) for _ in range(reps)])
            assert np.mean(p <= 1e-2) <= 2 * 1e-2, (name, size)
            assert np.mean(p <= 1e-3) <= 2.5 * 1e-3, (name, size)


def test_two_outlying_single_sample_commits_never_alert() -> None:
    for seed in range(10):
        x = list(_noise_with_outliers(np.random.default_rng(seed), 300, 0.01)) + [600.0, 450.0]
        assert gate(Series.from_samples(x)).tier is Tier.NONE


def test_gate_quiet_on_single_sample_noise_with_outliers() -> None:
    rng = np.random.default_rng(12)
    alerts = 0
    for _ in range(3):
        x = _noise_with_outliers(rng, 700, float(rng.uniform(0.005, 0.05)))
        alerts += sum(
            gate(Series.from_samples(list(x[max(0, n - 305) : n + 1]))).tier is not Tier.NONE for n in range(40, 700)
        )
    assert alerts == 0
