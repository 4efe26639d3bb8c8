"""End to end through a real Buildbot master and worker: polling, scheduling, recipes, upload, ingest, store."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.harness import Farm, make_repo, wait_until

pytestmark = pytest.mark.integration
BUILDER = "fixture@local"


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    base = tmp_path_factory.mktemp("farm")
    repo = make_repo(base / "repo")
    f = Farm(base / "data", str(repo.path))
    f.repo = repo
    f.start()
    try:
        yield f
    finally:
        f.stop()


def _ops(run: dict) -> list[float]:
    return run["measurements"][("loop", "throughput")]


def test_every_commit_gets_its_own_run(farm):
    repo = farm.repo
    # Three commits land before the next poll: Buildbot would collapse them by default.
    shas = [repo.bench_commit(f"step {v}", v) for v in (2000, 3000, 4000)]
    runs = farm.wait_for_runs(3)
    by_sha = {r["sha"]: r for r in runs}
    assert set(shas) <= set(by_sha), "a commit was collapsed or skipped"
    for sha, value in zip(shas, (2000, 3000, 4000)):
        run = by_sha[sha]
        assert run["status"] == "ok" and run["ref"] == "master" and run["source"] == "poll"
        assert _ops(run) == [float(value)] * 5, "the run measured another commit's program"
        assert run["subject"] == f"step {value}" and run["author"] == "Test Er <tester@example.org>"
    # first-parent order of the branch is stored, oldest first
    order = [row[0] for row in farm.query("SELECT sha FROM branch_commits WHERE branch='master' ORDER BY position")]
    assert order[-3:] == shas
    assert len(order) == 4


def test_new_tag_on_measured_commit_triggers_a_run(farm):
    repo = farm.repo
    before = len(farm.runs())
    sha = repo.head()
    repo.tag("REL_1_0", annotated=True)
    runs = farm.wait_for_runs(before + 1)
    tag_runs = [r for r in runs if r["ref"] == "REL_1_0"]
    assert len(tag_runs) == 1
    # an annotated tag's change names the tag object; the run is stored for the commit it points at
    assert tag_runs[0]["sha"] == sha
    assert farm.query("SELECT sha FROM tags WHERE name='REL_1_0'") == [(sha,)]


def test_forced_run_at_an_old_revision(farm):
    repo = farm.repo
    first = repo.git("rev-list", "--max-parents=0", "HEAD")
    before = len(farm.runs())
    farm.force(BUILDER, revision=first, branch="master")
    runs = farm.wait_for_runs(before + 1)
    forced = [r for r in runs if r["source"] == "force"]
    assert len(forced) == 1
    assert forced[0]["sha"] == first and _ops(forced[0]) == [1000.0] * 5


def test_malformed_result_is_rejected_and_nothing_is_stored(farm):
    repo = farm.repo
    before = farm.runs()
    bad = repo.bench_commit("prints a NaN", "nan")
    build = wait_until(
        lambda: next((b for b in _complete_builds(farm) if b.get("sha") == bad), None),
        120,
        "the build of the malformed commit",
    )
    assert build["results"] == 2, "the build should fail when its result is rejected"  # FAILURE
    log = farm.step_log(build["buildid"], "ingest", "ingest")
    assert "REJECTED, nothing stored" in log and "samples[0]" in log and "finite number" in log
    assert [r for r in farm.runs() if r["sha"] == bad] == []
    assert len(farm.runs()) == len(before)
    rejected = list((farm.settings.incoming_dir / "rejected").glob("*.json"))
    assert rejected and "finite number" in (rejected[0].with_name(rejected[0].name + ".error")).read_text()
    # ... and it is not re-queued forever: the rejection counts as the commit's outcome
    time.sleep(3 * farm.settings.reconcile_interval)
    assert len([b for b in _complete_builds(farm) if b.get("sha") == bad]) == 1


def _complete_builds(farm: Farm) -> list[dict]:
    data = farm.api("builds?complete=true&property=got_revision") or {"builds": []}
    out = []
    for b in data["builds"]:
        props = b.get("properties") or {}
        b["sha"] = props.get("got_revision", [None])[0]
        out.append(b)
    return out


def test_sigterm_during_a_build_requeues_the_commit_and_measures_it_once(tmp_path):
    repo = make_repo(tmp_path / "repo")
    farm = Farm(tmp_path / "data", str(repo.path), reconcile_interval=2)
    farm.start()
    try:
        slow = repo.bench_commit("slow benchmark", 7000, sleep_us=1_500_000)  # ~7.5 s of bench
        # wait until the build of that commit is in its bench step, then SIGTERM the master
        wait_until(lambda: _step_running(farm, "bench"), 90, "the bench step to start")
        time.sleep(2)  # the benchmark program is running on the worker now
        assert farm.stop_master(signal.SIGTERM) is not None
        assert farm.runs() == [], "the cancelled build must not have stored a result"
        farm.start_master()
        farm.wait_worker_connected()
        runs = farm.wait_for_runs(1, timeout=180)
        assert [r["sha"] for r in runs] == [slow]
        # Buildbot 4.3 cancels the running build on SIGTERM and does not retry it: the reconciler re-queues
        assert runs[0]["source"] == "requeue" and runs[0]["status"] == "ok"
        # several more reconcile passes: still exactly one run, no duplicate build queued
        time.sleep(4 * farm.settings.reconcile_interval)
        assert len(farm.runs()) == 1
        pending = farm.api("buildrequests?complete=false")["buildrequests"]
        assert pending == []
        report = json.loads((farm.settings.data_dir / "reconcile.json").read_text())
        assert report["missing"] == []
    finally:
        farm.stop()


def _step_running(farm: Farm, name: str) -> bool:
    for b in (farm.api("builds?complete=false") or {"builds": []})["builds"]:
        steps = (farm.api(f"builds/{b['buildid']}/steps") or {"steps": []})["steps"]
        if any(s["name"] == name and s["started_at"] and not s["complete"] for s in steps):
            return True
    return False
