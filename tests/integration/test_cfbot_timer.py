"""The cfbot timer inside a real master (issue #31 item 3): with `cfbot.repo` set, the master itself fetches a local
repository in cfbot's layout and queues a try-job for a patch branch's head, once, and for the new head after a
push, without anyone running `perffarm cfbot`. A patch repository that goes away is logged with what to do and
tried again; the master goes on."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.harness import Farm, GitRepo, make_repo, wait_until

pytestmark = pytest.mark.integration
THREAD = "https://postgr.es/m/CAfoo%40mail.example.org"


def cfbot_jobs(farm: Farm) -> list[tuple]:
    if not farm.settings.results_db.exists():
        return []
    return farm.query(
        "SELECT j.id, j.requested_by, h.links FROM jobs j LEFT JOIN cfbot_heads h ON h.job_id = j.id "
        "WHERE j.requested_by LIKE 'cfbot %' ORDER BY j.id"
    )


@pytest.mark.timeout(600)
def test_the_master_queues_a_job_for_each_pushed_patch_head_once(tmp_path):
    repo = make_repo(tmp_path / "repo", first_value=1000)
    patches = GitRepo(tmp_path / "patches")
    subprocess.run(["git", "clone", "--quiet", str(repo.path), str(patches.path)], check=True)
    patches.git("config", "user.email", "cfbot@example.org")
    patches.git("config", "user.name", "cfbot")
    patches.git("checkout", "--quiet", "-b", "cf/4711", "master")
    first = patches.bench_commit(f"[CF 4711] v1 - faster\n\nDiscussion: {THREAD}\n", 1100)
    patches.git("checkout", "--quiet", "master")
    farm = Farm(
        tmp_path / "data",
        str(repo.path),
        env={
            "PERFFARM_CFBOT_REPO": str(patches.path),
            "PERFFARM_CFBOT_INTERVAL": "2",
            "PERFFARM_RECIPES_OPTIONS": "fixture:samples=3",
        },
    )
    farm.start()
    try:
        jobs = wait_until(lambda: cfbot_jobs(farm), 120, "the timer to queue a job for cf/4711")
        assert [(r, links) for _id, r, links in jobs] == [(f"cfbot cf/4711 {first}", THREAD)]
        assert f"perffarm cfbot: cf/4711 {first[:12]}: job {jobs[0][0]} queued" in farm.master_log()
        # later passes see the head measured already: said once in the log, and no second job
        wait_until(lambda: "skipped: this head is measured already" in farm.master_log(), 60, "a second pass")
        patches.git("checkout", "--quiet", "cf/4711")
        second = patches.bench_commit("[CF 4711] v2 - faster still", 1200)
        patches.git("checkout", "--quiet", "master")
        wait_until(lambda: len(cfbot_jobs(farm)) == 2, 120, "the timer to queue a job for the pushed head")
        assert [r for _id, r, _links in cfbot_jobs(farm)] == [f"cfbot cf/4711 {first}", f"cfbot cf/4711 {second}"]
        # the repository goes away: each pass says so and what to check; the master keeps running
        shutil.move(patches.path, tmp_path / "patches-away")
        wait_until(lambda: "nothing queued this pass" in farm.master_log(), 60, "a pass that cannot fetch")
        assert "check that cfbot.repo" in farm.master_log()
        assert farm.alive()["master"] and len(cfbot_jobs(farm)) == 2
        shutil.move(tmp_path / "patches-away", patches.path)
        patches.git("checkout", "--quiet", "-b", "cf/4712", "master")
        third = patches.bench_commit("[CF 4712] v1 - another", 900)
        wait_until(lambda: len(cfbot_jobs(farm)) == 3, 120, "the timer to recover and queue cf/4712")
        assert cfbot_jobs(farm)[2][1] == f"cfbot cf/4712 {third}"
        assert "Traceback" not in farm.master_log().split("perffarm cfbot", 1)[1]
    finally:
        farm.stop()
