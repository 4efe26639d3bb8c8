"""Series: what change detection and the site read (tables series, and the runs and measurements along a
branch's first-parent order)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from master.store.connection import _chunked, table_columns
from recipes import paired as paired_metrics


@dataclass(frozen=True)
class MeasureKey:
    """What makes samples comparable, before the branch is chosen; `config_hash` is the workload's (a
    measurement's), so adding a workload to a recipe leaves the other workloads' keys as they were."""

    machine_id: str
    recipe: str
    recipe_version: int
    config_hash: str
    workload: str
    metric: str


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


class Segment(NamedTuple):
    """What a ratio series' samples are relative to, per commit: the reference build, and whether the ratios are
    per order-balanced block (recipes/paired.py BALANCED_FLAG) or per round (before issue #28). Either changing
    starts a new segment: the ratios are no longer comparable, though the code did not change."""

    reference: str | None
    balanced: bool = False

    def label(self) -> str:
        """How the site marks where the segment starts."""
        onto = f"rebased onto {self.reference[:12] if self.reference else 'no reference'}"
        return f"{onto}, order-balanced ratios" if self.balanced else onto


@dataclass(frozen=True)
class BranchSamples:
    """Every ok sample of a series, per tested commit in first-parent order. A ratio series (``.rqps``, ``.ratio``)
    counts every run of a commit measured in the segment of its first run (a bisection probe against the same
    reference adds samples); any other series counts the commit's first run only, so a re-measurement minutes or
    days later (a bisection probe, a forced run) never moves a commit by the machine's drift."""

    commits: list[str]
    positions: list[int]
    samples: list[list[float]]  # per commit, its samples (see above), in run order
    references: list[str | None]  # per commit, the reference its throughput was paired with (None: unpaired)
    segments: list[Segment] = field(default_factory=list)  # per commit, for ratio series (empty otherwise)

    def rebases(self) -> list[int]:
        """Indices of the commits measured in another segment than the commit before (a rebase, or the method)."""
        keys = self.segments or [Segment(r) for r in self.references]
        return [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]]


# what a paired run stores beside a wall-clock metric (recipes/paired.py): per-block ratios to the run's
# reference (`.rqps` for a throughput, `.ratio` for any other), and the reference's own raw samples
RATIO_SUFFIX, REFERENCE_SUFFIX = paired_metrics.RQPS_SUFFIX, paired_metrics.REFERENCE_SUFFIX
RATIO_SUFFIXES = paired_metrics.RATIO_SUFFIXES


def is_ratio_to_reference(metric: str) -> bool:
    """Whether a metric's samples are ratios to the run's reference (compare only within one segment)."""
    return paired_metrics.is_paired_ratio(metric)


def is_paired_throughput(metric: str) -> bool:
    """Whether the paired gate judges a series' newest commits (rQPS only: recipes.paired.is_paired_throughput)."""
    return paired_metrics.is_paired_throughput(metric)


def absolute_metric(metric: str) -> str:
    """The metric a ratio series is the ratio of (``tps`` for ``tps.rqps``); the metric itself otherwise."""
    for suffix in RATIO_SUFFIXES:
        if metric.endswith(suffix):
            return metric.removesuffix(suffix)
    return metric


def is_balanced(flags: str | None) -> bool:
    """Whether a measurement's flags (JSON) say its ratios are per order-balanced block (recipes/paired.py)."""
    return flags is not None and flags != "[]" and paired_metrics.BALANCED_FLAG in json.loads(flags)


def ensure_for_run(conn: sqlite3.Connection, run_id: int) -> list[int]:
    """The ids of every series a run contributes to (created on first sight)."""
    run = conn.execute(
        "SELECT sha, machine_id, recipe, recipe_version, status FROM runs WHERE id = ?", (run_id,)
    ).fetchone()
    if run is None or run["status"] != "ok":
        return []
    branches = [
        r[0]
        for r in conn.execute(
            "SELECT branch FROM branch_commits WHERE sha = ? AND branch NOT IN (SELECT branch FROM branch_indexing)",
            (run["sha"],),
        )
    ]
    ids = []
    for m in conn.execute(
        "SELECT workload, metric, unit, direction, config_hash FROM measurements WHERE run_id = ?", (run_id,)
    ):
        for branch in branches:
            conn.execute(
                "INSERT INTO series (machine_id, recipe, recipe_version, config_hash, workload, metric, branch, "
                "unit, direction) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    run["machine_id"],
                    run["recipe"],
                    run["recipe_version"],
                    m["config_hash"],
                    m["workload"],
                    m["metric"],
                    branch,
                    m["unit"],
                    m["direction"],
                ),
            )
            ids.append(
                conn.execute(
                    "SELECT id FROM series WHERE machine_id=? AND recipe=? AND recipe_version=? AND config_hash=? "
                    "AND workload=? AND metric=? AND branch=?",
                    (
                        run["machine_id"],
                        run["recipe"],
                        run["recipe_version"],
                        m["config_hash"],
                        m["workload"],
                        m["metric"],
                        branch,
                    ),
                ).fetchone()[0]
            )
    return ids


