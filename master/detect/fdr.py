"""False-alarm control across the many series of a farm.

Benjamini & Hochberg (1995) step-up procedure over the p-values of all change points found in one
detection round, so that alerts stay mostly right when hundreds of series are tested at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def benjamini_hochberg(pvalues: Sequence[float] | np.ndarray, q: float = 0.05, m: int | None = None) -> np.ndarray:
    """Boolean mask of discoveries at false discovery rate ``q`` (BH step-up).

    ``m`` is the number of hypotheses in the family when only some of their p-values are given (the
    others count as p = 1, which keeps the procedure valid); default: one per given p-value.
    """
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    p = np.asarray(pvalues, dtype=float)
    m = len(p) if m is None else m
    if m < len(p):
        raise ValueError(f"m ({m}) must be at least the number of p-values ({len(p)})")
    if len(p) == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p, kind="stable")
    passed = p[order] <= q * np.arange(1, len(p) + 1) / m
    keep = np.zeros(len(p), dtype=bool)
    if passed.any():
        last = int(np.flatnonzero(passed).max())
        keep[order[: last + 1]] = True
    return keep


def per_series_alpha(total_alpha: float, n_series: int) -> float:
    """Bonferroni share of a farm-wide false-alarm budget for one series."""
    if n_series < 1:
        raise ValueError("n_series must be at least 1")
    return total_alpha / n_series
