"""The fault-and-hostile-input suite's smoke scenario under `make test` (issue #12; docs/reliability.md).

One run of `python -m tests.benchmarks.chaos --smoke` in this process: 12 commits through a real master and worker
while one fault of each kind hits (master SIGKILL right after a run is stored, worker SIGTERM in a bench step, a
broken clone with a stale result beside it, the results DB locked past sqlite's busy timeout, a full disk, a
try-job's build request cancelled, hostile commit text, refs and force requests). Each test asserts one invariant
and prints the evidence when it fails.
"""

from __future__ import annotations

import pytest

from tests.benchmarks.chaos import Options, Report, print_report, run
from tests.chaos.faults import KINDS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    result = run(Options(smoke=True, work=tmp_path_factory.mktemp("chaos"), settle_timeout=120))
    print_report(result)
    return result


def _evidence(report: Report, *kinds: str) -> str:
    lines = [f"{v['after']} -> {v['kind']}: {v['detail']}" for v in report.violations if v["kind"] in kinds]
    return "\n".join(lines) or "(no violation recorded at the final check)"


def test_the_run_completed(report: Report) -> None:
    assert not [v for v in report.violations if v["kind"] == "aborted"], _evidence(report, "aborted")
    assert report.figures["pushed"] == 12


def test_every_fault_kind_was_injected_or_says_why_not(report: Report) -> None:
    injected = {f.kind for f in report.faults if not f.skipped}
    for kind in KINDS:
        assert kind in injected or report.skipped.get(kind), f"fault kind {kind} neither injected nor skipped"
    assert all(f.window_hit is not False for f in report.faults), [
        f"{f.label}: {f.notes}" for f in report.faults if f.window_hit is False
    ]


def test_no_commit_is_lost(report: Report) -> None:
    assert report.figures["lost"] == 0, _evidence(report, "lost", "gave-up")
    assert report.figures["exactly_one"] == report.figures["pushed"]


def test_no_commit_is_measured_twice(report: Report) -> None:
    assert report.figures["duplicate_runs"] == 0, _evidence(report, "duplicate")


def test_no_result_is_stored_under_another_commit(report: Report) -> None:
    assert report.figures["misattributed"] == 0, _evidence(report, "misattributed")


def test_no_fault_is_stored_as_the_commits_result(report: Report) -> None:
    assert report.figures["failed_runs"] == 0, _evidence(report, "failed-run")


def test_no_alert_is_duplicated(report: Report) -> None:
    assert report.figures["alerts_duplicated"] == 0, _evidence(report, "alert-duplicate")


def test_the_site_is_consistent_after_every_fault(report: Report) -> None:
    seen = [
        f"fault {f.index} ({f.label}): {v['detail']}"
        for f in report.faults
        for v in f.new_violations
        if v["kind"] == "site"
    ]
    assert report.site_inconsistent_checks == 0, "\n".join(seen)


def test_no_job_is_lost_duplicated_hung_or_failed_by_a_fault(report: Report) -> None:
    f = report.figures
    assert f["jobs"] >= 1 and f["jobs_ended_right"] == f["jobs"], _evidence(
        report, "job-lost", "job-duplicate", "job-hung", "job-failed", "job-misattributed"
    )


def test_hostile_input_runs_nothing(report: Report) -> None:
    assert report.figures["hostile_ran"] == 0, _evidence(report, "hostile-ran")


def test_the_farm_recovers_by_itself(report: Report) -> None:
    stalls = [f"fault {f.index} ({f.label}): {f.stuck}" for f in report.faults if f.stuck]
    assert report.stuck == 0, "\n".join(stalls) or _evidence(report, "stuck")
