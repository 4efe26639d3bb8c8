"""The service loop per series: one significance level with the CLI, withdrawal of stale reports."""

from __future__ import annotations

import numpy as np

from master.detect import offline
from master.detect.identity import Reported, reconcile
from master.detect.model import ChangePoint, Direction, Kind, Series
from master.detect.tracker import Tracker, still_holds
from master.verbs import detect as cli


def _groups(rng: np.random.Generator, levels: list[float], k: int, cv: float = 0.01) -> list[list[float]]:
    return [list(level * (1 + cv * rng.standard_normal(k))) for level in levels]


def test_tracker_alerts_what_the_cli_lists_at_the_same_level() -> None:
    # 8 + 8 commits, 5 samples each, 1 % step at 0.5 % noise: p ~ 4e-5, between the old live level
    # (1e-5) and the detector's level (1e-4). `perffarm detect` lists it, so the service must too.
    rng = np.random.default_rng(11)
    series = Series.from_samples(_groups(rng, [1000.0] * 8 + [990.0] * 8, 5, cv=0.005))
    listed = cli.analyse(series, Direction.HIGHER).change_points
    assert [cp.index for cp in listed] == [8] and 1e-5 < listed[0].pvalue <= offline.OfflineSettings().alpha
    (new,) = Tracker("s").observe(series).new
    assert (new.current.index, new.current.kind) == (8, Kind.REGRESSION)


def test_a_report_whose_evidence_goes_away_is_withdrawn_and_comes_back_under_its_identity() -> None:
    rng = np.random.default_rng(5)
    groups = _groups(rng, [1000.0] * 60 + [950.0] * 10, 5)
    tracker = Tracker("s")
    (first,) = tracker.observe(Series.from_samples(groups)).new
    assert first.current.index == 60
    # Re-runs of commits 60..69 (a bisection, a forced run) measure them at the old level: the first
    # runs were a bad stretch of the machine, not a change. The detector stops listing it.
    for i in range(60, 70):
        groups[i] += _groups(rng, [1000.0], 15)[0]
    groups += _groups(rng, [1000.0] * 10, 5)
    second = tracker.observe(Series.from_samples(groups))
    assert not second.new and not second.unmatched_old
    (gone,) = second.withdrawn
    assert gone.first_commit == "60" and not gone.active
    # Another quiet round: it stays withdrawn and is not withdrawn again.
    third = tracker.observe(Series.from_samples(groups))
    assert not third.withdrawn and not third.new and [r.active for r in third.all] == [False]
    # More runs show the slowdown after all: the same identity returns, it is not a second alert.
    for i in range(60, 70):
        groups[i] += _groups(rng, [950.0], 25)[0]
    fourth = tracker.observe(Series.from_samples(groups))
    back = [r for r in fourth.updated if r.first_commit == "60"]
    assert back and back[0].active and back[0].current.kind is Kind.REGRESSION
    assert all(r.first_commit != "60" for r in fourth.new)


def test_a_real_change_that_the_list_misses_for_a_round_still_holds() -> None:
    rng = np.random.default_rng(2)
    series = Series.from_samples(_groups(rng, [1000.0] * 40 + [900.0] * 40, 1))
    cp = ChangePoint("41", 41, 0.9, Kind.REGRESSION, 1e-9)  # reported one commit late, then moved
    report = Reported("s", "41", cp)
    assert still_holds(series, report, [], Direction.HIGHER)
    assert not still_holds(
        series, Reported("s", "41", ChangePoint("41", 41, 1.1, Kind.IMPROVEMENT, 1e-9)), [], Direction.HIGHER
    )


def test_reconcile_reactivates_a_withdrawn_report_even_when_unchanged() -> None:
    cp = ChangePoint("c10", 10, 0.9, Kind.REGRESSION, 1e-6)
    old = [Reported("s", "c10", cp, active=False)]
    result = reconcile("s", old, [cp])
    assert not result.unchanged and not result.new
    (back,) = result.updated
    assert back.active and back.identity == ("s", "c10")
