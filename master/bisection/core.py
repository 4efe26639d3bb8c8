"""Bisection as a pure decision over what has been measured so far (no Buildbot, no database).

`decide()` looks at every sample measured for every commit of the range and returns the next thing to do:
measure a commit (again), or the outcome. Because it is a pure function of the measurements it is memoised and
resumable by construction: after a master restart the same measurements give the same next step, and nothing
known is measured again.

Statistics, after Chromium's Pinpoint: first confirm the two ends really differ (Mann-Whitney U on their samples
plus a minimum effect), re-measuring them alternately; "no change" needs a bootstrap interval of the ratio inside
the minimum effect. For a paired ratio series, whose every run is measured against the branch's pinned reference
in the same job, the series' own levels around the ends stand for the ends (``Observations.levels``): no end is
measured again, each probe once unless it is not sure yet, and the culprit needs no further rounds. Then each
probe is judged against both ends: its position
t = (probe - good) / (bad - good) on 20%-trimmed means, with a bootstrap confidence interval; an interval entirely
below 1/2 is "like good", above is "like bad", otherwise "not sure yet" and the least precise of the probe and
the two ends gets another round of samples, up to a cap — then the range is reported as ambiguous rather than
guessed. Commits that failed to build or run are skipped, never blamed.

The culprit of a series with no levels is confirmed against its parent with fresh rounds of both. Where the farm
runs jobs (a recipe with sides, master/jobs), those rounds are one job per round with the two as its sides,
measured interleaved in one session on the bisection's worker (``ConfirmPair``; its outcome comes back as a
``PairRun``), so drift on the machine hits both alike; elsewhere (``perffarm bisect --local``) they are separate
builds, alternating (``Measure``). Either way the rounds join the commits' samples and the search re-judges them
against the ends, as it judges every probe; the culprit's ratio is then the paired ratio of the job's rounds.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from master.detect.config import BISECT_MIN_EFFECT, DetectionSettings
from master.detect.steady import SteadySettings
from recipes.stats import NoRatio, PairedRatio, paired_estimate

STEADY = SteadySettings()


class Verdict(enum.Enum):
    GOOD = "good"
    BAD = "bad"
    UNSURE = "unsure"


@dataclass(frozen=True)
class Policy:
    """Knobs of the search; defaults aim at exact answers with few probes on noisy 2-core machines."""

    confirm_rounds: int = 1  # fresh rounds each end gets in this bisection before anything is decided
    max_end_rounds: int = 30  # rounds per end before giving up on confirming the change
    max_probe_rounds: int = 30  # rounds per probe before reporting an ambiguous range
    end_alpha: float = 1e-3  # Mann-Whitney p-value below which the ends differ
    # the same for the levels of a paired series (Observations.levels): detection has already found the change on
    # many commits, so the levels need only show it is there and large enough, not prove it again
    level_alpha: float = 1e-2
    level_z: float = 3.0  # standard errors a probe judged on the levels must lie clear of the midpoint
    paired_probe_rounds: int = 2  # rounds a probe of a paired series is measured with (one order-balanced block)
    min_effect: float = BISECT_MIN_EFFECT  # relative change the ends must show (1%)
    # the same when both ends repeat exactly (instruction counts): the steps detection reports for such series
    steady_min_effect: float = STEADY.min_effect
    steady_cv: float = STEADY.cv  # an end is steady when all its samples agree within this relative range
    confidence: float = 0.95  # of the bootstrap interval of a probe's position
    n_boot: int = 2000
    culprit_confirm_rounds: int = 2  # fresh rounds of the culprit and its parent in the final A/B

    @classmethod
    def configured(cls, detection: DetectionSettings) -> Policy:
        """The policy under the farm's ``[detection]`` settings: steady ends are confirmed from the same
        ``min_effect`` detection reports steady steps from, so every such step it reports can be bisected."""
        return cls(min_effect=detection.bisect_min_effect, steady_min_effect=detection.min_effect)


@dataclass(frozen=True)
class Measure:
    commit: str
    reason: str


@dataclass(frozen=True)
class Culprit:
    commit: str
    parent: str  # the last commit judged like good (the culprit's first parent unless it could not be built)


@dataclass(frozen=True)
class Ambiguous:
    good: str
    bad: str
    reason: str


@dataclass(frozen=True)
class NotReproducible:
    reason: str


@dataclass(frozen=True)
class ConfirmPair:
    """Measure the culprit and its parent once more each, as the two sides of one job (parent A, culprit B):
    interleaved in one session on one worker, so drift between them cancels."""

    parent: str
    culprit: str
    reason: str


Decision = Measure | ConfirmPair | Culprit | Ambiguous | NotReproducible


@dataclass(frozen=True)
class PairRun:
    """One ended confirmation job (``ConfirmPair``): the bisected metric's samples of each side, sample i of both
    taken in round i; or why the job measured nothing (``failed``: a build or bench failure, a lost build), which
    counts its two commits as broken, as a failed build of either would."""

    parent: str
    culprit: str
    parent_samples: tuple[float, ...] = ()
    culprit_samples: tuple[float, ...] = ()
    failed: str | None = None


@dataclass(frozen=True)
class Observations:
    """Everything measured so far: per commit, its samples (all sources) and rounds run by this bisection.

    ``levels``: the series' level before the change and after it, from several measured commits around the ends,
    when the series has no drift to fear (a ratio to the branch's pinned reference, measured interleaved with it
    in every run): the probes are judged against those, and neither end nor the culprit is measured again."""

    samples: Mapping[str, Sequence[float]]
    fresh_rounds: Mapping[str, int]
    broken: frozenset[str] = frozenset()
    levels: tuple[Sequence[float], Sequence[float]] | None = None
    pair_jobs: bool = False  # the culprit's confirmation rounds run as jobs (ConfirmPair), not as single builds
    pair_runs: tuple[PairRun, ...] = ()  # the confirmation jobs that ended, oldest first

    def of(self, commit: str) -> np.ndarray:
        return np.asarray(self.samples.get(commit, ()), dtype=float)

    def rounds(self, commit: str) -> int:
        return self.fresh_rounds.get(commit, 0)


def _boot_centres(x: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """Bootstrap distribution of the 20%-trimmed mean (robust to outliers, nearly as efficient as the mean)."""
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return stats.trim_mean(x[idx], 0.2, axis=1)


def position_interval(
    probe: np.ndarray, good: np.ndarray, bad: np.ndarray, policy: Policy, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap interval of t = (probe - good) / (bad - good) on trimmed means: 0 is like good, 1 like bad."""
    rng = np.random.default_rng(seed)
    p, g, b = (_boot_centres(x, rng, policy.n_boot) for x in (probe, good, bad))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (p - g) / (b - g)
    t = t[np.isfinite(t)]
    if len(t) == 0:
        return (-np.inf, np.inf)
    tail = (1 - policy.confidence) / 2
    low, high = np.quantile(t, [tail, 1 - tail])
    return float(low), float(high)


