"""Series as columns: every (series, commit) point of a publish in flat numpy arrays (pure, no I/O but SQL reads).

A full publish has ~1M points (100 series x 10,000 commits). Per-point Python objects made that minutes;
here samples are parsed in one pass, medians/spreads and the rQPS of every point against the previous one are
array operations (master.detect.rqps.median_ratio_block), and pages read slices.
"""

from __future__ import annotations

import json
import math
import operator
import sqlite3
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from master.detect.rqps import Bands, median_ratio_block
from master.publish.source import MeasureKey, SeriesKey


def median(xs: Iterable[float]) -> float:
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2.0


def round_sig(a: np.ndarray, digits: int = 6) -> np.ndarray:
    """Round to `digits` significant digits of the array's largest magnitude (shorter JSON, same picture)."""
    finite = a[np.isfinite(a)]
    top = float(np.max(np.abs(finite))) if finite.size else 0.0
    decimals = digits - 1 - (int(math.floor(math.log10(top))) if top > 0 else 0)
    return np.round(a, max(decimals, 0))


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
class SeriesData:
    """One series: its rows of the table (possibly only a window of its history)."""

    key: SeriesKey
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


_GROUPED = (
    "SELECT r.machine_id, r.recipe, r.recipe_version, r.config_hash, m.workload, m.metric, m.unit, m.direction, "
    "group_concat(r.id), group_concat(r.sha), group_concat(r.noisy), group_concat(m.samples, '|'), "
    "group_concat(m.flags != '[]' AND m.flags LIKE '%sla-miss%') "
    "FROM runs r JOIN measurements m ON m.run_id = r.id WHERE r.status = 'ok'{where} "
    "GROUP BY r.machine_id, r.recipe, r.recipe_version, r.config_hash, m.workload, m.metric"
)


def _grouped(conn: sqlite3.Connection, shas: Iterable[str] | None) -> list[tuple]:
    """One row per measure key with its runs, shas, flags and samples concatenated (SQLite groups 1M rows in C;
    per-row Python work was most of a full publish)."""
    if shas is None:
        return conn.execute(_GROUPED.format(where="")).fetchall()
    want = sorted(set(shas))
    if len(want) <= 900:
        return conn.execute(_GROUPED.format(where=f" AND r.sha IN ({','.join('?' * len(want))})"), want).fetchall()
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS publish_shas (sha TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM publish_shas")
    conn.executemany("INSERT OR IGNORE INTO publish_shas VALUES (?)", [(x,) for x in want])
    return conn.execute(_GROUPED.format(where=" AND r.sha IN (SELECT sha FROM publish_shas)")).fetchall()


@dataclass
class KeyGroup:
    """Every ok run's samples of one measure key, in one place (the unit of the samples cache)."""

    key: MeasureKey
    unit: str
    direction: str
    ids: list[int]
    shas: list[str]
    noisy: list[bool]
    sla: list[bool]
    texts: list[str]  # the samples as stored (JSON)
    counts: list[int]
    flat: np.ndarray


def _parse(g: tuple) -> KeyGroup:
    texts = g[11].split("|")
    counts = [t.count(",") + 1 if t.strip() != "[]" else 0 for t in texts]
    body = ",".join(t.strip()[1:-1] for t, c in zip(texts, counts) if c)
    flat = np.fromstring(body, sep=",") if body else np.empty(0)  # the C parser: ~0.3 us per sample
    return KeyGroup(MeasureKey(g[0], g[1], int(g[2]), g[3], g[4], g[5]), g[6], g[7],
                    [int(x) for x in g[8].split(",")], g[9].split(","), [x == "1" for x in g[10].split(",")],
                    [x == "1" for x in g[12].split(",")], texts, counts, flat)


_CACHE_VERSION = 1


def _cached_groups(conn: sqlite3.Connection, cache: sqlite3.Connection) -> list[KeyGroup]:
    """Every key's samples: parsed ones from the publish cache plus measurement rows stored since (by rowid).

    Runs and their measurements never change once stored, so the cache only grows; if the number of
    measurement rows does not add up (rows deleted), it is rebuilt. Derived data: deleting it costs time only.
    """
    cache.execute("CREATE TABLE IF NOT EXISTS sample_groups (key TEXT PRIMARY KEY, unit TEXT, direction TEXT, "
                  "ids TEXT, shas TEXT, noisy TEXT, sla TEXT, texts TEXT, counts BLOB, flat BLOB)")
    cache.execute("CREATE TABLE IF NOT EXISTS sample_meta (name TEXT PRIMARY KEY, value INTEGER)")
    meta = dict(cache.execute("SELECT name, value FROM sample_meta").fetchall())
    upto, seen = meta.get("upto", 0), meta.get("seen", 0)
    top, total = conn.execute("SELECT COALESCE(MAX(rowid), 0), COUNT(*) FROM measurements").fetchone()
    fresh = conn.execute("SELECT COUNT(*) FROM measurements WHERE rowid > ?", (upto,)).fetchone()[0]
    groups: dict[MeasureKey, KeyGroup] = {}
    if meta.get("version") == _CACHE_VERSION and seen + fresh == total:
        for row in cache.execute("SELECT key, unit, direction, ids, shas, noisy, sla, texts, counts, flat "
                                 "FROM sample_groups"):
            k = MeasureKey(*json.loads(row[0]))
            groups[k] = KeyGroup(k, row[1], row[2], [int(x) for x in row[3].split(",")], row[4].split(","),
                                 [x == "1" for x in row[5]], [x == "1" for x in row[6]], row[7].split("|"),
                                 np.frombuffer(row[8], dtype=np.int64).tolist(), np.frombuffer(row[9], dtype=float))
    else:
        upto = 0
    new = [_parse(g) for g in conn.execute(_GROUPED.format(where=" AND m.rowid > ? AND m.rowid <= ?"),
                                           (upto, top)).fetchall()]
    for g in new:
        old = groups.get(g.key)
        if old is None:
            groups[g.key] = g
        else:
            groups[g.key] = KeyGroup(g.key, g.unit, g.direction, old.ids + g.ids, old.shas + g.shas,
                                     old.noisy + g.noisy, old.sla + g.sla, old.texts + g.texts,
                                     old.counts + g.counts, np.concatenate([old.flat, g.flat]))
    if new or meta.get("version") != _CACHE_VERSION or upto == 0:
        with cache:
            cache.execute("DELETE FROM sample_groups WHERE ? = 0", (upto,))
            cache.executemany("INSERT OR REPLACE INTO sample_groups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                (json.dumps([k.machine_id, k.recipe, k.recipe_version, k.config_hash, k.workload, k.metric]),
                 g.unit, g.direction, ",".join(map(str, g.ids)), ",".join(g.shas),
                 "".join("1" if x else "0" for x in g.noisy), "".join("1" if x else "0" for x in g.sla),
                 "|".join(g.texts), np.asarray(g.counts, dtype=np.int64).tobytes(), g.flat.tobytes())
                for k, g in groups.items() if upto == 0 or any(n.key == k for n in new)])
            cache.executemany("INSERT OR REPLACE INTO sample_meta VALUES (?, ?)",
                              [("version", _CACHE_VERSION), ("upto", top), ("seen", total)])
    return list(groups.values())


