"""The evaluation's scoring: TCPDBench F1 reproduces the published doctests; drift episodes count once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from generator import Episode, build_suite
from metrics import score, tcpd_f_measure, true_positives


def test_tcpdbench_doctests() -> None:
    assert true_positives({1, 10, 20, 23}, {3, 8, 20}) == {1, 10, 20}
    assert true_positives({1, 10, 20, 23}, {1, 3, 5, 8, 20}) == {1, 10, 20}
    assert tcpd_f_measure({"1": [10, 20], "2": [11, 20], "3": [10], "4": [0, 5]}, [10, 20]) == 1.0
    assert tcpd_f_measure({"1": [], "2": [10], "3": [50]}, [10]) == pytest.approx(0.9090909090909091)
    assert tcpd_f_measure({"1": [], "2": [10], "3": [50]}, []) == pytest.approx(0.8)


def test_score_exact_and_tolerance() -> None:
    eps = (Episode(100, 0.9, last=100), Episode(200, 1.1, last=200))
    assert (score(eps, [100, 203], 0).tp, score(eps, [100, 203], 0).fp) == (1, 1)
    assert score(eps, [101, 202], 2).tp == 2


def test_drift_counts_once_and_inner_points_are_not_false() -> None:
    eps = (Episode(50, 1.05, last=70, steps=(50, 55, 60, 65, 70)),)
    c = score(eps, [52, 60, 69], 2)
    assert (c.tp, c.fp, c.fn) == (1, 0, 0)


def test_generator_is_deterministic() -> None:
    a = build_suite(7, 0.05).groups["mixed-5"][0]
    b = build_suite(7, 0.05).groups["mixed-5"][0]
    assert a.episodes == b.episodes
    assert all((x == y).all() for x, y in zip(a.samples, b.samples))


def test_exact_placement_bound() -> None:
    # Known levels, Gaussian noise: a 3 % step at CV 2 % with 5 samples per commit lands on its
    # commit about 90 % of the time at best, so the 95 % is out of reach on such data.
    from evaluate import exact_hit_bound

    assert 0.88 < exact_hit_bound(0.03, 0.02, 5, draws=20_000) < 0.92
    assert exact_hit_bound(0.20, 0.02, 5, draws=2_000) == 1.0
