"""Online gate for paired ratio series: rQPS against a pinned reference, judged commit by commit.

A paired run measures the commit interleaved with the branch's reference build, so each commit's rQPS carries its
own run-to-run spread only (0.9 % CV measured here for pgbench-ro-prepared-c1, docs/throughput.md) and no drift of
the machine: the commit medians of such a series are close to independent and close to Gaussian around the
branch's level. That is what the rank gate (``online``) cannot use: it treats a commit's rounds as samples, divides
their evidence by the design effect of the commit-level spread, and with the baseline of a young series it cannot
reach its level for weeks; on paired data it needed 5 or more commits to report a 5 % step.

Here each commit counts once, by its median on a log scale. For the newest ``h`` commits (``persistence`` to
``max_run``), all on one side of the baseline median, the statistic is

    t = (mean of the h log medians - median of the baseline's) / (s * sqrt(1/h + pi/2/n))

with ``s`` the baseline's spread over the ``n`` commits since the last change: the larger of its robust spread
(1.4826 MAD of the log medians) and the standard deviation of the baseline without its most extreme tenth (at
least one commit), floored at ``min_scale``. The MAD alone reads a heavy-tailed baseline as tighter than it is:
on 16 real A-vs-A paired runs (issue #28, load 0.8-5.3), per-commit rQPS with a standard deviation of 2.4 % and a
MAD-spread of 1.9 %, it gave 18.2 false alerts per 1000 commits against 4.2 for the old per-round method, and the
trimmed deviation 10.0 (tests/benchmarks/min_step.py; on Gaussian commit medians the spreads agree). The trim
keeps one wild baseline commit from widening the gate for the next ``baseline_max`` commits: issue #28's culprit
at load 10-15, whose baseline held one commit 12 % high, is still found at the second commit after the drop.
``t`` is referred to Student's t with n - 1 degrees of freedom and the
p-value Bonferroni-corrected over the run lengths tried. Each of the h commits must lie nearer the new level than
the baseline's (|log m_i - centre| > |shift| / 2), so the run starts where the level moved. A change alerts at
``alpha`` and only when the level moved by at least ``min_effect``. The spread is the baseline's own, so a
noisier workload needs a larger step: the minimum detectable effect follows from the data, and
tests/benchmarks/min_step.py measures it on real runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from master.detect.config import MIN_EFFECT
from master.detect.model import ChangePoint, Direction, Kind, Series
from master.detect.online import QUIET, GateResult, Tier


@dataclass(frozen=True)
class PairedSettings:
    """Knobs of the paired gate (defaults measured by tests/benchmarks/min_step.py, docs/throughput.md)."""

    baseline_min: int = 10
    baseline_max: int = 100
    persistence: int = 2  # one commit alone never alerts: a lone slow run is not a change
    max_run: int = 3
    alpha: float = 3e-3
    critical_alpha: float = 1e-6
    critical_effect: float = 0.03
    min_effect: float = MIN_EFFECT
    min_scale: float = 1e-4  # a baseline of identical ratios would make any move infinitely significant


def gate(
    series: Series,
    direction: Direction = Direction.HIGHER,
    settings: PairedSettings | None = None,
    stable_from: int = 0,
) -> GateResult:
    """Test the newest commits of a paired ratio series against the baseline since ``stable_from``."""
    settings = settings or PairedSettings()
    n = len(series)
    medians = series.commit_medians()
    if n == 0 or not np.all(medians > 0):
        return QUIET
    logs = np.log(medians)
    runs = []
    for h in range(settings.persistence, settings.max_run + 1):
        start = n - h
        lo = max(stable_from, start - settings.baseline_max)
        if start - lo >= settings.baseline_min:
            runs.append((h, start, lo))
    best: tuple[float, int, float] | None = None
    for h, start, lo in runs:
        base, new = logs[lo:start], logs[start:n]
        centre = float(np.median(base))
        up, down = bool(np.all(new > centre)), bool(np.all(new < centre))
        if not (up or down):
            continue
        shift = float(np.mean(new)) - centre
        if abs(shift) < math.log1p(settings.min_effect):
            continue
        if not bool(np.all(np.abs(new - centre) > abs(shift) / 2)):
            # every commit of the run must sit nearer the new level than the old one: a big jump in the newest
            # commit must not drag an unchanged commit before it (below the median by chance) into the run, or
            # the change is placed a commit early and its bisection searches the wrong range
            continue
        mad = 1.4826 * float(np.median(np.abs(base - centre)))
        nb = len(base)
        kept = base[np.argsort(np.abs(base - centre), kind="stable")[: nb - max(1, nb // 10)]]
        scale = max(mad, float(np.std(kept, ddof=1)), settings.min_scale)
        t = shift / (scale * math.sqrt(1.0 / h + math.pi / 2.0 / nb))
        p = min(1.0, 2.0 * float(stats.t.sf(abs(t), nb - 1)) * len(runs))
        if best is None or p < best[0]:
            best = (p, start, math.exp(shift))
    if best is None or best[0] > settings.alpha:
        return QUIET
    p, start, ratio = best
    strong = p <= settings.critical_alpha and abs(math.log(ratio)) >= math.log1p(settings.critical_effect)
    change = ChangePoint(series.commits[start], start, ratio, Kind.of(ratio, direction), p)
    return GateResult(Tier.CRITICAL if strong else Tier.WARN, change, n - start)


def gate_with_history(
    series: Series, direction: Direction, settings: PairedSettings | None = None, cuts: tuple[int, ...] = ()
) -> GateResult:
    """The gate with its baseline starting after the last known change point (cuts among the newest commits
    are ignored, so a fresh shift is judged by the gate, not taken as the baseline's start)."""
    settings = settings or PairedSettings()
    old = [c for c in cuts if c < len(series) - settings.max_run - 1]
    return gate(series, direction, settings, stable_from=max(old, default=0))
