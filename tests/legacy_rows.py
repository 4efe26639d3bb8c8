"""Samples a results database may hold from before the validator checked them by what their metric can be (issue
#26 item 4): a throughput of 0 or -5, 1e-300 next to 1e300. The master refuses them now, so a test that needs such
rows (an old database that every reader must survive) stores them as the master did then: through the same ingest,
with the sample check of that time (every sample a finite number of magnitude at most 1e300)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import pytest

from recipes import result


def _check_before_26(samples: list[Any], path: str, unit: str = "", direction: str = "") -> None:
    for k, v in enumerate(samples):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > 1e300:
            raise result.ResultError(f"{path}[{k}]: expected a finite number of magnitude at most 1e300, got {v!r}")


@contextlib.contextmanager
def validator_before_26() -> Iterator[None]:
    """Within: recipes.result validates samples as it did before issue #26 (what an old database was filled with)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(result, "_samples", _check_before_26)
        yield


# A release job's result per case: side A's and the later sides' samples (None: the healthy ones), as a results
# database may hold them from before the check; the last is a lower-is-better count that is honestly 0 (a
# transaction that never yields the CPU), whose ratio is undefined too.
OLD_JOBS = (
    ("tps", "tx/s", "higher", 0.0, None),  # side A measured 0
    ("tps", "tx/s", "higher", -5.0, None),
    ("tps", "tx/s", "higher", 1e-300, 1e300),  # a ratio of inf with a CI of nan
    ("tps", "tx/s", "higher", None, -5.0),
    ("ctx_switches_per_tx", "switches/tx", "lower", 0.0, 0.0),
)
# the farm's own runs of the commits after the first (tagged REL_1_0 .. REL_4_0 at the first four)
OLD_RUNS = ((1000.0, 1010.0), (0.0, 0.0), (-5.0, -5.0), (1e-300, 1e-300), (1e300, 1e300), (1000.0, 990.0))


def old_database(tmp_path: Any) -> Any:
    """Settings of a real results database and git repository holding every kind of sample the validator refuses
    now (OLD_JOBS as done release jobs 2.., after a healthy job 1; OLD_RUNS as runs of a branch with release
    tags), stored through the master's own ingest as it was before the check."""
    import json

    from master import ingest, store
    from master.jobs import core
    from master.jobs import ingest as job_ingest
    from master.settings import load_settings
    from tests.harness import make_repo
    from tests.unit.test_jobs import result_for as job_result
    from tests.unit.test_store_ingest import put, result_for, run_ctx

    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    shas = [repo.head()]
    repo.tag("REL_1_0")
    for i in range(1, len(OLD_RUNS)):
        shas.append(repo.bench_commit(f"commit {i}", i))
        if i < 4:
            repo.tag(f"REL_{i + 1}_0")
    with validator_before_26():
        for i, (sha, samples) in enumerate(zip(shas, OLD_RUNS), start=1):
            doc = result_for(sha, samples=samples)
            ingest.ingest_file(settings, put(settings, doc, f"b-{i}.json"), run_ctx(i, sha), "fixture")
    tags = {f"REL_{i + 1}_0": sha for i, sha in enumerate(shas[:3])}
    conn = store.connect(settings.results_db)
    try:
        for case in ((None, None, None, None, None), *OLD_JOBS):
            metric, unit, direction, a, rest = case
            job_id = core.create_releases(conn, tags, ["REL_*"], "jobs-pg-quick@local", ["jobs-pg-quick@local"])
            doc = job_result(core.get(conn, job_id))
            for k, side in enumerate(doc["sides"]):
                m = side["workloads"][0]["metrics"][0]
                if metric is not None:
                    m.update(name=metric, unit=unit, direction=direction)
                value = a if k == 0 else rest
                if value is not None:
                    m["samples"] = [value] * len(m["samples"])
            path = tmp_path / f"job-{job_id}.json"
            path.write_text(json.dumps(doc))
            with validator_before_26():
                outcome = job_ingest.ingest_file(settings, path, job_id, job_id, f"http://x/#/builds/{job_id}")
            assert outcome.state == "done", outcome.message
    finally:
        conn.close()
    return settings
