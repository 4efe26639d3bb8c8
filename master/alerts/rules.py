"""Which change points alert: a significant shift past the warn or critical threshold of its workload."""

from __future__ import annotations

import math
from dataclasses import dataclass

from master.alerts.config import SEVERITIES, AlertSettings


@dataclass(frozen=True)
class Line:
    """One change point as alerts see it: its series, its commit range and its numbers."""

    change_point_id: int
    series_key: str  # machine/recipe@version/config/workload/metric/branch: stable across databases
    machine_id: str
    recipe: str
    workload: str
    metric: str
    branch: str
    unit: str
    direction: str  # higher | lower (which way is better)
    kind: str  # regression | improvement
    first_sha: str
    sha: str
    prev_sha: str | None
    position: int
    prev_position: int | None
    ratio: float  # after / before, in the metric's own terms
    ci_low: float | None
    ci_high: float | None
    pvalue: float
    active: bool = True

    @property
    def goodness(self) -> float:
        """The ratio turned 'higher is better', so one set of thresholds serves both directions."""
        return self.ratio if self.direction == "higher" else 1.0 / self.ratio

    @property
    def goodness_ci(self) -> tuple[float, float] | None:
        if self.ci_low is None or self.ci_high is None or math.isnan(self.ci_low) or math.isnan(self.ci_high):
            return None
        if self.direction == "higher":
            return (self.ci_low, self.ci_high)
        return (1.0 / self.ci_high, 1.0 / self.ci_low)

    @property
    def change(self) -> float:
        """Relative size of the change, e.g. 0.06 for 6% slower or faster."""
        return round(abs(1.0 - self.goodness), 9)  # 0.9 is a 10% change, not 9.99999%


def significant(line: Line, max_pvalue: float) -> bool:
    """Statistically significant: p below the limit and, when a CI is known, the CI excludes 'no change'."""
    if not math.isfinite(line.pvalue) or line.pvalue > max_pvalue:
        return False
    ci = line.goodness_ci
    if ci is None:
        return True
    low, high = ci
    return high < 1.0 if line.kind == "regression" else low > 1.0


def severity(line: Line, settings: AlertSettings) -> str | None:
    """'critical', 'warn', or None when the change point does not alert."""
    if not line.active or line.ratio <= 0 or not math.isfinite(line.ratio):
        return None
    worse = line.goodness < 1.0
    if worse != (line.kind == "regression"):
        return None  # the stored kind disagrees with the numbers: do not guess
    if not significant(line, settings.max_pvalue):
        return None
    th = settings.thresholds_for(line.workload, line.kind, line.metric, line.unit)
    if line.change >= th.critical:
        return "critical"
    if line.change >= th.warn:
        return "warn"
    return None


def max_severity(values: list[str]) -> str:
    """The highest of some severities (warn < critical)."""
    return max(values, key=SEVERITIES.index)
