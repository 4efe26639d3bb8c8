"""Retrospective change points over a whole series: seeded binary segmentation, exact rank tests.

1. Candidates: Seeded Binary Segmentation (Kovács, Li, Bühlmann & Munk 2023, Biometrika) with a CUSUM
   of van der Waerden scores (ranks mapped to a Gaussian scale) on every seeded interval; every
   interval's best split that clears ``candidate_alpha`` is kept, so both ends of a short-lived
   regression survive; a cheap neighbour-to-neighbour CUSUM thins them (``thin_alpha``).
2. Pruning, as in the merge step of Hunter (Fleming et al. 2023): each cut is re-located to the best
   Mann-Whitney split between its neighbours and kept only if that split is significant (exact tail
   for short segments, Siegmund's scan correction, commit-level run effects and serial dependence
   divided out) and moves the median by at least ``min_effect``; the weakest failing cuts go first.
3. Long series (2,000 commits and more): before thinning, every commit is clipped to within 3 sd of
   its running median (a lone outlying run no longer seeds a candidate pair around itself), and after
   pruning the search runs again on ranks taken within each segment, where the noise is homogeneous
   (series-wide normal scores spread differently in every segment); new candidates are pruned with
   the old, reusing every range already ranked.
4. Serially dependent series only (``serial_factor`` > 1: trends, wandering levels): a kept cut must
   also be a local feature — the level moves across it more than it moves elsewhere in its two
   segments at some window scale (robust z >= ``local_z``) — so a smooth trend is not cut into steps.
5. Position: the maximum-likelihood split near each kept cut under the noise density estimated from
   the neighbouring segments (kernel density with a heavy-tailed share), so shifts land on the commit
   whatever the noise shape.

Ranks make it indifferent to skew, bimodality and outliers; a minimum segment of a few commits means a
single outlying commit can never become a change point of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import median_filter
from scipy.special import ndtri

from master.detect.config import MIN_EFFECT, REPORT_ALPHA
from master.detect.exact import lower_tail
from master.detect.model import ChangePoint, Direction, Kind, Series
from master.detect.ranktest import (
    design_effect,
    normal_scores,
    scan_pvalue,
    scan_pvalue_one,
    serial_factor,
    tie_broken_ranks,
)


@dataclass(frozen=True)
class OfflineSettings:
    """Knobs of the retrospective detector; the defaults are what the evaluation measures."""

    alpha: float = REPORT_ALPHA
    candidate_alpha: float = 1e-2
    thin_alpha: float = 1e-3
    min_segment: int = 3
    min_effect: float = MIN_EFFECT
    commit_alpha: float = 1e-2
    decay: float = 0.5
    local_z: float = 3.0


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
        # Both ends are non-decreasing in the interval number, so duplicates are neighbours.
        keep = np.ones(len(starts), dtype=bool)
        keep[1:] = (starts[1:] != starts[:-1]) | (stops[1:] != stops[:-1])
        levels.append((starts[keep], stops[keep]))
        k += 1
    return levels


def _level_scan(
    prefix: np.ndarray, offsets: np.ndarray, starts: np.ndarray, stops: np.ndarray, min_seg: int, sigma2: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best CUSUM split of normal scores for many intervals at once: (cut index, z, samples per interval).

    Prefix sums make every split of every interval O(1), so the whole seeded scan costs O(n log n)
    arithmetic and no sorting. The noise variance ``sigma2`` is the series-wide robust estimate, not
    the interval's own variance, which a short-lived shift inside the interval would inflate. This
    stage only proposes candidates; ``_prune`` tests them on exact ranks.
    """
    s0 = offsets[starts]
    s1 = offsets[stops]
    lens = (s1 - s0).astype(float)
    mean = (prefix[s1] - prefix[s0]) / lens
    pos = np.arange(min_seg, int((stops - starts).max()) - min_seg + 1)
    # Splits past an interval's last valid one repeat that one; argmax keeps the first occurrence.
    cut = np.minimum(starts[:, None] + pos[None, :], (stops - min_seg)[:, None])
    oc = offsets[cut]
    n1 = (oc - s0[:, None]).astype(float)
    dev = prefix[oc] - prefix[s0][:, None] - n1 * mean[:, None]
    best = np.argmax(dev * dev / (n1 * (lens[:, None] - n1)), axis=1)  # |z| up to a per-interval factor
    rows = np.arange(len(starts))
    nb = n1[rows, best]
    z = dev[rows, best] / np.sqrt(sigma2 * nb * (lens - nb) / lens)
    return cut[rows, best], z, lens


