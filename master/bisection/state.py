"""Bisections in the results database: create one, read what is measured, advance it, record the outcome.

Pure (no Buildbot): the master's bisection service and `perffarm bisect --local` both drive a bisection
through `advance()`, which returns either the next commit to measure or the finished outcome. Every probe is a
stored run (source `bisect`, linked in `bisection_runs`), so the state survives restarts and later bisections
and the history reuse the samples.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from master import refnames, store
from master.bisection.core import (
    Ambiguous,
    Culprit,
    Decision,
    Measure,
    NotReproducible,
    Observations,
    Policy,
    decide,
)
from master.detect import rqps
from recipes.result import NAME_RE

MAX_LOST_ATTEMPTS = 3  # builds of one probe that ended with no result before the commit counts as broken


class BisectionError(ValueError):
    """A bisection cannot be created as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Bisection:
    id: int
    builder: str
    machine_id: str
    recipe: str
    config_hash: str
    workload: str
    metric: str
    direction: str
    branch: str
    commits: tuple[str, ...]
    state: str
    created_at: float


def _row_to_bisection(row: sqlite3.Row) -> Bisection:
    return Bisection(row["id"], row["builder"], row["machine_id"], row["recipe"], row["config_hash"], row["workload"],
                     row["metric"], row["direction"], row["branch"], tuple(json.loads(row["commits"])), row["state"],
                     row["created_at"])


def get(conn: sqlite3.Connection, bisection_id: int) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM bisections WHERE id = ?", (bisection_id,)).fetchone()
    if row is None:
        raise BisectionError(f"no bisection with id {bisection_id}")
    return row


def resolve_commit(conn: sqlite3.Connection, ref: str) -> str:
    """A full sha from a sha, a unique sha prefix, or a tag name the farm knows."""
    problem = refnames.revision_problem(ref)
    if problem is not None:
        raise BisectionError(f"{refnames.show(ref)} {problem}; give a commit sha (or unique prefix) or a tag")
    tag = conn.execute("SELECT sha FROM tags WHERE name = ?", (ref,)).fetchone()
    if tag:
        return tag[0]
    if not refnames.is_sha(ref):
        raise BisectionError(f"{ref!r} is not a commit or tag the farm knows (has any result been stored for it?)")
    # a validated hex prefix: no LIKE wildcards in it
    rows = conn.execute("SELECT sha FROM commits WHERE sha LIKE ? LIMIT 2", (ref.lower() + "%",)).fetchall()
    if len(rows) == 1 and len(ref) >= 4:
        return rows[0][0]
    if len(rows) > 1:
        raise BisectionError(f"{ref!r} is ambiguous: more than one known commit starts with it")
    raise BisectionError(f"{ref!r} is not a commit or tag the farm knows (has any result been stored for it?)")


def create(
    conn: sqlite3.Connection,
    *,
    good: str,
    bad: str,
    workload: str,
    branch: str = "master",
    metric: str | None = None,
    builder: str | None = None,
    change_point_id: int | None = None,
    requested_by: str = "detector",
) -> int:
    """Start a bisection of (good, bad] on a branch's first-parent order; returns its id."""
    problem = refnames.ref_problem(branch)
    if problem is not None:
        raise BisectionError(f"branch {refnames.show(branch)} {problem}")
    for name, value in (("workload", workload), ("metric", metric)):
        if value is not None and not NAME_RE.match(value):
            raise BisectionError(f"{name} {refnames.show(value)} is not a workload or metric name "
                                 "(letters, digits, '_', '.', '+', '-')")
    good_sha, bad_sha = resolve_commit(conn, good), resolve_commit(conn, bad)
    pos = dict(conn.execute(
        "SELECT sha, position FROM branch_commits WHERE branch = ? AND sha IN (?, ?)", (branch, good_sha, bad_sha)
    ).fetchall())
    for name, sha in (("good", good_sha), ("bad", bad_sha)):
        if sha not in pos:
            raise BisectionError(f"--{name} {sha[:12]} is not on the first-parent history of branch {branch!r}")
    if pos[good_sha] >= pos[bad_sha]:
        raise BisectionError(f"--good {good_sha[:12]} must come before --bad {bad_sha[:12]} on {branch}")
    commits = [r[0] for r in conn.execute(
        "SELECT sha FROM branch_commits WHERE branch = ? AND position BETWEEN ? AND ? ORDER BY position",
        (branch, pos[good_sha], pos[bad_sha]),
    )]
    where = "r.builder = ?" if builder else "1"
    params: tuple = (builder,) if builder else ()
    found = conn.execute(
        f"SELECT r.builder, r.machine_id, r.recipe, m.config_hash, m.metric, m.direction "
        f"FROM runs r JOIN measurements m ON m.run_id = r.id "
        f"WHERE {where} AND m.workload = ? AND r.status = 'ok' AND r.sha IN (?, ?) "
        f"AND (? IS NULL OR m.metric = ?) ORDER BY r.id DESC LIMIT 1",
        (*params, workload, good_sha, bad_sha, metric, metric),
    ).fetchone()
    if found is None:
        raise BisectionError(
            f"no stored result of workload {workload!r}" + (f" metric {metric!r}" if metric else "")
            + (f" on builder {builder!r}" if builder else "")
            + " for either end; measure the ends first (or check the names with `perffarm results export`)"
        )
    now = time.time()
    cur = conn.execute(
        "INSERT INTO bisections (change_point_id, builder, machine_id, recipe, config_hash, workload, metric, "
        "direction, branch, good, bad, commits, state, requested_by, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
        (change_point_id, found["builder"], found["machine_id"], found["recipe"], found["config_hash"], workload,
         found["metric"], found["direction"], branch, good_sha, bad_sha, json.dumps(commits), requested_by, now, now),
    )
    bisection_id = cur.lastrowid
    assert bisection_id is not None  # set by every INSERT
    _log(conn, bisection_id, f"bisecting {len(commits) - 1} commits ({good_sha[:12]}..{bad_sha[:12]}] on {branch}, "
                             f"{workload}/{found['metric']} on {found['builder']}")
    return bisection_id


