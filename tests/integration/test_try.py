"""Try-jobs through a real master and worker (issue #16 item 3): `perffarm try --patch` logs in, posts the try
form, the master checks the patch against the base in its mirror and queues a job that measures base vs base+patch
interleaved on the worker. Bad requests fail with one line and queue nothing. A hostile patch runs in the worker's
sandbox (issue #26 items 1-2): it reaches none of the farm's secrets, data or shared clone, and a later commit's
result is its own."""

from __future__ import annotations

import json
import subprocess

import pytest

from master import store
from master.jobs import core
from recipes.api import SOURCE_DIR
from recipes.sandbox import BWRAP_ENV
from tests.harness import BENCH_C, BIN, Farm, make_repo, wait_until
from tests.sandbox_support import hostile_program

pytestmark = pytest.mark.integration


def perffarm(farm: Farm, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "perffarm"), *args], env={**farm.env, **(env or {})}, capture_output=True, text=True, timeout=400
    )


def ended(farm: Farm, job_id: int) -> tuple[str, str | None] | None:
    """(state, error) of a job once it is done or failed, else None."""
    state, error = farm.query("SELECT state, error FROM jobs WHERE id = ?", (job_id,))[0]
    return (state, error) if state in ("done", "failed") else None


def jobs_in(farm: Farm) -> int:
    return farm.query("SELECT COUNT(*) FROM jobs")[0][0] if farm.settings.results_db.exists() else 0


