"""Hostile and clumsy inputs through a real master and worker (issue #12, items 1, 2 and 6).

- a "branch" that is an option to `git fetch` (from the force form, and from a ref in the watched repository)
  never runs anything on the worker;
- a build whose checkout failed never stores the previous build's result under its commit;
- a master killed after a result is stored but before its build finished does not store it twice;
- each web form (force, try, bisect) queues builds only on its own builders, whatever builderid the REST call
  names (issue #26 item 9).
"""

from __future__ import annotations

import signal
import sqlite3
import time

import pytest
import requests

from tests.harness import Farm, make_repo, wait_until

pytestmark = pytest.mark.integration
BUILDER = "fixture@local"


def _ops(run: dict) -> list[float]:
    return run["measurements"][("loop", "throughput")]


def _complete_builds(farm: Farm) -> list[dict]:
    return (farm.api("builds?complete=true") or {"builds": []})["builds"]


def _idle(farm: Farm) -> bool:
    pending = (farm.api("buildrequests?complete=false") or {"buildrequests": [1]})["buildrequests"]
    return not pending


def _hostile(marker) -> str:
    # a valid ref name (git check-ref-format accepts it) that git fetch reads as --upload-pack: ${IFS} is the
    # space the ref name cannot hold
    return f"--upload-pack=touch${{IFS}}{marker};git-upload-pack"


@pytest.fixture
def farm(tmp_path):
    repo = make_repo(tmp_path / "repo", first_value=1111)
    # every branch is watched, so a hostile branch pushed to the repository reaches the scheduler
    f = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_REPOSITORY_BRANCHES": ".*"})
    f.repo = repo
    f.start()
    try:
        yield f
    finally:
        f.stop()


def test_a_branch_that_is_a_git_option_runs_nothing_on_the_worker(farm, tmp_path):
    repo = farm.repo
    first = repo.bench_commit("a normal commit", 2222)
    farm.wait_for_runs(1)  # the worker has a clone now: the next checkout is a `git fetch <repo> <branch>`

    # 1. the force form (the REST call the web UI makes): refused before any build exists
    marker = tmp_path / "PWNED-force"
    builds_before = len(farm.builds())
    for branch, revision in (
        (f"--upload-pack=touch {marker}; git-upload-pack", ""),
        ("master", f"--output={marker}"),
        (_hostile(marker), first),
    ):
        with pytest.raises(RuntimeError, match="(?i)invalid|branch|revision"):
            farm.force(BUILDER, revision=revision, branch=branch)
    time.sleep(3)
    assert len(farm.builds()) == builds_before, "a refused force must not create a build"

    # 2. refs of the same shape in the repository, even under a filter that watches every branch: never
    # watched (so never fetched by the poller, never built), and they do not stop the poller for the others —
    # including a broken loose ref git itself would not create (one such ref used to fail every poll's fetch)
    marker2 = tmp_path / "PWNED-poll"
    hostile = _hostile(marker2)
    repo.git("check-ref-format", f"refs/heads/{hostile}")  # git itself accepts the name
    repo.git("update-ref", f"refs/heads/{hostile}", first)
    repo.git("update-ref", "refs/tags/-x", first)
    broken = repo.path / ".git" / "refs" / "heads" / f"--upload-pack=touch {marker2};x"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text(first + "\n")
    time.sleep(4 * farm.settings.poll_interval)
    assert not marker.exists() and not marker2.exists(), "a branch name ran a command on the worker"
    assert len(farm.builds()) == builds_before, "a hostile ref was built"
    assert [r for r in farm.runs() if r["ref"].startswith("-")] == []

    # the farm carries on with the next ordinary commit
    later = repo.bench_commit("after the hostile ref", 3333)
    runs = farm.wait_for_runs(2)
    assert [(r["sha"], _ops(r)[0]) for r in runs] == [(first, 2222.0), (later, 3333.0)]


def test_a_failed_checkout_never_stores_the_previous_result_under_its_commit(farm):
    repo = farm.repo
    first = repo.bench_commit("measured normally", 2222)
    farm.wait_for_runs(1)

    # a forced build of a revision the repository does not have: refused on the master, nothing stored
    missing = "0" * 40
    farm.force(BUILDER, revision=missing, branch="master")
    build = wait_until(
        lambda: next((b for b in _complete_builds(farm) if b["number"] > 1), None),
        90,
        "the forced build of a missing revision",
    )
    assert build["results"] == 2
    assert "is not a commit of the watched repository" in farm.step_log(build["buildid"], "check-source", "check")

    # the worker's clone breaks (HEAD is garbage, so every git command in it fails): the next checkout fails
    clone = farm.settings.worker_dir("local") / "fixture_local" / "source" / ".git"  # builder dir: sanitised
    assert clone.is_dir()
    (clone / "HEAD").write_text("garbage\n")
    second = repo.bench_commit("measured after the clone broke", 4444)
    runs = wait_until(
        lambda: [r for r in farm.runs() if r["sha"] == second], 240, "the commit after the broken clone to be measured"
    )
    wait_until(lambda: _idle(farm), 60, "the queue to drain")
    time.sleep(3 * farm.settings.reconcile_interval)
    runs = farm.runs()
    assert [(r["sha"], _ops(r)[0]) for r in runs] == [(first, 2222.0), (second, 4444.0)], (
        "a result was stored under another commit"
    )
    assert farm.query("SELECT sha, revision FROM runs ORDER BY id") == [(first, first), (second, second)]
    # the failed checkout's build left no result behind it, and its stale file was never ingested
    failed = [b for b in _complete_builds(farm) if b["results"] == 2 and b["number"] > 2]
    assert failed, "the broken clone should have failed one checkout"
    assert "nothing stored" in farm.step_log(failed[0]["buildid"], "ingest", "ingest")


