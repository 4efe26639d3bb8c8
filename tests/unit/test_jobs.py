"""Jobs on the master (master/jobs): creating one from tags, and checking the worker's result against the job
before anything is stored. Real SQLite files."""

from __future__ import annotations

import copy
import json

import pytest

from master import store
from master.jobs import core, ingest
from master.settings import load_settings
from master.store.jobs import JobSide

A, B, C = "a" * 40, "b" * 40, "c" * 40
TAGS = {"REL_13_16": A, "REL_18_6": C, "REL_15_18": B, "REL_9_6_24": "d" * 40, "v1": "e" * 40}
BUILDERS = ["jobs-pg-quick@local"]


@pytest.fixture
def settings(tmp_path):
    return load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data")})


@pytest.fixture
def conn(settings):
    settings.data_dir.mkdir(parents=True)
    c = store.connect(settings.results_db)
    yield c
    c.close()


def test_tags_are_taken_in_version_order_not_name_order(conn):
    job_id = core.create_releases(conn, TAGS, ["REL_1*", "REL_9*"], BUILDERS[0], BUILDERS)
    job = core.get(conn, job_id)
    assert [(s.label, s.revision) for s in job.sides] == [
        ("A", "REL_9_6_24"),
        ("B", "REL_13_16"),
        ("C", "REL_15_18"),
        ("D", "REL_18_6"),
    ]
    assert job.state == "queued" and job.branch == "REL_9_6_24" and job.kind == "releases"


@pytest.mark.parametrize(
    "patterns, options, builder, says",
    [
        (["REL_13_*"], [], BUILDERS[0], "matched 1 tag"),
        (["nothing*"], [], BUILDERS[0], "matched 0 tag"),
        (["*"], [], BUILDERS[0], None),  # 5 tags: fine
        (["REL_*"], ["samples"], BUILDERS[0], "not KEY=VALUE"),
        (["REL_*"], ["reference=" + A], BUILDERS[0], "already paired"),
        (["REL_*"], [], "jobs-pg-full@elsewhere", "no builder"),
    ],
)
def test_a_job_that_cannot_run_is_refused_and_nothing_is_queued(conn, patterns, options, builder, says):
    if says is None:
        assert core.create_releases(conn, TAGS, patterns, builder, BUILDERS, options) == 1
        return
    with pytest.raises(core.JobError, match=says):
        core.create_releases(conn, TAGS, patterns, builder, BUILDERS, options)
    assert store.jobs.newest_first(conn) == []


def test_more_than_eight_tags_are_refused(conn):
    many = {f"REL_{i}_0": f"{i:040x}" for i in range(1, 10)}
    with pytest.raises(core.JobError, match="at most 8"):
        core.create_releases(conn, many, ["REL_*"], BUILDERS[0], BUILDERS)


def result_for(job, patch_id=None):
    side = lambda label, sha, value: {  # noqa: E731
        "label": label,
        "sha": sha,
        "patch": patch_id if label == job.sides[-1].label and job.sides[-1].patched else None,
        "workloads": [
            {
                "name": "ro",
                "flags": [],
                "metrics": [
                    {
                        "name": "tps",
                        "unit": "tx/s",
                        "direction": "higher",
                        "samples": [value, value * 1.01, value * 0.99],
                    }
                ],
            }
        ],
    }
    return {
        "schema": "perffarm-job-result",
        "schema_version": 1,
        "job": job.id,
        "recipe": {"name": "pg-quick", "version": 1, "config_hash": "abc", "options": {}},
        "machine": {
            "id": "m1",
            "fingerprint": {"cpu_model": "x", "kernel": "k", "compiler": "c", "cores": 2, "memory_bytes": 1},
        },
        "host_checks": {"noisy": False},
        "status": "ok",
        "log_excerpt": "",
        "sides": [side(s.label, s.sha, 1000.0 * (1 + 0.1 * i)) for i, s in enumerate(job.sides)],
        "started_at": "2026-11-25T00:00:00+00:00",
        "finished_at": "2026-11-25T00:01:00+00:00",
    }