@pytest.mark.timeout(600)
def test_a_try_job_measures_base_against_base_plus_patch_and_bad_requests_queue_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo", first_value=1000)
    farm = Farm(
        tmp_path / "data",
        str(repo.path),
        env={
            "PERFFARM_MASTER_WEB_USERS": "alice",
            "PERFFARM_RECIPES_OPTIONS": "fixture:samples=4",
            BWRAP_ENV: str(tmp_path / "no-bwrap-here"),
        },
    )
    secret = farm.settings.secrets_dir / "web-user-alice"
    secret.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret.write_text("correct horse\n")
    secret.chmod(0o600)
    password = tmp_path / "pw"
    password.write_text("correct horse\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("battery staple\n")
    # the patch: the program prints 900 instead of 1000, made with git diff
    (repo.path / "perffarm_bench.c").write_text(BENCH_C.format(value=900, sleep_us=0))
    good = tmp_path / "slower.patch"
    good.write_text(repo.git("diff") + "\n")
    repo.git("checkout", "--", "perffarm_bench.c")
    stale = tmp_path / "stale.patch"
    stale.write_text(good.read_text().replace("ops 1000", "ops 1234"))
    junk = tmp_path / "junk.patch"
    junk.write_text("this is not a diff\n")
    login = ["--user", "alice", "--password-file", str(password)]
    farm.start()
    try:
        cases = [
            (["--patch", str(good)], 2, "needs a login"),
            (["--patch", str(good), "--user", "alice", "--password-file", str(wrong)], 1, "login refused"),
            (["--patch", str(junk), *login], 2, "not a unified diff"),
            (["--patch", str(stale), *login], 1, "does not apply to master"),
            (["--patch", str(good), "--base", "no-such-branch", *login], 1, "not a branch, tag or commit"),
            (["--patch", str(good), "--base=--upload-pack=x", *login], 1, "refused"),
        ]
        for argv, code, says in cases:
            r = perffarm(farm, "try", *argv)
            assert r.returncode == code and says in r.stderr, (argv, r.returncode, r.stderr)
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr  # one line
            assert jobs_in(farm) == 0, argv  # nothing queued
        # a worker that cannot set up the sandbox refuses the patch and says what to do (here: no bubblewrap)
        refused = perffarm(farm, "try", "--patch", str(good), *login)
        assert refused.returncode == 0 and "try job 1 queued" in refused.stdout, refused.stdout + refused.stderr
        state = wait_until(lambda: ended(farm, 1), 300, "the refused try-job to end")
        assert state[0] == "failed" and "cannot run a try-job's patch" in state[1], state
        assert "apt-get install bubblewrap" in state[1], state
        farm.stop_worker()
        del farm.env[BWRAP_ENV]
        farm.start_worker()
        job_id = 2
        ok = perffarm(farm, "try", "--patch", str(good), *login, "--option", "samples=5")
        assert ok.returncode == 0 and f"try job {job_id} queued" in ok.stdout, ok.stdout + ok.stderr
        state = wait_until(lambda: ended(farm, job_id), 300, "the try-job to end")
        assert state == ("done", None), state
        conn = store.connect(farm.settings.results_db)
        try:
            job = core.get(conn, job_id)
        finally:
            conn.close()
        assert job.kind == "try" and job.requested_by == "try (alice)"
        (side,) = core.comparisons(job)
        loop = next(c for c in side.comparisons if c.metric == "throughput")
        assert loop.estimate.ratio == pytest.approx(0.9) and loop.verdict == "regression" and len(loop.a) == 5
        assert farm.query("SELECT COUNT(*) FROM runs")[0][0] == 0  # never a run: no series, no alert
        status = perffarm(farm, "try", "--status", str(job_id))
        assert status.returncode == 0 and "B / A" in status.stdout and "regression" in status.stdout, status.stdout
        assert f"job    {job_id}  try" in perffarm(farm, "try", "--list").stdout
        page = wait_until(
            lambda: (p := farm.settings.site_dir / "jobs" / f"{job_id}.html").exists() and p.read_text(), 60, "page"
        )
        assert "0.9000" in page and "+ patch" in page

        # Issue #26 items 1-2: a patch whose program tries to read the master's secrets and the worker's password,
        # write the results database, plant a post-checkout hook in the worker's clone (which the next commit's
        # checkout would run), reach the master's web port and see the worker's process.
        worker_dir = farm.settings.worker_dir("local")
        clone = next(worker_dir.glob(f"fixture*/{SOURCE_DIR}"))
        hook = clone / ".git" / "hooks" / "post-checkout"
        secrets = [secret, farm.settings.secrets_dir / "worker-local", worker_dir / "buildbot.tac"]
        assert all(p.exists() for p in secrets)
        (repo.path / "perffarm_bench.c").write_text(
            hostile_program(
                1100,
                reads=secrets,
                writes=[hook, farm.settings.results_db],
                database=farm.settings.results_db,
                port=farm.settings.web_port,
                pid=farm.worker.pid,
            )
        )
        hostile = tmp_path / "hostile.patch"
        hostile.write_text(repo.git("diff") + "\n")
        repo.git("checkout", "--", "perffarm_bench.c")
        r = perffarm(farm, "try", "--patch", str(hostile), *login)
        assert r.returncode == 0 and "try job 3 queued" in r.stdout, r.stdout + r.stderr
        assert wait_until(lambda: ended(farm, 3), 300, "the hostile try-job to end") == ("done", None)
        conn = store.connect(farm.settings.results_db)
        try:
            (side,) = core.comparisons(core.get(conn, 3))
        finally:
            conn.close()
        b = next(c for c in side.comparisons if c.metric == "throughput").b
        assert list(b) == [1100.0] * 4, b  # 666666 if a secret was read, the port reached or the worker seen
        assert not hook.exists()
        assert farm.query("PRAGMA integrity_check") == [("ok",)] and farm.query("SELECT COUNT(*) FROM jobs") == [(3,)]
        builds = (farm.api("builds?property=perffarm_job&order=buildid") or {"builds": []})["builds"]
        bench = [x for x in builds if str(x["properties"].get("perffarm_job", [None])[0]) == "3"]
        log = farm.step_log(bench[-1]["buildid"], "job-bench", "stdio")
        assert "[sandbox]" in log and "correct horse" not in log

        # the next honest commit is measured as itself (it printed 777777 when the hook got planted)
        honest = repo.bench_commit("honest work", 1500)
        farm.wait_for_runs(1, timeout=300)
        (samples,) = farm.query(
            "SELECT m.samples FROM runs r JOIN measurements m ON m.run_id = r.id "
            "WHERE r.sha = ? AND m.metric = 'throughput'",
            (honest,),
        )[0]
        assert json.loads(samples) == [1500.0] * 4, samples
        assert farm.query("SELECT COUNT(*) FROM runs WHERE status = 'forged'")[0][0] == 0
    finally:
        farm.stop()