def classify(probe: np.ndarray, good: np.ndarray, bad: np.ndarray, policy: Policy, seed: int = 0) -> Verdict:
    """Is `probe` like `good`, like `bad`, or not sure yet (bootstrap interval of its position between them)?"""
    if len(probe) == 0:
        return Verdict.UNSURE
    return _classify(tuple(probe.tolist()), tuple(good.tolist()), tuple(bad.tolist()), policy, seed)


@functools.lru_cache(maxsize=8192)
def _classify(probe: tuple, good: tuple, bad: tuple, policy: Policy, seed: int) -> Verdict:
    # decide() re-judges the probes on its path at every step; samples only grow, so most calls repeat
    low, high = position_interval(np.array(probe), np.array(good), np.array(bad), policy, seed)
    if high < 0.5:
        return Verdict.GOOD
    if low > 0.5:
        return Verdict.BAD
    return Verdict.UNSURE


def classify_on_levels(probe: np.ndarray, good: np.ndarray, bad: np.ndarray, policy: Policy) -> Verdict:
    """Like `classify`, for a paired series judged on its levels: a probe is one or a few runs of one block of
    rounds each, too few samples to show their own spread, so its noise is taken as the levels' (the spread of
    their samples over several commits and runs, divided by the square root of the probe's sample count), and its
    position t must lie `policy.level_z` such standard errors clear of 1/2."""
    g, b = float(stats.trim_mean(good, 0.2)), float(stats.trim_mean(bad, 0.2))
    if len(probe) == 0 or b == g:
        return Verdict.UNSURE
    spread = max(
        float(np.std(good, ddof=1)) if len(good) > 1 else 0.0, float(np.std(bad, ddof=1)) if len(bad) > 1 else 0.0
    )
    noise = max(spread / np.sqrt(len(probe)), _sem(probe) if len(probe) > 1 else 0.0)
    ends = sorted((float(np.mean(probe)) + k * policy.level_z * noise - g) / (b - g) for k in (-1, 1))
    if ends[1] < 0.5:
        return Verdict.GOOD
    if ends[0] > 0.5:
        return Verdict.BAD
    return Verdict.UNSURE