def try_job(conn, patch="--- a/x\n+++ b/x\n"):
    with store.transaction(conn):
        return store.jobs.insert(
            conn,
            kind="try",
            builder=BUILDERS[0],
            branch="master",
            sides=(JobSide("A", "master", A), JobSide("B", "master", A, patched=True)),
            options=(),
            patch=patch,
            requested_by="test",
            now=1.0,
        )


def ingest_doc(settings, tmp_path, job_id, doc):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    return ingest.ingest_file(settings, path, job_id, 12, "http://x/#/builders/1/builds/12")


def test_a_result_that_is_this_jobs_is_stored_and_compared_to_side_a(conn, settings, tmp_path):
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    outcome = ingest_doc(settings, tmp_path, job_id, result_for(core.get(conn, job_id)))
    assert outcome.state == "done", outcome.message
    job = core.get(conn, job_id)
    assert job.state == "done" and job.machine_id == "m1" and job.build_id == 12
    ratios = [round(sc.comparisons[0].estimate.ratio, 6) for sc in core.comparisons(job)]
    assert ratios == [1.1, 1.2]
    assert not (tmp_path / "job.json").exists()


@pytest.mark.parametrize(
    "tamper, says",
    [
        (lambda d: d.update(job=d["job"] + 1), "the result is for job"),
        (lambda d: d["sides"][1].update(sha="f" * 40), "the result measured"),
        (lambda d: d["sides"].pop(), "expected a list of 2 to 8 sides"),
        (lambda d: d["sides"][1].update(patch=None), "patch: expected"),
        (lambda d: d["sides"][1].update(patch="0" * 16), "patch: expected"),
        (lambda d: d.update(schema="perffarm-result"), "not a job's: is this the job's file"),
        (lambda d: d["sides"][0]["workloads"][0]["metrics"][0].update(samples=[float("inf")]), "finite"),
    ],
)
def test_the_workers_word_is_checked_a_result_for_another_job_or_side_is_rejected(
    conn, settings, tmp_path, tamper, says
):
    job_id = try_job(conn)
    job = core.get(conn, job_id)
    doc = result_for(job, ingest.patch_id(job.patch))
    assert ingest.check(job, doc) is None  # untampered, it would be stored
    bad = copy.deepcopy(doc)
    tamper(bad)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(bad).replace("Infinity", "1e999"))
    outcome = ingest.ingest_file(settings, path, job_id, 12, "u")
    assert outcome.state == "failed" and says in outcome.message, outcome.message
    job = core.get(conn, job_id)
    assert job.state == "failed" and job.result is None and says in (job.error or "")
    assert (tmp_path / "rejected" / "job.json").exists()


@pytest.mark.parametrize(
    "content, says",
    [
        # read by the run's reader (master/ingest.py read_result): before, a job's nested file crashed the step
        (b"[" * 100_000, "$: result is nested too deeply to read"),
        (b'{"job": 1' + b"0" * 5000 + b"}", "result is not valid JSON for the schema"),
        (b'{"schema": "\xff"}', "result is not UTF-8 text"),
        (b"{", "result is not valid JSON (Expecting property name"),
    ],
)
def test_a_job_file_json_cannot_read_fails_the_job_with_what_is_wrong(conn, settings, tmp_path, content, says):
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    path = tmp_path / "job.json"
    path.write_bytes(content)
    outcome = ingest.ingest_file(settings, path, job_id, 12, "u")
    assert outcome.state == "failed" and outcome.message.startswith(says), outcome.message
    assert core.get(conn, job_id).state == "failed" and (tmp_path / "rejected" / "job.json").exists()


def test_a_failed_build_fails_the_job_with_the_first_line_of_its_log(conn, settings, tmp_path):
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    doc = result_for(core.get(conn, job_id))
    doc.update(status="build-failed", log_excerpt="side B: the patch does not apply to abc\nmore")
    for s in doc["sides"]:
        s["workloads"] = []
    outcome = ingest_doc(settings, tmp_path, job_id, doc)
    assert outcome.state == "failed" and outcome.message == "build-failed: side B: the patch does not apply to abc"


