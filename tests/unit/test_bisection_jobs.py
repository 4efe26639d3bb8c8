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
