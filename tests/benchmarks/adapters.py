"""The three detectors behind one interface: commit-indexed change points for a labelled series.

Ours gets every raw sample; Otava and MongoDB take one value per point, so they get each commit's
median (the fairest single value under outliers). Peers run with their published defaults: Otava
``compute_change_points`` (windowed E-divisive + t-test merge, window 50, p 0.001, as its CLI);
MongoDB ``e_divisive`` (pvalue 0.05, 100 permutations, as the library).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from master.detect import offline
from master.detect.model import Direction, Series
from master.detect.tracker import Tracker


def series_of(samples: Sequence[np.ndarray]) -> Series:
    """Our Series from per-commit sample arrays."""
    return Series.from_samples(list(samples))


def ours(samples: Sequence[np.ndarray]) -> list[int]:
    """Retrospective change points of our detector."""
    return [cp.index for cp in offline.detect(series_of(samples), Direction.HIGHER)]


def otava(samples: Sequence[np.ndarray]) -> list[int]:
    """Apache Otava with its default windowed mode."""
    from otava.analysis import compute_change_points

    values = [float(np.median(s)) for s in samples]
    cps, _ = compute_change_points(values, window_len=50, max_pvalue=0.001, min_magnitude=0.0)
    return sorted(int(cp.index) for cp in cps)


def mongodb(samples: Sequence[np.ndarray], seed: int = 0) -> list[int]:
    """MongoDB signal-processing-algorithms E-divisive with its default permutation test."""
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    values = np.array([float(np.median(s)) for s in samples])
    np.random.seed(seed % (2**32))
    return sorted(int(i) for i in e_divisive(values, pvalue=0.05, permutations=100))


@dataclass(frozen=True)
class Detector:
    """A named offline detector."""

    name: str
    find: Callable[[Sequence[np.ndarray]], list[int]]


DETECTORS = (Detector("ours", ours), Detector("otava", otava), Detector("mongodb", mongodb))


class LiveOurs:
    """Our service loop: tracker with online gate + retrospective detector + identity matching."""

    def __init__(self) -> None:
        self.tracker = Tracker("eval")

    def step(self, samples: Sequence[np.ndarray]) -> int:
        """Feed the series as it is now; return how many new alerts appeared."""
        return len(self.tracker.observe(series_of(samples)).new)


class LivePeer:
    """A retrospective peer re-run on every new commit, with the same identity matching as ours."""

    def __init__(self, confirm: int = 0, window: int = 5) -> None:
        self.confirm = confirm
        self.window = window
        self.reported: list[tuple[int, int]] = []  # (current index, sign)

    def update(self, found: Sequence[int], samples: Sequence[np.ndarray]) -> int:
        """Reconcile one round of the peer's change points; return how many new alerts appeared."""
        n = len(samples)
        med = np.array([float(np.median(s)) for s in samples])
        dets = []
        for i in found:
            if i > n - self.confirm:
                continue
            before = np.median(med[max(0, i - 10) : i]) if i > 0 else med[0]
            after = np.median(med[i : i + 10])
            dets.append((i, 1 if after >= before else -1))
        new = 0
        used: set[int] = set()
        for i, sign in sorted(dets):
            match = [
                (abs(r[0] - i), k)
                for k, r in enumerate(self.reported)
                if k not in used and r[1] == sign and abs(r[0] - i) <= self.window
            ]
            if match:
                k = min(match)[1]
                self.reported[k] = (i, sign)
                used.add(k)
            else:
                self.reported.append((i, sign))
                used.add(len(self.reported) - 1)
                new += 1
        return new