def _noise_variance(scores: np.ndarray, offsets: np.ndarray) -> float:
    """Per-sample noise variance of the scores, robust to steps (MAD of first differences of commit means).

    Scaled back to one sample, it includes any commit-level run effect, so no design effect is needed.
    """
    counts = np.diff(offsets)
    means = np.add.reduceat(scores, offsets[:-1]) / counts
    if len(means) < 3:
        return float(np.var(scores)) or 1.0
    d = np.diff(means)
    var_mean = (1.4826 * float(np.median(np.abs(d - np.median(d))))) ** 2 / 2.0
    k_harm = len(counts) / float(np.sum(1.0 / counts))
    return max(var_mean * k_harm, 1e-6)


def _min_frac(offsets: np.ndarray, lo: int, hi: int, min_seg: int) -> float:
    """Smallest fraction of the range's samples a segment of ``min_seg`` commits can hold (scan edge)."""
    n = offsets[hi] - offsets[lo]
    return float(min(offsets[lo + min_seg] - offsets[lo], offsets[hi] - offsets[hi - min_seg]) / n)


def _candidates(scores: np.ndarray, offsets: np.ndarray, n: int, settings: OfflineSettings, serial: float) -> list[int]:
    """Best split of every seeded interval that clears ``candidate_alpha``, thinned to ``min_segment`` apart.

    All significant interval maxima are kept (not only the greedy winner's disjoint refinements), so
    both ends of a short-lived regression survive to the pruning step, as Hunter keeps its weak points.
    """
    prefix = np.concatenate([[0.0], np.cumsum(scores)])
    sigma2 = _noise_variance(scores, offsets) * serial
    cuts, pvals = [], []
    for starts, stops in seeded_intervals(n, 2 * settings.min_segment, settings.decay):
        cut, z, lens = _level_scan(prefix, offsets, starts, stops, settings.min_segment, sigma2)
        edge = (offsets[starts + settings.min_segment] - offsets[starts]) / lens
        p = scan_pvalue(z, edge)
        keep = p <= settings.candidate_alpha
        cuts.append(cut[keep])
        pvals.append(p[keep])
    if not cuts:
        return []
    all_cuts = np.concatenate(cuts)
    all_p = np.concatenate(pvals)
    blocked = np.zeros(n + 1, dtype=bool)
    accepted: list[int] = []
    m = settings.min_segment
    for i in np.lexsort((all_cuts, all_p)):
        c = int(all_cuts[i])
        if blocked[c]:
            continue
        accepted.append(c)
        blocked[max(0, c - m + 1) : c + m] = True
    if n >= _LOCAL_NOISE_MIN_COMMITS:
        prefix = np.concatenate([[0.0], np.cumsum(_despiked(scores, offsets, settings.min_segment))])
    return _thin(prefix, scores, offsets, n, sorted(accepted), sigma2, serial, settings)


def _despiked(scores: np.ndarray, offsets: np.ndarray, min_seg: int, clip: float = 3.0) -> np.ndarray:
    """Scores with every commit mean pulled to within ``clip`` robust sd of its running median.

    The running median over 2·``min_seg`` + 1 commits follows any level that holds for ``min_seg``
    commits or more and ignores a lone outlying commit, whose pull on a short segment would otherwise
    make a candidate pair around it (a 3-commit "segment" holding one bad run): Huber's clipping of
    the residual, applied before the cumulative sums.
    """
    counts = np.diff(offsets)
    means = np.add.reduceat(scores, offsets[:-1]) / counts
    w = 2 * min_seg + 1
    if len(means) < 2 * w:
        return scores
    padded = np.concatenate([np.full(min_seg, means[0]), means, np.full(min_seg, means[-1])])
    level = np.sort(np.lib.stride_tricks.sliding_window_view(padded, w), axis=1)[:, min_seg]
    resid = means - level
    d = np.diff(means)
    sd = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    if sd <= 0.0:
        return scores
    shift = np.clip(resid, -clip * sd, clip * sd) - resid
    return scores + np.repeat(shift, counts)


