"""A/B comparison: two installs measured in one interleaved job, reported as median ratios with bootstrap CIs.

Why one job: on a shared machine the noise between two separate runs (minutes or hours apart) dwarfs most real
changes; samples taken back to back in alternating order see the same neighbours, so their ratio is far
steadier. `perffarm compare` and bisection use this; the ratio is B/A (for throughput, rQPS).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recipes.api import HIGHER, Context, WorkloadResult
from recipes.pg.build import Install
from recipes.pg.profile import run_bench
from recipes.pg.stats import RatioEstimate, bootstrap_median_ratio, cv

MIN_EFFECT = 0.001  # 0.1%: smaller ratios are reported as "same" even when the CI excludes 1.0


@dataclass(frozen=True)
class Comparison:
    """One (workload, metric): both sides' raw samples and the B/A median ratio with its 95% CI."""

    workload: str
    metric: str
    unit: str
    direction: str
    a: tuple[float, ...]
    b: tuple[float, ...]
    estimate: RatioEstimate
    min_effect: float = MIN_EFFECT

    @property
    def verdict(self) -> str:
        """'improvement' or 'regression' by the metric's direction; 'same' when the CI contains 1.0 or the
        change is smaller than `min_effect` (instruction counts are exact, so their CI has no width and a
        rebuild alone moves them by ~0.01%: that is not a change anyone should chase)."""
        if not self.estimate.excludes_one() or abs(self.estimate.ratio - 1) < self.min_effect:
            return "same"
        better = self.estimate.ratio > 1 if self.direction == HIGHER else self.estimate.ratio < 1
        return "improvement" if better else "regression"

    def to_json(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "workload": self.workload,
            "metric": self.metric,
            "unit": self.unit,
            "direction": self.direction,
            "a": list(self.a),
            "b": list(self.b),
            "ratio": e.ratio,
            "ci_low": e.low,
            "ci_high": e.high,
            "ci_half_width": e.half_width,
            "n": e.n,
            "verdict": self.verdict,
            "cv_a": cv(self.a),
            "cv_b": cv(self.b),
        }


def compare(a: Sequence[WorkloadResult], b: Sequence[WorkloadResult], seed: int = 1) -> list[Comparison]:
    """Pair up the two sides' metrics by (workload, metric) and estimate each ratio."""
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
            est = bootstrap_median_ratio(m.samples[:n], mb.samples[:n], seed=seed)
            out.append(Comparison(w.name, m.name, m.unit, m.direction, m.samples[:n], mb.samples[:n], est))
    return out


def run_ab(ctx: Context, profile: Mapping[str, Any], a: Install, b: Install) -> list[Comparison]:
    """Measure A and B interleaved in one job and compare them."""
    results = run_all(ctx, profile, {"A": a, "B": b})
    return compare(results["A"], results["B"])


def run_all(
    ctx: Context, profile: Mapping[str, Any], installs: Mapping[str, Install], confs: Mapping[str, str] | None = None
) -> dict[str, list[WorkloadResult]]:
    """Measure every install interleaved in one job (slices and rounds alternate their order); results per label.
    `confs`: a label's own postgresql.conf (the same install measured with and without an overlay)."""
    return run_bench(ctx, profile, installs, threads=os.cpu_count() or 2, confs=confs)


def format_versions(
    labels: Sequence[str],
    installs: Mapping[str, Install],
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
        if (
            metrics
            and any_c.metric not in metrics
            and any_c.metric not in ("tps", "instructions", "connections", "qps")
        ):
            continue
        name = f"{any_c.metric} ({any_c.unit})"
        rows.append(
            (
                any_c.workload,
                name,
                f"{first} {installs[first].version}",
                f"{statistics.median(any_c.a):,.1f}",
                "1",
                "",
                "",
                "base",
            )
        )
        for label in labels[1:]:
            c = cs.get(label)
            if c is None:
                rows.append(("", "", f"{label} {installs[label].version}", "-", "-", "", "", "not measured"))
                continue
            rows.append(
                ("", "", f"{label} {installs[label].version}", f"{statistics.median(c.b):,.1f}", *_ratio_cells(c))
            )
    return _columns(rows)


def format_table(comparisons: Sequence[Comparison], metrics: Sequence[str] | None = None) -> str:
    """A plain-text table: medians, B/A ratio, 95% CI and verdict per (workload, metric)."""
    rows = [("workload", "metric", "median A", "median B", "B/A", "95% CI", "+-", "verdict")]
    for c in comparisons:
        if metrics and c.metric not in metrics and c.metric not in ("tps", "instructions", "connections", "qps"):
            continue
        median_a, median_b = f"{statistics.median(c.a):,.1f}", f"{statistics.median(c.b):,.1f}"
        rows.append((c.workload, f"{c.metric} ({c.unit})", median_a, median_b, *_ratio_cells(c)))
    return _columns(rows)


def _ratio_cells(c: Comparison) -> tuple[str, ...]:
    """ratio, 95% CI, relative half-width and verdict, as printed."""
    e = c.estimate
    return (f"{e.ratio:.4f}", f"[{e.low:.4f}, {e.high:.4f}]", f"{e.half_width:.2%}", c.verdict)


def _columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as left-aligned text columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows)
