"""A/B comparison of a job's sides: each side's samples against the first's, as order-balanced ratios with CIs.

Why one job: on a shared machine the noise between two separate runs (minutes or hours apart) dwarfs most real
changes; samples taken back to back in alternating order see the same neighbours, so their ratio is far
steadier. `perffarm compare` and jobs use this, for any recipe's results; the ratio is B/A (for throughput, rQPS).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recipes.api import HIGHER, WorkloadResult
from recipes.stats import NoRatio, PairedRatio, cv, paired_estimate

# what a table shows of a workload unless asked for every metric: PostgreSQL's primary metrics
PRIMARY_METRICS = ("tps", "instructions", "connections", "qps")
MIN_EFFECT = 0.001  # 0.1%: smaller ratios are reported as "same" even when the CI excludes 1.0


NO_RATIO = "no ratio"  # the verdict of a comparison whose samples form no ratio (Comparison.problem says why)


@dataclass(frozen=True)
class Comparison:
    """One (workload, metric): both sides' raw samples and the B/A ratio (recipes.stats.paired_estimate: the
    order-balanced mean log ratio of the rounds, A first in even ones) with its 95% CI; no estimate
    where the samples form no ratio (a stored throughput of 0 from before the validator refused it), and
    `problem` says why in one line."""

    workload: str
    metric: str
    unit: str
    direction: str
    a: tuple[float, ...]
    b: tuple[float, ...]
    estimate: PairedRatio | None
    min_effect: float = MIN_EFFECT
    problem: str | None = None

    @property
    def verdict(self) -> str:
        """'improvement' or 'regression' by the metric's direction; 'same' when the CI contains 1.0 or the
        change is smaller than `min_effect` (instruction counts are exact, so their CI has no width and a
        rebuild alone moves them by ~0.01%: that is not a change anyone should chase); 'no ratio' without one."""
        if self.estimate is None:
            return NO_RATIO
        if not self.estimate.excludes_one() or abs(self.estimate.ratio - 1) < self.min_effect:
            return "same"
        better = self.estimate.ratio > 1 if self.direction == HIGHER else self.estimate.ratio < 1
        return "improvement" if better else "regression"

    def to_json(self) -> dict[str, Any]:
        """As JSON: numbers that are not finite (no ratio, a CV over a mean of 0) are null."""
        e = self.estimate
        return {
            "workload": self.workload,
            "metric": self.metric,
            "unit": self.unit,
            "direction": self.direction,
            "a": list(self.a),
            "b": list(self.b),
            "ratio": _finite(e.ratio) if e else None,
            "ci_low": _finite(e.low) if e else None,
            "ci_high": _finite(e.high) if e else None,
            "ci_half_width": _finite(e.half_width) if e else None,
            "n": e.n if e else None,
            "verdict": self.verdict,
            "problem": self.problem,
            "cv_a": _finite(_cv(self.a)),
            "cv_b": _finite(_cv(self.b)),
        }


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _cv(samples: Sequence[float]) -> float | None:
    """cv, or None where the samples have none (not finite, too large to square)."""
    try:
        return cv(samples)
    except (ValueError, OverflowError, ArithmeticError):
        return None


def compare(
    a: Sequence[WorkloadResult], b: Sequence[WorkloadResult], seed: int = 1, labels: tuple[str, str] = ("A", "B")
) -> list[Comparison]:
    """Pair up the two sides' metrics by (workload, metric) and estimate each ratio (sample i of each side ran in
    round i, A first when i is even: recipes/pg/profile.py). A pair whose samples form no
    ratio is a Comparison without an estimate whose `problem` names the side (`labels`) and the metric."""
    b_index = {(w.name, m.name): m for w in b for m in w.metrics}
    out = []
    for w in a:
        for m in w.metrics:
            mb = b_index.get((w.name, m.name))
            if mb is None:
                continue
            n = min(len(m.samples), len(mb.samples))
            if n == 0:
                continue
            try:
                est: PairedRatio | None = paired_estimate(m.samples[:n], mb.samples[:n], seed=seed)
                problem = None
            except NoRatio as e:
                est, problem = None, e.describe(f"side {labels[0]}", f"side {labels[1]}", m.name)
            out.append(
                Comparison(w.name, m.name, m.unit, m.direction, m.samples[:n], mb.samples[:n], est, problem=problem)
            )
    return out


def format_versions(
    labels: Sequence[str],
    versions: Mapping[str, str],
    vs_first: Mapping[str, Sequence[Comparison]],
    metrics: Sequence[str] | None = None,
) -> str:
    """A plain-text table of N versions: per (workload, metric), one row per version with its median, its ratio to
    the first version (1 for the first itself), the 95% CI and the verdict."""
    rows = [("workload", "metric", "version", "median", "ratio to A", "95% CI", "+-", "verdict")]
    first = labels[0]
    keys: list[tuple[str, str]] = []
    by: dict[tuple[str, str], dict[str, Comparison]] = {}
    for label in labels[1:]:
        for c in vs_first.get(label, ()):
            k = (c.workload, c.metric)
            if k not in by:
                keys.append(k)
            by.setdefault(k, {})[label] = c
    for k in keys:
        cs = by[k]
        any_c = next(iter(cs.values()))
        if metrics and any_c.metric not in metrics and any_c.metric not in PRIMARY_METRICS:
            continue
        name = f"{any_c.metric} ({any_c.unit})"
        rows.append(
            (
                any_c.workload,
                name,
                f"{first} {versions[first]}",
                _median(any_c.a),
                "1",
                "",
                "",
                "base",
            )
        )
        for label in labels[1:]:
            c = cs.get(label)
            if c is None:
                rows.append(("", "", f"{label} {versions[label]}", "-", "-", "", "", "not measured"))
                continue
            rows.append(("", "", f"{label} {versions[label]}", _median(c.b), *_ratio_cells(c)))
    return _columns(rows)


def format_table(comparisons: Sequence[Comparison], metrics: Sequence[str] | None = None) -> str:
    """A plain-text table: medians, B/A ratio, 95% CI and verdict per (workload, metric)."""
    rows = [("workload", "metric", "median A", "median B", "B/A", "95% CI", "+-", "verdict")]
    for c in comparisons:
        if metrics and c.metric not in metrics and c.metric not in PRIMARY_METRICS:
            continue
        rows.append((c.workload, f"{c.metric} ({c.unit})", _median(c.a), _median(c.b), *_ratio_cells(c)))
    return _columns(rows)


def _median(samples: Sequence[float]) -> str:
    """A side's median as printed: grouped thousands and one decimal (a stored sample may be as large as 1e300:
    exponent notation past 1e15)."""
    m = statistics.median(samples)
    return f"{m:,.1f}" if abs(m) < 1e15 else f"{m:.4g}"


def _ratio_cells(c: Comparison) -> tuple[str, ...]:
    """ratio, 95% CI, relative half-width and verdict, as printed; without a ratio, what is wrong."""
    e = c.estimate
    if e is None:
        return ("-", "", "", c.problem or NO_RATIO)
    return (f"{e.ratio:.4f}", f"[{e.low:.4f}, {e.high:.4f}]", f"{e.half_width:.2%}", c.verdict)


def _columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as left-aligned text columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows)