# The local noise estimate replaces the series-wide one only when clearly larger: an average over a
# short stretch is itself noisy, and taking the larger of two estimates every time would
# inflate the variance, and cost power, everywhere.
_LOCAL_NOISE_FACTOR = 1.5
# ... and only on long series, where the exact tests of many candidates are what costs time. It can
# drop a true short-lived change whose candidate cuts sit a few commits off (the jump then counts as
# noise inside a segment): seen once in 400 held-out series of 300 commits, where the full candidate
# list costs a few milliseconds anyway.
_LOCAL_NOISE_MIN_COMMITS = 2000


def _clipped_square_differences(means: np.ndarray, clip: float = 3.0) -> np.ndarray:
    """Half the squared successive differences of commit means, each capped at ``clip`` robust sd.

    Their mean over a stretch estimates the noise variance there with the tails counted (a MAD alone
    misses them when the noise is skewed or heavy-tailed), while a step or an outlying commit adds at
    most ``clip``² sd² once. Length ``len(means) - 1``.
    """
    d = np.diff(means)
    if len(d) == 0:
        return d
    sd = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    return np.minimum(d * d, (clip * sd) ** 2) / 2.0


def _thin(
    prefix: np.ndarray,
    scores: np.ndarray,
    offsets: np.ndarray,
    n: int,
    cuts: list[int],
    sigma2: float,
    serial: float,
    settings: OfflineSettings,
) -> list[int]:
    """Cheap backward elimination on the score CUSUM between neighbours (O(1) per cut via prefix sums).

    Drops candidates that are not even candidate-significant once their neighbours are known, so
    the exact rank tests of ``_prune`` run on a short list even for 10,000-commit series. Normal
    scores spread more in the tails than in the middle, so when large steps put a long segment at the
    top or bottom of the ranks, the series-wide noise variance understates that segment's and its
    random wiggles pass as candidates; on long series the local estimate
    (``_clipped_square_differences``, averaged over the two segments) is used there instead, which
    halves the candidates of a 10,000-commit series.
    """
    cuts_arr = np.array(cuts, dtype=np.int64)
    m = settings.min_segment
    counts = np.diff(offsets)
    means = np.add.reduceat(scores, offsets[:-1]) / counts
    k_harm = len(counts) / float(np.sum(1.0 / counts))
    vprefix = np.concatenate([[0.0], np.cumsum(_clipped_square_differences(means) * k_harm * serial)])
    while len(cuts_arr):
        lo = np.concatenate([[0], cuts_arr[:-1]])
        hi = np.concatenate([cuts_arr[1:], [n]])
        s0, sc, s1 = offsets[lo], offsets[cuts_arr], offsets[hi]
        n1 = (sc - s0).astype(float)
        n2 = (s1 - sc).astype(float)
        tot = n1 + n2
        mean = (prefix[s1] - prefix[s0]) / tot
        local = (vprefix[hi - 1] - vprefix[lo]) / np.maximum(hi - 1 - lo, 1)
        var = np.where(local > _LOCAL_NOISE_FACTOR * sigma2, local, sigma2) if n >= _LOCAL_NOISE_MIN_COMMITS else sigma2
        z = (prefix[sc] - prefix[s0] - n1 * mean) / np.sqrt(var * n1 * n2 / tot)
        edge = np.minimum(offsets[lo + m] - s0, s1 - offsets[hi - m]) / tot
        p = scan_pvalue(z, edge)
        fail = np.where(p > settings.thin_alpha, p, -1.0)
        left = np.concatenate([[-1.0], fail[:-1]])
        right = np.concatenate([fail[1:], [-1.0]])
        drop = (fail >= 0) & (fail >= left) & (fail > right)
        if not drop.any():
            break
        cuts_arr = cuts_arr[~drop]
    return [int(c) for c in cuts_arr]


