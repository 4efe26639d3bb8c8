"""Bisections and what their probes measured (tables bisections, bisection_runs, bisection_jobs; reads runs,
measurements, rejections and attempts of the bisected commits, and the jobs that confirmed a culprit). The search
itself is master/bisection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from master.store.connection import columns
from master.store.series import Segment, is_balanced, is_ratio_to_reference


@dataclass(frozen=True)
class Bisection:
    """One row of `bisections`, every column as stored except `commits`, parsed."""

    id: int
    change_point_id: int | None  # set when detection started it
    builder: str
    machine_id: str
    recipe: str
    config_hash: str  # the workload's
    workload: str
    metric: str
    direction: str
    branch: str
    good: str
    bad: str
    commits: tuple[str, ...]  # (good, bad] in first-parent order, good first
    state: str  # running | culprit | ambiguous | not-reproducible
    culprit: str | None
    parent: str | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    probes: int
    rounds: int
    samples: int
    reason: str
    log: str  # JSON list of lines
    requested_by: str
    created_at: float
    updated_at: float
    finished_at: float | None


@dataclass(frozen=True)
class WorkloadRun:
    """Who measured a workload in a run, and how: what a bisection of it measures with."""

    builder: str
    machine_id: str
    recipe: str
    config_hash: str
    metric: str
    direction: str


_SELECT = f"SELECT {columns(Bisection)} FROM bisections"


def _bisection(row: sqlite3.Row) -> Bisection:
    values = list(row)
    values[12] = tuple(json.loads(values[12]))  # commits
    return Bisection(*values)


def get(conn: sqlite3.Connection, bisection_id: int) -> Bisection | None:
    row = conn.execute(_SELECT + " WHERE id = ?", (bisection_id,)).fetchone()
    return _bisection(row) if row else None


def running(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM bisections WHERE state = 'running' ORDER BY id")]


def newest_first(conn: sqlite3.Connection) -> list[Bisection]:
    return [_bisection(r) for r in conn.execute(_SELECT + " ORDER BY id DESC")]


def running_or_finished_since(conn: sqlite3.Connection, since: float) -> list[Bisection]:
    return [
        _bisection(r)
        for r in conn.execute(_SELECT + " WHERE state = 'running' OR finished_at > ? ORDER BY id", (since,))
    ]


def by_change_point(conn: sqlite3.Connection) -> dict[int, Bisection]:
    """change point id -> the bisection that speaks for it: the newest one detection started for it or that it
    shares (``share``)."""
    out: dict[int, Bisection] = {}
    for r in conn.execute(_SELECT + " WHERE change_point_id IS NOT NULL ORDER BY id"):
        b = _bisection(r)
        assert b.change_point_id is not None  # by the WHERE
        out[b.change_point_id] = b
    shared = conn.execute("SELECT change_point_id, bisection_id FROM bisection_shares").fetchall()
    for cp_id, bisection_id in shared:
        found = get(conn, bisection_id)
        if found is not None and (cp_id not in out or out[cp_id].id < found.id):
            out[cp_id] = found
    return out


def of_change_point(conn: sqlite3.Connection, change_point_id: int) -> list[Bisection]:
    """The bisections detection started for a change point or that it shares, oldest first (a moved change point
    may have several; the newest speaks for it)."""
    return [
        _bisection(r)
        for r in conn.execute(
            _SELECT + " WHERE change_point_id = ? OR id IN (SELECT bisection_id FROM bisection_shares "
            "WHERE change_point_id = ?) ORDER BY id",
            (change_point_id, change_point_id),
        )
    ]


def covering(conn: sqlite3.Connection, builder: str, branch: str, prev_sha: str, sha: str) -> Bisection | None:
    """The newest bisection on this builder and branch that can answer for the range (prev_sha, sha]: a running one
    whose range holds both, or a finished one whose culprit lies in the range (issue #28: one bisection per
    regression)."""
    for r in conn.execute(
        _SELECT + " WHERE builder = ? AND branch = ? AND state IN ('running', 'culprit') ORDER BY id DESC",
        (builder, branch),
    ):
        b = _bisection(r)
        if prev_sha not in b.commits or sha not in b.commits:
            continue
        lo, hi = b.commits.index(prev_sha), b.commits.index(sha)
        if b.state == "running" or (b.culprit in b.commits and lo < b.commits.index(b.culprit) <= hi):
            return b
    return None


def share(conn: sqlite3.Connection, change_point_id: int, bisection_id: int, now: float) -> None:
    """The change point is bisected by that bisection (a newer share replaces an older one)."""
    conn.execute(
        "INSERT INTO bisection_shares (change_point_id, bisection_id, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT(change_point_id) DO UPDATE SET bisection_id = excluded.bisection_id, "
        "created_at = excluded.created_at",
        (change_point_id, bisection_id, now),
    )


def shared_by(conn: sqlite3.Connection, change_point_id: int) -> int | None:
    """The bisection a change point shares, if any (``share``)."""
    row = conn.execute(
        "SELECT bisection_id FROM bisection_shares WHERE change_point_id = ?", (change_point_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def sharing(conn: sqlite3.Connection, bisection_id: int) -> list[int]:
    """The change points a bisection answers for: the one it was started for, then those that share it."""
    own = conn.execute("SELECT change_point_id FROM bisections WHERE id = ?", (bisection_id,)).fetchone()
    shared = [
        r[0]
        for r in conn.execute(
            "SELECT change_point_id FROM bisection_shares WHERE bisection_id = ? ORDER BY change_point_id",
            (bisection_id,),
        )
    ]
    return ([own[0]] if own and own[0] is not None else []) + [c for c in shared if not own or c != own[0]]


def insert(
    conn: sqlite3.Connection,
    *,
    change_point_id: int | None,
    measured: WorkloadRun,
    workload: str,
    branch: str,
    good: str,
    bad: str,
    commits: Sequence[str],
    requested_by: str,
    now: float,
) -> int:
    """A new running bisection; returns its id."""
    cur = conn.execute(
        "INSERT INTO bisections (change_point_id, builder, machine_id, recipe, config_hash, workload, metric, "
        "direction, branch, good, bad, commits, state, requested_by, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
        (
            change_point_id,
            measured.builder,
            measured.machine_id,
            measured.recipe,
            measured.config_hash,
            workload,
            measured.metric,
            measured.direction,
            branch,
            good,
            bad,
            json.dumps(list(commits)),
            requested_by,
            now,
            now,
        ),
    )
    bisection_id = cur.lastrowid
    assert bisection_id is not None  # set by every INSERT
    return bisection_id


def log_lines(conn: sqlite3.Connection, bisection_id: int) -> list[str]:
    row = conn.execute("SELECT log FROM bisections WHERE id = ?", (bisection_id,)).fetchone()
    return list(json.loads(row[0])) if row else []


def set_log(conn: sqlite3.Connection, bisection_id: int, lines: list[str], now: float) -> None:
    conn.execute("UPDATE bisections SET log = ?, updated_at = ? WHERE id = ?", (json.dumps(lines), now, bisection_id))


def set_counts(conn: sqlite3.Connection, bisection_id: int, probes: int, rounds: int, samples: int) -> None:
    conn.execute(
        "UPDATE bisections SET probes = ?, rounds = ?, samples = ? WHERE id = ?",
        (probes, rounds, samples, bisection_id),
    )


def record_culprit(
    conn: sqlite3.Connection,
    bisection_id: int,
    culprit: str,
    parent: str,
    ratio: float,
    ci_low: float,
    ci_high: float,
    now: float,
) -> None:
    conn.execute(
        "UPDATE bisections SET state = 'culprit', culprit = ?, parent = ?, ratio = ?, ci_low = ?, "
        "ci_high = ?, finished_at = ? WHERE id = ?",
        (culprit, parent, ratio, ci_low, ci_high, now, bisection_id),
    )


def record_ambiguous(conn: sqlite3.Connection, bisection_id: int, reason: str, good: str, bad: str, now: float) -> None:
    """No single culprit: the change is somewhere in (good, bad], which become the bisection's ends."""
    conn.execute(
        "UPDATE bisections SET state = 'ambiguous', reason = ?, culprit = NULL, parent = ?, finished_at = ? "
        "WHERE id = ?",
        (reason, good, now, bisection_id),
    )
    conn.execute("UPDATE bisections SET good = ?, bad = ? WHERE id = ?", (good, bad, bisection_id))