def test_no_result_file_fails_the_job_and_says_what_to_do(conn, settings, tmp_path):
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    outcome = ingest.ingest_file(settings, tmp_path / "missing.json", job_id, None, "")
    assert outcome.state == "failed" and "queue the job again" in outcome.message


def test_a_job_is_stored_once_a_second_result_never_replaces_the_first(conn, settings, tmp_path):
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    first = ingest_doc(settings, tmp_path, job_id, result_for(core.get(conn, job_id)))
    assert first.state == "done", first.message
    stored = core.get(conn, job_id)
    # the same job measured again (a build Buildbot retried after the master was killed mid-ingest): other numbers,
    # another build; and a failing one
    again = result_for(stored)
    again["sides"][1]["workloads"][0]["metrics"][0]["samples"] = [1.0, 1.0, 1.0]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(again))
    second = ingest.ingest_file(settings, path, job_id, 13, "http://x/#/builders/1/builds/13")
    assert second.state == "done" and f"job {job_id} ended already (done, build 12)" in second.message
    assert (tmp_path / "rejected" / "job.json").exists()  # kept, not stored
    failing = ingest.ingest_file(settings, tmp_path / "missing.json", job_id, 14, "u")
    assert failing.state == "done" and "not measured again" in failing.message
    assert core.get(conn, job_id) == stored


def test_a_running_job_is_acted_on_only_after_two_passes_without_a_request_and_the_grace():
    # pass 1: job 1 has a request, job 2 has none (first seen now), job 3 was seen without one 10 s ago
    act, seen = core.stalled_jobs([1, 2, 3], alive={1}, seen={3: 90.0}, now=100.0, grace=5)
    assert act == [3] and seen == {2: 100.0, 3: 90.0}
    # pass 2, 2 s later: job 2 is still inside the grace; a job whose request appeared meanwhile is forgotten
    act, seen = core.stalled_jobs([1, 2], alive={1}, seen=seen, now=102.0, grace=5)
    assert act == [] and seen == {2: 100.0}
    act, seen = core.stalled_jobs([1, 2], alive={1, 2}, seen=seen, now=106.0, grace=5)
    assert act == [] and seen == {}


def test_a_cancelled_request_fails_the_job_a_lost_build_queues_it_again_up_to_max_attempts(conn):
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    with store.transaction(conn):
        assert store.jobs.mark_running(conn, job_id, 2.0)
        store.jobs.set_request(conn, job_id, 7)
    job = core.get(conn, job_id)
    assert (job.attempts, job.build_request) == (1, 7)
    cancelled = core.why_stalled(job, 7, [], max_attempts=3)
    assert not cancelled.requeue and "build request 7 was cancelled before a build started" in cancelled.reason
    assert "perffarm releases" in cancelled.reason
    never = core.why_stalled(job, None, [], max_attempts=3)
    assert never.requeue and "never submitted" in never.reason
    ended = core.why_stalled(job, 7, [(4, "cancelled")], max_attempts=3)
    assert ended.requeue and "its build 4 ended (cancelled)" in ended.reason
    with store.transaction(conn):
        assert store.jobs.requeue(conn, job_id, 3.0, note=never.reason)
        for _ in range(3):
            assert store.jobs.mark_running(conn, job_id, 4.0)
            assert store.jobs.requeue(conn, job_id, 5.0)
        assert store.jobs.mark_running(conn, job_id, 6.0)
    job = core.get(conn, job_id)
    assert (job.state, job.attempts, job.build_request, job.note) == ("running", 5, None, never.reason)
    gave_up = core.why_stalled(job, None, [], max_attempts=3)
    assert not gave_up.requeue and "given up after 5 builds" in gave_up.reason