def _median(x: np.ndarray) -> float:
    """np.median of a 1-D array (same value), without its generic-axis overhead: one partition."""
    n = len(x)
    lo, hi = (n - 1) // 2, n // 2
    part = np.partition(x, [lo, hi]) if lo != hi else np.partition(x, lo)
    return float((part[lo] + part[hi]) / 2.0)


def _median_ratio(series: Series, lo: int, mid: int, hi: int) -> float:
    """Median of the samples after the split over the median before it."""
    before = _median(series.samples(lo, mid))
    after = _median(series.samples(mid, hi))
    if before == 0.0:
        return math.inf if after > 0 else (1.0 if after == 0 else -math.inf)
    return after / before


class _RankSums:
    """Prefix sums of within-range ranks at commit boundaries, memoized per commit range.

    Re-ranking a range costs one sort; the best split of the range and the rank-sum test of any cut
    in it then cost O(1) each, so the pruning loop sorts each range it visits once.
    """

    def __init__(self, ranks: np.ndarray, offsets: np.ndarray) -> None:
        self.ranks = ranks
        self.offsets = offsets
        self.memo: dict[tuple[int, int], np.ndarray] = {}
        self.splits: dict[tuple[int, int, int], tuple[int, float]] = {}
        # Scratch indexed by global rank: within-range ranks are scattered into it in sorted order
        # and gathered back in sample order (a plain sort of the integer ranks plus two O(n) passes
        # costs about half an argsort).
        self._scratch = np.empty(len(ranks))
        self._one_to_n = np.arange(1.0, len(ranks) + 1.0)
        self.offsets_f = offsets.astype(float)
        counts = np.diff(offsets)
        # Samples per commit when every commit has as many (a reshape then sums them, not reduceat).
        self.uniform = int(counts[0]) if len(counts) and int(counts.min()) == int(counts.max()) else 0

    def prefix(self, lo: int, hi: int) -> np.ndarray:
        """Cumulative sums (from 0), per commit of [lo, hi), of the 1-based ranks of its samples among the range's."""
        key = (lo, hi)
        got = self.memo.get(key)
        if got is None:
            s0, s1 = int(self.offsets[lo]), int(self.offsets[hi])
            mine = self.ranks[s0:s1]
            self._scratch[np.sort(mine)] = self._one_to_n[: s1 - s0]
            local = self._scratch[mine]
            if self.uniform > 1:
                local = local.reshape(hi - lo, self.uniform).sum(axis=1)
            elif s1 - s0 != hi - lo:
                local = np.add.reduceat(local, self.offsets[lo:hi] - s0)
            got = np.concatenate([[0.0], np.cumsum(local)])
            self.memo[key] = got
        return got

    def best_split(self, lo: int, hi: int, min_seg: int) -> tuple[int, float]:
        """Best Mann-Whitney split of [lo, hi) with ``min_seg`` commits a side: (cut, z); (-1, 0) if too short."""
        key = (lo, hi, min_seg)
        got = self.splits.get(key)
        if got is None:
            if hi - lo < 2 * min_seg:
                got = (-1, 0.0)
            else:
                cum = self.prefix(lo, hi)[min_seg : hi - lo - min_seg + 1]
                s0 = self.offsets_f[lo]
                n = self.offsets_f[hi] - s0
                n1 = self.offsets_f[lo + min_seg : hi - min_seg + 1] - s0
                z = (n1 * ((n + 1) / 2.0) - cum) / np.sqrt(n1 * (n - n1) * ((n + 1) / 12.0))
                best = int(np.argmax(np.abs(z)))
                got = (lo + min_seg + best, float(z[best]))
            self.splits[key] = got
        return got

    def z(self, lo: int, cut: int, hi: int, enough: Callable[[float], bool] | None = None) -> float:
        """Mann-Whitney of commits [lo, cut) vs [cut, hi) as a normal deviate, using the exact tail.

        The normal approximation badly understates the evidence when one side is short (6 commits far
        above 150 others: exact p = 1/C(156,6), not the normal curve's 1e-5), so the exact null
        distribution is used and mapped back to z (positive: the right side is larger). When
        ``enough(z)`` says the normal deviate already decides the test, the (slower) exact tail, which
        only ever adds evidence far out in the tail, is skipped.
        """
        cum = self.prefix(lo, hi)
        n = int(self.offsets[hi] - self.offsets[lo])
        n1 = int(self.offsets[cut] - self.offsets[lo])
        n2 = n - n1
        r1 = float(cum[cut - lo])
        z = (n1 * (n + 1) / 2.0 - r1) / math.sqrt(n1 * n2 * (n + 1) / 12.0)
        if min(n1, n2) > 60 or abs(z) < 1.96 or (enough is not None and enough(z)):
            return z
        u_left_high = r1 - n1 * (n1 + 1) / 2.0
        u_opposed = int(round(n1 * n2 - u_left_high)) if z < 0 else int(round(u_left_high))
        p = lower_tail(u_opposed, min(n1, n2), max(n1, n2))
        if p <= 0.0 or p >= 0.5:
            return z
        return math.copysign(float(-ndtri(p)), z)


