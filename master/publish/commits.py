"""Rows of the per-commit data files (data/commits/<sha>.js): every series measured at a commit, its median, its
rQPS vs the series' previous point and its raw samples (the compare page's CI and verdict need them).

A full publish has a million (series, commit) points. They are ordered once with numpy (by commit, then a fixed
series order) and become Python tuples only per batch of commits, so two processes can share that work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from master.publish.model import COLOURS, SiteSeries, pick
from master.publish.render import (
    float_column,
    int_column,
    join_columns,
    js_literal,
    literal_column,
    script_safe,
    sig6_decimals,
    text_column,
    vocab,
    vocab_column,
)

if TYPE_CHECKING:
    from master.publish.context import Context

# [sid, median, n, ratio, ci_low, ci_high, colour, base, flags, samples]; ratio and CI in millionths, samples the
# array as stored (JSON text spliced in, never decoded and re-encoded: series_data's chunks do the same), or null
# for a point of more than ROW_SAMPLES samples
Row = tuple[Any, ...]

# A point's samples go into its commit's data up to this many: the compare page's exact bootstrap costs
# (n(n+1)/2)^2 ratios per series (34 samples: 354,025) and a point may hold up to 100,000 samples
# (docs/result-schema.md), which the series chunks carry; beyond it the compare page shows the ratio alone.
ROW_SAMPLES = 34


@dataclass
class CommitOrder:
    """The loaded table's rows grouped by commit; group g is rows[bounds[g]:bounds[g + 1]], commit shas[g]."""

    rows: np.ndarray
    bounds: np.ndarray
    shas: list[str]
    sid_of: np.ndarray  # object: the series id of every table row
    first: np.ndarray  # bool: the row is its series' first loaded point (no previous point)
    sids: list[str] = field(default_factory=list)  # the loaded series' ids
    sid_code: np.ndarray | None = None  # int64 per table row: index into sids
    vocab: tuple | None = None  # encoded sids, colours and short base shas (render.vocab), made on first use

    def index(self) -> dict[str, int]:
        return {sha: g for g, sha in enumerate(self.shas)}


def order_key(s: SiteSeries) -> tuple[str, str, str, str, str, int, str]:
    """Where a series' row goes among a commit's rows."""
    m = s.key.measure
    return (m.workload, m.metric, s.key.branch, m.machine_id, m.recipe, m.recipe_version, s.sid)


def order(ctx: Context, shas: Iterable[str] | None = None) -> CommitOrder | None:
    """Group the rows of every commit (or only of `shas`); None when nothing is loaded."""
    t = ctx.table
    if t is None or not ctx.series:
        return None
    series = sorted(ctx.series.values(), key=order_key)
    rows = np.concatenate([np.arange(s.start, s.end) for s in series])
    if shas is not None:
        want = set(shas)
        rows = rows[np.array([sha in want for sha in t.commits], dtype=bool)[t.commit[rows]]]
    rows = rows[np.argsort(t.commit[rows], kind="stable")]  # by commit, then series order
    cid = t.commit[rows]
    if not len(rows):
        return CommitOrder(
            rows,
            np.zeros(1, dtype=np.int64),
            [],
            np.empty(0, dtype=object),
            np.empty(0, dtype=bool),
            [],
            np.empty(0, dtype=np.int64),
        )
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(cid)) + 1, [len(rows)]]).astype(np.int64)
    sid_of = np.empty(len(t.pos), dtype=object)
    sid_code = np.zeros(len(t.pos), dtype=np.int64)
    first = np.zeros(len(t.pos), dtype=bool)
    for i, s in enumerate(series):
        sid_of[s.start : s.end] = s.sid
        sid_code[s.start : s.end] = i
        first[s.start] = True
    return CommitOrder(
        rows,
        bounds,
        [t.commits[c] for c in cid[bounds[:-1]].tolist()],
        sid_of,
        first,
        [s.sid for s in series],
        sid_code,
    )


