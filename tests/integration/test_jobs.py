"""Jobs through a real master and worker (master/jobs): `perffarm releases` measures 2-8 tags interleaved in one
build with the fixture recipe; the result is checked against the job and stored, never as a run of a series; the
site's job page shows each release's ratio to the first."""

from __future__ import annotations

import subprocess

import pytest

from master.jobs import core
from tests.harness import BIN, Farm, make_repo, wait_until

pytestmark = pytest.mark.integration


def perffarm(farm: Farm, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "perffarm"), *args], env=farm.env, capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(600)
def test_releases_are_measured_interleaved_in_one_job_and_shown_on_the_site(tmp_path):
    repo = make_repo(tmp_path / "repo", first_value=1000)
    repo.tag("REL_1_0")
    repo.bench_commit("release 2 is slower", 900)
    repo.tag("REL_2_0")
    repo.bench_commit("release 10 is faster", 1100)
    repo.tag("REL_10_0")
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_RECIPES_OPTIONS": "fixture:samples=4"})
    farm.start()
    try:
        # a pattern that matches one tag is refused with what to do, and queues nothing
        bad = perffarm(farm, "releases", "--tags", "REL_1_*")
        assert bad.returncode == 2 and "matched 1 tag" in bad.stderr and "2 to 8" in bad.stderr, bad.stderr
        ok = perffarm(farm, "releases", "--tags", "REL_*", "--option", "samples=6")
        assert ok.returncode == 0, ok.stderr
        assert "job 1 queued on jobs-fixture@local: A=REL_1_0, B=REL_2_0, C=REL_10_0" in ok.stdout, ok.stdout
        state = wait_until(
            lambda: (s := farm.query("SELECT state, error FROM jobs WHERE id = 1")[0])[0] in ("done", "failed") and s,
            300,
            "the job to end",
        )
        assert state == ("done", None), state
        # the job's samples are not runs: no series, no detection, no alert
        assert farm.query("SELECT COUNT(*) FROM runs")[0][0] == 0
        shown = perffarm(farm, "jobs", "--status", "1")
        assert shown.returncode == 0, shown.stderr
        assert "B / A" in shown.stdout and "C / A" in shown.stdout
        from master import store

        conn = store.connect(farm.settings.results_db)
        try:
            job = core.get(conn, 1)
        finally:
            conn.close()
        ratios = {sc.side.revision: sc.comparisons[0].estimate.ratio for sc in core.comparisons(job)}
        assert ratios == {"REL_2_0": pytest.approx(0.9), "REL_10_0": pytest.approx(1.1)}
        assert all(len(c.a) == 6 for sc in core.comparisons(job) for c in sc.comparisons)  # the job's own option
        page = wait_until(
            lambda: (p := farm.settings.site_dir / "jobs" / "1.html").exists() and p.read_text(),
            60,
            "the job's page",
        )
        assert "REL_10_0" in page and "0.9000" in page and "1.1000" in page
        assert "jobs/1.html" in (farm.settings.site_dir / "jobs.html").read_text()
    finally:
        farm.stop()
