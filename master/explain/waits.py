"""Which waits moved between two sides: "LWLock:WALWrite 31% → 44%", claimed only beyond the samples' noise.

A side's samples each carry the share of backend-samples in each wait (`CPU` for a backend running, `LWLock:...`,
`Lock:...`, `IO:...`; recipes/pg/waits.py) and how many there were. A side's share of a wait is pooled over its
samples: the wait's backend-samples over all backend-samples.

How sure: the pooled share's variance is the larger of

* the binomial variance p(1 − p)/N over the N backend-samples (what it would be if every one were an independent
  draw), and
* the between-sample variance of a ratio estimator, n/(n − 1) · Σ (oᵢ (pᵢ − p))² / (Σ oᵢ)² over the n samples of
  oᵢ observations and share pᵢ (what the samples show: backends of one moment, or of one slice, wait together, and
  one sample's load differs from the next's).

The change B − A is claimed when its normal interval, at 99% after a Bonferroni correction for the number of waits
looked at (z = Φ⁻¹(1 − 0.01 / 2k) for k waits), excludes 0 and the change is at least `MIN_CHANGE` (2 points of
share). Each side needs at least `MIN_SAMPLES` samples (one sample shows no between-sample spread) and
`MIN_OBSERVATIONS` backend-samples. A share is a fact about where the backends were, not a share of the time lost:
the farm does not say how much of a slowdown a wait explains. Pure: no Buildbot, no store (docs/explain.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

ALPHA = 0.01  # family-wise, over the waits of one workload: a false claim in 1 of 100 A-vs-A comparisons
MIN_CHANGE = 0.02  # a move of less than 2 points of share is not listed, however sure
MIN_SAMPLES = 2  # per side: one sample has no between-sample spread to judge by
MIN_OBSERVATIONS = 50  # per side: backend-samples behind the shares (busy backends: few on a fast read-only load)
CPU = "CPU"  # recipes/pg/waits.py: an active backend that waits for nothing


@dataclass(frozen=True)
class WaitSample:
    """One sample's waits: backend-samples per wait (from the stored shares × observations)."""

    counts: Mapping[str, int]
    observations: int


def samples_from_json(docs: Sequence[Mapping[str, Any]]) -> list[WaitSample]:
    """Stored samples (the result's form: observations and shares, checked at ingest) as counts."""
    out = []
    for d in docs:
        n = int(d.get("observations", 0))
        counts = {str(k): round(float(v) * n) for k, v in dict(d.get("shares", {})).items()}
        out.append(WaitSample(counts, n))
    return out


@dataclass(frozen=True)
class Share:
    """One wait's pooled share on one side, with its variance (see the module docstring)."""

    share: float
    variance: float


def pooled(samples: Sequence[WaitSample], wait: str) -> Share:
    total = sum(s.observations for s in samples)
    if total <= 0:
        return Share(0.0, math.inf)
    hits = sum(s.counts.get(wait, 0) for s in samples)
    p = hits / total
    binomial = p * (1 - p) / total
    n = sum(1 for s in samples if s.observations > 0)
    between = 0.0
    if n > 1:
        between = (
            n
            / (n - 1)
            * sum(
                (s.observations * (s.counts.get(wait, 0) / s.observations - p)) ** 2
                for s in samples
                if s.observations > 0
            )
            / total**2
        )
    return Share(p, max(binomial, between))


@dataclass(frozen=True)
class WaitChange:
    workload: str
    wait: str
    before: float  # pooled share on side A
    after: float  # on side B
    low: float  # the change's interval (after - before), Bonferroni-corrected
    high: float
    observations: tuple[int, int]  # backend-samples behind each side

    @property
    def delta(self) -> float:
        return self.after - self.before

    def text(self) -> str:
        """`LWLock:WALWrite 31% → 44%`."""
        return f"{self.wait} {_pct(self.before)} → {_pct(self.after)}"


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.095 or x == 0 else f"{x:.1%}"


