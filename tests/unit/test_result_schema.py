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
        (["schema_version"], 3, "$.schema_version"),
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
    (SAMPLES, [1.0, 1e31], "$.workloads[0].metrics[0].samples[1]"),  # any ratio of two samples must be finite
    (SAMPLES, [1.0, 1e-300], "$.workloads[0].metrics[0].samples[1]"),
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
    doc["workloads"][0]["metrics"][0]["samples"] = [1e-30, 1e30, 2**63 - 1, 1, 1500.25]
    doc["workloads"][0]["metrics"].append(
        {"name": "ctx_switches_per_tx", "unit": "switches/tx", "direction": "lower", "samples": [0, 0.0, 1e-30, 1e30]}
    )
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


# ------------------------------------------------------------- what a sample can be, by its metric (#26 item 4)


def _metric(unit: str, direction: str, samples: list) -> dict:
    doc = good()
    doc["workloads"][0]["metrics"] = [{"name": "m", "unit": unit, "direction": direction, "samples": samples}]
    return doc


# Every unit and direction the recipes emit (recipes/fixture.py, recipes/paired.py, recipes/pg/profile.py _record,
# insertbench, memprobe, instructions) with the values each can honestly take: none is rejected.
HONEST = [
    ("ops/s", "higher", [6000.0, 5999.5]),  # fixture throughput (and its `.reference`)
    ("s", "lower", [0.0022, 0.0]),  # fixture wall time
    ("ratio", "higher", [0.9, 1.1]),  # paired `.rqps`
    ("tx/s", "higher", [1234.5]),  # pgbench tps
    ("conn/s", "higher", [310.0]),  # connection workload
    ("queries/s", "higher", [55.0]),  # insertbench qps
    ("rows/s", "higher", [0.5, 9000.0]),  # insertbench inserts, background_inserts, indexed
    ("connections", "higher", [0.0, 100.0]),  # idle connections really held: 0 when none could be opened
    ("ms", "lower", [0.0, 0.123, 2500.0]),  # latency_avg, p95, p99 (pgbench prints 3 decimals: 0.000 is possible)
    ("us/tx", "lower", [0.0, 45.2]),  # cpu_per_tx: rusage ticks can round to 0
    ("switches/tx", "lower", [0.0, 0.02]),  # ctx_switches_per_tx: a tx that never yields the CPU
    ("KiB", "lower", [0.0, 123456.0]),  # peak_backend_rss, rss_peak, rss_growth
    ("instructions/query", "lower", [181234.5]),  # instruction counts
    ("instructions/tx", "lower", [2**40]),
    ("errors/s", "lower", [0.0, 2.0]),  # only a higher-is-better rate is a throughput: errors may be 0
]


@pytest.mark.parametrize("unit, direction, samples", HONEST, ids=[f"{u}-{d}" for u, d, _ in HONEST])
def test_every_value_a_recipe_can_honestly_measure_passes(unit, direction, samples):
    doc = _metric(unit, direction, samples)
    assert validate(doc) is doc


P0 = "$.workloads[0].metrics[0].samples[0]"
BROKEN = [
    ("ops/s", "higher", [0.0], "must be above 0 to form ratios"),  # side A measured 0 ops/s: no ratio to it
    ("ops/s", "higher", [0], "must be above 0 to form ratios"),
    ("tx/s", "higher", [-5.0], "must be above 0 to form ratios"),
    ("ratio", "higher", [0.0], "a ratio must be above 0"),
    ("ratio", "higher", [-1.0], "a ratio must be above 0"),
    ("ms", "lower", [-0.5], "cannot be negative"),
    ("switches/tx", "lower", [-1], "cannot be negative"),
    ("connections", "higher", [-2.0], "cannot be negative"),
    ("KiB", "lower", [-4.0], "cannot be negative"),
    ("errors/s", "lower", [-1.0], "cannot be negative"),  # a rate where lower is better may be 0, never below
    ("tx/s", "higher", [1e-300], "below 1e-30 and not 0"),  # 1e300 against it: an infinite ratio
    ("ms", "lower", [5e-324], "below 1e-30 and not 0"),
    ("tx/s", "higher", [1e300], "beyond ±1e+30"),
    ("ms", "lower", [-1e31], "beyond ±1e+30"),
]


@pytest.mark.parametrize("unit, direction, samples, rule", BROKEN, ids=[f"{b[0]}:{b[2][0]}" for b in BROKEN])
def test_a_sample_the_metric_cannot_be_is_rejected_with_its_path_and_the_rule(unit, direction, samples, rule):
    with pytest.raises(ResultError) as e:
        validate(_metric(unit, direction, samples))
    message = str(e.value)
    assert message.startswith(P0 + ": ") and rule in message, message
    assert "\n" not in message and len(message) < 400


def test_a_job_side_that_measured_zero_is_rejected_with_the_sides_path():
    from recipes.result import validate_job

    side = lambda label, value: {  # noqa: E731
        "label": label,
        "sha": "a" * 40,
        "patch": None,
        "workloads": [
            {
                "name": "loop",
                "metrics": [{"name": "throughput", "unit": "ops/s", "direction": "higher", "samples": [value]}],
            }
        ],
    }
    doc = good()
    del doc["commit"], doc["workloads"]
    doc.update(schema="perffarm-job-result", job=1, sides=[side("A", 1000.0), side("B", 900.0)])
    validate_job(doc)
    doc["sides"][0]["workloads"][0]["metrics"][0]["samples"] = [0.0]
    with pytest.raises(ResultError, match=r"^\$\.sides\[0\]\.workloads\[0\]\.metrics\[0\]\.samples\[0\]: 0\.0 ops/s: "):
        validate_job(doc)
