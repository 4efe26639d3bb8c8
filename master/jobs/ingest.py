"""Check an uploaded job result against the job the master queued, and store it (off the reactor).

The worker's word is checked, not trusted: the result must be for this job, its sides must be the commits (and
the patch) the master asked for, in order, and it must follow the result schema (recipes/result.py; read as a
run's is, master/ingest.py read_result). A result that fails any check is kept in `<incoming>/rejected/` and the
job fails with the reason; nothing half-stored.

A job is measured once: its id is the idempotency key. A result (or failure) is stored only while the job has not
ended, in the same transaction that ends it, so a build Buildbot retries after the master was killed mid-ingest (or
any second build of the job) never replaces what the first stored; its file is kept in `rejected/`.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from master import store
from master.ingest import IngestRejected, machine_refusal, read_result
from master.settings import Settings
from master.store.jobs import Job
from recipes.result import validate_job


@dataclass(frozen=True)
class JobOutcome:
    state: str  # done | failed | queued (the job's state after this build)
    message: str


@dataclass(frozen=True)
class Stopped:
    """The build was stopped before it could end the job. `requeue`: by the master's shutdown (SIGTERM cancels the
    running build and Buildbot does not retry it), so the job is queued again with `reason` as its note; else by
    someone (the web UI's Stop button): the job fails with `reason`."""

    reason: str
    requeue: bool


def patch_id(patch: str) -> str:
    """What the worker names a patch by (recipes/sides.py Side.patch_id): its sha256, the first 16 hex."""
    return hashlib.sha256(patch.encode()).hexdigest()[:16]


def check(job: Job, doc: dict) -> str | None:
    """Why a validated job result is not this job's, or None."""
    if doc["job"] != job.id:
        return f"$.job: the result is for job {doc['job']}, this build ran job {job.id}"
    got = [(s["label"], s["sha"]) for s in doc["sides"]]
    want = [(s.label, s.sha) for s in job.sides]
    if got != want:
        return f"$.sides: the result measured {got}, the job asked for {want}"
    for side, s in zip(job.sides, doc["sides"]):
        expected = patch_id(job.patch) if side.patched and job.patch is not None else None
        if s.get("patch") != expected:
            return f"$.sides[{side.label}].patch: expected {expected}, got {s.get('patch')!r}"
    return None


def ingest_file(
    settings: Settings,
    path: Path,
    job_id: int,
    build_id: int | None,
    build_url: str,
    stopped: Stopped | None = None,
    worker: str | None = None,
) -> JobOutcome:
    """Store the job result at `path` (or the job's failure) and say what happened. A build that was `stopped`
    still stores a whole result it uploaded; without one, the job is queued again or fails as `stopped` says.
    `worker`: the Buildbot worker that uploaded it; the machine the result names must be bound to it
    (master/machinebinding.py, as for commit results). None: not a worker's upload (tools, tests): not checked."""
    conn = store.connect(settings.results_db)
    try:
        job = store.jobs.get(conn, job_id)
        if job is None:
            return JobOutcome("failed", f"no job {job_id} in the results database")
        if job.state in store.jobs.ENDED:
            return _ended_already(conn, job_id, path)

        def fail(reason: str, result: dict | None = None, machine: str | None = None) -> JobOutcome:
            with store.transaction(conn):
                if build_id is not None:
                    store.jobs.set_build(conn, job_id, build_id, build_url, time.time())
                ended = store.jobs.finish(
                    conn, job_id, result=result, error=reason, machine_id=machine, now=time.time()
                )
            return JobOutcome("failed", reason) if ended else _ended_already(conn, job_id, path)

        def interrupted(stopped: Stopped) -> JobOutcome:
            if not stopped.requeue:
                return fail(stopped.reason)
            with store.transaction(conn):
                store.jobs.requeue(conn, job_id, time.time(), note=stopped.reason)
            return JobOutcome("queued", stopped.reason)

        # A stopped build's file is not evidence against the job: the upload may be cut short, or be the previous
        # job's result (the step removing it on the worker was skipped): kept in rejected/, the stop decides.
        if not path.exists():
            if stopped is not None:
                return interrupted(stopped)
            return fail("the worker produced no job result (the build log says why); queue the job again")
        try:  # the run's reader (master/ingest.py): one schema, one set of limits and messages
            doc = read_result(path, validate_job, "malformed job result")
        except IngestRejected as e:
            _reject(path)
            return interrupted(stopped) if stopped else fail(str(e))
        problem = check(job, doc)
        if problem:
            _reject(path)
            return interrupted(stopped) if stopped else fail(f"not this job's result: {problem}")
        machine = doc["machine"]["id"]
        # a job's sides are measured on one machine, like a commit's run: the same binding rule
        refused = machine_refusal(conn, settings, doc, worker, by_worker=True) if worker is not None else None
        if refused is not None:
            _reject(path)
            with store.transaction(conn):
                store.machines.record_refusal(
                    conn, refused.machine_id, refused.worker, refused.bound_worker, refused.message, time.time()
                )
            return fail(f"result refused: {refused.message}")
        if doc["status"] != "ok":
            first = (doc.get("log_excerpt") or doc["status"]).strip().splitlines()[0][:500]
            path.unlink(missing_ok=True)
            return fail(f"{doc['status']}: {first}", doc, machine)
        with store.transaction(conn):
            if build_id is not None:
                store.jobs.set_build(conn, job_id, build_id, build_url, time.time())
            ended = store.jobs.finish(conn, job_id, result=doc, error=None, machine_id=machine, now=time.time())
            if ended and worker is not None:
                store.machines.bind(conn, machine, doc["machine"]["fingerprint"], worker, time.time())
        if not ended:
            return _ended_already(conn, job_id, path)
        path.unlink(missing_ok=True)
        return JobOutcome("done", f"job {job_id} done: {len(doc['sides'])} sides measured on {machine}")
    finally:
        conn.close()


def ended_message(job: Job) -> str:
    """What a build of a job that has ended already says: the job is not measured again, its result stays."""
    build = f", build {job.build_id}" if job.build_id is not None else ""
    return f"job {job.id} ended already ({job.state}{build}): not measured again; its stored result is kept"


def _ended_already(conn: sqlite3.Connection, job_id: int, path: Path) -> JobOutcome:
    """This build's result is not stored: the job ended (another build of it stored its result first)."""
    job = store.jobs.get(conn, job_id)
    if job is None:
        return JobOutcome("failed", f"no job {job_id} in the results database")
    if path.exists():
        _reject(path)
        kept = f"; this build's result file is kept in {path.parent / 'rejected'}"
    else:
        kept = ""
    return JobOutcome(job.state, ended_message(job) + kept)


def _reject(path: Path) -> None:
    rejected = path.parent / "rejected"
    rejected.mkdir(parents=True, exist_ok=True)
    os.replace(path, rejected / path.name)