def record_not_reproducible(conn: sqlite3.Connection, bisection_id: int, reason: str, now: float) -> None:
    conn.execute(
        "UPDATE bisections SET state = 'not-reproducible', reason = ?, finished_at = ? WHERE id = ?",
        (reason, now, bisection_id),
    )


# ------------------------------------------------------------------------------------------------ probes


def newest_workload_run(
    conn: sqlite3.Connection, workload: str, shas: Sequence[str], builder: str | None, metric: str | None
) -> WorkloadRun | None:
    """How the newest ok run at one of `shas` (on `builder`, if given) measured `workload` (its `metric`, if
    given)."""
    where = "r.builder = ?" if builder else "1"
    params: tuple = (builder,) if builder else ()
    marks = ",".join("?" * len(shas))
    found = conn.execute(
        f"SELECT r.builder, r.machine_id, r.recipe, m.config_hash, m.metric, m.direction "
        f"FROM runs r JOIN measurements m ON m.run_id = r.id "
        f"WHERE {where} AND m.workload = ? AND r.status = 'ok' AND r.sha IN ({marks}) "
        f"AND (? IS NULL OR m.metric = ?) ORDER BY r.id DESC LIMIT 1",
        (*params, workload, *shas, metric, metric),
    ).fetchone()
    return WorkloadRun(*found) if found else None


