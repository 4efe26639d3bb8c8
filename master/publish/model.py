"""Series points in first-parent order, assembled from stored samples and branch orders (pure, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from master.publish.source import MeasureKey, Sample, SeriesKey


@dataclass(frozen=True)
class Point:
    """One commit of a series: summary of its samples (median, min, max) and the runs behind it."""

    position: int
    sha: str
    median: float
    lo: float
    hi: float
    samples: tuple[float, ...]
    run_ids: tuple[int, ...]
    noisy: bool
    sla_miss: bool

    @property
    def runs_key(self) -> str:
        return ",".join(map(str, self.run_ids))


@dataclass(frozen=True)
class SeriesData:
    """A series' points (possibly only a window of its history) in position order."""

    key: SeriesKey
    unit: str
    direction: str
    points: tuple[Point, ...]

    @property
    def sid(self) -> str:
        return self.key.sid


def median(xs: tuple[float, ...]) -> float:
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2.0


def point(position: int, s: Sample) -> Point:
    xs = s.samples
    return Point(position, s.sha, median(xs), min(xs), max(xs), xs, s.run_ids, s.noisy, s.sla_miss)


def assemble(
    samples: Mapping[MeasureKey, Mapping[str, Sample]],
    where: Mapping[str, Iterable[tuple[str, int]]],
) -> dict[SeriesKey, SeriesData]:
    """Series for every (measure key, branch): `where` maps a sha to the (branch, position) pairs it sits at."""
    out: dict[SeriesKey, SeriesData] = {}
    for mkey, per in samples.items():
        lists: dict[str, list[Point]] = {}
        unit = direction = ""
        for sha, s in per.items():
            unit, direction = s.unit, s.direction
            for branch, pos in where.get(sha, ()):
                lists.setdefault(branch, []).append(point(pos, s))
        for branch, pts in lists.items():
            pts.sort(key=lambda p: p.position)
            key = SeriesKey(mkey, branch)
            out[key] = SeriesData(key, unit, direction, tuple(pts))
    return out