class _PruneState:
    """What pruning has learnt about one series, kept across passes: range rank sums and verdicts."""

    def __init__(self, series: Series, ranks: np.ndarray) -> None:
        self.sums = _RankSums(ranks, series.offsets)
        self.commit_sums: _RankSums | None = None
        if int(series.counts.max()) > 1:
            self.commit_sums = _RankSums(tie_broken_ranks(series.commit_medians()), np.arange(len(series) + 1))
        self.verdicts: dict[tuple[int, int, int], tuple[float, float, bool]] = {}


def _prune(series: Series, state: _PruneState, cuts: list[int], settings: OfflineSettings, deff: float) -> list[int]:
    """Re-locate each cut between its neighbours; drop failing cuts that are locally weakest; repeat.

    A cut fails when its local scan p-value exceeds ``alpha``, its median ratio is below
    ``min_effect``, or (several samples per commit) the commit medians alone do not show it at
    ``commit_alpha``. Every round removes each failing cut that is weaker than both neighbours (the
    globally weakest always among them), so long series need few rounds; neighbours are re-examined.
    """
    offsets = series.offsets
    n = len(series)
    m = settings.min_segment
    sums, commit_sums, eval_memo = state.sums, state.commit_sums, state.verdicts
    log_min = math.log1p(settings.min_effect)
    sd = math.sqrt(deff)
    unit_offsets = np.arange(n + 1)

    def evaluate(lo: int, c: int, hi: int) -> tuple[float, float, bool]:
        """(scan p-value, median ratio, weak) of cut ``c`` between neighbours ``lo`` and ``hi``."""
        key = (lo, c, hi)
        if key not in eval_memo:
            edge = _min_frac(offsets, lo, hi, m)
            zc = sums.z(lo, c, hi, enough=lambda z: scan_pvalue_one(z / sd, edge) <= settings.alpha)
            p = scan_pvalue_one(zc / sd, edge)
            ratio = _median_ratio(series, lo, c, hi) if p <= settings.alpha else 1.0
            weak = ratio > 0 and abs(math.log(ratio)) < log_min
            if not weak and p <= settings.alpha and commit_sums is not None:
                # With several samples per commit, one bad run moves all of them: the shift must also
                # show in the commit medians, or two outlying runs could make a 3-commit "segment".
                frac = _min_frac(unit_offsets, lo, hi, m)
                zk = commit_sums.z(lo, c, hi, enough=lambda z: scan_pvalue_one(z, frac) <= settings.commit_alpha)
                weak = scan_pvalue_one(zk, frac) > settings.commit_alpha
            eval_memo[key] = (p, ratio, weak)
        return eval_memo[key]

    cuts = sorted(cuts)
    while cuts:
        for _ in range(4):
            moved = False
            for j in range(len(cuts)):
                lo = cuts[j - 1] if j > 0 else 0
                hi = cuts[j + 1] if j + 1 < len(cuts) else n
                best, _ = sums.best_split(lo, hi, m)
                if best >= 0 and best != cuts[j]:
                    cuts[j] = best
                    moved = True
            if not moved:
                break
        bounds = [0, *cuts, n]
        stats = [evaluate(bounds[j], cuts[j], bounds[j + 2]) for j in range(len(cuts))]
        score = [(1.0 + p if weak else p) if (p > settings.alpha or weak) else -1.0 for p, _, weak in stats]
        drop = [
            j
            for j, sc in enumerate(score)
            if sc >= 0 and (j == 0 or sc >= score[j - 1]) and (j + 1 == len(score) or sc > score[j + 1])
        ]
        if not drop:
            return cuts
        for j in reversed(drop):
            del cuts[j]
    return []