def _build_complete_in_db(farm: Farm, buildid: int) -> bool:
    db = farm.settings.master_dir / "state.sqlite"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute("SELECT complete_at FROM builds WHERE id = ?", (buildid,)).fetchone()
    return bool(row and row[0])


def test_a_master_killed_after_storing_a_result_does_not_store_it_twice(farm):
    repo = farm.repo
    hit = None
    for attempt in range(6):
        sha = repo.bench_commit(f"killed after store {attempt}", 5000 + attempt)
        # SIGKILL the moment the run is in the database: the build is still in its ingest step (detection,
        # alerts and the site come after the store), so Buildbot retries the request after the restart
        row = wait_until(
            lambda sha=sha: farm.query("SELECT build_id FROM runs WHERE sha = ?", (sha,)),
            120,
            "the run to be stored",
            interval=0.02,
        )
        farm.stop_master(signal.SIGKILL)
        if not _build_complete_in_db(farm, row[0][0]):
            hit = sha
        farm.start_master()
        farm.wait_worker_connected()
        if hit:
            break
    assert hit, "never managed to kill the master between the store and the end of the build"
    wait_until(
        lambda: _idle(farm) and len([b for b in _complete_builds(farm)]) >= 2, 180, "the retried build to finish"
    )
    time.sleep(3 * farm.settings.reconcile_interval)
    runs = [r for r in farm.runs() if r["sha"] == hit]
    assert len(runs) == 1, f"the commit was stored {len(runs)} times"
    retried = [
        b
        for b in _complete_builds(farm)
        if b["buildid"] != runs[0]["build_id"] and "stored already" in farm.step_log(b["buildid"], "ingest", "ingest")
    ]
    assert retried, "the retried build should have found its result stored"


def test_each_form_queues_builds_only_on_its_own_builders(tmp_path):
    repo = make_repo(tmp_path / "repo", first_value=1111)
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_MASTER_WEB_USERS": "alice"})  # the try form too
    secret = farm.settings.secrets_dir / "web-user-alice"
    secret.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret.write_text("correct horse\n")
    secret.chmod(0o600)
    farm.start()
    try:
        base = f"http://127.0.0.1:{farm.settings.web_port}"
        alice = requests.Session()
        assert alice.get(f"{base}/auth/login", auth=("alice", "correct horse"), timeout=10).status_code == 200
        head = repo.head()
        commit = {"branch": "master", "revision": head, "reason": "x", "perffarm_options": "", "project": "perffarm"}
        patch = "--- a/perffarm_bench.c\n+++ b/perffarm_bench.c\n@@ -1 +1 @@\n-x\n+y\n"
        try_form = {"base": "master", "patch": patch, "measure_on": "jobs-fixture@local", "options": ""}
        bisect_form = {"good": head, "bad": head, "workload": "loop", "branch": "master", "measure_on": BUILDER}

        def force(scheduler: str, builder: str, params: dict) -> requests.Response:
            builderid = farm.api(f"builders/{builder}")["builders"][0]["builderid"]
            return alice.post(
                f"{base}/api/v2/forceschedulers/{scheduler}",
                json={"jsonrpc": "2.0", "method": "force", "id": 1, "params": {"builderid": builderid, **params}},
                timeout=10,
            )

        for scheduler, builder, params in (
            ("force", "jobs-fixture@local", commit),  # the job step would refuse it, after a build request existed
            ("force", "try-request", commit),
            ("force", "bisect-request", commit),
            ("try", BUILDER, try_form),
            ("try", "jobs-fixture@local", try_form),
            ("bisect-form", "jobs-fixture@local", bisect_form),
        ):
            r = force(scheduler, builder, params)
            error = r.json().get("error", {})
            assert r.status_code == 400 and f"builder {builder!r} is not one of" in str(error.get("message")), (
                scheduler,
                builder,
                r.status_code,
                r.text,
            )
        r = alice.post(
            f"{base}/api/v2/forceschedulers/force",
            json={"jsonrpc": "2.0", "method": "force", "id": 1, "params": {"builderid": "x", **commit}},
            timeout=10,
        )
        assert r.status_code == 400 and "builderid" in r.text, r.text
        assert (farm.api("buildrequests") or {}).get("buildrequests") == [], "a refused form call queued a build"
        # the form's own builder still works
        assert "result" in force("force", BUILDER, commit).json()
        requests_now = wait_until(lambda: (farm.api("buildrequests") or {}).get("buildrequests"), 30, "the request")
        assert [r["builderid"] for r in requests_now] == [farm.api(f"builders/{BUILDER}")["builders"][0]["builderid"]]
    finally:
        farm.stop()