def _point_t(probe: np.ndarray, good: np.ndarray, bad: np.ndarray) -> float:
    """t = (probe - good) / (bad - good) on 20%-trimmed means (0.5 when the ends coincide)."""
    g, b = stats.trim_mean(good, 0.2), stats.trim_mean(bad, 0.2)
    return float((stats.trim_mean(probe, 0.2) - g) / (b - g)) if b != g else 0.5


def _steady(x: np.ndarray, policy: Policy) -> bool:
    """All of a commit's samples (every run) agree within policy.steady_cv, as steady.is_steady asks per commit."""
    return bool(np.ptp(x) <= policy.steady_cv * abs(float(np.median(x))))


def _sem(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("inf")


def ends_differ(
    good: np.ndarray, bad: np.ndarray, policy: Policy, seed: int = 0, alpha: float | None = None
) -> bool | None:
    """True: a real change; False: precisely no change of min_effect; None: not sure yet (`alpha`: the
    Mann-Whitney level, default policy.end_alpha)."""
    if len(good) < 2 or len(bad) < 2:
        return None
    # steady ends (instruction counts) can show what detection reports for them: steps from 0.5%
    min_effect = policy.steady_min_effect if _steady(good, policy) and _steady(bad, policy) else policy.min_effect
    p = float(stats.mannwhitneyu(good, bad, alternative="two-sided").pvalue)
    mg = float(stats.trim_mean(good, 0.2))
    if mg == 0:
        return None
    effect = float(stats.trim_mean(bad, 0.2)) / mg - 1.0
    if p < (policy.end_alpha if alpha is None else alpha) and abs(effect) >= min_effect:
        return True
    rng = np.random.default_rng(seed)
    ratios = _boot_centres(bad, rng, policy.n_boot) / _boot_centres(good, rng, policy.n_boot) - 1.0
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    if -min_effect < lo and hi < min_effect:
        return False  # any change is smaller than the smallest one worth bisecting
    return None


def decide(commits: Sequence[str], obs: Observations, policy: Policy = Policy()) -> Decision:
    """The next step of a bisection over `commits` (first = known good end, last = bad end, in order)."""
    if len(commits) < 2:
        raise ValueError("a bisection needs a good and a bad commit")
    obs = with_pair_runs(obs)
    good, bad = commits[0], commits[-1]
    for end in (good, bad):
        if end in obs.broken:
            return NotReproducible(f"the {'good' if end == good else 'bad'} end {end[:12]} does not build or run")
    trusted = obs.levels is not None and len(obs.levels[0]) > 0 and len(obs.levels[1]) > 0
    # 1. confirm the ends differ: from the series' levels when they are drift-free, else re-measuring the ends
    #    alternately (good, bad, good, bad, ...)
    differ = ends_differ(*_levels(obs), policy, alpha=policy.level_alpha) if trusted else None
    if not trusted or differ is None:
        for end in (good, bad):
            if obs.rounds(end) < policy.confirm_rounds:
                return Measure(end, "re-measure the ends to confirm the change")
        differ = ends_differ(obs.of(good), obs.of(bad), policy)
        trusted = False
    if differ is None:
        if min(obs.rounds(good), obs.rounds(bad)) >= policy.max_end_rounds:
            return NotReproducible(f"the ends are not clearly different after {policy.max_end_rounds} rounds each")
        end = good if obs.rounds(good) <= obs.rounds(bad) else bad
        return Measure(end, "the ends may differ: more samples")
    if not differ:
        return NotReproducible("re-measured, the good and bad ends perform the same")
    # 2. binary search over (lo, hi]: lo judged like good, hi like bad
    lo, hi = 0, len(commits) - 1
    g, b = _levels(obs) if trusted else (obs.of(good), obs.of(bad))
    while hi - lo > 1:
        candidates = [i for i in range(lo + 1, hi) if commits[i] not in obs.broken]
        if not candidates:
            skipped = ", ".join(c[:12] for c in commits[lo + 1 : hi])
            return Ambiguous(commits[lo], commits[hi], f"every commit in between failed to build or run: {skipped}")
        mid = (lo + hi) // 2
        probe = min(candidates, key=lambda i: (abs(i - mid), i))
        samples = obs.of(commits[probe])
        if len(samples) == 0:
            return Measure(commits[probe], "bisect")
        verdict = classify_on_levels(samples, g, b, policy) if trusted else classify(samples, g, b, policy, seed=probe)
        if verdict is Verdict.GOOD:
            lo = probe
        elif verdict is Verdict.BAD:
            hi = probe
        else:
            # more samples where the uncertainty is. t's variance is about
            # [Var(probe) + (1 - t)^2 Var(good) + t^2 Var(bad)] / (bad - good)^2: measure the largest term's
            # commit, among those below their round caps (a probe at its cap can still be decided by its ends)
            t_hat = min(max(_point_t(samples, g, b), 0.0), 1.0)
            terms = [
                (commits[probe], _sem(samples) ** 2, policy.max_probe_rounds),
                (good, (1 - t_hat) ** 2 * _sem(g) ** 2, 0 if trusted else policy.max_end_rounds),
                (bad, t_hat**2 * _sem(b) ** 2, 0 if trusted else policy.max_end_rounds),
            ]
            open_terms = [(c, v) for c, v, cap in terms if obs.rounds(c) < cap and v > 0]
            if not open_terms:
                return Ambiguous(
                    commits[lo],
                    commits[hi],
                    f"{commits[probe][:12]} is neither like good nor like bad after {policy.max_probe_rounds} rounds",
                )
            return Measure(max(open_terms, key=lambda item: item[1])[0], "not sure yet: more samples")
    # 3. confirm the culprit against the last good commit with interleaved fresh rounds; a paired series judged on
    #    its levels has judged both already, each against the level of many commits
    culprit, parent = commits[hi], commits[lo]
    if trusted:
        return Culprit(culprit, parent)
    deficit = {c: _needed(c, commits, policy) - obs.rounds(c) for c in (parent, culprit)}
    if max(deficit.values()) > 0:
        if obs.pair_jobs:
            # one job per round, both sides in it: the rounds of the two are interleaved in one session
            return ConfirmPair(parent, culprit, "confirm the culprit against its parent (one job, sides interleaved)")
        # alternate parent and culprit (A/B/A/B) so drift on the machine hits both alike
        c = parent if deficit[parent] >= deficit[culprit] else culprit
        return Measure(c, "confirm the culprit against its parent (interleaved A/B)")
    return Culprit(culprit, parent)


def with_pair_runs(obs: Observations) -> Observations:
    """The observations with the confirmation jobs' rounds folded in: each job's samples of a side join that
    commit's samples and count as one fresh round of it, and a failed job's two commits count as broken."""
    if not obs.pair_runs:
        return obs
    samples = {c: list(xs) for c, xs in obs.samples.items()}
    fresh = dict(obs.fresh_rounds)
    broken = set(obs.broken)
    for run in obs.pair_runs:
        if run.failed is not None:
            broken |= {run.parent, run.culprit}
            continue
        for commit, xs in ((run.parent, run.parent_samples), (run.culprit, run.culprit_samples)):
            samples.setdefault(commit, []).extend(xs)
            fresh[commit] = fresh.get(commit, 0) + 1
    return Observations(samples, fresh, frozenset(broken), obs.levels, obs.pair_jobs, ())


def pair_ratio(obs: Observations, parent: str, culprit: str) -> PairedRatio | None:
    """culprit / parent from the rounds of their confirmation jobs (the order-balanced ratio a job's sides get,
    recipes/stats.py, with its 95% CI; drift between rounds cancels), or None without a job that measured both.
    Rounds of several jobs are pooled; a job with an odd number of rounds gives all but its last, so that round i
    of the pool still ran the parent first when i is even (as every job's round i does)."""
    runs = [r for r in obs.pair_runs if r.failed is None and (r.parent, r.culprit) == (parent, culprit)]
    a: list[float] = []
    b: list[float] = []
    for run in runs:
        n = min(len(run.parent_samples), len(run.culprit_samples))
        if len(runs) > 1:
            n -= n % 2
        a.extend(run.parent_samples[:n])
        b.extend(run.culprit_samples[:n])
    if not a:
        return None
    try:
        return paired_estimate(a, b)
    except NoRatio:
        return None


def _levels(obs: Observations) -> tuple[np.ndarray, np.ndarray]:
    assert obs.levels is not None
    return np.asarray(obs.levels[0], dtype=float), np.asarray(obs.levels[1], dtype=float)


def _needed(commit: str, commits: Sequence[str], policy: Policy) -> int:
    """Fresh rounds a commit needs before the culprit is confirmed: the ends already have confirm_rounds."""
    base = policy.confirm_rounds if commit in (commits[0], commits[-1]) else 1
    return base + policy.culprit_confirm_rounds
