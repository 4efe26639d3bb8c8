"""Deterministic (steady) series: instruction counts that repeat exactly are judged by magnitude."""

from __future__ import annotations

import numpy as np
import pytest

from master.detect import steady
from master.detect.model import Direction, Kind, Series
from master.detect.tracker import Tracker

BASE = 56900.55


def counts(levels, k=4, jitter=0.0, seed=0):
    """One commit per level, k identical samples each (valgrind); `jitter` relative commit-to-commit wobble."""
    rng = np.random.default_rng(seed)
    return Series.from_samples([[lv * (1 + jitter * rng.standard_normal())] * k for lv in levels])


def test_instruction_counts_are_steady_and_wall_clock_is_not():
    assert steady.is_steady(counts([BASE] * 5))
    rng = np.random.default_rng(1)
    noisy = Series.from_samples([1000 * (1 + 0.005 * rng.standard_normal(4)) for _ in range(30)])
    assert not steady.is_steady(noisy)
    assert not steady.is_steady(Series.from_samples([[BASE]] * 10))  # one sample a commit: cannot tell


def test_two_commits_past_a_4_percent_step_are_a_change_that_ranks_cannot_see():
    s = counts([BASE] * 22 + [BASE * 1.042] * 2)
    cps = steady.detect(s, Direction.LOWER)
    assert [(c.index, c.kind) for c in cps] == [(22, Kind.REGRESSION)]
    assert cps[0].ratio == pytest.approx(1.042) and cps[0].pvalue < 1e-12
    # the service's path: the tracker uses the magnitude rule for steady series
    assert [c.index for c in Tracker("s", Direction.LOWER).detections(s)] == [22]


def test_a_short_baseline_is_enough():
    s = counts([BASE] * 3 + [BASE * 0.98] * 2)
    cps = steady.detect(s, Direction.LOWER)
    assert [(c.index, c.kind) for c in cps] == [(3, Kind.IMPROVEMENT)]
    assert steady.detect(counts([BASE] * 2 + [BASE * 0.98] * 2), Direction.LOWER) == []  # baseline too short


@pytest.mark.parametrize(
    "levels",
    [
        [BASE] * 10 + [BASE * 1.05] + [BASE] * 5,  # a one-commit spike (a reverted commit)
        [BASE] * 10 + [BASE * 1.004] * 6,  # below the 0.5% minimum effect
        [BASE] * 10 + [BASE * 1.05],  # one commit past the step: not yet
    ],
)
def test_no_change(levels):
    assert steady.detect(counts(levels), Direction.LOWER) == []


def test_steps_both_ways_and_the_series_own_scatter_sets_the_fence():
    s = counts([BASE] * 8 + [BASE * 1.03] * 8 + [BASE * 1.01] * 8, jitter=0.0005, seed=3)
    cps = steady.detect(s, Direction.LOWER)
    assert [(c.index, c.kind) for c in cps] == [(8, Kind.REGRESSION), (16, Kind.IMPROVEMENT)]
    # a series whose commits wander by ~2% (real code churn) does not report 1% moves
    wander = counts([BASE * (1 + 0.02 * ((i * 7) % 5 - 2) / 2) for i in range(30)] + [BASE * 1.01] * 3)
    assert all(abs(c.ratio - 1) > 0.02 for c in steady.detect(wander, Direction.LOWER))


def test_cli_says_when_a_series_is_judged_by_magnitude(tmp_path):
    from master.verbs import detect as cli

    rows = ["commit,value"] + [f"c{i},{BASE if i < 6 else BASE * 1.03}" for i in range(8) for _ in range(3)]
    (tmp_path / "s.csv").write_text("\n".join(rows) + "\n")
    report = cli.analyse(cli.read_series(str(tmp_path / "s.csv")), Direction.LOWER)
    assert report.steady and [c.index for c in report.change_points] == [6]
    assert "steady series" in cli.render_text(report)