def observations(conn: sqlite3.Connection, b: Bisection) -> Observations:
    """Everything measured for the bisection's commits on its machine and recipe config (any source: history,
    forced runs, other bisections), and the rounds this bisection ran itself."""
    marks = ",".join("?" * len(b.commits))
    samples: dict[str, list[float]] = {c: [] for c in b.commits}
    for sha, raw in conn.execute(
        f"SELECT r.sha, m.samples FROM runs r JOIN measurements m ON m.run_id = r.id "
        f"WHERE r.machine_id = ? AND r.recipe = ? AND m.config_hash = ? AND r.status = 'ok' "
        f"AND m.workload = ? AND m.metric = ? AND r.sha IN ({marks}) ORDER BY r.id",
        (b.machine_id, b.recipe, b.config_hash, b.workload, b.metric, *b.commits),
    ):
        samples[sha].extend(json.loads(raw))
    fresh = dict(conn.execute(
        "SELECT r.sha, COUNT(*) FROM bisection_runs br JOIN runs r ON r.id = br.run_id "
        "WHERE br.bisection_id = ? AND r.status = 'ok' GROUP BY r.sha",
        (b.id,),
    ).fetchall())
    broken = {r[0] for r in conn.execute(
        f"SELECT DISTINCT sha FROM runs WHERE machine_id = ? AND recipe = ? AND status != 'ok' AND sha IN ({marks})",
        (b.machine_id, b.recipe, *b.commits),
    )}
    broken |= {r[0] for r in conn.execute(
        f"SELECT DISTINCT revision FROM rejections WHERE builder = ? AND revision IN ({marks})",
        (b.builder, *b.commits),
    )}
    # builds of a probe that ended with no result at all (crashes): after a few, treat it as broken
    for sha, n in conn.execute(
        f"SELECT sha, COUNT(*) FROM attempts WHERE builder = ? AND started_at >= ? AND sha IN ({marks}) GROUP BY sha",
        (b.builder, b.created_at, *b.commits),
    ):
        stored = conn.execute(
            "SELECT COUNT(*) FROM runs WHERE builder = ? AND sha = ? AND ingested_at >= ?",
            (b.builder, sha, b.created_at),
        ).fetchone()[0]
        if n - stored >= MAX_LOST_ATTEMPTS:
            broken.add(sha)
    return Observations(samples, fresh, frozenset(broken))


def _log(conn: sqlite3.Connection, bisection_id: int, line: str) -> None:
    row = conn.execute("SELECT log FROM bisections WHERE id = ?", (bisection_id,)).fetchone()
    log = json.loads(row[0]) if row else []
    stamped = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}Z {line}"
    if log and log[-1].split("Z ", 1)[-1] == line:
        return  # re-evaluating the same state: say it once
    log.append(stamped)
    conn.execute("UPDATE bisections SET log = ?, updated_at = ? WHERE id = ?", (json.dumps(log), time.time(),
                                                                             bisection_id))


