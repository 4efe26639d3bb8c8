"""Scoring: precision/recall/F1 against labelled episodes, and TCPDBench's F1 for TCPD.

Synthetic labels: each step is one episode; a slow drift is one episode spanning its first to its
last small step. A detection matches an episode if it lies within ``tol`` commits of the step (or of
the drift's span); matching is one-to-one, closest first. Detections inside a drift's span that
match nothing are neither true nor false (a drift may fairly be reported once or a few times).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from generator import Episode


@dataclass(frozen=True)
class Counts:
    """True positives, false positives and false negatives, summed over series."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def _distance(e: Episode, d: int) -> int:
    hi = max(e.last, e.index)
    if e.index <= d <= hi:
        return 0
    return min(abs(d - e.index), abs(d - hi))


def score(episodes: Sequence[Episode], detections: Iterable[int], tol: int) -> Counts:
    """Match detections to episodes within ``tol`` commits (one-to-one, closest first)."""
    dets = sorted({int(d) for d in detections})
    pairs = sorted(
        (_distance(e, d), i, j) for i, e in enumerate(episodes) for j, d in enumerate(dets) if _distance(e, d) <= tol
    )
    used_e: set[int] = set()
    used_d: set[int] = set()
    for _, i, j in pairs:
        if i in used_e or j in used_d:
            continue
        used_e.add(i)
        used_d.add(j)
    drift_spans = [(e.index - tol, e.last + tol) for e in episodes if e.is_drift]
    fp = sum(1 for j, d in enumerate(dets) if j not in used_d and not any(lo <= d <= hi for lo, hi in drift_spans))
    return Counts(len(used_e), fp, len(episodes) - len(used_e))


# --- TCPDBench F1 (van den Burg & Williams 2020, analysis/scripts/metrics.py), re-implemented ---


def true_positives(truth: Iterable[int], predicted: Iterable[int], margin: int = 5) -> set[int]:
    """Annotated points matched by a prediction within ``margin``, each prediction used once."""
    pool = set(predicted)
    hits: set[int] = set()
    for tau in truth:
        close = sorted((abs(tau - x), x) for x in pool if abs(tau - x) <= margin)
        if not close:
            continue
        hits.add(tau)
        pool.remove(close[0][1])
    return hits


def tcpd_f_measure(annotations: Mapping[str, Sequence[int]], predictions: Iterable[int], margin: int = 5) -> float:
    """TCPDBench F1: precision against the union of annotators, recall averaged over annotators.

    As in TCPDBench, index 0 is added to every annotation set and to the predictions.
    """
    tks = [set(v) | {0} for v in annotations.values()]
    x = set(predictions) | {0}
    tstar = set().union(*tks)
    precision = len(true_positives(tstar, x, margin)) / len(x)
    recall = sum(len(true_positives(tk, x, margin)) / len(tk) for tk in tks) / len(tks)
    if precision + recall == 0:
        return 0.0
    return precision * recall / (0.5 * recall + 0.5 * precision)