def get(conn: sqlite3.Connection, series_id: int) -> StoredSeries | None:
    s = conn.execute(
        "SELECT id, machine_id, recipe, recipe_version, config_hash, workload, metric, branch, unit, direction, "
        "analysed_at FROM series WHERE id = ?",
        (series_id,),
    ).fetchone()
    return StoredSeries(s[0], SeriesKey(*s[1:8]), s[8], s[9], s[10]) if s else None


def branch_samples(conn: sqlite3.Connection, key: SeriesKey, since: int | None = None) -> BranchSamples:
    """Every ok sample of a series, grouped per commit in first-parent order; with ``since``, of the commits at
    branch positions ``since`` and later only (``tail_positions``), read from there (the cost of the tail,
    whatever the history's length).

    A commit's reference is that of its first run. For a ratio metric (``.rqps``, ``.ratio``) only the runs in
    that run's segment (its reference, and its ratios per block or per round) count: a commit measured again
    after a rebase (a bisection probe, a forced run) keeps its place in the segment it was first measured in.
    For any other metric only the first run counts (``BranchSamples``)."""
    ratio = is_ratio_to_reference(key.metric)
    params = (key.branch, key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.metric)
    if since is None:
        rows = conn.execute(
            "SELECT bc.position, bc.sha, m.samples, r.reference, m.flags FROM branch_commits bc "
            "JOIN runs r ON r.sha = bc.sha JOIN measurements m ON m.run_id = r.id "
            "WHERE bc.branch = ? AND r.machine_id = ? AND r.recipe = ? AND r.recipe_version = ? "
            "AND m.config_hash = ? AND r.status = 'ok' AND m.workload = ? AND m.metric = ? "
            "AND bc.branch NOT IN (SELECT branch FROM branch_indexing) ORDER BY bc.position, r.id",
            params,
        ).fetchall()
    else:
        # From the branch's positions (its primary key) to each commit's runs (runs_sha), so SQLite reads the
        # tail only; left to itself it read every run of the machine (runs_series) for each commit
        rows = conn.execute(
            "SELECT bc.position, bc.sha, m.samples, r.reference, m.flags FROM branch_commits bc "
            "CROSS JOIN runs r INDEXED BY runs_sha CROSS JOIN measurements m "
            "WHERE bc.branch = ? AND bc.position >= ? AND r.sha = bc.sha AND m.run_id = r.id AND r.machine_id = ? "
            "AND r.recipe = ? AND r.recipe_version = ? AND m.config_hash = ? AND r.status = 'ok' "
            "AND m.workload = ? AND m.metric = ? AND bc.branch NOT IN (SELECT branch FROM branch_indexing) "
            "ORDER BY bc.position, r.id",
            (params[0], since, *params[1:]),
        ).fetchall()
    commits: list[str] = []
    positions: list[int] = []
    groups: list[list[float]] = []
    references: list[str | None] = []
    segments: list[Segment] = []
    for position, sha, samples, reference, flags in rows:
        segment = Segment(reference, is_balanced(flags)) if ratio else Segment(reference)
        if not commits or commits[-1] != sha:
            commits.append(sha)
            positions.append(position)
            groups.append([])
            references.append(reference)
            segments.append(segment)
        elif not ratio or segment != segments[-1]:
            continue
        groups[-1].extend(json.loads(samples))
    return BranchSamples(commits, positions, groups, references, segments if ratio else [])


