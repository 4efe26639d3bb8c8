"""Which way is better for a metric, and whether a change made it worse: the detectors' two enums, apart from
master/detect/model.py so that what only names a direction (`perffarm detect --help`) loads no numpy."""

from __future__ import annotations

import enum


class Direction(enum.Enum):
    """Which way is better for a metric; decides whether a shift is a regression or an improvement."""

    HIGHER = "higher"
    LOWER = "lower"

    @classmethod
    def parse(cls, text: str) -> Direction:
        """Parse 'higher'/'lower' (case-insensitive), naming the bad value on failure."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"direction must be 'higher' or 'lower', not {text!r}") from None


class Kind(enum.Enum):
    """Whether a change made the metric worse or better, given its direction."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"

    @classmethod
    def of(cls, ratio: float, direction: Direction) -> Kind:
        """Classify an after/before ratio under a direction."""
        worse = ratio < 1.0 if direction is Direction.HIGHER else ratio > 1.0
        return cls.REGRESSION if worse else cls.IMPROVEMENT
