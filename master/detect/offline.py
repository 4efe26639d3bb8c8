"""Retrospective change points over a whole series: seeded binary segmentation on ranks, then pruning.

Method: candidates come from Seeded Binary Segmentation (Kovács, Li, Bühlmann & Munk 2023, Biometrika)
with a standardized Mann-Whitney (rank CUSUM, Pettitt 1979) statistic on every seeded interval, which
finds short-lived regressions that plain binary segmentation misses. Each candidate is then re-located
to the best split between its neighbours and kept only if that local split is significant after
correcting for the scan (Siegmund's approximation) and moves the median by at least ``min_effect``;
the weakest failing candidate is dropped and the rest re-examined, as in the merge step of Hunter
(Fleming et al. 2023). Ranks make it indifferent to skew, bimodality and outliers; a minimum segment of
a few commits means a single outlying commit can never become a change point of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from master.detect.model import ChangePoint, Direction, Kind, Series
from master.detect.ranktest import (
    design_effect,
    normal_scores,
    scan_pvalue,
    serial_factor,
    split_scan,
    tie_broken_ranks,
)


@dataclass(frozen=True)
class OfflineSettings:
    """Knobs of the retrospective detector; the defaults are what the evaluation measures."""

    alpha: float = 1e-4
    candidate_alpha: float = 1e-2
    min_segment: int = 3
    min_effect: float = 0.005
    decay: float = 0.5


@dataclass(frozen=True)
class _Candidate:
    """A proposed split from one seeded interval."""

    pvalue: float
    index: int
    start: int
    stop: int


def seeded_intervals(n: int, min_len: int, decay: float = 0.5) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded intervals per level (Kovács et al. 2023): level k has length n·decay^k, overlapping by half."""
    levels = []
    k = 0
    while True:
        length = n * decay**k
        if length < min_len:
            break
        count = 2 * math.ceil((1 / decay) ** k) - 1
        shift = (n - length) / (count - 1) if count > 1 else 0.0
        starts = np.floor(np.arange(count) * shift).astype(np.int64)
        stops = np.minimum(np.ceil(np.arange(count) * shift + length).astype(np.int64), n)
        pairs = np.unique(np.stack([starts, stops], axis=1), axis=0)
        levels.append((pairs[:, 0], pairs[:, 1]))
        k += 1
    return levels


