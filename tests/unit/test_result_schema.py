"""The result JSON validator: a good result passes; every kind of bad one is named by its JSON path."""

from __future__ import annotations

import copy
import re

import pytest

from recipes.result import ResultError, validate
from workers.hostinfo import machine_id

# A made-up machine; its id is the one its fingerprint gives, as the master checks (master/machinebinding.py).
FINGERPRINT = {"cpu_model": "x", "cores": 2, "memory_bytes": 1, "kernel": "6", "compiler": "gcc"}
MACHINE_ID = machine_id(FINGERPRINT)


def good() -> dict:
    return {
        "schema": "perffarm-result",
        "schema_version": 1,
        "commit": {"sha": "a" * 40, "ref": "master"},
        "recipe": {"name": "fixture", "version": 1, "config_hash": "abc"},
        "machine": {"id": MACHINE_ID, "fingerprint": dict(FINGERPRINT)},
        "host_checks": {"noisy": False},
        "status": "ok",
        "log_excerpt": "",
        "workloads": [
            {
                "name": "loop",
                "metrics": [{"name": "throughput", "unit": "ops/s", "direction": "higher", "samples": [1.0, 2, 3.5]}],
            }
        ],
    }


def test_good_result_passes():
    assert validate(good())["status"] == "ok"


def test_a_workload_may_carry_its_own_config_hash():
    doc = good()
    doc["workloads"][0]["config_hash"] = "0a24875ae55c870f"
    assert validate(doc)["workloads"][0]["config_hash"] == "0a24875ae55c870f"


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


# ------------------------------------------------------------------------- everything stored is bounded (#12)

SAMPLES = ["workloads", 0, "metrics", 0, "samples"]


def _deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"x": value}
    return value


BOUNDED = [
    (SAMPLES, [1.0, 10**400], "$.workloads[0].metrics[0].samples[1]"),  # OverflowError in math.isfinite
    (SAMPLES, [2**63], "$.workloads[0].metrics[0].samples[0]"),
    (SAMPLES, [-(2**63) - 1], "$.workloads[0].metrics[0].samples[0]"),
    (SAMPLES, [1e308], "$.workloads[0].metrics[0].samples[0]"),  # not a plausible measurement
    (SAMPLES, [1.0, -1e301], "$.workloads[0].metrics[0].samples[1]"),
    (SAMPLES, [None], "$.workloads[0].metrics[0].samples[0]"),
    (SAMPLES, [[1.0]], "$.workloads[0].metrics[0].samples[0]"),
    (["started_at"], {"at": 1}, "$.started_at"),
    (["started_at"], "2026-11-22T03:04:12+00:00" + " " * 100, "$.started_at"),
    (["finished_at"], "yesterday", "$.finished_at"),
    (["finished_at"], 1700000000, "$.finished_at"),
    (["recipe", "version"], 2**63, "$.recipe.version"),
    (["recipe", "version"], 10**400, "$.recipe.version"),
    (["machine", "fingerprint", "memory_bytes"], 2**64, "$.machine.fingerprint.memory_bytes"),
    (["commit", "ref"], "master\ud800", "$.commit.ref"),  # a lone surrogate: SQLite cannot store it
    (["commit", "ref"], "mas\x00ter", "$.commit.ref"),
    (["commit", "ref"], "r" * 256, "$.commit.ref"),
    (["machine", "id"], "m" * 129, "$.machine.id"),
    (["machine", "id"], "\udfff", "$.machine.id"),
    (["recipe", "config_hash"], "h" * 129, "$.recipe.config_hash"),
    (["recipe", "config_hash"], "a\x1eb", "$.recipe.config_hash"),  # part of each series' key on the site
    (["workloads", 0, "config_hash"], "h" * 129, "$.workloads[0].config_hash"),
    (["workloads", 0, "config_hash"], "a\x1fb", "$.workloads[0].config_hash"),
    (["workloads", 0, "config_hash"], "", "$.workloads[0].config_hash"),
    (["workloads", 0, "config_hash"], 7, "$.workloads[0].config_hash"),
    (["workloads", 0, "metrics", 0, "unit"], "u" * 129, "$.workloads[0].metrics[0].unit"),
    (["workloads", 0, "metrics", 0, "unit"], "ms\ud83d", "$.workloads[0].metrics[0].unit"),
    (["log_excerpt"], "error \ud800", "$.log_excerpt"),
    (["machine", "fingerprint", "kernel"], "k" * 1025, "$.machine.fingerprint.kernel"),
    (["machine", "fingerprint", "extra"], ["x"] * 257, "$.machine.fingerprint.extra"),
    (["host_checks"], {"k": "x" * 1025}, "$.host_checks.k"),
    (["host_checks"], {"k": 2**70}, "$.host_checks.k"),
    (["host_checks"], {"k": [1, "\x00"]}, "$.host_checks.k[1]"),
    (["host_checks"], {"\ud800": 1}, '$.host_checks["\\ud800"]'),
    (["host_checks"], {f"k{i}": i for i in range(65)}, "$.host_checks"),
    (["host_checks"], _deep(40), "$.host_checks.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x"),
    (["host_checks"], {"noisy": "yes"}, "$.host_checks.noisy"),
    (["host_checks"], {"noisy_reasons": "SMT"}, "$.host_checks.noisy_reasons"),
    (["recipe", "options"], {"samples": 3}, "$.recipe.options.samples"),
    (["recipe", "options"], {"a b": "x" * 1025}, '$.recipe.options["a b"]'),
    (["timings"], {"build_seconds": "1 s"}, "$.timings.build_seconds"),
    (["workloads", 0, "flags"], ["f" * 129], "$.workloads[0].flags[0]"),
    (["workloads", 0, "flags"], ["sla-miss"] * 65, "$.workloads[0].flags"),
    (["workloads", 0, "flags"], [""], "$.workloads[0].flags[0]"),
    (["unknown"], "\ud800", "$.unknown"),  # fields the schema does not name are stored too (the raw result)
    (["unknown"], [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]], "$.unknown[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]"),
]


