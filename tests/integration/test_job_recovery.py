"""Jobs through crashes and cancels, with a real master and worker (issue #26, items 5 and 6).

- a master killed while a job's result is being ingested: Buildbot retries the build, which must not measure the
  job again nor replace the result the first build stored (a job's idempotency key is its id);
- a job left `running` with no build (its build request cancelled, or the master stopped between taking the job and
  submitting its build) is found by the job service and failed or queued again, with the reason shown;
- a master stopped with SIGTERM while a job is measured (Buildbot cancels the build and does not retry it) queues
  the job again: a restart never fails a job (found by the chaos suite's job faults).
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import requests

from master import store
from tests.harness import BIN, Farm, GitRepo, make_repo, wait_until

pytestmark = pytest.mark.integration
JOB_BUILDER = "jobs-fixture@local"
SKIPPED = 3  # buildbot.process.results


def perffarm(farm: Farm, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "perffarm"), *args], env=farm.env, capture_output=True, text=True, timeout=120)


def tagged_repo(path, sleep_us: int = 0) -> GitRepo:
    repo = make_repo(path, first_value=1000)
    if sleep_us:
        repo.bench_commit("release 1", 1000, sleep_us=sleep_us)
    repo.tag("REL_1_0")
    repo.bench_commit("release 2", 900, sleep_us=sleep_us)
    repo.tag("REL_2_0")
    return repo


def queue_release_job(farm: Farm) -> int:
    r = perffarm(farm, "releases", "--tags", "REL_*")
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[1])


def job_row(farm: Farm, job_id: int) -> tuple:
    return farm.query("SELECT state, build_id, finished_at, result, error FROM jobs WHERE id = ?", (job_id,))[0]


def job_builds(farm: Farm, complete: bool | None = None) -> list[dict]:
    builderid = farm.api(f"builders/{JOB_BUILDER}")["builders"][0]["builderid"]
    query = "" if complete is None else f"?complete={'true' if complete else 'false'}"
    return (farm.api(f"builders/{builderid}/builds{query}") or {"builds": []})["builds"]


def step_results(farm: Farm, buildid: int) -> dict[str, int | None]:
    return {s["name"]: s["results"] for s in (farm.api(f"builds/{buildid}/steps") or {"steps": []})["steps"]}


@pytest.mark.timeout(900)
def test_a_master_killed_while_a_job_is_ingested_does_not_measure_it_again(tmp_path):
    repo = tagged_repo(tmp_path / "repo")
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_RECIPES_OPTIONS": "fixture:samples=3"})
    farm.start()
    try:
        hit = None
        for _attempt in range(5):
            job_id = queue_release_job(farm)
            # SIGKILL the moment the job is stored as done: its build is still in ingest-job (the site's job pages
            # come after the store), so Buildbot retries the build request after the restart
            wait_until(
                lambda j=job_id: job_row(farm, j)[0] in ("done", "failed"),
                300,
                "the job to end",
                interval=0.01,
            )
            farm.stop_master(signal.SIGKILL)
            stored = job_row(farm, job_id)
            assert stored[0] == "done", stored
            if not farm.build_complete_in_db(stored[1]):
                hit = (job_id, stored)
            farm.start_master()
            farm.wait_worker_connected()
            if hit:
                break
            wait_until(lambda: not job_builds(farm, complete=False), 120, "the job build to end")
        assert hit, "never managed to kill the master between the job's store and the end of its build"
        job_id, stored = hit
        retried = wait_until(
            lambda: [b for b in job_builds(farm, complete=True) if b["buildid"] > stored[1]],
            300,
            "the retried build of the job to finish",
        )
        assert job_row(farm, job_id) == stored, "the retried build replaced the job's stored result"
        steps = step_results(farm, retried[0]["buildid"])
        assert steps["job-bench"] == SKIPPED and steps["job-build"] == SKIPPED, steps
        log = farm.step_log(retried[0]["buildid"], "check-job", "job")
        assert f"job {job_id} ended already" in log and "not measured again" in log, log
        assert (farm.settings.site_dir / "jobs" / f"{job_id}.html").exists()  # the retried build published it
    finally:
        farm.stop()


def cancel_request(farm: Farm, brid: int) -> None:
    """What the Cancel button of Buildbot's web UI does to a waiting build request."""
    r = requests.post(
        f"http://127.0.0.1:{farm.settings.web_port}/api/v2/buildrequests/{brid}",
        json={"jsonrpc": "2.0", "method": "cancel", "id": 1, "params": {"reason": "not wanted"}},
        timeout=10,
    )
    assert r.status_code == 200 and "error" not in r.json(), r.text


