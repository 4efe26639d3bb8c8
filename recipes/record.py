"""A run's result as the master stores it: the commit's side, with its ratios to the reference when paired.

The runner writes every result keyed by side (recipes/result.py, version 2): a run's sides are ``run`` and, when
paired, ``reference`` before it, each with its raw samples. The master stores a run as one record (a result of
version 1: the commit's workloads at the top level), and derives the paired metrics here, from the two sides' raw
samples (recipes/paired.py ``merge``): a worker sends samples, never the ratios the series are judged on. A run
result of version 1 already is a record, and is taken as it is.
"""

from __future__ import annotations

from typing import Any

from recipes.api import Metric, WorkloadResult
from recipes.paired import RATIO_SUFFIXES, REFERENCE, REFERENCE_SUFFIX, RUN, merge
from recipes.result import (
    CALLGRIND,
    COVERAGE,
    PLANS,
    RUN_RECORD_VERSION,
    WAITS,
    WAITS_REFERENCE,
    ResultError,
    validate,
    validate_record,
)

PAIRED_SUFFIXES = (REFERENCE_SUFFIX, *RATIO_SUFFIXES)  # metrics only a record of a paired run has


def paired_metric(workloads: list[dict[str, Any]]) -> str | None:
    """The JSON path (below the workloads' owner) of the first paired metric among `workloads`, or None."""
    for w in workloads:
        for m in w["metrics"]:
            if m["name"].endswith(PAIRED_SUFFIXES):
                return f"workloads[{w['name']!r}].metrics[{m['name']!r}]"
    return None


def run_record(doc: Any) -> dict[str, Any]:
    """The record of a run's result of any version: validated, its sides joined; ResultError says what is wrong
    (a job's result, a side that carries paired metrics, a reference other than the one the run was asked for)."""
    doc = validate(doc)
    if "commit" not in doc:  # a job's
        raise ResultError("$.job: a job's result, not a commit's run's; is this the build's result file?")
    if "sides" not in doc:
        return doc  # version 1: already the record
    sides = {s["label"]: s for s in doc["sides"]}
    for i, side in enumerate(doc["sides"]):
        found = paired_metric(side["workloads"])
        if found is not None:
            raise ResultError(
                f"$.sides[{i}].{found}: a side carries raw samples only; the master pairs a run's sides itself"
            )
    asked = doc["recipe"].get("options", {}).get("reference") or None
    reference = sides.get(REFERENCE)
    # a run that failed before its reference was checked (a malformed reference option) has its own side alone
    if (reference["sha"] if reference else None) != asked and (reference is not None or doc["status"] == "ok"):
        raise ResultError(
            f"$.sides: the run's reference side is {reference['sha'][:12] if reference else 'absent'} but its "
            f"options name {asked[:12] if asked else 'none'} ($.recipe.options.reference)"
        )
    run = sides[RUN]
    hashes = {w["name"]: {"config_hash": w["config_hash"]} if "config_hash" in w else {} for w in run["workloads"]}
    workloads = [_workload(w) for w in run["workloads"]]
    if reference is not None:
        workloads = merge(workloads, [_workload(w) for w in reference["workloads"]])
    record = {k: v for k, v in doc.items() if k != "sides"}
    record["schema_version"] = RUN_RECORD_VERSION
    record["workloads"] = [{**w.to_json(), **hashes[w.name]} for w in workloads]
    for key in (CALLGRIND, COVERAGE, PLANS, WAITS):
        if run.get(key):
            record[key] = run[key]
    if reference is not None and reference.get(WAITS):
        record[WAITS_REFERENCE] = reference[WAITS]
    return validate_record(record)


def _workload(w: dict[str, Any]) -> WorkloadResult:
    metrics = tuple(Metric(m["name"], m["unit"], m["direction"], tuple(m["samples"])) for m in w["metrics"])
    return WorkloadResult(w["name"], metrics, tuple(w.get("flags", ())))