def test_a_build_stopped_without_a_result_queues_the_job_again_on_shutdown_and_fails_it_on_a_stop(
    conn, settings, tmp_path
):
    shutdown = ingest.Stopped("queued again by the farm: its build 3 was cancelled by the master's shutdown", True)
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    with store.transaction(conn):
        store.jobs.mark_running(conn, job_id, 2.0)
    outcome = ingest.ingest_file(settings, tmp_path / "missing.json", job_id, 3, "u", shutdown)
    assert outcome.state == "queued"
    job = core.get(conn, job_id)
    assert (job.state, job.error, job.note) == ("queued", None, shutdown.reason)
    # an upload the shutdown cut short: queued again too
    with store.transaction(conn):
        store.jobs.mark_running(conn, job_id, 4.0)
    (tmp_path / "cut.json").write_text('{"schema": "perffarm-job-re')
    assert ingest.ingest_file(settings, tmp_path / "cut.json", job_id, 4, "u", shutdown).state == "queued"
    # a whole result uploaded before the shutdown is stored
    with store.transaction(conn):
        store.jobs.mark_running(conn, job_id, 5.0)
    assert ingest_doc_stopped(settings, tmp_path, job_id, result_for(job), shutdown).state == "done"
    # someone's Stop button: the job fails with the reason
    other = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    with store.transaction(conn):
        store.jobs.mark_running(conn, other, 2.0)
    stop = ingest.Stopped("its build 5 was stopped before the job ended (not wanted)", False)
    outcome = ingest.ingest_file(settings, tmp_path / "missing.json", other, 5, "u", stop)
    assert outcome.state == "failed" and core.get(conn, other).error == stop.reason


def ingest_doc_stopped(settings, tmp_path, job_id, doc, stopped):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    return ingest.ingest_file(settings, path, job_id, 12, "u", stopped)


def test_a_stopped_builds_stale_file_of_another_job_never_fails_the_job(conn, settings, tmp_path):
    # the master's shutdown stopped the build before the previous job's job.json was removed on the worker
    previous = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
    with store.transaction(conn):
        store.jobs.mark_running(conn, job_id, 2.0)
    stale = result_for(core.get(conn, previous))
    shutdown = ingest.Stopped("queued again by the farm: its build 9 was cancelled by the master's shutdown", True)
    assert ingest_doc_stopped(settings, tmp_path, job_id, stale, shutdown).state == "queued"
    assert core.get(conn, job_id).state == "queued" and (tmp_path / "rejected" / "job.json").exists()


def test_a_job_result_naming_another_workers_machine_is_refused_and_counted(conn, settings, tmp_path):
    """Issue #26 item 3 for jobs: a job's sides land in the machine's job pages, so the machine a job result names
    must be bound to the worker that uploaded it, as for a commit's result."""
    from tests.unit.test_result_schema import FINGERPRINT, MACHINE_ID

    def upload(worker, fingerprint=FINGERPRINT, machine_id=MACHINE_ID):
        job_id = core.create_releases(conn, TAGS, ["REL_1*"], BUILDERS[0], BUILDERS)
        doc = result_for(core.get(conn, job_id))
        doc["machine"] = {"id": machine_id, "fingerprint": dict(fingerprint)}
        path = tmp_path / "job.json"
        path.write_text(json.dumps(doc))
        return job_id, ingest.ingest_file(settings, path, job_id, 12, "u", None, worker)

    first, outcome = upload("local")
    assert outcome.state == "done", outcome.message
    assert store.machines.binding(conn, MACHINE_ID).worker == "local"  # the first upload binds the machine

    forged, outcome = upload("w2")  # another host claims local's machine
    assert outcome.state == "failed"
    assert "bound to worker 'local'" in outcome.message and "'w2'" in outcome.message, outcome.message
    job = core.get(conn, forged)
    assert job.state == "failed" and job.result is None and job.machine_id is None
    assert (tmp_path / "rejected" / "job.json").exists()

    other_cpu = dict(FINGERPRINT, cpu_model="Forged CPU 9000")  # local's id, another machine's fingerprint
    _, outcome = upload("local", other_cpu)
    assert outcome.state == "failed" and "fingerprint" in outcome.message, outcome.message
    assert [(r.worker, r.bound_worker, r.attempts) for r in store.machines.refusals(conn)] == [
        ("local", None, 1),
        ("w2", "local", 1),
    ]
    assert core.get(conn, first).state == "done"  # what was stored stays