def _finish(
    series: Series,
    sums: _RankSums,
    cuts: list[int],
    settings: OfflineSettings,
    deff: float,
    previous: Sequence[tuple[int, float, float]] = (),
) -> list[tuple[int, float, float]]:
    """Polish every kept cut's position and report (index, ratio, p-value) at the final positions.

    ``previous`` is an earlier result for a superset of ``cuts`` (already polished): a cut that has
    the same two neighbours as there keeps its position, only the others are polished again.
    """
    n = len(series)
    m = settings.min_segment
    final = list(cuts)
    old_bounds = [0, *[c for c, _, _ in previous], n]
    neighbours = {c: (old_bounds[j], old_bounds[j + 2]) for j, (c, _, _) in enumerate(previous)}
    bounds = [0, *final, n]
    settled = {c for j, c in enumerate(final) if neighbours.get(c) == (bounds[j], bounds[j + 2])}
    for j in range(len(final)):
        if final[j] in settled:
            continue
        lo = final[j - 1] if j > 0 else 0
        hi = final[j + 1] if j + 1 < len(final) else n
        final[j] = _polish(series, lo, final[j], hi, m)
    out = []
    bounds = [0, *final, n]
    for j, c in enumerate(final):
        lo, hi = bounds[j], bounds[j + 2]
        z = sums.z(lo, c, hi)
        p = scan_pvalue_one(z / math.sqrt(deff), _min_frac(series.offsets, lo, hi, m))
        out.append((c, _median_ratio(series, lo, c, hi), p))
    return out


def _huber(r: np.ndarray, c: float) -> np.ndarray:
    """Huber's loss: squared near zero (efficient for Gaussian noise), linear in the tails (robust)."""
    a = np.abs(r)
    return np.where(a <= c, 0.5 * r * r, c * a - 0.5 * c * c)


