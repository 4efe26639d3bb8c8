"""Change points (table change_points), each with the key of its series."""

from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass
from typing import Any

from master.store.series import SeriesKey


@dataclass(frozen=True)
class StoredChangePoint:
    """A stored change point with its series' key, unit and direction (the detector's own record is
    master.detect.model.ChangePoint)."""

    id: int
    series_id: int
    key: SeriesKey
    unit: str
    direction: str  # higher | lower (which way is better)
    first_sha: str  # its identity: the commit it was first reported at
    sha: str  # first tested commit after the change
    prev_sha: str | None  # last tested commit before it: (prev_sha, sha] is the suspect range
    position: int
    prev_position: int | None
    kind: str  # regression | improvement
    ratio: float
    ci_low: float | None
    ci_high: float | None
    pvalue: float
    state: str  # active | retracted
    first_seen: float
    updated_at: float


# The columns `_change_point` reads, in its order; callers add their own columns after them.
SELECT = (
    "SELECT cp.id, cp.series_id, s.machine_id, s.recipe, s.recipe_version, s.config_hash, s.workload, s.metric, "
    "s.branch, s.unit, s.direction, cp.first_sha, cp.sha, cp.prev_sha, cp.position, cp.prev_position, cp.kind, "
    "cp.ratio, cp.ci_low, cp.ci_high, cp.pvalue, cp.state, cp.first_seen, cp.updated_at"
)
FROM = " FROM change_points cp JOIN series s ON s.id = cp.series_id"
WIDTH = 24  # columns in SELECT


def from_row(r: Any) -> StoredChangePoint:
    """The record from a row that starts with SELECT's columns."""
    return StoredChangePoint(r[0], r[1], SeriesKey(*r[2:9]), *r[9:WIDTH])


def change_points(conn: sqlite3.Connection) -> list[StoredChangePoint]:
    """Every stored change point, retracted ones too, in id order."""
    return [from_row(r) for r in conn.execute(SELECT + FROM + " ORDER BY cp.id")]


def change_point(conn: sqlite3.Connection, change_point_id: int) -> StoredChangePoint | None:
    row = conn.execute(SELECT + FROM + " WHERE cp.id = ?", (change_point_id,)).fetchone()
    return from_row(row) if row else None


def for_series(conn: sqlite3.Connection, series_id: int) -> list[StoredChangePoint]:
    """Every change point stored for a series, retracted ones too, in branch order."""
    return [
        from_row(r) for r in conn.execute(SELECT + FROM + " WHERE cp.series_id = ? ORDER BY cp.position", (series_id,))
    ]


@dataclass(frozen=True)
class Placement:
    """Where a change point is now and its numbers: what detection writes for it."""

    sha: str
    prev_sha: str | None
    position: int
    prev_position: int | None
    kind: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    pvalue: float


def report(conn: sqlite3.Connection, series_id: int, first_sha: str, p: Placement, now: float) -> int:
    """Store a newly reported change point (or bring back a retracted one under its identity); returns its id."""
    cur = conn.execute(
        "INSERT INTO change_points (series_id, first_sha, sha, prev_sha, position, prev_position, kind, "
        "ratio, ci_low, ci_high, pvalue, first_seen, updated_at) "
        "VALUES (:series_id, :first_sha, :sha, :prev_sha, :position, :prev_position, :kind, :ratio, "
        ":ci_low, :ci_high, :pvalue, :now, :now) "
        "ON CONFLICT(series_id, first_sha) DO UPDATE SET sha = excluded.sha, prev_sha = excluded.prev_sha, "
        "position = excluded.position, prev_position = excluded.prev_position, kind = excluded.kind, "
        "ratio = excluded.ratio, ci_low = excluded.ci_low, ci_high = excluded.ci_high, "
        "pvalue = excluded.pvalue, state = 'active', updated_at = excluded.updated_at RETURNING id",
        dict(dataclasses.asdict(p), series_id=series_id, first_sha=first_sha, now=now),
    )
    return int(cur.fetchone()[0])


def move(conn: sqlite3.Connection, series_id: int, first_sha: str, p: Placement, now: float) -> int:
    """Update a reported change point that more data moved (or that is back); returns its id."""
    return int(
        conn.execute(
            "UPDATE change_points SET sha = :sha, prev_sha = :prev_sha, position = :position, "
            "prev_position = :prev_position, kind = :kind, ratio = :ratio, ci_low = :ci_low, "
            "ci_high = :ci_high, pvalue = :pvalue, state = 'active', updated_at = :now "
            "WHERE series_id = :series_id AND first_sha = :first_sha RETURNING id",
            dict(dataclasses.asdict(p), series_id=series_id, first_sha=first_sha, now=now),
        ).fetchone()[0]
    )


def retract(conn: sqlite3.Connection, series_id: int, first_sha: str, now: float) -> int:
    """Mark a change point whose evidence is gone retracted (the row stays: alerts and the site refer to it)."""
    return int(
        conn.execute(
            "UPDATE change_points SET state = 'retracted', updated_at = ? WHERE series_id = ? AND first_sha = ? "
            "RETURNING id",
            (now, series_id, first_sha),
        ).fetchone()[0]
    )