def newest_builder(
    conn: sqlite3.Connection, machine_id: str, recipe: str, config_hash: str, workload: str, sha: str
) -> str | None:
    """The builder of the newest run that measured `workload` at `sha` on this machine and recipe config."""
    row = conn.execute(
        "SELECT r.builder FROM runs r JOIN measurements m ON m.run_id = r.id WHERE r.machine_id = ? AND r.recipe = ? "
        "AND m.config_hash = ? AND m.workload = ? AND r.sha = ? ORDER BY r.id DESC LIMIT 1",
        (machine_id, recipe, config_hash, workload, sha),
    ).fetchone()
    return row[0] if row else None


def _measured(conn: sqlite3.Connection, b: Bisection) -> list[tuple[int, str, str, Segment]]:
    """(run id, commit, samples JSON, segment) of every ok measurement of the bisection's commits on its machine
    and recipe config (any source: history, forced runs, other bisections), oldest first."""
    marks = ",".join("?" * len(b.commits))
    return [
        (run_id, sha, samples, Segment(reference, is_balanced(flags)))
        for run_id, sha, samples, reference, flags in conn.execute(
            f"SELECT r.id, r.sha, m.samples, r.reference, m.flags FROM runs r JOIN measurements m ON m.run_id = r.id "
            f"WHERE r.machine_id = ? AND r.recipe = ? AND m.config_hash = ? AND r.status = 'ok' "
            f"AND m.workload = ? AND m.metric = ? AND r.sha IN ({marks}) ORDER BY r.id",
            (b.machine_id, b.recipe, b.config_hash, b.workload, b.metric, *b.commits),
        )
    ]


def _comparable(b: Bisection, rows: list) -> list:
    """The rows whose samples compare with each other: for a ratio metric (``.rqps``, ``.ratio``,
    docs/throughput.md) only those in the segment of the newest measurement (its reference, its ratios per block
    or per round), so a rebase during a bisection re-measures its ends and probes against the new reference
    instead of mixing ratios to two different builds."""
    if not b.metric or not is_ratio_to_reference(b.metric) or not rows:
        return rows
    newest = rows[-1][3]
    return [row for row in rows if row[3] == newest]


