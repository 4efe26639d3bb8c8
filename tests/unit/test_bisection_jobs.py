"""A bisection's culprit confirmation as a job in the results database (issue #30 item 1): schema 26 keeps every
job and cfbot head while `jobs.kind` learns `bisect`, and the bisection reads its jobs back. Real SQLite files."""

from __future__ import annotations

import json

from master import store
from master.store.jobs import JobSide
from tests.unit.test_store_ingest import db_at_schema

SIDES = json.dumps([{"label": "A", "revision": "main", "sha": "a" * 40, "patched": False}])


def test_schema_26_keeps_every_job_and_cfbot_head_and_takes_bisect_jobs(tmp_path):
    path = tmp_path / "r.sqlite"
    old = db_at_schema(path, 25)
    old.execute(
        "INSERT INTO jobs (id, kind, state, builder, branch, sides, requested_by, created_at, updated_at, attempts, "
        "note) VALUES (7, 'try', 'done', 'jobs-fixture@local', 'main', ?, 'cfbot main/x', 1, 2, 1, 'again')",
        (SIDES,),
    )
    old.execute("INSERT INTO cfbot_heads VALUES (7, 'cf/1', ?, 'subject', 'https://example.org/m')", ("b" * 40,))
    old.commit()
    old.close()
    conn = store.connect(path)  # migrates
    job = store.jobs.get(conn, 7)
    assert job is not None and (job.kind, job.state, job.attempts, job.note) == ("try", "done", 1, "again")
    assert [tuple(r) for r in conn.execute("SELECT job_id, branch, subject FROM cfbot_heads")] == [
        (7, "cf/1", "subject")
    ]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    with store.transaction(conn):
        conn.execute(
            "INSERT INTO bisections (id, builder, machine_id, recipe, config_hash, workload, metric, direction, "
            "branch, good, bad, commits, state, requested_by, created_at, updated_at) VALUES (3, 'fixture@local', "
            "'m', 'fixture', 'h', 'loop', 'throughput', 'higher', 'main', 'a', 'b', '[]', 'running', 'cli', 1, 1)"
        )
        job_id = store.jobs.insert(
            conn,
            kind="bisect",
            builder="jobs-fixture@local",
            branch="main",
            sides=(JobSide("A", "a" * 40, "a" * 40), JobSide("B", "b" * 40, "b" * 40)),
            options=("workloads=loop",),
            patch=None,
            requested_by="bisection 3",
            now=3.0,
        )
        store.bisections.link_job(conn, 3, job_id)
    assert store.bisections.jobs_of(conn, 3) == [job_id] and store.jobs.get(conn, job_id).kind == "bisect"
    # the cascade still holds: a cfbot head goes with its job
    with store.transaction(conn):
        conn.execute("DELETE FROM jobs WHERE id = 7")
    assert conn.execute("SELECT COUNT(*) FROM cfbot_heads").fetchone()[0] == 0


def _job_result(machine: str, a: list[float], b: list[float], status: str = "ok") -> dict:
    def side(label: str, sha: str, samples: list[float]) -> dict:
        metrics = [{"name": "throughput", "unit": "ops/s", "direction": "higher", "samples": samples}]
        return {"label": label, "sha": sha, "workloads": [{"name": "loop", "config_hash": "h", "metrics": metrics}]}

    return {
        "status": status,
        "machine": {"id": machine},
        "recipe": {"name": "fixture", "config_hash": "h"},
        "sides": [side("A", "a" * 40, a), side("B", "b" * 40, b)],
    }


def test_the_bisection_reads_its_ended_jobs_as_rounds_failures_or_jobs_to_queue_again(tmp_path):
    from master.bisection import state
    from master.bisection.core import PairRun

    conn = store.connect(tmp_path / "r.sqlite")
    parent, culprit = "a" * 40, "b" * 40
    with store.transaction(conn):
        conn.execute(
            "INSERT INTO bisections (id, builder, machine_id, recipe, config_hash, workload, metric, direction, "
            "branch, good, bad, commits, state, requested_by, created_at, updated_at) VALUES (3, 'fixture@local', "
            "'m', 'fixture', 'h', 'loop', 'throughput', 'higher', 'main', ?, ?, ?, 'running', 'cli', 1, 1)",
            (parent, culprit, json.dumps([parent, culprit])),
        )

    def job(state_: str, result: dict | None = None, error: str | None = None) -> None:
        with store.transaction(conn):
            job_id = store.jobs.insert(
                conn,
                kind="bisect",
                builder="jobs-fixture@local",
                branch="main",
                sides=(JobSide("A", parent, parent), JobSide("B", culprit, culprit)),
                options=("workloads=loop",),
                patch=None,
                requested_by="bisection 3",
                now=1.0,
            )
            store.bisections.link_job(conn, 3, job_id)
            if state_ != "queued":
                conn.execute("UPDATE jobs SET state = 'running' WHERE id = ?", (job_id,))
                store.jobs.finish(conn, job_id, result=result, error=error, machine_id="m", now=2.0)

    b = store.bisections.get(conn, 3)
    assert b is not None
    job("done", _job_result("m", [1000.0, 1001.0], [950.0, 951.0]))
    job("done", _job_result("elsewhere", [1.0, 1.0], [1.0, 1.0]))  # another machine: measured nothing here
    job("failed", None, "its build request 9 was cancelled before a build started")
    runs, waiting = state.pair_runs(conn, b)
    assert runs == (PairRun(parent, culprit, (1000.0, 1001.0), (950.0, 951.0)),) and waiting is None
    job("failed", None, "its build 4 ended (exception) without storing the job's result")  # the third lost one
    runs, _ = state.pair_runs(conn, b)
    assert runs[-1].failed is not None and runs[-1].failed.startswith("3 confirmation jobs measured nothing")
    job("failed", _job_result("m", [], [], status="build-failed"), "build-failed: side B: error")
    job("queued")
    runs, waiting = state.pair_runs(conn, b)
    assert runs[-1] == PairRun(parent, culprit, failed="build-failed: side B: error")
    assert waiting is not None and waiting.state == "queued"