def _pick(seq: list, idx: list[int]) -> list:
    """seq[i] for i in idx, in C (itemgetter) for the million-element columns."""
    if len(idx) < 2:
        return [seq[i] for i in idx]
    return list(operator.itemgetter(*idx)(seq))


def load(
    conn: sqlite3.Connection,
    where: Mapping[str, list[tuple[str, int]]],
    shas: Iterable[str] | None,
    keys: set[MeasureKey] | None,
    cache: sqlite3.Connection | None = None,
) -> dict[SeriesKey, SeriesData]:
    """Series for every (measure key, branch) of the ok runs at `shas` (None: all); `where` maps a sha to the
    (branch, position) pairs it sits at. Runs of one commit are merged (bisection probes add samples).
    With `cache` (and shas None) parsed samples come from the publish cache (see _cached_groups)."""
    if shas is None and cache is not None:
        found = _cached_groups(conn, cache)
    else:
        found = [_parse(g) for g in _grouped(conn, shas)]
    groups = [g for g in found if keys is None or g.key in keys]
    groups.sort(key=lambda g: (g.key.machine_id, g.key.recipe, g.key.recipe_version, g.key.config_hash,
                               g.key.workload, g.key.metric))
    cols: dict[str, list] = {c: [] for c in ("pos", "sha", "off", "n", "text", "runs", "noisy", "sla")}
    flats: list[np.ndarray] = []  # every key's parsed samples, and merged samples of commits with several runs
    main_blocks: list[int] = []  # which of `flats` are keys' samples, in key order
    base = 0
    spans: list[tuple[MeasureKey, str, str, str, int, int]] = []
    for g in groups:
        key = g.key
        ids, shas_k, noisy, texts, sla, counts, flat = g.ids, g.shas, g.noisy, g.texts, g.sla, g.counts, g.flat
        offs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) + base
        wl = [where.get(sha, ()) for sha in shas_k]
        if len(set(shas_k)) == len(shas_k) and all(len(w) == 1 for w in wl):
            # the common case: one run per commit, each commit on one branch: whole columns at once
            br = [w[0][0] for w in wl]
            ps = np.array([w[0][1] for w in wl], dtype=np.int64)
            cnt = np.array(counts, dtype=np.int64)
            nz = np.array(noisy, dtype=bool)
            sl = np.array(sla, dtype=bool)
            names = sorted(set(br))
            for branch in names:
                sel = np.arange(len(br)) if len(names) == 1 else np.array([i for i, x in enumerate(br) if x == branch])
                o = sel[np.argsort(ps[sel], kind="stable")]
                first = len(cols["sha"])
                ol = o.tolist()
                cols["pos"].append(ps[o])
                cols["sha"].extend(_pick(shas_k, ol))
                cols["off"].append(offs[o])
                cols["n"].append(cnt[o])
                cols["text"].extend(_pick(texts, ol))
                cols["runs"].extend(zip(_pick(ids, ol)))
                cols["noisy"].append(nz[o])
                cols["sla"].append(sl[o])
                spans.append((key, branch, g.unit, g.direction, first, len(cols["sha"])))
        else:
            # runs of one commit merged, oldest first; commits on several branches
            by_sha: dict[str, list[int]] = {}
            for j in sorted(range(len(ids)), key=ids.__getitem__):
                by_sha.setdefault(shas_k[j], []).append(j)
            by_branch: dict[str, list[tuple[int, str, list[int]]]] = {}
            for sha, js in by_sha.items():
                for branch, p in where.get(sha, ()):
                    by_branch.setdefault(branch, []).append((p, sha, js))
            for branch in sorted(by_branch):
                items = sorted(by_branch[branch], key=lambda t: t[0])
                first = len(cols["sha"])
                for p, sha, js in items:
                    cols["pos"].append(np.array([p], dtype=np.int64))
                    cols["sha"].append(sha)
                    if len(js) == 1:
                        j = js[0]
                        cols["off"].append(np.array([offs[j]], dtype=np.int64))
                        cols["n"].append(np.array([counts[j]], dtype=np.int64))
                        cols["text"].append(texts[j])
                        cols["runs"].append((ids[j],))
                        cols["noisy"].append(np.array([noisy[j]]))
                        cols["sla"].append(np.array([sla[j]]))
                    else:
                        merged = np.concatenate([flat[offs[j] - base : offs[j] - base + counts[j]] for j in js])
                        flats.append(merged)
                        # -(index in flats + 1): placed after all keys' samples below
                        cols["off"].append(np.array([-len(flats)], dtype=np.int64))
                        cols["n"].append(np.array([len(merged)], dtype=np.int64))
                        cols["text"].append("[" + ", ".join(texts[j].strip()[1:-1] for j in js if counts[j]) + "]")
                        cols["runs"].append(tuple(ids[j] for j in js))
                        cols["noisy"].append(np.array([any(noisy[j] for j in js)]))
                        cols["sla"].append(np.array([any(sla[j] for j in js)]))
                spans.append((key, branch, g.unit, g.direction, first, len(cols["sha"])))
        flats.append(flat)
        main_blocks.append(len(flats) - 1)
        base += len(flat)
    # lay the sample blocks out: each key's parsed samples at its base, merged ones after all of them
    main = [flats[i] for i in main_blocks]
    flat_all = np.concatenate(main) if main else np.empty(0)
    def cat(name: str, dtype: type) -> np.ndarray:
        return np.concatenate(cols[name]).astype(dtype) if cols[name] else np.empty(0, dtype=dtype)

    off = cat("off", np.int64)
    extra: list[np.ndarray] = []
    if (off < 0).any():
        start = len(flat_all)
        for i in np.nonzero(off < 0)[0]:
            block = flats[-int(off[i]) - 1]
            off[i] = start
            start += len(block)
            extra.append(block)
        flat_all = np.concatenate([flat_all, *extra])
    table = Table(cat("pos", np.int64), cols["sha"], off, cat("n", np.int64), flat_all, cols["text"], cols["runs"],
                  cat("noisy", bool), cat("sla", bool))
    out = {}
    for key, branch, unit, direction, a, b in spans:
        sk = SeriesKey(key, branch)
        out[sk] = SeriesData(sk, unit, direction, table, a, b)
    return out


@dataclass
class Ratios:
    """rQPS of rows against base rows (NaN where undefined) and their colour bands."""

    ratio: np.ndarray
    low: np.ndarray
    high: np.ndarray
    colour: list[str]


def ratios(table: Table, rows: np.ndarray, base_rows: np.ndarray, higher: np.ndarray, bands: Bands) -> Ratios:
    """median(row)/median(base row) with the bootstrap CI, vectorised per pair of sample counts."""
    out = np.full((len(rows), 3), np.nan)
    if len(rows):
        nb, nx = table.n[base_rows], table.n[rows]
        combos = np.unique(np.stack([nb, nx], axis=1), axis=0)
        for cb, cx in combos:
            sel = np.nonzero((nb == cb) & (nx == cx))[0]
            if cb == 0 or cx == 0:
                continue
            out[sel] = median_ratio_block(table.block(base_rows[sel]), table.block(rows[sel]), presorted=True)
    r = out[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        good = np.where(higher, r, 1.0 / r)
    colour = np.where(np.isnan(good), "grey", np.where(good <= bands.red, "red",
                                                       np.where(good >= bands.green, "green", "grey")))
    return Ratios(out[:, 0], out[:, 1], out[:, 2], colour.tolist())