def tail_positions(conn: sqlite3.Connection, key: SeriesKey, count: int) -> list[int]:
    """The branch positions of the series' newest ``count`` tested commits (an ok run measured it), newest first;
    all of them when it has fewer. Read from the branch's newest commit back, so it costs the tail only."""
    rows = conn.execute(
        "SELECT bc.position FROM branch_commits bc WHERE bc.branch = ? "
        "AND bc.branch NOT IN (SELECT branch FROM branch_indexing) AND EXISTS (SELECT 1 FROM runs r INDEXED BY "
        "runs_sha CROSS JOIN measurements m WHERE r.sha = bc.sha AND r.machine_id = ? AND r.recipe = ? "
        "AND r.recipe_version = ? AND r.status = 'ok' AND m.run_id = r.id AND m.config_hash = ? "
        "AND m.workload = ? AND m.metric = ?) ORDER BY bc.position DESC LIMIT ?",
        (key.branch, key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.metric, count),
    )
    return [position for (position,) in rows]


def references(conn: sqlite3.Connection) -> dict[SeriesKey, list[tuple[int, Segment]]]:
    """Per ratio series (``.rqps``, ``.ratio``): (branch position, segment) of each tested commit in first-parent
    order, the segment of the commit's first run (as ``branch_samples`` counts it). The site marks where it
    changes."""
    out: dict[SeriesKey, list[tuple[int, Segment]]] = {}
    # CROSS JOIN fixes the order: the few ratio series first, then each one's machine's runs (runs_series). Left to
    # itself SQLite scanned every run of the farm and matched series to it, on every publish, with no ratio series
    # at all: 1.1 s at 6,000 commits x 20 machines, growing with the history (docs/scale.md).
    rows = conn.execute(
        "SELECT s.machine_id, s.recipe, s.recipe_version, s.config_hash, s.workload, s.metric, s.branch, "
        "bc.position, r.reference, m.flags FROM series s CROSS JOIN runs r CROSS JOIN measurements m "
        "CROSS JOIN branch_commits bc "
        "WHERE (s.metric LIKE ? OR s.metric LIKE ?) AND r.machine_id = s.machine_id AND r.recipe = s.recipe "
        "AND r.recipe_version = s.recipe_version AND r.status = 'ok' AND m.run_id = r.id "
        "AND m.config_hash = s.config_hash AND m.workload = s.workload AND m.metric = s.metric "
        "AND bc.branch = s.branch AND bc.sha = r.sha AND s.branch NOT IN (SELECT branch FROM branch_indexing) "
        "ORDER BY s.id, bc.position, r.id",
        tuple("%" + suffix for suffix in RATIO_SUFFIXES),
    )
    for *key, position, reference, flags in rows:
        points = out.setdefault(SeriesKey(*key), [])
        if not points or points[-1][0] != position:
            points.append((position, Segment(reference, is_balanced(flags))))
    return out


def plan_points(
    conn: sqlite3.Connection, workloads: Sequence[str] | None = None
) -> dict[SeriesKey, list[tuple[int, str, str]]]:
    """Per series of a workload whose runs captured plans: (branch position, sha, plan shape) of each measured
    commit in first-parent order, the commit's first run's plan (as ``branch_samples`` counts a commit's runs).
    Read from the few plans rows outward (each run's measurement of the workload names the series' identity), not
    from `series`, which analysis fills later. `workloads`: only theirs (an alert's message reads its own)."""
    out: dict[SeriesKey, list[tuple[int, str, str]]] = {}
    only = "" if workloads is None else f" AND p.workload IN ({','.join('?' * len(workloads))})"
    rows = conn.execute(
        "SELECT r.machine_id, r.recipe, r.recipe_version, m.config_hash, m.workload, m.metric, bc.branch, "
        "bc.position, r.sha, p.shape FROM plans p CROSS JOIN runs r CROSS JOIN measurements m "
        "CROSS JOIN branch_commits bc "
        "WHERE r.id = p.run_id AND r.status = 'ok' AND m.run_id = r.id AND m.workload = p.workload "
        "AND bc.sha = r.sha AND bc.branch NOT IN (SELECT branch FROM branch_indexing)" + only + " "
        "ORDER BY r.machine_id, r.recipe, r.recipe_version, m.config_hash, m.workload, m.metric, bc.branch, "
        "bc.position, r.id",
        tuple(workloads or ()),
    )
    for *key, position, sha, shape in rows:
        points = out.setdefault(SeriesKey(*key), [])
        if not points or points[-1][0] != position:
            points.append((int(position), sha, shape))
    return out


