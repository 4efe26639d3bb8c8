"""Series: what change detection and the site read (tables series, and the runs and measurements along a
branch's first-parent order)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True)
class SeriesKey:
    """A series' identity (docs/glossary.md): samples compare only within one of these."""

    machine_id: str
    recipe: str
    recipe_version: int
    config_hash: str  # the workload's (measurements.config_hash)
    workload: str
    metric: str
    branch: str


@dataclass(frozen=True)
class StoredSeries:
    """One row of `series`: a series the farm has seen, with its unit and direction."""

    id: int
    key: SeriesKey
    unit: str
    direction: str  # higher | lower (which way is better)
    analysed_at: float | None


@dataclass(frozen=True)
class BranchSamples:
    """Every ok sample of a series, per tested commit in first-parent order (bisection and forced runs add
    samples to a commit; build order never matters)."""

    commits: list[str]
    positions: list[int]
    samples: list[list[float]]  # per commit, every sample of every ok run, in run order


def ensure_for_run(conn: sqlite3.Connection, run_id: int) -> list[int]:
    """The ids of every series a run contributes to (created on first sight)."""
    run = conn.execute(
        "SELECT sha, machine_id, recipe, recipe_version, status FROM runs WHERE id = ?", (run_id,)
    ).fetchone()
    if run is None or run["status"] != "ok":
        return []
    branches = [r[0] for r in conn.execute("SELECT branch FROM branch_commits WHERE sha = ?", (run["sha"],))]
    ids = []
    for m in conn.execute("SELECT workload, metric, unit, direction, config_hash FROM measurements WHERE run_id = ?",
                          (run_id,)):
        for branch in branches:
            conn.execute(
                "INSERT INTO series (machine_id, recipe, recipe_version, config_hash, workload, metric, branch, "
                "unit, direction) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (run["machine_id"], run["recipe"], run["recipe_version"], m["config_hash"], m["workload"],
                 m["metric"], branch, m["unit"], m["direction"]),
            )
            ids.append(conn.execute(
                "SELECT id FROM series WHERE machine_id=? AND recipe=? AND recipe_version=? AND config_hash=? "
                "AND workload=? AND metric=? AND branch=?",
                (run["machine_id"], run["recipe"], run["recipe_version"], m["config_hash"], m["workload"],
                 m["metric"], branch),
            ).fetchone()[0])
    return ids


def get(conn: sqlite3.Connection, series_id: int) -> StoredSeries | None:
    s = conn.execute(
        "SELECT id, machine_id, recipe, recipe_version, config_hash, workload, metric, branch, unit, direction, "
        "analysed_at FROM series WHERE id = ?", (series_id,)
    ).fetchone()
    return StoredSeries(s[0], SeriesKey(*s[1:8]), s[8], s[9], s[10]) if s else None


def branch_samples(conn: sqlite3.Connection, key: SeriesKey) -> BranchSamples:
    """Every ok sample of a series, grouped per commit in first-parent order."""
    rows = conn.execute(
        "SELECT bc.position, bc.sha, m.samples FROM branch_commits bc "
        "JOIN runs r ON r.sha = bc.sha JOIN measurements m ON m.run_id = r.id "
        "WHERE bc.branch = ? AND r.machine_id = ? AND r.recipe = ? AND r.recipe_version = ? "
        "AND m.config_hash = ? AND r.status = 'ok' AND m.workload = ? AND m.metric = ? "
        "ORDER BY bc.position, r.id",
        (key.branch, key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.metric),
    ).fetchall()
    commits: list[str] = []
    positions: list[int] = []
    groups: list[list[float]] = []
    for position, sha, samples in rows:
        if not commits or commits[-1] != sha:
            commits.append(sha)
            positions.append(position)
            groups.append([])
        groups[-1].extend(json.loads(samples))
    return BranchSamples(commits, positions, groups)


def count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM series").fetchone()[0])


def mark_analysed(conn: sqlite3.Connection, series_id: int, now: float) -> None:
    conn.execute("UPDATE series SET analysed_at = ? WHERE id = ?", (now, series_id))