def samples_and_rounds(conn: sqlite3.Connection, b: Bisection) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Every comparable ok sample of the bisection's commits per commit (``_measured``, ``_comparable``), and
    commit -> the comparable ok runs this bisection made of it (its probes), from one read of the measurements."""
    ours = {r[0] for r in conn.execute("SELECT run_id FROM bisection_runs WHERE bisection_id = ?", (b.id,))}
    out: dict[str, list[float]] = {c: [] for c in b.commits}
    rounds: dict[str, int] = {}
    for run_id, sha, raw, _ in _comparable(b, _measured(conn, b)):
        out[sha].extend(json.loads(raw))
        if run_id in ours:
            rounds[sha] = rounds.get(sha, 0) + 1
    return out, rounds


LEVEL_COMMITS = (5, 3)  # measured commits of the series read for the level before the change and after it


def levels(conn: sqlite3.Connection, b: Bisection) -> tuple[list[float], list[float]] | None:
    """For a ratio series (a paired rQPS against the branch's pinned reference, drift-free): the level of the
    series before the change, from its newest measured commits up to the good end, and after it, from the bad end
    and the commits measured after it (``LEVEL_COMMITS``), each in one segment (the good end's, the bad end's,
    which must be the same, and that of the newest measurement of its commits: ``_comparable``). The bisection
    judges its probes against these instead of re-measuring the ends (issue #28). None for any other series, or
    when either side has no measurement in that segment."""
    if not b.metric or not is_ratio_to_reference(b.metric):
        return None
    pos = dict(
        conn.execute(
            "SELECT sha, position FROM branch_commits WHERE branch = ? AND sha IN (?, ?)", (b.branch, b.good, b.bad)
        ).fetchall()
    )
    if b.good not in pos or b.bad not in pos:
        return None
    sides = []
    for op, order, at, want in (
        ("<=", "DESC", pos[b.good], LEVEL_COMMITS[0]),
        (">=", "ASC", pos[b.bad], LEVEL_COMMITS[1]),
    ):
        rows = conn.execute(
            "SELECT bc.sha, m.samples, r.reference, m.flags FROM branch_commits bc "
            "CROSS JOIN runs r INDEXED BY runs_sha CROSS JOIN measurements m "
            f"WHERE bc.branch = ? AND bc.position {op} ? AND r.sha = bc.sha AND m.run_id = r.id "
            "AND r.machine_id = ? AND r.recipe = ? AND m.config_hash = ? AND r.status = 'ok' AND m.workload = ? "
            f"AND m.metric = ? ORDER BY bc.position {order}, r.id LIMIT ?",
            (b.branch, at, b.machine_id, b.recipe, b.config_hash, b.workload, b.metric, want * 20),
        ).fetchall()
        samples: list[float] = []
        segment: Segment | None = None
        first: dict[str, Segment] = {}
        for sha, raw, reference, flags in rows:
            seg = Segment(reference, is_balanced(flags))
            if sha not in first:
                if len(first) == want or (segment is not None and seg != segment):
                    break
                first[sha] = seg
                segment = seg
            if seg == first[sha]:
                samples.extend(json.loads(raw))
        sides.append((segment, samples))
    (seg_good, good), (seg_bad, bad) = sides
    measured = _measured(conn, b)
    newest = measured[-1][3] if measured else None
    if not good or not bad or not seg_good == seg_bad == newest:
        return None  # a rebase since: the probes are measured against another reference (_comparable)
    return good, bad


def failed_commits(conn: sqlite3.Connection, b: Bisection) -> set[str]:
    """The bisection's commits with a failed run on its machine and recipe, or a rejected result on its builder."""
    marks = ",".join("?" * len(b.commits))
    broken = {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT sha FROM runs WHERE machine_id = ? AND recipe = ? AND status != 'ok' "
            f"AND sha IN ({marks})",
            (b.machine_id, b.recipe, *b.commits),
        )
    }
    broken |= {
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT revision FROM rejections WHERE builder = ? AND revision IN ({marks})",
            (b.builder, *b.commits),
        )
    }
    return broken


def lost_builds(conn: sqlite3.Connection, b: Bisection) -> dict[str, int]:
    """commit -> builds of it on the bisection's builder since the bisection started that stored no result
    (crashes), for the commits that had builds."""
    marks = ",".join("?" * len(b.commits))
    out = {}
    for sha, n in conn.execute(
        f"SELECT sha, COUNT(*) FROM attempts WHERE builder = ? AND started_at >= ? AND sha IN ({marks}) GROUP BY sha",
        (b.builder, b.created_at, *b.commits),
    ):
        stored = conn.execute(
            "SELECT COUNT(*) FROM runs WHERE builder = ? AND sha = ? AND ingested_at >= ?",
            (b.builder, sha, b.created_at),
        ).fetchone()[0]
        out[sha] = n - stored
    return out


# ------------------------------------------------------------------------ culprit confirmation jobs (schema 26)


def link_job(conn: sqlite3.Connection, bisection_id: int, job_id: int) -> None:
    """The job confirms the bisection's culprit (queued by it: master/bisection/state.py)."""
    conn.execute("INSERT INTO bisection_jobs (bisection_id, job_id) VALUES (?, ?)", (bisection_id, job_id))


def jobs_of(conn: sqlite3.Connection, bisection_id: int) -> list[int]:
    """The ids of the jobs a bisection queued to confirm its culprit, oldest first."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT job_id FROM bisection_jobs WHERE bisection_id = ? ORDER BY job_id", (bisection_id,)
        )
    ]
