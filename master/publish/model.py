"""Series as columns: every (series, commit) point of a publish in flat numpy arrays (pure, no I/O but store reads).

A full publish has ~1M points (100 series x 10,000 commits). Per-point Python objects made that minutes;
here samples are parsed in one pass, medians/spreads and the rQPS of every point against the previous one are
array operations (master.detect.rqps.median_ratio_block), and pages read slices.
"""

from __future__ import annotations

import itertools
import operator
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from master.detect.rqps import Bands, median_ratio_block
from master.publish import forkjoin, scan
from master.publish.source import SeriesRef
from master.store.series import MeasureKey


@dataclass
class Table:
    """All loaded points. Series s owns rows [start, end) of every column, in branch-position order."""

    pos: np.ndarray  # int64 branch position
    sha: list[str]
    off: np.ndarray  # int64 offset of the point's samples in `flat`
    n: np.ndarray  # int64 number of samples
    flat: np.ndarray  # float64 every sample
    text: list[str]  # the samples as stored (JSON), spliced into data files without re-encoding
    runs: list[tuple[int, ...]]
    noisy: np.ndarray  # bool
    sla: np.ndarray  # bool
    commit: np.ndarray  # int64 index into `commits`: groups points by commit without hashing a million strings
    commits: list[str]  # the distinct shas of the table
    med: np.ndarray = field(init=False)
    lo: np.ndarray = field(init=False)
    hi: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        size = len(self.pos)
        self.med = np.empty(size)
        self.lo = np.empty(size)
        self.hi = np.empty(size)
        # each point's samples sorted in place (a copy of `flat`): medians, spreads and the bootstrap need it
        self.sorted = self.flat.copy()
        for k in np.unique(self.n):
            rows = np.nonzero(self.n == k)[0]
            if k == 0:  # no samples (not a valid result, but never a crash here)
                self.med[rows] = self.lo[rows] = self.hi[rows] = np.nan
                continue
            idx = self.off[rows][:, None] + np.arange(k)[None, :]
            block = np.sort(self.flat[idx], axis=1)
            self.sorted[idx] = block
            self.med[rows] = (block[:, (k - 1) // 2] + block[:, k // 2]) / 2.0
            self.lo[rows] = block[:, 0]
            self.hi[rows] = block[:, -1]

    def block(self, rows: np.ndarray) -> np.ndarray:
        """Samples of `rows` (all with the same count), each row in ascending order, as a 2-D array."""
        k = int(self.n[rows[0]])
        return self.sorted[self.off[rows][:, None] + np.arange(k)[None, :]]

    def samples(self, i: int) -> tuple[float, ...]:
        return tuple(self.flat[self.off[i] : self.off[i] + self.n[i]].tolist())


@dataclass
class SiteSeries:
    """One series: its rows of the table (possibly only a window of its history)."""

    key: SeriesRef
    unit: str
    direction: str
    table: Table
    start: int
    end: int

    @property
    def sid(self) -> str:
        return self.key.sid

    def __len__(self) -> int:
        return self.end - self.start

    @property
    def positions(self) -> np.ndarray:
        return self.table.pos[self.start : self.end]

    def index_of(self, sha: str) -> int | None:
        """Row (absolute) of a commit in this series, or None."""
        for i in range(self.start, self.end):
            if self.table.sha[i] == sha:
                return i
        return None


def pick(seq: list, idx: list[int]) -> list:
    """seq[i] for i in idx, in C (itemgetter) for the million-element columns."""
    if len(idx) < 2:
        return [seq[i] for i in idx]
    return list(operator.itemgetter(*idx)(seq))


def _ragged_arange(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for every c in counts, concatenated."""
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - np.repeat(ends - counts, counts)


def load(
    conn: sqlite3.Connection,
    where: Mapping[str, list[tuple[str, int]]],
    shas: Iterable[str] | None,
    keys: set[MeasureKey] | None,
    jobs: int = 1,
    machines: Iterable[tuple[str, str, int]] | None = None,
) -> dict[SeriesRef, SiteSeries]:
    """Series for every (measure key, branch) of the ok runs at `shas` (None: all), of the runs by `machines`
    ((machine, recipe, recipe version); None: all); `where` maps a sha to the (branch, position) pairs it sits at.
    Runs of one commit are merged, oldest first (bisection probes add samples). Every step is a column operation
    on the million rows except merging those few commits. jobs=2: parse in two processes (it forks)."""
    # only the runs that can hold a wanted key: a run's machine, recipe and version are part of every key it has,
    # so an incremental publish of one machine's run does not read and parse the other machines' samples
    if keys is not None:
        of_keys = {(k.machine_id, k.recipe, k.recipe_version) for k in keys}
        machines = of_keys if machines is None else of_keys & set(machines)
    m = scan.read(conn, shas, jobs, machines)
    wanted = np.array([keys is None or k in keys for k in m.keys], dtype=bool)
    # key rank in the published order (machine, recipe, version, config, workload, metric)
    by = sorted(
        range(len(m.keys)),
        key=lambda i: (
            m.keys[i].machine_id,
            m.keys[i].recipe,
            m.keys[i].recipe_version,
            m.keys[i].config_hash,
            m.keys[i].workload,
            m.keys[i].metric,
        ),
    )
    rank = np.empty(len(m.keys), dtype=np.int64)
    rank[by] = np.arange(len(by))
    rows = np.flatnonzero(wanted[m.key]) if len(m.key) else np.empty(0, dtype=np.int64)
    # each row once per (branch, position) of its commit (a commit can be on several branches, or on none loaded)
    branches = sorted({b for sha in m.run_sha for b, _ in where.get(sha, ())})
    code = {b: i for i, b in enumerate(branches)}
    places = [where.get(sha, ()) for sha in m.run_sha]
    run_places = np.array([len(p) for p in places], dtype=np.int64)
    run_first = np.concatenate([[0], np.cumsum(run_places)[:-1]]).astype(np.int64)
    place_branch = np.array([code[b] for p in places for b, _ in p], dtype=np.int64)
    place_pos = np.array([pos for p in places for _, pos in p], dtype=np.int64)
    reps = run_places[m.run[rows]]
    x = np.repeat(rows, reps)
    place = np.repeat(run_first[m.run[rows]], reps) + _ragged_arange(reps)
    xk, xb, xp, xr = rank[m.key[x]], place_branch[place], place_pos[place], m.run_id[m.run[x]]
    order = np.lexsort((xr, xp, xb, xk))  # by key, branch, position, then run id (oldest run first)
    x, xk, xb, xp = x[order], xk[order], xb[order], xp[order]
    # a point per (key, branch, position); several rows there are runs of one commit, merged below
    new_point = np.ones(len(x), dtype=bool)
    new_point[1:] = (xk[1:] != xk[:-1]) | (xb[1:] != xb[:-1]) | (xp[1:] != xp[:-1])
    starts = np.flatnonzero(new_point)
    sizes = np.diff(np.append(starts, len(x)))
    first = x[starts]
    runs_of = m.run[first]
    off, n = m.off[first], m.n[first]  # fancy indexing: copies, changed below for merged points
    text = pick(m.text, first.tolist())
    runs: list[tuple[int, ...]] = list(zip(m.run_id[runs_of].tolist()))
    noisy = m.run_noisy[runs_of]
    sla = m.sla[first]
    extra: list[np.ndarray] = []
    top = len(m.flat)
    for p in np.flatnonzero(sizes > 1).tolist():
        js = x[starts[p] : starts[p] + sizes[p]].tolist()
        block = np.concatenate([m.flat[m.off[j] : m.off[j] + m.n[j]] for j in js])
        off[p], n[p] = top, len(block)
        top += len(block)
        extra.append(block)
        text[p] = "[" + ", ".join(m.text[j].strip()[1:-1] for j in js if m.n[j]) + "]"
        runs[p] = tuple(int(m.run_id[m.run[j]]) for j in js)
        noisy[p] = bool(m.run_noisy[m.run[js]].any())
        sla[p] = bool(m.sla[js].any())
    code: dict[str, int] = {}
    run_commit = np.array([code.setdefault(sha, len(code)) for sha in m.run_sha], dtype=np.int64)
    commits = list(code)
    commit = run_commit[runs_of]
    table = Table(
        xp[starts],
        pick(commits, commit.tolist()),
        off,
        n,
        np.concatenate([m.flat, *extra]) if extra else m.flat,
        text,
        runs,
        noisy,
        sla,
        commit,
        commits,
    )
    # series: runs of points with the same (key, branch)
    pk, pb = xk[starts], xb[starts]
    new_series = np.ones(len(starts), dtype=bool)
    new_series[1:] = (pk[1:] != pk[:-1]) | (pb[1:] != pb[:-1])
    bounds = np.append(np.flatnonzero(new_series), len(starts)).tolist()
    out = {}
    for a, b in itertools.pairwise(bounds):
        k = by[int(pk[a])]
        sk = SeriesRef(m.keys[k], branches[int(pb[a])])
        out[sk] = SiteSeries(sk, m.units[k], m.directions[k], table, a, b)
    return out


@dataclass
class Ratios:
    """rQPS of rows against base rows (NaN where undefined) and their colour bands."""

    ratio: np.ndarray
    low: np.ndarray
    high: np.ndarray
    colour: list[str]
    band: np.ndarray  # int8 per row: index of its colour in COLOURS


COLOURS = ("grey", "red", "green")


def ratios(
    table: Table, rows: np.ndarray, base_rows: np.ndarray, higher: np.ndarray, bands: Bands, jobs: int = 1
) -> Ratios:
    """median(row)/median(base row) with the bootstrap CI, vectorised per pair of sample counts; jobs=2 computes
    the second half of the rows in a forked child (each row's result does not depend on the others)."""
    parts = forkjoin.halves(len(rows), lambda a, b: _ratio_rows(table, rows[a:b], base_rows[a:b]), jobs, SPLIT_MIN_ROWS)
    out = np.concatenate(parts) if len(parts) > 1 else parts[0]
    r = out[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        good = np.where(higher, r, 1.0 / r)
    band = np.where(np.isnan(good), 0, np.where(good <= bands.red, 1, np.where(good >= bands.green, 2, 0)))
    band = band.astype(np.int8)
    return Ratios(out[:, 0], out[:, 1], out[:, 2], np.array(COLOURS, dtype=object)[band].tolist(), band)


SPLIT_MIN_ROWS = 50_000  # fewer ratios than this take less time than a fork of a large process


def _ratio_rows(table: Table, rows: np.ndarray, base_rows: np.ndarray) -> np.ndarray:
    """(ratio, low, high) per row; NaN where undefined."""
    out = np.full((len(rows), 3), np.nan)
    if len(rows):
        nb, nx = table.n[base_rows], table.n[rows]
        combos = np.unique(np.stack([nb, nx], axis=1), axis=0)
        for cb, cx in combos:
            sel = np.nonzero((nb == cb) & (nx == cx))[0]
            if cb == 0 or cx == 0:
                continue
            out[sel] = median_ratio_block(table.block(base_rows[sel]), table.block(rows[sel]), presorted=True)
    return out
