"""The result JSON validator: a good result passes; every kind of bad one is named by its JSON path."""

from __future__ import annotations

import copy

import pytest

from recipes.result import ResultError, validate


def good() -> dict:
    return {
        "schema": "perffarm-result",
        "schema_version": 1,
        "commit": {"sha": "a" * 40, "ref": "master"},
        "recipe": {"name": "fixture", "version": 1, "config_hash": "abc"},
        "machine": {
            "id": "m1",
            "fingerprint": {"cpu_model": "x", "cores": 2, "memory_bytes": 1, "kernel": "6", "compiler": "gcc"},
        },
        "host_checks": {"noisy": False},
        "status": "ok",
        "log_excerpt": "",
        "workloads": [
            {"name": "loop", "metrics": [{"name": "throughput", "unit": "ops/s", "direction": "higher",
                                          "samples": [1.0, 2, 3.5]}]}
        ],
    }


def test_good_result_passes():
    assert validate(good())["status"] == "ok"


def test_failed_result_needs_no_workloads_but_an_excerpt():
    doc = good()
    doc.update(status="build-failed", workloads=[], log_excerpt="error: x.c:1: expected ';'")
    validate(doc)
    doc["log_excerpt"] = ""
    with pytest.raises(ResultError, match=r"^\$\.log_excerpt"):
        validate(doc)


def _break(path, value):
    doc = good()
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    "path, value, where",
    [
        (["schema"], "other", "$.schema"),
        (["schema_version"], 2, "$.schema_version"),
        (["commit", "sha"], "abc", "$.commit.sha"),
        (["commit", "sha"], "A" * 40, "$.commit.sha"),
        (["commit", "ref"], "", "$.commit.ref"),
        (["recipe", "version"], -1, "$.recipe.version"),
        (["recipe", "name"], "../x", "$.recipe.name"),
        (["machine", "fingerprint", "cores"], "two", "$.machine.fingerprint.cores"),
        (["machine"], KeyError, "$.machine"),
        (["status"], "great", "$.status"),
        (["workloads"], [], "$.workloads"),
        (["workloads", 0, "metrics", 0, "direction"], "up", "$.workloads[0].metrics[0].direction"),
        (["workloads", 0, "metrics", 0, "samples"], [], "$.workloads[0].metrics[0].samples"),
        (["workloads", 0, "metrics", 0, "samples"], [1, float("nan")], "$.workloads[0].metrics[0].samples[1]"),
        (["workloads", 0, "metrics", 0, "samples"], [1, "2"], "$.workloads[0].metrics[0].samples[1]"),
        (["workloads", 0, "metrics", 0, "samples"], [True], "$.workloads[0].metrics[0].samples[0]"),
        (["workloads", 0, "metrics", 0, "samples"], [float("inf")], "$.workloads[0].metrics[0].samples[0]"),
        (["workloads", 0, "flags"], "sla", "$.workloads[0].flags"),
    ],
)
def test_bad_results_name_the_field(path, value, where):
    with pytest.raises(ResultError) as e:
        validate(_break(path, value))
    assert str(e.value).startswith(where + ":")


def test_duplicate_workload_is_rejected():
    doc = good()
    doc["workloads"].append(copy.deepcopy(doc["workloads"][0]))
    with pytest.raises(ResultError, match="appears twice"):
        validate(doc)


def test_not_an_object():
    with pytest.raises(ResultError, match=r"^\$: expected an object"):
        validate([1, 2])
