"""Rows of the per-commit data files (data/commits/<sha>.js): every series measured at a commit, its median and
its rQPS vs the series' previous point.

A full publish has a million (series, commit) points. They are ordered once with numpy (by commit, then a fixed
series order) and become Python tuples only per batch of commits, so two processes can share that work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from master.publish.model import pick

if TYPE_CHECKING:
    from master.publish.publisher import Context

Row = tuple[Any, ...]  # [sid, median, n, ratio, ci_low, ci_high, colour, base, flags]; ratio and CI in millionths


@dataclass(frozen=True)
class CommitOrder:
    """The loaded table's rows grouped by commit; group g is rows[bounds[g]:bounds[g + 1]], commit shas[g]."""

    rows: np.ndarray
    bounds: np.ndarray
    shas: list[str]
    sid_of: np.ndarray  # object: the series id of every table row
    first: np.ndarray  # bool: the row is its series' first loaded point (no previous point)

    def index(self) -> dict[str, int]:
        return {sha: g for g, sha in enumerate(self.shas)}


def order(ctx: Context, shas: Iterable[str] | None = None) -> CommitOrder | None:
    """Group the rows of every commit (or only of `shas`); None when nothing is loaded."""
    t = ctx.table
    if t is None or not ctx.series:
        return None
    series = sorted(ctx.series.values(), key=lambda s: (s.key.measure.workload, s.key.measure.metric, s.key.branch,
                                                        s.key.measure.machine_id, s.key.measure.recipe,
                                                        s.key.measure.recipe_version, s.sid))
    rows = np.concatenate([np.arange(s.start, s.end) for s in series])
    if shas is not None:
        want = set(shas)
        rows = rows[np.array([sha in want for sha in t.commits], dtype=bool)[t.commit[rows]]]
    rows = rows[np.argsort(t.commit[rows], kind="stable")]  # by commit, then series order
    cid = t.commit[rows]
    if not len(rows):
        return CommitOrder(rows, np.zeros(1, dtype=np.int64), [], np.empty(0, dtype=object), np.empty(0, dtype=bool))
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(cid)) + 1, [len(rows)]]).astype(np.int64)
    sid_of = np.empty(len(t.pos), dtype=object)
    first = np.zeros(len(t.pos), dtype=bool)
    for s in series:
        sid_of[s.start : s.end] = s.sid
        first[s.start] = True
    return CommitOrder(rows, bounds, [t.commits[c] for c in cid[bounds[:-1]].tolist()], sid_of, first)


def rows(ctx: Context, o: CommitOrder, groups: Sequence[int]) -> dict[str, list[Row]]:
    """sha -> its rows, for the commits of `groups` (indexes into o.shas). Column-wise: no per-point Python loop."""
    if not len(groups):
        return {}
    t = ctx.table
    g = np.asarray(groups, dtype=np.int64)
    sizes = o.bounds[g + 1] - o.bounds[g]
    at = np.repeat(o.bounds[g] - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(int(sizes.sum()))
    r = o.rows[at]
    base = np.array([sha[:12] for sha in t.commits], dtype=object)[t.commit[r - 1]]
    base[o.first[r]] = ""
    cols = [
        o.sid_of[r].tolist(), ctx.med_r[r].tolist(), t.n[r].tolist(),
        _micro(ctx.prev_ratio[r]), _micro(ctx.prev_low[r]), _micro(ctx.prev_high[r]),
        pick(ctx.prev_colour, r.tolist()), base.tolist(),
        ((t.noisy[r].astype(np.int64)) | (t.sla[r].astype(np.int64) * 2)).tolist(),
    ]
    zipped = list(zip(*cols))
    out: dict[str, list[Row]] = {}
    start = 0
    for k, n in zip(g.tolist(), sizes.tolist()):
        out[o.shas[k]] = zipped[start : start + n]
        start += n
    return out


def _micro(a: np.ndarray) -> list[int | None]:
    """Ratios in millionths as integers (null where undefined) for the per-commit page data."""
    out = np.rint(np.nan_to_num(a, nan=0.0) * 1e6).astype(np.int64).astype(object)
    out[np.isnan(a)] = None
    return out.tolist()
