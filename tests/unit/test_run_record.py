"""One result schema keyed by side (recipes/result.py version 2) and the record the master stores a run as
(recipes/record.py): a paired run's ratios are derived on the master from its sides' raw samples, exactly as the
runner used to merge them, and a side's forged ratios never reach a series."""

from __future__ import annotations

import copy
import json
import re

import pytest

from master import ingest, store
from recipes import paired
from recipes.api import Metric, WorkloadResult
from recipes.record import run_record
from recipes.result import ResultError, validate, validate_job
from tests.unit.test_result_schema import good
from tests.unit.test_store_ingest import env, put  # noqa: F401 - env is a fixture

REF = "b" * 40


def sides_doc(sha: str, run: list[dict], reference: list[dict] | None = None) -> dict:
    """A run's result of version 2: its own side, and the reference's before it when paired."""
    doc = good()
    doc["schema_version"] = 2
    doc["commit"] = {"sha": sha, "ref": "master"}
    del doc["workloads"]
    doc["sides"] = [{"label": "run", "sha": sha, "patch": None, "workloads": run}]
    if reference is not None:
        doc["recipe"]["options"] = {"reference": REF}
        doc["sides"].insert(0, {"label": "reference", "sha": REF, "patch": None, "workloads": reference})
    return doc


def tps(samples: list[float], name: str = "ro") -> dict:
    metrics = [{"name": "tps", "unit": "tx/s", "direction": "higher", "samples": samples}]
    metrics.append({"name": "instructions", "unit": "instructions/tx", "direction": "lower", "samples": [5.0] * 4})
    return {"name": name, "metrics": metrics, "flags": [], "config_hash": "h-" + name}


def test_a_paired_runs_record_is_what_the_runner_merged_before_sides():
    run, reference = [tps([110.0, 99.0, 120.0, 101.0])], [tps([100.0, 100.0, 100.0, 100.0])]
    reference[0]["metrics"].pop()  # the reference is measured for the ratios alone: no instruction counts
    doc = sides_doc("a" * 40, run, reference)
    doc["sides"][0]["waits"] = {"ro": [{"observations": 1, "ticks": 1, "hz": 100.0, "shares": {"CPU": 1.0}}]}
    record = run_record(copy.deepcopy(doc))

    # the version-1 result the runner wrote before: paired.merge over the same samples, then each workload's hash
    def objects(ws: list[dict]) -> list[WorkloadResult]:
        return [
            WorkloadResult(
                w["name"],
                tuple(Metric(m["name"], m["unit"], m["direction"], tuple(m["samples"])) for m in w["metrics"]),
            )
            for w in ws
        ]

    merged = paired.merge(objects(run), objects(reference))
    before = {k: v for k, v in doc.items() if k != "sides"}
    before.update(schema_version=1, workloads=[{**w.to_json(), "config_hash": "h-ro"} for w in merged])
    before["waits_reference"] = doc["sides"][0]["waits"]
    assert json.dumps(record, sort_keys=True) == json.dumps(before, sort_keys=True)
    metrics = {m["name"]: m["samples"] for m in record["workloads"][0]["metrics"]}
    assert set(metrics) == {"tps", "instructions", "tps.reference", "tps.rqps"}
    assert metrics["tps.rqps"] == pytest.approx([((110 / 100) * (99 / 100)) ** 0.5, ((120 / 100) * (101 / 100)) ** 0.5])
    assert record["workloads"][0]["flags"] == [paired.BALANCED_FLAG]


def test_an_unpaired_runs_record_is_its_side_and_version_1_is_read_as_it_is():
    doc = sides_doc("a" * 40, [tps([1.0, 2.0])])
    record = run_record(doc)
    assert record["workloads"] == doc["sides"][0]["workloads"] and record["schema_version"] == 1
    assert run_record(good()) == good()  # a result of version 1 waiting in incoming/ across an upgrade