@pytest.mark.timeout(900)
def test_a_job_left_running_with_no_build_is_failed_or_queued_again_with_the_reason(tmp_path):
    repo = tagged_repo(tmp_path / "repo")
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_RECIPES_OPTIONS": "fixture:samples=3"})
    farm.start()
    try:
        # 1. its build request is cancelled before a build started (the worker is away, so the request waits)
        farm.stop_worker()
        cancelled = queue_release_job(farm)
        pending = wait_until(
            lambda: job_row(farm, cancelled)[0] == "running" and farm.pending_requests(), 60, "the job's build request"
        )
        cancel_request(farm, pending[0]["buildrequestid"])
        farm.start_worker()
        state, *_, error = wait_until(
            lambda: (row := job_row(farm, cancelled))[0] != "running" and row, 120, "the cancelled job to end"
        )
        assert state == "failed" and "was cancelled before a build started" in error, error
        assert "perffarm releases" in error  # what to do
        listed = perffarm(farm, "jobs")
        assert f"job {cancelled:>4}  releases failed" in listed.stdout and "was cancelled" in listed.stdout
        shown = perffarm(farm, "jobs", "--status", str(cancelled))
        assert shown.returncode == 1 and "failed: " in shown.stdout and "was cancelled" in shown.stdout, shown.stdout
        page = wait_until(
            lambda: (p := farm.settings.site_dir / "jobs" / f"{cancelled}.html").exists() and p.read_text(),
            60,
            "the cancelled job's page",
        )
        assert "was cancelled before a build started" in page

        # 2. the master stopped between marking a job running and submitting its build: the state it leaves
        farm.stop_master()
        lost = queue_release_job(farm)
        conn = store.connect(farm.settings.results_db)
        try:
            with store.transaction(conn):
                assert store.jobs.mark_running(conn, lost, time.time())
        finally:
            conn.close()
        farm.start_master()
        farm.wait_worker_connected()
        state, *_, error = wait_until(
            lambda: (row := job_row(farm, lost))[0] in ("done", "failed") and row, 300, "the lost job to end"
        )
        assert (state, error) == ("done", None)
        shown = perffarm(farm, "jobs", "--status", str(lost))
        assert shown.returncode == 0 and "queued again" in shown.stdout and "never submitted" in shown.stdout, (
            shown.stdout
        )
        assert "B / A" in shown.stdout
    finally:
        farm.stop()


@pytest.mark.timeout(900)
def test_a_master_stopped_while_a_job_is_measured_queues_it_again(tmp_path):
    repo = tagged_repo(tmp_path / "repo", sleep_us=300_000)
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_RECIPES_OPTIONS": "fixture:samples=4"})
    farm.start()
    try:
        job_id = queue_release_job(farm)
        wait_until(lambda: farm.step_running("job-bench"), 300, "the job's bench step", interval=0.1)
        farm.stop_master(signal.SIGTERM)
        # queued again (the job service may even have taken it again on the way down): never failed
        assert job_row(farm, job_id)[0] in ("queued", "running"), job_row(farm, job_id)
        farm.start_master()
        farm.wait_worker_connected()
        state, *_, error = wait_until(
            lambda: (row := job_row(farm, job_id))[0] in ("done", "failed") and row, 300, "the job to end"
        )
        assert (state, error) == ("done", None)
        shown = perffarm(farm, "jobs", "--status", str(job_id))
        assert "note: queued again by the farm: its build 1 was cancelled by the master's shutdown" in shown.stdout, (
            shown.stdout
        )
    finally:
        farm.stop()