def rows(ctx: Context, o: CommitOrder, groups: Sequence[int]) -> dict[str, str]:
    """sha -> the JSON text (script-safe, as render.js_literal writes it) of its rows, for the commits of `groups`
    (indexes into o.shas). Column-wise: no per-point Python loop or object; byte matrices (render.join_columns)
    where every median's text is proven equal to its repr, else the rows as tuples through the encoder."""
    if not len(groups):
        return {}
    g = np.asarray(groups, dtype=np.int64)
    sizes = o.bounds[g + 1] - o.bounds[g]
    at = np.repeat(o.bounds[g] - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(int(sizes.sum()))
    r = o.rows[at]
    text = _rows_text(ctx, o, r)
    out: dict[str, str] = {}
    if text is not None:
        blob, off = text
        ends = np.cumsum(sizes)
        bounds = off[np.concatenate([[0], ends])].tolist()
        for j, k in enumerate(g.tolist()):
            a, b = bounds[j], bounds[j + 1]
            out[o.shas[k]] = "[" + blob[a : b - 1].decode("utf-8") + "]" if b > a else "[]"
        return out
    each = _encoded_rows(ctx, o, r)
    start = 0
    for k, n in zip(g.tolist(), sizes.tolist()):
        out[o.shas[k]] = "[" + ",".join(each[start : start + n]) + "]"
        start += n
    return out


def _encoded_rows(ctx: Context, o: CommitOrder, r: np.ndarray) -> list[str]:
    """Rows r one by one through the encoder (where the byte columns are not proven), each with its samples
    spliced in as stored: the same text _rows_text writes."""
    texts = _samples(ctx, r)
    return [
        js_literal(list(row))[:-1] + "," + script_safe(x) + "]" for row, x in zip(zip(*_row_columns(ctx, o, r)), texts)
    ]


def _samples(ctx: Context, r: np.ndarray) -> list[str]:
    """The stored sample arrays of rows r (JSON text), "null" for a point of more than ROW_SAMPLES samples."""
    t = ctx.table
    texts = pick(t.text, r.tolist())
    for j in np.flatnonzero(t.n[r] > ROW_SAMPLES).tolist():
        texts[j] = "null"
    return texts


def _row_columns(ctx: Context, o: CommitOrder, r: np.ndarray) -> list[list[Any]]:
    """Rows r as Python columns (sid, median, n, ratio, ci_low, ci_high, colour, base, flags) for the encoder; the
    samples are spliced in after them (_encoded_rows)."""
    t = ctx.table
    base = np.array([sha[:12] for sha in t.commits], dtype=object)[t.commit[r - 1]]
    base[o.first[r]] = ""
    return [
        o.sid_of[r].tolist(),
        ctx.med_r[r].tolist(),
        t.n[r].tolist(),
        _micro(ctx.prev_ratio[r]),
        _micro(ctx.prev_low[r]),
        _micro(ctx.prev_high[r]),
        pick(ctx.prev_colour, r.tolist()),
        base.tolist(),
        ((t.noisy[r].astype(np.int64)) | (t.sla[r].astype(np.int64) * 2)).tolist(),
    ]


@dataclass
class RowParts:
    """The rows of some commits as text, one commit after another, to be merged with other loads' rows of the same
    commits (a full publish loads one machine at a time): group j has sizes[j] rows; per row its series (index into
    the order's sids) and the length of its text `[...],` in blob."""

    sizes: np.ndarray  # int64 per group
    codes: np.ndarray  # int64 per row
    lens: np.ndarray  # int64 per row
    blob: bytes

    def __post_init__(self) -> None:
        self.first_row = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)  # of each group, and the end
        self.first_byte = np.concatenate([[0], np.cumsum(self.lens)]).astype(np.int64)  # of each row, and the end
        self.bytes = np.frombuffer(self.blob, dtype=np.uint8)