@pytest.mark.parametrize(
    ("tamper", "says"),
    [
        # a worker sends samples; the ratios the series are judged on are the master's to compute
        (
            lambda d: d["sides"][1]["workloads"][0]["metrics"].append(
                {"name": "tps.rqps", "unit": "ratio", "direction": "higher", "samples": [9.0]}
            ),
            r"$.sides[1].workloads['ro'].metrics['tps.rqps']: a side carries raw samples only",
        ),
        (lambda d: d["sides"][0].update(sha="c" * 40), "the run's reference side is cccccccccccc but its options name"),
        (lambda d: d["sides"].pop(0), "the run's reference side is absent but its options name bbbbbbbbbbbb"),
        (lambda d: d["sides"].reverse(), "$.sides[0].label: expected 'reference'"),
        (lambda d: d["sides"][1].update(sha="c" * 40), "$.sides[1].sha: the run's side must be the commit"),
        (lambda d: d["sides"][1].update(patch="0" * 16), "$.sides[1].patch: a commit's run has no patch"),
        (lambda d: d["sides"][1].update(workloads=[]), "$.sides[1].workloads: an ok result must have"),
        (lambda d: d.update(job=3), "$: expected either commit"),
        (lambda d: d["sides"].append(dict(d["sides"][1])), "$.sides: expected a list of 1 to 2 sides"),
    ],
)
def test_a_run_result_that_does_not_add_up_is_refused_by_its_path(tamper, says):
    doc = sides_doc("a" * 40, [tps([110.0, 99.0])], [tps([100.0, 100.0])])
    tamper(doc)
    with pytest.raises(ResultError, match=re.escape(says)):
        run_record(doc)


def test_a_failed_run_keeps_its_own_side_alone_and_an_empty_reference_side_is_no_error():
    doc = sides_doc("a" * 40, [])
    doc.update(status="build-failed", log_excerpt="reference=REL_15_0: expected the reference commit's full sha")
    doc["recipe"]["options"] = {"reference": "REL_15_0"}  # refused before the reference became a side
    assert run_record(doc)["workloads"] == []
    only_instructions = sides_doc("a" * 40, [tps([1.0, 1.0])], [])
    assert run_record(only_instructions)["workloads"][0]["flags"] == []


def test_a_jobs_result_is_one_schema_with_a_runs_and_the_old_job_form_is_still_read():
    doc = sides_doc("a" * 40, [tps([1.0, 2.0])])
    doc.pop("commit")
    doc["job"] = 7
    doc["sides"] = [
        {"label": label, "sha": sha, "patch": None, "workloads": [tps([1.0, 2.0])]}
        for label, sha in (("A", "a" * 40), ("B", REF))
    ]
    assert validate_job(copy.deepcopy(doc))["sides"][1]["sha"] == REF
    with pytest.raises(ResultError, match=re.escape("$.job: a job's result, not a commit's run's")):
        run_record(copy.deepcopy(doc))  # the run's ingest refuses a job's file
    old = dict(doc, schema="perffarm-job-result", schema_version=1)
    assert validate(old) == old
    with pytest.raises(ResultError, match=re.escape("$.sides[1].label: expected 'B' (sides in label order)")):
        validate_job(dict(doc, sides=[doc["sides"][0], dict(doc["sides"][1], label="C")]))
    with pytest.raises(ResultError, match=re.escape("$.job: expected a job's result")):
        validate_job(sides_doc("a" * 40, [tps([1.0])]))


def test_the_master_stores_a_paired_run_with_ratios_it_computed_and_refuses_forged_ones(env):  # noqa: F811
    repo, settings = env
    head = repo.head()
    ctx = store.RunContext("fixture@local", "local", "poll", 1, got_revision=head, reference=REF)
    forged = sides_doc(head, [tps([110.0, 99.0])], [tps([100.0, 100.0])])
    forged["sides"][1]["workloads"][0]["metrics"].append(
        {"name": "tps.rqps", "unit": "ratio", "direction": "higher", "samples": [2.0]}
    )
    with pytest.raises(ingest.IngestRejected, match="a side carries raw samples only"):
        ingest.ingest_file(settings, put(settings, forged), ctx, "fixture")
    doc = sides_doc(head, [tps([110.0, 99.0])], [tps([100.0, 100.0])])
    ingest.ingest_file(settings, put(settings, doc, "b-2.json"), ctx, "fixture")
    conn = store.connect(settings.results_db)
    stored = {r[0]: json.loads(r[1]) for r in conn.execute("SELECT metric, samples FROM measurements")}
    assert stored["tps.rqps"] == pytest.approx([(1.1 * 0.99) ** 0.5]) and stored["tps.reference"] == [100.0, 100.0]
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
