"""A release job whose side A measured 0 ops/s or -5, through a real master and worker (issue #26 item 4): the
job fails at ingest with the JSON path and the rule, nothing of it is stored, `perffarm jobs --status` says so
without a traceback, and the site publishes every other page. Then a job stored before that check (a row put into
the results database directly, as an old database holds it): `perffarm jobs --status` and `perffarm publish`
survive it and say what is wrong. The fixture recipe's program prints `ops <value>`."""

from __future__ import annotations

import subprocess

import pytest

from master import store
from master.jobs import core
from tests.harness import BIN, Farm, make_repo, wait_until
from tests.site_support import add_release_job

pytestmark = pytest.mark.integration

WHERE = "$.sides[0].workloads[0].metrics[0].samples[0]"  # side A's first sample
RULE = "ops/s: a throughput (per second, higher is better) must be above 0 to form ratios"
WHAT_TO_DO = "a benchmark that measured nothing must report bench-failed, not a number"


def perffarm(farm: Farm, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "perffarm"), *args], env=farm.env, capture_output=True, text=True, timeout=300)


def ended(farm: Farm, job_id: int) -> tuple[str, str | None] | None:
    state, error = farm.query("SELECT state, error FROM jobs WHERE id = ?", (job_id,))[0]
    return (state, error) if state in ("done", "failed") else None


@pytest.mark.timeout(900)
def test_a_job_side_that_measured_zero_or_negative_fails_at_ingest_and_the_site_publishes_the_rest(tmp_path):
    repo = make_repo(tmp_path / "repo", first_value=0)  # REL_1_0: the program prints `ops 0`
    repo.tag("REL_1_0")
    repo.bench_commit("a release that measures", 1000)
    repo.tag("REL_2_0")
    repo.bench_commit("a release that prints a negative throughput", -5)
    repo.tag("REL_3_0")
    repo.bench_commit("and one that measures again", 1100)
    repo.tag("REL_4_0")
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_RECIPES_OPTIONS": "fixture:samples=3"})
    farm.start()
    try:
        cases = {  # job id -> (its tags, the side A value its program prints)
            1: (["REL_1_0", "REL_2_0"], "0.0"),
            2: (["REL_3_0", "REL_4_0"], "-5.0"),
            3: (["REL_2_0", "REL_4_0"], None),  # healthy: its page must still be published
        }
        for job_id, (tags, _) in cases.items():
            queued = perffarm(farm, "releases", *(a for t in tags for a in ("--tags", t)))
            assert queued.returncode == 0 and f"job {job_id} queued" in queued.stdout, queued.stdout + queued.stderr
        for job_id, (_, value) in cases.items():
            state, error = wait_until(lambda j=job_id: ended(farm, j), 400, f"job {job_id} to end")
            if value is None:
                assert (state, error) == ("done", None)
                continue
            assert state == "failed", error
            assert error == f"malformed job result: {WHERE}: {value} {RULE}; {WHAT_TO_DO}", error
            shown = perffarm(farm, "jobs", "--status", str(job_id))
            assert shown.returncode == 1 and "Traceback" not in shown.stdout + shown.stderr, shown.stderr
            assert f"failed: malformed job result: {WHERE}: {value} {RULE}" in shown.stdout, shown.stdout
        # nothing of a refused job is stored; its result file is kept for the operator in incoming/rejected/
        conn = store.connect(farm.settings.results_db)
        try:
            assert [core.get(conn, j).result is None for j in (1, 2, 3)] == [True, True, False]
        finally:
            conn.close()
        assert len(list((farm.settings.incoming_dir / "rejected").iterdir())) == 2
        assert farm.query("SELECT COUNT(*) FROM runs")[0][0] == 0  # a job is never a run of a series

        # a job stored before the check: side A's samples 0, put into the database directly
        old = add_release_job(
            farm.settings,
            {"REL_1_0": {"loop": 0.0}, "REL_2_0": {"loop": 1000.0}},
            metric=("throughput", "ops/s"),
            shas={t: repo.git("rev-parse", f"{t}^{{commit}}") for t in ("REL_1_0", "REL_2_0")},
        )
        shown = perffarm(farm, "jobs", "--status", str(old))
        assert shown.returncode == 0 and "Traceback" not in shown.stdout + shown.stderr, shown.stderr
        assert "side A has no positive samples of throughput: cannot form a ratio" in shown.stdout, shown.stdout

        published = perffarm(farm, "publish", "--quiet")
        assert published.returncode == 0 and not published.stderr, published.stderr
        site = farm.settings.site_dir
        pages = {j: (site / "jobs" / f"{j}.html").read_text() for j in (1, 2, 3, old)}
        assert f"Failed: malformed job result: {WHERE}: 0.0 {RULE}" in pages[1]
        assert f"Failed: malformed job result: {WHERE}: -5.0 {RULE}" in pages[2]
        assert "1.1000" in pages[3]  # REL_4_0 / REL_2_0 measured interleaved: 1100 / 1000
        assert "side A has no positive samples of throughput: cannot form a ratio" in pages[old]
        assert all(f"jobs/{j}.html" in (site / "jobs.html").read_text() for j in pages)
        assert (site / "releases.html").exists() and (site / "archaeology.html").exists()
        assert "Traceback" not in farm.master_log()
    finally:
        farm.stop()
