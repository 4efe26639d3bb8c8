"""Paired throughput through a real master and worker (issue #14): alert on rQPS, bisect on rQPS, name the commit.

The fixture recipe runs the commit's program and the reference's alternately (recipes/paired.py), so the whole
paired path runs in about two minutes: the check-source step pairs every build of `master` with the reference tag,
the ingest stores `<metric>.reference` and `<metric>.rqps`, detection searches only the rQPS series with the paired
gate, the alert uses `alerts.paired_warn`, and the bisection's probes are paired builds too. The same chain on real
PostgreSQL, with a contention regression that instruction counts do not see, is
tests/benchmarks/contention_farm.py (too long for `make test`; its figures are in docs/throughput.md).
"""

from __future__ import annotations

import json

import pytest

from tests.harness import Farm, make_repo, wait_until
from tests.integration.test_bisection import NOISY_C

pytestmark = pytest.mark.integration

BASELINE = 11  # the paired gate wants 10 commits of baseline since the last change (master/detect/paired.py)


@pytest.mark.timeout(900)
def test_a_throughput_regression_is_alerted_on_rqps_and_bisected_to_its_commit(tmp_path):
    repo = make_repo(tmp_path / "repo")
    repo.tag("base")  # the reference every build of master is paired with
    env = {
        "PERFFARM_THROUGHPUT_REFERENCES": "master=base",
        "PERFFARM_MASTER_QUEUED": "newest",
        "PERFFARM_RECIPES_OPTIONS": "fixture:samples=6",
    }
    farm = Farm(tmp_path / "data", str(repo.path), env=env)
    farm.start()
    try:
        # the baseline: one commit at a time, each measured paired against the tag
        for i in range(BASELINE):
            repo.commit(f"fast {i}", {"perffarm_bench.c": NOISY_C.format(i=i, value=1000, cv=0.01)})
            farm.wait_for_runs(i + 1, timeout=120)
        base = repo.git("rev-parse", "base^{commit}")
        assert {r[0] for r in farm.query("SELECT reference FROM runs")} == {base}
        assert not farm.query("SELECT id FROM change_points")

        # the push: 8 commits at once, the 4th makes the program 6% slower; queued commits collapse into the 8th
        shas = []
        for i in range(1, 9):
            value = 940 if i >= 4 else 1000
            shas.append(
                repo.commit(
                    f"push {i}" + (" <b>slower</b>" if i == 4 else ""),
                    {"perffarm_bench.c": NOISY_C.format(i=100 + i, value=value, cv=0.01)},
                )
            )
        wait_until(lambda: farm.query("SELECT 1 FROM runs WHERE sha = ?", (shas[-1],)), 120, "the push's head")
        # the gate wants the level to stay moved for two measured commits
        repo.commit("after", {"perffarm_bench.c": NOISY_C.format(i=200, value=940, cv=0.01)})

        alert = wait_until(
            lambda: farm.query(
                "SELECT s.workload, s.metric, a.kind, c.ratio FROM alerts a "
                "JOIN alert_lines l ON l.alert_id = a.id JOIN change_points c ON c.id = l.change_point_id "
                "JOIN series s ON s.id = c.series_id"
            ),
            300,
            "an alert on the rQPS series",
        )
        assert [(w, m, k) for w, m, k, _ in alert] == [("loop", "throughput.rqps", "regression")], alert
        assert 0.90 < alert[0][3] < 0.98, alert
        # detection searched only rQPS: the absolute and the reference's series have no change point
        searched = {
            r[0] for r in farm.query("SELECT s.metric FROM change_points c JOIN series s ON s.id = c.series_id")
        }
        assert searched == {"throughput.rqps"}, searched

        done = wait_until(
            lambda: farm.query(
                "SELECT state, culprit, metric, probes, ratio, ci_low, ci_high, log, commits FROM bisections "
                "WHERE state != 'running'"
            ),
            400,
            "the bisection to end",
        )[0]
        state, culprit, metric, probes, ratio, lo, hi, log, commits = done
        assert (state, culprit, metric) == ("culprit", shas[3], "throughput.rqps"), log
        assert lo <= ratio <= hi < 1.0, done
        # every probe was a paired build against the same reference
        probe_runs = farm.query("SELECT reference FROM runs WHERE sha IN (SELECT value FROM json_each(?))", (commits,))
        assert probe_runs and {r[0] for r in probe_runs} == {base}
        alerted = farm.query("SELECT culprit_sha FROM alerts")
        assert alerted == [(shas[3],)], alerted
        # issue #28: one bisection, judged on the series' levels: no end of the range was measured again
        assert farm.query("SELECT COUNT(*) FROM bisections")[0][0] == 1
        measured = {r[0] for r in farm.query("SELECT r.sha FROM bisection_runs br JOIN runs r ON r.id = br.run_id")}
        assert measured and not measured & {json.loads(commits)[0], json.loads(commits)[-1]}, log
        print(f"\npaired farm: probes={probes} ratio={ratio:.4f} [{lo:.4f}, {hi:.4f}] range={len(json.loads(commits))}")
    finally:
        farm.stop()
