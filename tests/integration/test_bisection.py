"""Bisection end to end: (a) on the farm with real probe builds, surviving a master restart;
(b)-(d) with `--local` (real checkouts and compiles, no master); (f) on the farm, the culprit confirmed by jobs
measuring it and its parent interleaved, across a master restart."""

from __future__ import annotations

import dataclasses
import json
import signal

import pytest

from master import store
from master.bisection import local, state
from master.bisection.core import Ambiguous, Culprit, NotReproducible
from master.settings import load_settings
from tests.harness import BENCH_C, Farm, make_repo, wait_until

pytestmark = pytest.mark.integration
BUILDER = "fixture@local"

NOISY_C = """#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
/* commit {i}: throughput {value} with {cv} relative gaussian noise per sample */
int main(void) {{
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    srand((unsigned) (ts.tv_nsec ^ (getpid() << 16)));
    double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = (rand() + 1.0) / (RAND_MAX + 2.0);
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    printf("ops %.3f\\n", {value} * (1.0 + {cv} * z));
    return 0;
}}
"""


def history(repo, n, culprit, slow=950.0, fast=1000.0, broken=(), noisy_cv=None):
    """Commits 1..n after the initial one; commit `culprit` and later print the slower throughput."""
    shas = [repo.head()]
    for i in range(1, n + 1):
        value = slow if i >= culprit else fast
        if i in broken:
            text = f"/* commit {i} */ int main(void) {{ this does not compile }}\n"
        elif noisy_cv is not None:
            text = NOISY_C.format(i=i, value=value, cv=noisy_cv)
        else:
            text = f"/* commit {i} */\n" + BENCH_C.format(value=value, sleep_us=0)
        shas.append(repo.commit(f"commit {i}" + (" (culprit)" if i == culprit else ""), {"perffarm_bench.c": text}))
    return shas


def test_a_farm_finds_the_culprit_of_64_untested_commits_in_8_probes_across_a_restart(tmp_path):
    repo = make_repo(tmp_path / "repo")
    # c0..c7 fast, c8..c70 untested (culprit c44), c71..c78 slow: the farm measured only the neighbourhoods of
    # the range (c7, c71] of 64 commits; 0.5% noise per sample, as on a quiet dedicated machine
    shas = history(repo, 78, culprit=44, noisy_cv=0.005)
    farm = Farm(tmp_path / "data", str(repo.path), reconcile_interval=60)
    farm.start()  # the first poll records the head and builds nothing
    try:
        for i in list(range(0, 8)) + list(range(71, 79)):
            farm.force(BUILDER, revision=shas[i], branch="master")
        bisection = wait_until(
            lambda: farm.query("SELECT id, good, bad FROM bisections"),
            240,
            "a change point spanning untested commits to start a bisection",
        )[0]
        assert (bisection[1], bisection[2]) == (shas[7], shas[71])  # (c7, c71]: 64 commits
        # restart the master in the middle of the search: state lives in the results database
        wait_until(lambda: farm.query("SELECT COUNT(*) FROM bisection_runs")[0][0] >= 3, 240, "three probes")
        farm.stop_master(signal.SIGTERM)
        farm.start_master()
        farm.wait_worker_connected()
        done = wait_until(
            lambda: farm.query(
                "SELECT state, culprit, probes, rounds, ratio, ci_low, ci_high FROM bisections WHERE state != 'running'"
            ),
            300,
            "the culprit",
        )[0]
        state_, culprit, probes, rounds, ratio, lo, hi = done
        assert state_ == "culprit" and culprit == shas[44]
        assert probes <= 8, probes
        assert ratio == pytest.approx(0.95, abs=0.01) and lo <= ratio <= hi
        # every probe is a stored run with source bisect, visible as a build
        sources = {
            r[0] for r in farm.query("SELECT DISTINCT r.source FROM bisection_runs br JOIN runs r ON r.id = br.run_id")
        }
        assert sources == {"bisect"}
        log = json.loads(farm.query("SELECT log FROM bisections")[0][0])
        assert any("culprit" in line for line in log) and any("measure" in line for line in log)
        # nothing known was measured twice beyond what the search asked for: one fresh run per
        # probe, plus the ends' confirmation and the culprit/parent A/B rounds
        per_commit = farm.query(
            "SELECT r.sha, COUNT(*) FROM bisection_runs br JOIN runs r ON r.id = br.run_id GROUP BY r.sha"
        )
        assert max(n for _, n in per_commit) <= 3
        print(f"\n(a) probes={probes} rounds={rounds}")
    finally:
        farm.stop()