def _level_scan(
    prefix: np.ndarray, prefix_sq: np.ndarray, offsets: np.ndarray, starts: np.ndarray, stops: np.ndarray, min_seg: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best CUSUM split of normal scores for many intervals at once: (cut index, z, samples per interval).

    Prefix sums make every split of every interval O(1), so the whole seeded scan costs O(n log n)
    arithmetic and no sorting; it only proposes candidates, which ``_prune`` then tests on exact ranks.
    """
    s0 = offsets[starts]
    s1 = offsets[stops]
    lens = (s1 - s0).astype(float)
    total = prefix[s1] - prefix[s0]
    mean = total / lens
    var = np.maximum((prefix_sq[s1] - prefix_sq[s0]) / lens - mean * mean, 1e-12)
    ncommits = stops - starts
    pos = np.arange(int(ncommits.max()) + 1)
    cvalid = (pos[None, :] >= min_seg) & (pos[None, :] <= (ncommits - min_seg)[:, None])
    cut = np.where(cvalid, starts[:, None] + pos[None, :], starts[:, None] + min_seg)
    n1 = (offsets[cut] - s0[:, None]).astype(float)
    n = lens[:, None]
    left = prefix[offsets[cut]] - prefix[s0][:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (left - n1 * mean[:, None]) / np.sqrt(var[:, None] * n1 * (n - n1) / n)
    z = np.where(cvalid, z, 0.0)
    best = np.argmax(np.abs(z), axis=1)
    rows = np.arange(len(starts))
    return cut[rows, best], z[rows, best], lens


def _min_frac(offsets: np.ndarray, lo: int, hi: int, min_seg: int) -> float:
    """Smallest fraction of the range's samples a segment of ``min_seg`` commits can hold (scan edge)."""
    n = offsets[hi] - offsets[lo]
    return float(min(offsets[lo + min_seg] - offsets[lo], offsets[hi] - offsets[hi - min_seg]) / n)


def _candidates(
    scores: np.ndarray, offsets: np.ndarray, n: int, settings: OfflineSettings, deff: float
) -> list[int]:
    """Greedy seeded binary segmentation: most significant interval first, then disjoint refinements."""
    found: list[_Candidate] = []
    prefix = np.concatenate([[0.0], np.cumsum(scores)])
    prefix_sq = np.concatenate([[0.0], np.cumsum(scores * scores)])
    for starts, stops in seeded_intervals(n, 2 * settings.min_segment, settings.decay):
        cut, z, lens = _level_scan(prefix, prefix_sq, offsets, starts, stops, settings.min_segment)
        edge = (offsets[starts + settings.min_segment] - offsets[starts]) / lens
        p = scan_pvalue(z / math.sqrt(deff), edge)
        for i in np.flatnonzero(p <= settings.candidate_alpha):
            found.append(_Candidate(float(p[i]), int(cut[i]), int(starts[i]), int(stops[i])))
    found.sort(key=lambda c: (c.pvalue, c.stop - c.start, c.index))
    accepted: list[int] = []
    for cand in found:
        if any(cand.start < a < cand.stop for a in accepted):
            continue
        if any(abs(cand.index - a) < settings.min_segment for a in accepted):
            continue
        accepted.append(cand.index)
    return sorted(accepted)


def _median_ratio(series: Series, lo: int, mid: int, hi: int) -> float:
    """Median of the samples after the split over the median before it."""
    before = float(np.median(series.samples(lo, mid)))
    after = float(np.median(series.samples(mid, hi)))
    if before == 0.0:
        return math.inf if after > 0 else (1.0 if after == 0 else -math.inf)
    return after / before


def _prune(
    series: Series, ranks: np.ndarray, cuts: list[int], settings: OfflineSettings, deff: float
) -> list[tuple[int, float, float]]:
    """Re-locate each cut between its neighbours and drop the weakest failing one until all pass."""
    offsets = series.offsets
    n = len(series)
    m = settings.min_segment
    memo: dict[tuple[int, int], tuple[int, float]] = {}

    def best_split(lo: int, hi: int) -> tuple[int, float]:
        key = (lo, hi)
        if key not in memo:
            memo[key] = split_scan(ranks, offsets, lo, hi, m)
        return memo[key]

    cuts = sorted(cuts)
    while cuts:
        zs = [0.0] * len(cuts)
        for _ in range(4):
            moved = False
            for j in range(len(cuts)):
                lo = cuts[j - 1] if j > 0 else 0
                hi = cuts[j + 1] if j + 1 < len(cuts) else n
                best, z = best_split(lo, hi)
                if best >= 0 and best != cuts[j]:
                    cuts[j] = best
                    moved = True
                zs[j] = z
            if not moved:
                break
        results = []
        worst, worst_score = -1, -1.0
        for j, c in enumerate(cuts):
            lo = cuts[j - 1] if j > 0 else 0
            hi = cuts[j + 1] if j + 1 < len(cuts) else n
            zc = zs[j] if not moved else _z_at(ranks, offsets, lo, c, hi)
            p = float(scan_pvalue(zc / math.sqrt(deff), _min_frac(offsets, lo, hi, m)))
            ratio = _median_ratio(series, lo, c, hi)
            small = abs(math.log(ratio)) < math.log1p(settings.min_effect) if ratio > 0 else False
            results.append((c, ratio, p))
            if p > settings.alpha or small:
                score = p if not small else 1.0 + p
                if score > worst_score:
                    worst, worst_score = j, score
        if worst < 0:
            return results
        del cuts[worst]
    return []


def _z_at(ranks: np.ndarray, offsets: np.ndarray, lo: int, cut: int, hi: int) -> float:
    """Standardized Mann-Whitney of commits [lo, cut) vs [cut, hi), ranks re-taken within the range."""
    s0, s1, sc = int(offsets[lo]), int(offsets[hi]), int(offsets[cut])
    n = s1 - s0
    local = np.empty(n)
    local[np.argsort(ranks[s0:s1])] = np.arange(1.0, n + 1.0)
    n1 = sc - s0
    r1 = local[:n1].sum()
    return float((n1 * (n + 1) / 2.0 - r1) / math.sqrt(n1 * (n - n1) * (n + 1) / 12.0))


def detect(
    series: Series, direction: Direction = Direction.HIGHER, settings: OfflineSettings | None = None
) -> list[ChangePoint]:
    """All retrospective change points of ``series``, oldest first."""
    settings = settings or OfflineSettings()
    n = len(series)
    if n < 2 * settings.min_segment:
        return []
    ranks = tie_broken_ranks(series.values)
    scores = normal_scores(ranks)
    deff = design_effect(scores, series.offsets) * serial_factor(scores, series.offsets)
    cuts = _candidates(scores, series.offsets, n, settings, deff)
    kept = _prune(series, ranks, cuts, settings, deff)
    return [
        ChangePoint(
            commit=series.commits[c],
            index=c,
            ratio=ratio,
            kind=Kind.of(ratio, direction),
            pvalue=p,
        )
        for c, ratio, p in kept
    ]