def changed(
    workload: str, a: Sequence[WaitSample], b: Sequence[WaitSample], alpha: float = ALPHA
) -> list[WaitChange] | None:
    """The waits of `workload` whose share moved from A to B beyond the noise, largest move first; None when a side
    has too few samples or observations to judge (nothing is claimed either way)."""
    for side in (a, b):
        if sum(1 for s in side if s.observations > 0) < MIN_SAMPLES:
            return None
        if sum(s.observations for s in side) < MIN_OBSERVATIONS:
            return None
    names = sorted({w for s in (*a, *b) for w, c in s.counts.items() if c > 0})
    if not names:
        return []
    z = NormalDist().inv_cdf(1 - alpha / (2 * len(names)))
    out = []
    for wait in names:
        sa, sb = pooled(a, wait), pooled(b, wait)
        d = sb.share - sa.share
        half = z * math.sqrt(sa.variance + sb.variance)
        if abs(d) < MIN_CHANGE or abs(d) <= half:
            continue
        obs = (sum(s.observations for s in a), sum(s.observations for s in b))
        out.append(WaitChange(workload, wait, sa.share, sb.share, d - half, d + half, obs))
    # the waits first, CPU (what is left when they move) last: "LWLock:X 6% → 46%" is the news, "CPU 90% → 50%" its
    # mirror image
    return sorted(out, key=lambda c: (c.wait == CPU, -round(abs(c.delta), 9), c.wait))


@dataclass(frozen=True)
class Judged:
    """Every workload both sides sampled: the changes (possibly none), and the workloads too thin to judge."""

    changes: tuple[WaitChange, ...]
    judged: tuple[str, ...]
    unjudged: tuple[str, ...]


Sampled = Mapping[str, Sequence[Mapping[str, Any]]]  # workload -> the stored samples (the result's form)


def compare(a: Sampled, b: Sampled) -> Judged | None:
    """B against A for every workload both sampled, workloads in name order; None when none was sampled on both."""
    common = sorted(set(a) & set(b))
    if not common:
        return None
    changes: list[WaitChange] = []
    judged, unjudged = [], []
    for w in common:
        found = changed(w, samples_from_json(a[w]), samples_from_json(b[w]))
        if found is None:
            unjudged.append(w)
        else:
            judged.append(w)
            changes.extend(found)
    return Judged(tuple(changes), tuple(judged), tuple(unjudged))


def summary(changes: Sequence[WaitChange], top: int = 3) -> str:
    """One line: the largest moves of the workload whose wait moved most (CPU last), e.g.
    `pgbench-ro-prepared-c2: LWLock:AutovacuumSchedule 0% → 46%, CPU 97% → 52%`."""
    if not changes:
        return ""
    first = max(changes, key=lambda c: (c.wait != CPU, abs(c.delta)))
    mine = [c for c in changes if c.workload == first.workload][:top]
    more = len({c.workload for c in changes}) - 1
    tail = f"; {more} more workload{'s' if more != 1 else ''} changed" if more else ""
    return f"{first.workload}: " + ", ".join(c.text() for c in mine) + tail


def table(j: Judged) -> str:
    """The changes as a fixed-width table; without any, one line saying what was judged."""
    if not j.changes:
        said = f"no wait's share moved beyond its noise in {', '.join(j.judged)}" if j.judged else "no wait was judged"
        thin = f" ({', '.join(j.unjudged)}: too few samples to judge)" if j.unjudged else ""
        return said + thin
    rows = [("workload", "wait", "before", "after", "change", "99% interval (points)")]
    for c in j.changes:
        rows.append(
            (
                c.workload,
                c.wait,
                _pct(c.before),
                _pct(c.after),
                f"{c.delta * 100:+.1f}",
                f"[{c.low * 100:+.1f}, {c.high * 100:+.1f}]",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(x.ljust(w) if i < 2 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths))).rstrip() for r in rows
    )
