"""Online gate and tracker: persistence, tiers, delay, identity as data grows."""

from __future__ import annotations

import numpy as np

from master.detect.model import Direction, Kind, Series
from master.detect.online import OnlineSettings, Tier, gate
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