@pytest.mark.parametrize("path, value, where", BOUNDED, ids=[f"{i}:{c[2][:40]}" for i, c in enumerate(BOUNDED)])
def test_every_stored_field_is_bounded(path, value, where):
    with pytest.raises(ResultError) as e:
        validate(_break(path, value))
    assert str(e.value).startswith(where + ":"), str(e.value)
    str(e.value).encode("utf-8")  # the message itself is storable (it becomes a rejection row)
    assert len(str(e.value)) < 400


def test_the_total_number_of_samples_is_bounded():
    doc = good()
    per = 100_000
    metrics = [{"name": f"m{j}", "unit": "ops/s", "direction": "higher", "samples": [1.0] * per} for j in range(10)]
    doc["workloads"] = [{"name": "a", "metrics": metrics}]
    validate(doc)  # 1,000,000 in all: the largest allowed result
    doc["workloads"].append(
        {"name": "b", "metrics": [{"name": "m", "unit": "s", "direction": "lower", "samples": [1.0]}]}
    )
    with pytest.raises(ResultError, match=r"^\$\.workloads: more than 1000000 samples in all"):
        validate(doc)


def test_plausible_extremes_and_a_realistic_result_pass():
    doc = good()
    doc["workloads"][0]["metrics"][0]["samples"] = [0, -1.5, 1e300, -1e300, 2**63 - 1, 5e-324]
    doc.update(
        started_at="2026-11-22T03:04:12+00:00",
        finished_at="2026-11-22T03:04:13.5+00:00",
        timings={"build_seconds": 0.2, "bench_seconds": 1},
    )
    doc["host_checks"] = {
        "aslr": 2,
        "cpu_governor": ["ondemand", "performance"],
        "load_1min": 0.3,
        "noisy": True,
        "noisy_reasons": ["ASLR is on (randomize_va_space != 0)"],
        "smt_active": None,
        "swap_bytes": 0,
        "transparent_hugepages": "madvise",
        "turbo": None,
        "virtualized": "kvm",
    }
    doc["recipe"]["options"] = {"workloads": "a,b", "samples": "3"}
    doc["commit"]["ref"] = "refs/tags/REL_17_5"
    doc["machine"]["fingerprint"]["cpu_model"] = "Intel\u00ae Xeon\u00ae \x1b[0m"  # odd but storable text
    assert validate(doc) is doc


def test_clean_text_makes_log_text_storable():
    from recipes.result import clean_text, text_problem

    dirty = "make: *** [x] Error 1\x00\udc80 caf\u00e9"
    assert text_problem(dirty, 100) is not None
    assert clean_text(dirty) == "make: *** [x] Error 1\ufffd\ufffd caf\u00e9"
    assert text_problem(clean_text(dirty), 100) is None


def _profile_doc():
    from recipes.callgrind import EdgeCost, FunctionCost, Profile

    prof = Profile(
        "Ir",
        1500,
        {
            "exec_simple_query": FunctionCost("exec_simple_query", "postgres.c", 10, 500, 1500),
            "standard_ExecutorRun": FunctionCost("standard_ExecutorRun", "execMain.c", 300, 1000, 1000),
        },
        {("exec_simple_query", "standard_ExecutorRun"): EdgeCost(10, 1000)},
    )
    return prof.to_json()


def test_a_result_may_carry_callgrind_profiles_of_its_instruction_workloads():
    doc = good()
    doc["callgrind"] = {"loop": {"queries": 10, "profile": _profile_doc()}}
    assert validate(doc)["callgrind"]["loop"]["queries"] == 10


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda p: p.update(queries=0), "$.callgrind.loop.queries"),
        (lambda p: p["profile"].update(total=1), "$.callgrind.loop.profile"),
        (lambda p: p["profile"]["functions"].update({"x" * 5000: [0, 1, 0, 0]}), "function name"),
        (lambda p: p["profile"]["functions"].update({"bad\x00name": [0, 1, 0, 0]}), "function name"),
        (lambda p: p["profile"].update(version=99), "version"),
    ],
)
def test_a_bad_callgrind_profile_rejects_the_result_and_says_where(change, where):
    doc = good()
    doc["callgrind"] = {"loop": {"queries": 10, "profile": _profile_doc()}}
    change(doc["callgrind"]["loop"])
    with pytest.raises(ResultError, match=re.escape(where)):
        validate(doc)