def _polish(
    series: Series, lo: int, cut: int, hi: int, min_seg: int, reach: int = 5, span: int = 60, floor: float = 0.02
) -> int:
    """Exact position of a confirmed change: maximum likelihood of the split near ``cut``, noise shape estimated.

    Ranks find and test a change well but place it poorly when the shift is large: a commit that is
    clearly at the new level yet the best of its segment ranks like a borderline one. With the two
    levels fixed at the medians of up to ``span`` commits on each side away from the boundary, the
    noise density is estimated from those segments' relative residuals (a Gaussian kernel density,
    Silverman's bandwidth), so skewed and bimodal noise are modelled as they are rather than as
    Gaussian; a heavy-tailed (Cauchy) share ``floor`` bounds what an outlying sample can cost.
    Each split within ``reach`` scores every nearby sample against its side's level; the cheapest
    contiguous split wins (ties: closest to ``cut``). Falls back to Huber's loss when the residuals
    have no spread.
    """
    a = max(lo + min_seg, cut - reach)
    b = min(hi - min_seg, cut + reach)
    if b <= a:
        return cut
    left = series.samples(max(lo, a - span), a) if a - lo >= min_seg else series.samples(lo, cut)
    right = series.samples(b, min(hi, b + span)) if hi - b >= min_seg else series.samples(cut, hi)
    m_left, m_right = _median(left), _median(right)
    x = series.samples(a, b)
    offs = series.offsets[a:b] - series.offsets[a]
    if m_left > 0 and m_right > 0:
        resid = np.concatenate([left / m_left - 1.0, right / m_right - 1.0])
        q75, q25 = np.percentile(resid, [75, 25])
        spread = min(float(np.std(resid)), float(q75 - q25) / 1.349)
    else:
        spread = 0.0
    if spread > 0.0:
        h = 0.9 * spread * len(resid) ** -0.2
        wide = 3.0 * spread

        # Both levels in one kernel matrix, built in place (the same arithmetic, fewer temporaries).
        r = np.concatenate([x / m_left, x / m_right]) - 1.0
        kern = np.subtract.outer(r, resid)
        kern /= h
        np.square(kern, out=kern)
        kern *= -0.5
        np.exp(kern, out=kern)
        kde = kern.mean(axis=1) / (h * math.sqrt(2 * math.pi))
        cauchy = 1.0 / (math.pi * wide * (1.0 + (r / wide) ** 2))
        cost = -np.log((1.0 - floor) * kde + floor * cauchy)
        cost_left = np.add.reduceat(cost[: len(x)], offs)
        cost_right = np.add.reduceat(cost[len(x) :], offs)
    else:
        both = np.concatenate([left - m_left, right - m_right])
        scale = 1.4826 * float(np.median(np.abs(both)))
        c = 1.345 * (scale if scale > 0.0 else max(abs(m_right - m_left) / 10.0, 1e-12))
        cost_left = np.add.reduceat(_huber(x - m_left, c), offs)
        cost_right = np.add.reduceat(_huber(x - m_right, c), offs)
    # total(t) = sum of left costs of commits a..t-1 + right costs of commits t..b-1, t in [a, b].
    total = np.concatenate([[0.0], np.cumsum(cost_left)]) + np.concatenate([np.cumsum(cost_right[::-1])[::-1], [0.0]])
    positions = np.arange(a, b + 1)
    order = np.lexsort((np.abs(positions - cut), total))
    return int(positions[order[0]])


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
    serial = serial_factor(scores, series.offsets)
    deff = design_effect(scores, series.offsets) * serial
    cuts = _candidates(scores, series.offsets, n, settings, serial)
    state = _PruneState(series, ranks)
    found = _prune(series, state, cuts, settings, deff)
    if n >= _LOCAL_NOISE_MIN_COMMITS:
        extra = set(_candidates(_segment_scores(ranks, series.offsets, found), series.offsets, n, settings, serial))
        if extra - set(found):
            found = _prune(series, state, sorted(set(found) | extra), settings, deff)
    kept = _finish(series, state.sums, found, settings, deff)
    if serial > 1.0:
        # Judged at the polished positions, where a step's move is sharpest; the survivors are
        # polished and reported again between their new neighbours.
        local = _local_changes_only(series.commit_medians(), [c for c, _, _ in kept], settings.local_z)
        if len(local) < len(kept):
            kept = _finish(series, state.sums, local, settings, deff, previous=kept)
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


# Odd window lengths (a median is then one of the values), growing by about 1.6 each.
_LOCAL_SCALES = (3, 5, 9, 13, 21, 35, 55, 89)
_LOCAL_MIN_REFERENCE = 10


def _locality(window_medians: Callable[[int], np.ndarray], lo: int, cut: int, hi: int, enough: float) -> float:
    """How far the level moves across ``cut``, against how it moves elsewhere in [lo, hi): a robust z.

    ``window_medians(w)[j]`` is the median of the commit levels j .. j+w-1. At each window scale w,
    the move at a position t is the median of the w commits from t on minus that of the w commits
    before t; the move at the cut is compared with the moves at every other position of the two
    segments whose windows do not reach the cut (their median and MAD). The largest z over the
    scales is returned (inf when no scale has enough reference positions); the scan stops at the
    first scale that reaches ``enough``.
    """
    best, tested = 0.0, False
    for w in _LOCAL_SCALES:
        if cut - lo < w or hi - cut < w:
            break
        t = np.arange(lo + w, hi - w + 1)
        t = t[np.abs(t - cut) >= w]
        if len(t) < _LOCAL_MIN_REFERENCE:
            continue
        tested = True
        med = window_medians(w)
        reference = med[t] - med[t - w]
        center = float(np.median(reference))
        spread = 1.4826 * float(np.median(np.abs(reference - center)))
        move = float(med[cut] - med[cut - w])
        if spread <= 0.0:
            return math.inf if move != center else best
        best = max(best, abs(move - center) / spread)
        if best >= enough:
            break
    return best if tested else math.inf


