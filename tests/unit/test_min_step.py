"""tests/benchmarks/min_step.py's scoring: what counts as detected, delayed and false (the figures in
docs/throughput.md come from it)."""

from __future__ import annotations

import random

from tests.benchmarks.min_step import inject, previous_commit_series, score


def runs(rng: random.Random, n: int, cv: float = 0.004) -> list[list[float]]:
    return [[(1 + rng.gauss(0, cv)) * (1 + rng.gauss(0, 0.002)) for _ in range(5)] for _ in range(n)]


def test_a_clear_step_is_detected_within_three_commits_and_nothing_else_is_flagged():
    h = inject(runs(random.Random(1), 40), 25, 0.05)
    assert h[24][0] > 0.97 and h[25][0] < 0.97  # the step starts at commit 25
    o = score(h, 25, threshold=0.02, ratio=True)
    assert o.detected and o.delay is not None and o.delay <= 3
    assert o.false_alerts == 0 and o.commits == 40 - 8 + 1


def test_a_vs_a_has_no_detection_and_no_false_alert():
    o = score(runs(random.Random(2), 40), None, threshold=0.02, ratio=True)
    assert not o.detected and o.delay is None and o.false_alerts == 0


def test_a_step_the_detector_misses_is_not_detected():
    # 0.2 % is below the detection floor (0.5 %): never reported, so never counted as found
    o = score(inject(runs(random.Random(3), 40), 25, 0.002), 25, threshold=0.02, ratio=True)
    assert not o.detected


def test_a_previous_commit_reference_moves_one_commit_only():
    h = [[1.0]] * 6
    assert previous_commit_series(h, 3, 0.1) == [[1.0], [1.0], [1.0], [0.9], [1.0], [1.0]]