def plans_at(conn: sqlite3.Connection, shas: Iterable[str]) -> dict[MeasureKey, dict[str, str]]:
    """The plan shape each measure key's workload ran with at each of these commits (release tags, for the
    archaeology page), the commit's first ok run's, as ``plan_points`` takes it; {} before migration 19."""
    if not table_columns(conn, "plans"):
        return {}
    sql = (
        "SELECT r.id, r.sha, r.machine_id, r.recipe, r.recipe_version, m.config_hash, m.workload, m.metric, p.shape "
        "FROM plans p JOIN runs r ON r.id = p.run_id JOIN measurements m ON m.run_id = r.id "
        "AND m.workload = p.workload WHERE r.status = 'ok'"
    )
    first: dict[tuple[MeasureKey, str], tuple[int, str]] = {}
    for r in _chunked(conn, sql, "r.sha", shas, where=True):
        at = (MeasureKey(r[2], r[3], int(r[4]), r[5], r[6], r[7]), r[1])
        if at not in first or r[0] < first[at][0]:
            first[at] = (r[0], r[8])
    out: dict[MeasureKey, dict[str, str]] = {}
    for (key, sha), (_, shape) in first.items():
        out.setdefault(key, {})[sha] = shape
    return out


def exists(conn: sqlite3.Connection, key: SeriesKey) -> bool:
    """Whether the farm has seen this series."""
    return (
        conn.execute(
            "SELECT 1 FROM series WHERE machine_id=? AND recipe=? AND recipe_version=? AND config_hash=? "
            "AND workload=? AND metric=? AND branch=?",
            (key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.metric, key.branch),
        ).fetchone()
        is not None
    )


def count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM series").fetchone()[0])


def searched_count(conn: sqlite3.Connection) -> int:
    """How many series detection searches: every series but what master/analysis.py ``not_searched`` keeps
    unsearched (a paired run's ``<metric>.reference``, and an absolute metric beside which a ratio of it to the
    reference exists). The false-discovery family of a detection pass (``analysis.admit``)."""
    siblings = " OR ".join("t.metric = s.metric || ?" for _ in RATIO_SUFFIXES)
    ratio = " OR ".join("substr(s.metric, -?) = ?" for _ in RATIO_SUFFIXES)
    row = conn.execute(
        "SELECT COUNT(*) FROM series s WHERE substr(s.metric, -?) != ? AND ("
        + ratio
        + " OR NOT EXISTS (SELECT 1 FROM series t WHERE t.machine_id = s.machine_id AND t.recipe = s.recipe "
        "AND t.recipe_version = s.recipe_version AND t.config_hash = s.config_hash AND t.workload = s.workload "
        "AND t.branch = s.branch AND (" + siblings + ")))",
        (
            len(REFERENCE_SUFFIX),
            REFERENCE_SUFFIX,
            *(x for suffix in RATIO_SUFFIXES for x in (len(suffix), suffix)),
            *RATIO_SUFFIXES,
        ),
    ).fetchone()
    return int(row[0])


def mark_analysed(conn: sqlite3.Connection, series_id: int, now: float) -> None:
    conn.execute("UPDATE series SET analysed_at = ? WHERE id = ?", (now, series_id))


# ---------------------------------------------------------------------------------------------- what the site reads


@dataclass(frozen=True)
class Sample:
    """All samples of one measure key at one commit: every ok run merged (bisection adds samples)."""

    sha: str
    run_ids: tuple[int, ...]
    samples: tuple[float, ...]
    unit: str
    direction: str
    noisy: bool
    sla_miss: bool