@pytest.fixture
def local_env(tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    return repo, settings


def _measure_ends(settings, good, bad, rounds=1):
    for _ in range(rounds):
        for sha in (good, bad):
            local.measure_commit(settings, "fixture", sha, "master", BUILDER, "force")


def _bisect(settings, good, bad):
    conn = store.connect(settings.results_db)
    with store.transaction(conn):
        bid = state.create(conn, good=good, bad=bad, workload="loop", branch="master")
    conn.close()
    decision = local.run(settings, bid, say=lambda _: None)
    conn = store.connect(settings.results_db)
    row = dataclasses.asdict(state.get(conn, bid))
    conn.close()
    return decision, row


def test_b_broken_commits_in_the_range_are_skipped_never_blamed(local_env):
    repo, settings = local_env
    shas = history(repo, 32, culprit=20, broken=(16, 17, 24))
    _measure_ends(settings, shas[0], shas[32])
    decision, row = _bisect(settings, shas[0], shas[32])
    assert decision == Culprit(shas[20], shas[19])
    assert row["culprit"] == shas[20]
    conn = store.connect(settings.results_db)
    failed = {r[0] for r in conn.execute("SELECT sha FROM runs WHERE status = 'build-failed'")}
    assert failed and failed <= {shas[16], shas[17], shas[24]}  # probed, failed, skipped: never the culprit
    print(f"\n(b) probes={row['probes']} rounds={row['rounds']}")


def test_b_culprit_hidden_behind_broken_commits_is_reported_as_a_range(local_env):
    repo, settings = local_env
    shas = history(repo, 16, culprit=9, broken=(8, 9))
    _measure_ends(settings, shas[0], shas[16])
    decision, row = _bisect(settings, shas[0], shas[16])
    # 9 itself does not build: the change is somewhere in (7, 10]; no commit is blamed
    assert isinstance(decision, Ambiguous) and (decision.good, decision.bad) == (shas[7], shas[10])
    assert row["culprit"] is None and row["state"] == "ambiguous"


def test_c_a_range_without_a_real_change_is_not_reproducible(local_env):
    repo, settings = local_env
    shas = history(repo, 16, culprit=99)  # no commit changes the speed
    _measure_ends(settings, shas[0], shas[16])
    decision, row = _bisect(settings, shas[0], shas[16])
    assert isinstance(decision, NotReproducible) and row["state"] == "not-reproducible"
    assert row["culprit"] is None and row["probes"] == 2
    conn = store.connect(settings.results_db)
    assert conn.execute("SELECT COUNT(*) FROM change_points").fetchone()[0] == 0
    print(f"\n(c) probes={row['probes']} rounds={row['rounds']}")


def test_d_noisy_5_percent_step_at_cv_5_is_found_exactly_with_adaptive_repeats(local_env):
    repo, settings = local_env
    shas = history(repo, 32, culprit=21, noisy_cv=0.05)
    _measure_ends(settings, shas[0], shas[32])
    decision, row = _bisect(settings, shas[0], shas[32])
    assert decision == Culprit(shas[21], shas[20]), row["log"]
    assert row["rounds"] > row["probes"]  # it needed repeats, and took them
    # the confirmation A/B's median ratio at CV 5% scatters around 0.95 (0.919 seen in CI). One run's 95% CI misses
    # the truth in about one run of twenty, so coverage is asserted over 100 seeded trials in
    # tests/unit/test_detect_rqps.py; here the CI must confirm a slowdown and hold its own estimate.
    assert row["ci_low"] <= row["ratio"] <= row["ci_high"] < 1.0, row
    assert 0.85 < row["ratio"] < 0.99, row
    print(f"\n(d) probes={row['probes']} rounds={row['rounds']} samples={row['samples']}")


def test_f_the_culprit_is_confirmed_by_jobs_of_its_parent_and_itself_across_a_restart(tmp_path):
    """Issue #30 item 1: the confirmation rounds of the culprit and its parent were separate probe builds, submitted
    one at a time. On a farm whose recipe measures jobs, each round is one job (kind `bisect`) with the parent as
    side A and the culprit as side B, built and measured interleaved in one build on the bisection's worker; the
    bisection waits for it, judges the search again with its samples, and records the jobs' paired ratio."""
    repo = make_repo(tmp_path / "repo")
    shas = history(repo, 16, culprit=9)  # deterministic: 1000 ops/s before commit 9, 950 from it on
    farm = Farm(tmp_path / "data", str(repo.path), reconcile_interval=60)
    farm.start()
    try:
        for i in (0, 16):
            farm.force(BUILDER, revision=shas[i], branch="master")
        farm.wait_for_runs(2, timeout=240)
        conn = store.connect(farm.settings.results_db)
        with store.transaction(conn):
            bid = state.create(conn, good=shas[0], bad=shas[16], workload="loop", metric="throughput")
        conn.close()
        # restart the master while the first confirmation job is queued or running: the bisection finds it again
        wait_until(
            lambda: farm.query("SELECT job_id FROM bisection_jobs WHERE bisection_id = ?", (bid,)),
            300,
            "the bisection to queue a confirmation job",
        )
        farm.stop_master(signal.SIGTERM)
        farm.start_master()
        farm.wait_worker_connected()
        done = wait_until(
            lambda: farm.query(
                "SELECT state, culprit, parent, ratio, ci_low, ci_high, log FROM bisections "
                "WHERE id = ? AND state != 'running'",
                (bid,),
            ),
            300,
            "the culprit",
        )[0]
        state_, culprit, parent, ratio, lo, hi, log = done
        assert (state_, culprit, parent) == ("culprit", shas[9], shas[8]), log
        jobs = farm.query(
            "SELECT j.kind, j.state, j.builder, j.sides, j.options FROM bisection_jobs bj "
            "JOIN jobs j ON j.id = bj.job_id WHERE bj.bisection_id = ? ORDER BY j.id",
            (bid,),
        )
        done_jobs = [j for j in jobs if j[1] == "done"]
        assert len(done_jobs) == 2, jobs  # Policy.culprit_confirm_rounds: one job per round
        for kind, _, builder, sides, options in jobs:
            assert (kind, builder) == ("bisect", "jobs-fixture@local")
            assert [(s["label"], s["sha"]) for s in json.loads(sides)] == [("A", shas[8]), ("B", shas[9])]
            assert json.loads(options) == ["workloads=loop"]
        # the parent and the culprit were probed once each by the search; their further rounds were the jobs
        per_commit = dict(
            farm.query(
                "SELECT r.sha, COUNT(*) FROM bisection_runs br JOIN runs r ON r.id = br.run_id "
                "WHERE br.bisection_id = ? GROUP BY r.sha",
                (bid,),
            )
        )
        assert per_commit[shas[8]] == per_commit[shas[9]] == 1, per_commit
        # the ratio is the jobs' paired one (1000 -> 950 ops/s, no noise)
        assert ratio == pytest.approx(0.95, abs=1e-6) and lo <= ratio <= hi
        lines = json.loads(log)
        assert any(f"against its parent {shas[8][:12]} in job" in line for line in lines), lines
        assert any("paired rounds of its confirmation jobs" in line for line in lines), lines
    finally:
        farm.stop()