def advance(conn: sqlite3.Connection, bisection_id: int, policy: Policy = Policy()) -> Decision:
    """Decide the next step from what is stored; when the search is over, record its outcome (one transaction)."""
    with store.transaction(conn):
        row = get(conn, bisection_id)
        b = _row_to_bisection(row)
        obs = observations(conn, b)
        if b.state != "running":
            return _finished(row)
        decision = decide(b.commits, obs, policy)
        probes = sum(1 for c in b.commits if obs.rounds(c) > 0)
        rounds = sum(obs.fresh_rounds.values())
        n_samples = sum(len(obs.samples.get(c, ())) for c in b.commits if obs.rounds(c) > 0)
        conn.execute("UPDATE bisections SET probes = ?, rounds = ?, samples = ? WHERE id = ?",
                     (probes, rounds, n_samples, bisection_id))
        if isinstance(decision, Measure):
            i = b.commits.index(decision.commit)
            _log(conn, bisection_id, f"measure {decision.commit[:12]} (commit {i} of {len(b.commits) - 1}, "
                                     f"round {obs.rounds(decision.commit) + 1}): {decision.reason}")
            return decision
        now = time.time()
        if isinstance(decision, Culprit):
            est = rqps.median_ratio(obs.of(decision.parent), obs.of(decision.commit))
            subject = conn.execute("SELECT subject, author FROM commits WHERE sha = ?", (decision.commit,)).fetchone()
            conn.execute(
                "UPDATE bisections SET state = 'culprit', culprit = ?, parent = ?, ratio = ?, ci_low = ?, "
                "ci_high = ?, finished_at = ? WHERE id = ?",
                (decision.commit, decision.parent, est.ratio, est.low, est.high, now, bisection_id),
            )
            _log(conn, bisection_id, f"culprit {decision.commit[:12]} "
                                     f"{(subject['subject'] if subject else '')!r}: ratio {est.ratio:.4f} "
                                     f"[{est.low:.4f}, {est.high:.4f}] against {decision.parent[:12]}; "
                                     f"{probes} probes, {rounds} rounds, {n_samples} samples")
        elif isinstance(decision, Ambiguous):
            conn.execute(
                "UPDATE bisections SET state = 'ambiguous', reason = ?, culprit = NULL, parent = ?, finished_at = ? "
                "WHERE id = ?", (decision.reason, decision.good, now, bisection_id))
            conn.execute("UPDATE bisections SET good = ?, bad = ? WHERE id = ?", (decision.good, decision.bad,
                                                                                  bisection_id))
            _log(conn, bisection_id, f"ambiguous: the change is in ({decision.good[:12]}, {decision.bad[:12]}]: "
                                     f"{decision.reason}")
        elif isinstance(decision, NotReproducible):
            conn.execute("UPDATE bisections SET state = 'not-reproducible', reason = ?, finished_at = ? WHERE id = ?",
                         (decision.reason, now, bisection_id))
            _log(conn, bisection_id, f"not reproducible: {decision.reason}")
        return decision


def _finished(row: sqlite3.Row) -> Decision:
    if row["state"] == "culprit":
        return Culprit(row["culprit"], row["parent"])
    if row["state"] == "ambiguous":
        return Ambiguous(row["good"], row["bad"], row["reason"])
    return NotReproducible(row["reason"])


def running(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM bisections WHERE state = 'running' ORDER BY id")]


def auto_create(conn: sqlite3.Connection, change_point_id: int) -> int | None:
    """A bisection for a change point whose range holds untested commits (None if nothing to bisect)."""
    cp = conn.execute(
        "SELECT cp.*, s.workload, s.metric, s.branch, s.machine_id, s.recipe, s.config_hash FROM change_points cp "
        "JOIN series s ON s.id = cp.series_id WHERE cp.id = ?", (change_point_id,)
    ).fetchone()
    if cp is None or cp["prev_sha"] is None or cp["position"] - cp["prev_position"] <= 1:
        return None
    if conn.execute("SELECT 1 FROM bisections WHERE change_point_id = ?", (change_point_id,)).fetchone():
        return None
    builder = conn.execute(
        "SELECT r.builder FROM runs r JOIN measurements m ON m.run_id = r.id WHERE r.machine_id = ? AND r.recipe = ? "
        "AND m.config_hash = ? AND m.workload = ? AND r.sha = ? ORDER BY r.id DESC LIMIT 1",
        (cp["machine_id"], cp["recipe"], cp["config_hash"], cp["workload"], cp["sha"])
    ).fetchone()
    if builder is None:
        return None
    return create(conn, good=cp["prev_sha"], bad=cp["sha"], workload=cp["workload"], metric=cp["metric"],
                  branch=cp["branch"], builder=builder[0], change_point_id=change_point_id)


def report_to_alert(conn: sqlite3.Connection, bisection_id: int, alert_settings) -> str | None:
    """Tell the alert of the bisection's change point where the bisection stands (and its culprit); the alert
    message is then updated, not re-sent as new. Returns the alert id, if there is one."""
    from master import alerts

    row = get(conn, bisection_id)
    if row["change_point_id"] is None:
        return None
    alert_id = store.alerts.alert_for_change_point(conn, row["change_point_id"])
    if alert_id is None:
        return None
    alerts.record_bisection(conn, alert_id, row["state"], row["culprit"])
    alerts.sync(conn, alert_settings)
    return alert_id