def samples_by_key(
    conn: sqlite3.Connection, shas: Iterable[str] | None = None, keys: set[MeasureKey] | None = None
) -> dict[MeasureKey, dict[str, Sample]]:
    """Every ok run's samples grouped by measure key and commit (optionally only some commits and keys)."""
    sql = (
        "SELECT r.id, r.sha, r.machine_id, r.recipe, r.recipe_version, m.config_hash, r.noisy, m.workload, "
        "m.metric, m.unit, m.direction, m.samples, m.flags FROM runs r JOIN measurements m ON m.run_id = r.id "
        "WHERE r.status = 'ok'"
    )
    acc: dict[MeasureKey, dict[str, list[Any]]] = {}
    loads = json.loads
    for r in _chunked(conn, sql, "r.sha", shas, where=True):
        key = MeasureKey(r[2], r[3], int(r[4]), r[5], r[7], r[8])
        if keys is not None and key not in keys:
            continue
        per = acc.setdefault(key, {})
        flags = r[12]
        sla = flags != "[]" and "sla-miss" in loads(flags)
        got = per.get(r[1])
        if got is None:
            per[r[1]] = [[r[0]], loads(r[11]), r[9], r[10], bool(r[6]), sla]
        else:
            got[0].append(r[0])
            got[1].extend(loads(r[11]))
            got[4] = got[4] or bool(r[6])
            got[5] = got[5] or sla
    return {
        key: {
            sha: Sample(sha, tuple(sorted(v[0])), tuple(float(x) for x in v[1]), v[2], v[3], v[4], v[5])
            for sha, v in per.items()
        }
        for key, per in acc.items()
    }


def keys_at(conn: sqlite3.Connection, shas: Sequence[str]) -> set[MeasureKey]:
    """Measure keys with ok results at any of these commits."""
    sql = (
        "SELECT DISTINCT r.machine_id, r.recipe, r.recipe_version, m.config_hash, m.workload, m.metric "
        "FROM runs r JOIN measurements m ON m.run_id = r.id WHERE r.status = 'ok'"
    )
    return {MeasureKey(r[0], r[1], int(r[2]), r[3], r[4], r[5]) for r in _chunked(conn, sql, "r.sha", shas, where=True)}


def prev_point_position(conn: sqlite3.Connection, key: MeasureKey, branch: str, before: int) -> int | None:
    """Branch position of the series' last tested commit before `before` (for the ratio vs the previous point).

    CROSS JOIN fixes the order: walk the branch back from `before` and stop at the first commit with a point of the
    series, usually a step or two. Left to itself, SQLite picks the `measurements_series` index and reads the
    series' whole history first: 25 ms instead of 0.03 ms per call at 10,000 commits, and an incremental publish
    makes two calls per series (docs/site.md). INDEXED BY: with runs_series (schema 13) SQLite found each commit's
    run among all of the machine's runs instead of by its sha, 12.6 ms instead of 0.025 ms at 6,000 commits
    (docs/scale.md).
    """
    row = conn.execute(
        "SELECT bc.position FROM branch_commits bc CROSS JOIN runs r INDEXED BY runs_sha CROSS JOIN measurements m "
        "WHERE bc.branch = ? AND bc.position < ? AND r.sha = bc.sha AND r.status = 'ok' AND r.machine_id = ? "
        "AND r.recipe = ? AND r.recipe_version = ? AND m.run_id = r.id AND m.config_hash = ? AND m.workload = ? "
        "AND m.metric = ? AND bc.branch NOT IN (SELECT branch FROM branch_indexing) ORDER BY bc.position DESC LIMIT 1",
        (branch, before, key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.metric),
    ).fetchone()
    return None if row is None else int(row[0])


@dataclass(frozen=True)
class MeasurementScan:
    """Every ok run (optionally only the runs at some commits) and its measurements, read in one pass, as flat
    text SQLite concatenated in storage order (master/publish/scan.py parses it; docs/site.md says why).

    Per run, in id order: id, sha, noisy, machine, recipe, recipe version. Per measurement row, in storage order:
    its run id (`row_runs`, comma-separated), "workload U+001F metric U+001F config hash" (`row_keys`, rows
    separated by U+001E), its samples array as stored (`row_samples`, separated by '|') and '1' when flagged
    sla-miss, else '0' (`row_sla`). The separators cannot occur in what they separate: run ids are integers,
    workload and metric names match the result schema's NAME_RE and config hashes its HASH_RE, sample arrays are
    JSON numbers. The row columns are None when no run has a measurement."""

    run_id: tuple[int, ...]
    run_sha: tuple[str, ...]
    run_noisy: tuple[int, ...]
    run_machine: tuple[str, ...]
    run_recipe: tuple[str, ...]
    run_version: tuple[int, ...]
    row_runs: str | None
    row_keys: str | None
    row_samples: str | None
    row_sla: str | None