def _local_changes_only(medians: np.ndarray, cuts: list[int], z: float) -> list[int]:
    """Drop, least local first, the cuts whose level move is not ``z`` robust sd beyond the moves around them.

    Used when the series is serially dependent (``serial_factor`` > 1): a trend or a wandering level
    makes every split of a long stretch significant, and the rank tests alone would cut a smooth curve
    into a staircase. A change point is then required to be a local feature — at some window scale the
    level moves across it as it moves nowhere else in its two segments — which a step is and a point
    on a trend is not (the same move happens all along the trend). Window medians of the commit
    medians, so a lone outlying run moves no window. Series without dependence, the usual benchmark
    noise, never reach this test.
    """
    n = len(medians)
    cache: dict[int, np.ndarray] = {}

    def window_medians(w: int) -> np.ndarray:
        # Running medians (scipy's rank filter), shifted so that entry j covers commits j .. j+w-1.
        if w not in cache:
            cache[w] = median_filter(medians, size=w, mode="nearest")[w // 2 : w // 2 + n - w + 1]
        return cache[w]

    cuts = list(cuts)
    memo: dict[tuple[int, int, int], float] = {}
    while cuts:
        bounds = [0, *cuts, n]
        scores = []
        for j, c in enumerate(cuts):
            key = (bounds[j], c, bounds[j + 2])
            if key not in memo:
                memo[key] = _locality(window_medians, *key, enough=z)
            scores.append(memo[key])
        j = int(np.argmin(scores))
        if scores[j] >= z:
            break
        del cuts[j]
    return cuts


def _segment_scores(ranks: np.ndarray, offsets: np.ndarray, cuts: list[int]) -> np.ndarray:
    """Normal scores of the ranks taken within each segment between ``cuts`` (one sort for all of them).

    Scores of series-wide ranks spread differently in every segment (widely in the tails, narrowly in
    the middle), so the first search mis-scales changes inside a segment whose level sits far from
    the median, and misses some; within a segment the noise is homogeneous again, and segments that
    hold no further change contribute nothing, since each is centred on its own median.
    """
    n = len(ranks)
    bounds = np.concatenate([[0], offsets[cuts], [n]])
    sizes = np.diff(bounds)
    segment = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    by_value = np.empty(n, dtype=np.int64)
    by_value[ranks] = np.arange(n)  # ranks are a permutation: no sort needed
    # A stable sort of the segment numbers keeps value order within each segment (radix sort).
    grouped = by_value[np.argsort(segment[by_value], kind="stable")]
    local = np.empty(n)
    local[grouped] = np.arange(n) - np.repeat(bounds[:-1], sizes)
    return ndtri((local + 0.5) / sizes[segment])


def support(
    series: Series, index: int, neighbours: Sequence[int] = (), settings: OfflineSettings | None = None
) -> tuple[float, float]:
    """(p-value, median ratio) of a change at ``index`` between the nearest ``neighbours`` on each side.

    The same tests as ``detect`` applies to a kept cut, but at a given position: the rank-sum scan
    p-value of the samples and, with several samples per commit, of the commit medians (the larger
    of the two is returned: both must show the change). The service asks it whether a change point
    reported earlier still holds once the detector stops listing it. p = 1 when a side has fewer
    than ``min_segment`` commits.
    """
    settings = settings or OfflineSettings()
    n = len(series)
    m = settings.min_segment
    lo = max([c for c in neighbours if c < index], default=0)
    hi = min([c for c in neighbours if c > index], default=n)
    if index - lo < m or hi - index < m:
        return 1.0, 1.0
    ranks = tie_broken_ranks(series.values)
    scores = normal_scores(ranks)
    deff = design_effect(scores, series.offsets) * serial_factor(scores, series.offsets)
    z = _RankSums(ranks, series.offsets).z(lo, index, hi)
    p = scan_pvalue_one(z / math.sqrt(deff), _min_frac(series.offsets, lo, hi, m))
    if int(series.counts.max()) > 1:
        unit = np.arange(n + 1)
        zk = _RankSums(tie_broken_ranks(series.commit_medians()), unit).z(lo, index, hi)
        p = max(p, scan_pvalue_one(zk, _min_frac(unit, lo, hi, m)))
    return p, _median_ratio(series, lo, index, hi)
