"""rQPS with confidence intervals for the site (master.detect.rqps.median_ratio_many), remembered in a cache file.

median_ratio's seeded bootstrap costs ~0.6-1.1 ms per ratio, and 100 series x 10,000 commits need a million of
them, so the site uses median_ratio_many: the same ratio, and the exact percentile bootstrap CI that
median_ratio approximates with 2000 resamples, vectorised over all pairs of one sample-size pair (~4 us per
ratio). Every computed (series, commit, base) ratio is also kept in `<data_dir>/publish-cache.sqlite`, keyed
by the run ids on both sides (runs never change once stored), so an incremental publish computes only the
ratios a new run changed. The cache is derived data: deleting it only costs time.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from master.detect.model import Direction
from master.detect.rqps import Bands, colour, median_ratio_many


@dataclass(frozen=True)
class Ratio:
    """new/base median ratio with its bootstrap CI (NaN when a side has one sample) and report colour."""

    ratio: float
    low: float
    high: float
    colour: str

    @property
    def has_ci(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


@dataclass(frozen=True)
class Want:
    """One ratio to compute: the key identifies it, the samples are its input."""

    sid: str
    sha: str
    base_sha: str
    runs: str
    base_runs: str
    samples: tuple[float, ...]
    base_samples: tuple[float, ...]
    direction: str


def _compute(pairs: Sequence[tuple[tuple[float, ...], tuple[float, ...]]]) -> list[tuple[float, float, float]]:
    """(ratio, low, high) per (base, new) pair; NaN where undefined (a zero base median, one sample)."""
    if not pairs:
        return []
    return [tuple(row) for row in median_ratio_many(pairs).tolist()]


class RatioCache:
    """Computes ratios in batches, reusing the cache file; call `flush` to persist new entries."""

    def __init__(self, path: Path | None, bands: Bands | None = None) -> None:
        self.bands = bands or Bands()
        self.conn: sqlite3.Connection | None = None
        self.computed = 0
        self.reused = 0
        self._new: list[tuple[object, ...]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, timeout=30)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS ratio (sid TEXT, sha TEXT, base_sha TEXT, runs TEXT, base_runs TEXT, "
                "ratio REAL, low REAL, high REAL, PRIMARY KEY (sid, sha, base_sha)) WITHOUT ROWID"
            )
            # earlier versions kept every parsed sample here too; the results DB is now read directly (scan.py)
            if self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sample_groups'").fetchone():
                with self.conn:
                    self.conn.execute("DROP TABLE sample_groups")
                    self.conn.execute("DROP TABLE IF EXISTS sample_meta")

    def resolve(self, wants: Sequence[Want]) -> dict[tuple[str, str, str], Ratio]:
        """Ratio for every wanted (sid, sha, base_sha): cached when the run ids match, computed otherwise."""
        known = self._lookup(wants)
        out: dict[tuple[str, str, str], Ratio] = {}
        missing: list[Want] = []
        for w in wants:
            hit = known.get((w.sid, w.sha, w.base_sha))
            if hit is not None and hit[0] == w.runs and hit[1] == w.base_runs:
                out[(w.sid, w.sha, w.base_sha)] = self._ratio(hit[2], hit[3], hit[4], w.direction)
                self.reused += 1
            else:
                missing.append(w)
        for w, (r, lo, hi) in zip(missing, self._run([(w.base_samples, w.samples) for w in missing])):
            out[(w.sid, w.sha, w.base_sha)] = self._ratio(r, lo, hi, w.direction)
            self._new.append((w.sid, w.sha, w.base_sha, w.runs, w.base_runs, r, lo, hi))
        self.computed += len(missing)
        return out

    def _ratio(self, r: float | None, lo: float | None, hi: float | None, direction: str) -> Ratio:
        # not finite: a ratio cached before median_ratio_block made such a pair NaN (1e300 over 1e-300)
        r = math.nan if r is None or not math.isfinite(r) else r
        lo = math.nan if lo is None or not math.isfinite(lo) else lo
        hi = math.nan if hi is None or not math.isfinite(hi) else hi
        band = "grey" if math.isnan(r) else colour(r, Direction(direction), self.bands).value
        return Ratio(r, lo, hi, band)

    def _run(self, pairs: list[tuple[tuple[float, ...], tuple[float, ...]]]) -> list[tuple[float, float, float]]:
        return _compute(pairs)

    def _lookup(self, wants: Sequence[Want]) -> dict[tuple[str, str, str], tuple]:
        if self.conn is None or not wants:
            return {}
        sids = sorted({w.sid for w in wants})
        out: dict[tuple[str, str, str], tuple] = {}
        if len(wants) > 50 * len(sids):  # most of each series: read them whole
            for i in range(0, len(sids), 500):
                part = sids[i : i + 500]
                for row in self.conn.execute(
                    f"SELECT sid, sha, base_sha, runs, base_runs, ratio, low, high FROM ratio "
                    f"WHERE sid IN ({','.join('?' * len(part))})",
                    part,
                ):
                    out[(row[0], row[1], row[2])] = row[3:]
        else:
            for w in wants:
                row = self.conn.execute(
                    "SELECT runs, base_runs, ratio, low, high FROM ratio WHERE sid = ? AND sha = ? AND base_sha = ?",
                    (w.sid, w.sha, w.base_sha),
                ).fetchone()
                if row:
                    out[(w.sid, w.sha, w.base_sha)] = tuple(row)
        return out

    def flush(self) -> None:
        """Persist what was computed (NaN stored as NULL)."""
        if self.conn is None or not self._new:
            self._new = []
            return
        rows = [(*r[:5], *(None if (isinstance(x, float) and math.isnan(x)) else x for x in r[5:])) for r in self._new]
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO ratio VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self._new = []

    def close(self) -> None:
        self.flush()
        if self.conn is not None:
            self.conn.close()
            self.conn = None