# One row per call: SQLite concatenates the columns of every matching measurement in storage order. Units are
# free text, so they are read per key afterwards (`units`).
_SCAN = (
    "SELECT group_concat(m.run_id), "
    "group_concat(m.workload || char(31) || m.metric || char(31) || m.config_hash, char(30)), "
    "group_concat(m.samples, '|'), group_concat(m.flags != '[]' AND m.flags LIKE '%sla-miss%', '') "
    "FROM measurements m WHERE m.run_id IN ({runs})"
)


def _ok_runs(
    conn: sqlite3.Connection, shas: Iterable[str] | None, machines: Iterable[tuple[str, str, int]] | None = None
) -> tuple[list[sqlite3.Row], str, list[Any]]:
    """The ok runs (optionally only at `shas`, only of `machines`), and the SQL/parameters selecting their ids."""
    cond = "status = 'ok'"
    if machines is not None:
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS publish_machines (machine_id TEXT, recipe TEXT, recipe_version INTEGER, "
            "PRIMARY KEY (machine_id, recipe, recipe_version))"
        )
        conn.execute("DELETE FROM publish_machines")
        conn.executemany("INSERT OR IGNORE INTO publish_machines VALUES (?, ?, ?)", sorted(set(machines)))
        cond += (
            " AND (machine_id, recipe, recipe_version) IN "
            "(SELECT machine_id, recipe, recipe_version FROM publish_machines)"
        )
    base = f"SELECT id, sha, noisy, machine_id, recipe, recipe_version FROM runs WHERE {cond}"
    if shas is None:
        return conn.execute(base + " ORDER BY id").fetchall(), f"SELECT id FROM runs WHERE {cond}", []
    want = sorted(set(shas))
    if len(want) <= 900:  # SQLite's bound-parameter limit (999 on old builds)
        marks = ",".join("?" * len(want))
        return (
            conn.execute(f"{base} AND sha IN ({marks}) ORDER BY id", want).fetchall(),
            f"SELECT id FROM runs WHERE {cond} AND sha IN ({marks})",
            want,
        )
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS publish_shas (sha TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM publish_shas")
    conn.executemany("INSERT OR IGNORE INTO publish_shas VALUES (?)", [(x,) for x in want])
    sub = f"SELECT id FROM runs WHERE {cond} AND sha IN (SELECT sha FROM publish_shas)"
    return conn.execute(f"{base} AND sha IN (SELECT sha FROM publish_shas) ORDER BY id").fetchall(), sub, []


def scan_measurements(
    conn: sqlite3.Connection,
    shas: Iterable[str] | None = None,
    machines: Iterable[tuple[str, str, int]] | None = None,
) -> MeasurementScan:
    """Every ok run's measurements (optionally only of runs at `shas`, and only of runs by these (machine, recipe,
    recipe version): what an incremental publish shows of one run reads that run's machine, not the fleet) in one
    pass: see MeasurementScan."""
    # one read transaction: the runs and their measurements come from the same snapshot even while the master
    # ingests (WAL), so every scanned row's run is in the runs read
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        runs, ids_sql, params = _ok_runs(conn, shas, machines)
        row_runs, row_keys, row_samples, row_sla = conn.execute(_SCAN.format(runs=ids_sql), params).fetchone()
    finally:
        if own:
            conn.execute("COMMIT")
    ids, sha, noisy, machine, recipe, version = list(zip(*runs)) or [()] * 6
    return MeasurementScan(ids, sha, noisy, machine, recipe, version, row_runs, row_keys, row_samples, row_sla)


class MetricUnit(NamedTuple):
    unit: str
    direction: str


def units(conn: sqlite3.Connection, run_ids: Iterable[int]) -> dict[tuple[int, str, str], MetricUnit]:
    """(run id, workload, metric) -> unit and direction, for every measurement of these runs."""
    ids = sorted(set(run_ids))
    got: dict[tuple[int, str, str], MetricUnit] = {}
    for i in range(0, len(ids), 900):  # SQLite's bound-parameter limit
        part = ids[i : i + 900]
        for r, w, m, u, d in conn.execute(
            "SELECT run_id, workload, metric, unit, direction FROM measurements "
            f"WHERE run_id IN ({','.join('?' * len(part))})",
            part,
        ):
            got[(r, w, m)] = MetricUnit(u, d)
    return got