def row_parts(ctx: Context, o: CommitOrder, groups: Sequence[int]) -> RowParts:
    """What rows() writes for the commits of `groups` (indexes into o.shas), per row: the same bytes, each row
    followed by a comma."""
    g = np.asarray(groups, dtype=np.int64)
    if not len(g):
        return RowParts(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), b"")
    sizes = o.bounds[g + 1] - o.bounds[g]
    at = np.repeat(o.bounds[g] - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(int(sizes.sum()))
    r = o.rows[at]
    assert o.sid_code is not None
    text = _rows_text(ctx, o, r)
    if text is not None:
        blob, off = text
        return RowParts(sizes, o.sid_code[r], np.diff(off), blob)
    each = [(row + ",").encode("utf-8") for row in _encoded_rows(ctx, o, r)]
    return RowParts(sizes, o.sid_code[r], np.array([len(b) for b in each], dtype=np.int64), b"".join(each))


def merged_rows(parts: Sequence[tuple[RowParts, int, np.ndarray]]) -> str:
    """One commit's rows as rows() writes them, from the rows of several loads: (parts, the commit's group in
    them, the rank of each of their series in the order rows() uses). Ranks are distinct (one per series)."""
    ranks, lens, starts, blobs = [], [], [], []
    size = 0
    for p, j, rank in parts:
        a, b = int(p.first_row[j]), int(p.first_row[j + 1])
        if a == b:
            continue
        lo, hi = int(p.first_byte[a]), int(p.first_byte[b])
        ranks.append(rank[p.codes[a:b]])
        lens.append(p.lens[a:b])
        starts.append(p.first_byte[a:b] - lo + size)
        blobs.append(p.bytes[lo:hi])
        size += hi - lo
    if not size:
        return "[]"
    if len(blobs) == 1:  # one machine measured the commit: its rows are in order
        return "[" + blobs[0][:-1].tobytes().decode("utf-8") + "]"
    order = np.argsort(np.concatenate(ranks), kind="stable")
    n = np.concatenate(lens)[order]
    at = np.concatenate(starts)[order]
    idx = np.repeat(at - (np.cumsum(n) - n), n) + np.arange(size)
    return "[" + np.concatenate(blobs)[idx][:-1].tobytes().decode("utf-8") + "]"


def _rows_text(ctx: Context, o: CommitOrder, r: np.ndarray) -> tuple[bytes, np.ndarray] | None:
    """Rows r as `[sid,median,n,ratio,ci_low,ci_high,colour,base,flags,samples],` each: (bytes, row offsets), or
    None when a median's text is not proven (render.float_column)."""
    t = ctx.table
    med = ctx.med_r[r]
    med_col = float_column(med, sig6_decimals(med))  # the places round6 rounded them to
    if med_col is None:
        return None
    if o.vocab is None:  # per order (and process): every series id and short base sha, encoded once
        o.vocab = (
            vocab([js_literal(sid) for sid in o.sids]),
            vocab([js_literal(c) for c in COLOURS]),
            vocab([js_literal(sha[:12]) for sha in t.commits] + [js_literal("")]),
        )
    sids, colours, bases = o.vocab
    base = t.commit[r - 1]
    base[o.first[r]] = len(t.commits)
    n = len(r)

    def micro(a: np.ndarray):
        return int_column(*_micro_ints(a))

    sep = literal_column(",", n)
    return join_columns(
        [
            literal_column("[", n),
            vocab_column(sids, o.sid_code[r]),
            sep,
            med_col,
            sep,
            int_column(t.n[r]),
            sep,
            micro(ctx.prev_ratio[r]),
            sep,
            micro(ctx.prev_low[r]),
            sep,
            micro(ctx.prev_high[r]),
            sep,
            vocab_column(colours, ctx.prev_band[r]),
            sep,
            vocab_column(bases, base),
            sep,
            int_column((t.noisy[r].astype(np.int64)) | (t.sla[r].astype(np.int64) * 2)),
            sep,
            text_column(_samples(ctx, r)),
            literal_column("],", n),
        ]
    )


_MICRO_MAX = 9e12  # |ratio| * 1e6 must fit an int64 (9.22e18); beyond it a cast wraps to -9223372036854775808


def _micro_ints(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ratios in millionths as int64, and the mask of those written as null: undefined (NaN) or beyond what the
    integers hold (an infinity, |ratio| >= 9e12), never a wrapped number."""
    null = ~(np.abs(a) < _MICRO_MAX)
    return np.rint(np.where(null, 0.0, a) * 1e6).astype(np.int64), null


def _micro(a: np.ndarray) -> list[int | None]:
    """Ratios in millionths as integers (null where undefined or out of range) for the per-commit page data."""
    ints, null = _micro_ints(a)
    out = ints.astype(object)
    out[null] = None
    return out.tolist()
