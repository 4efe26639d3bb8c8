"""Change points (table change_points), each with the key of its series."""

from __future__ import annotations

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


def change_point(conn: sqlite3.Connection, change_point_id: int) -> StoredChangePoint | None:
    row = conn.execute(SELECT + FROM + " WHERE cp.id = ?", (change_point_id,)).fetchone()
    return from_row(row) if row else None
