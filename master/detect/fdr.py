"""False-alarm control across the many series of a farm.

Benjamini & Hochberg (1995) step-up procedure over the p-values of all change points found in one
detection round, so that alerts stay mostly right when hundreds of series are tested at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np

from master.detect.model import ChangePoint

K = TypeVar("K")


def benjamini_hochberg(pvalues: Sequence[float] | np.ndarray, q: float = 0.05) -> np.ndarray:
    """Boolean mask of discoveries at false discovery rate ``q`` (BH step-up)."""
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if m == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p, kind="stable")
    passed = p[order] <= q * np.arange(1, m + 1) / m
    keep = np.zeros(m, dtype=bool)
    if passed.any():
        last = int(np.flatnonzero(passed).max())
        keep[order[: last + 1]] = True
    return keep


def control(found: Mapping[K, Sequence[ChangePoint]], q: float = 0.05) -> dict[K, list[ChangePoint]]:
    """Keep only change points that survive BH across all series of one round."""
    flat = [(key, cp) for key, cps in found.items() for cp in cps]
    mask = benjamini_hochberg([cp.pvalue for _, cp in flat], q)
    out: dict[K, list[ChangePoint]] = {key: [] for key in found}
    for (key, cp), ok in zip(flat, mask):
        if ok:
            out[key].append(cp)
    return out


def per_series_alpha(total_alpha: float, n_series: int) -> float:
    """Bonferroni share of a farm-wide false-alarm budget for one series."""
    if n_series < 1:
        raise ValueError("n_series must be at least 1")
    return total_alpha / n_series
