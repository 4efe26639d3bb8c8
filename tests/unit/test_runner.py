"""The recipe runner as a worker runs it: the shipped zipapp, build and bench phases, failures as results."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import zipfile

import pytest

from master import shipping
from recipes import registry
from recipes.record import run_record
from recipes.result import validate
from tests.harness import BENCH_C

SHA = "b" * 40


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    return shipping.build_zipapp(tmp_path_factory.mktemp("ship"))


def run_phase(pyz, phase, tmp_path, *extra):
    return subprocess.run(
        [
            sys.executable,
            str(pyz),
            phase,
            "--recipe",
            "fixture",
            "--src",
            str(tmp_path / "src"),
            "--work",
            str(tmp_path / "work"),
            "--state",
            str(tmp_path / "state"),
            "--sha",
            SHA,
            "--ref",
            "master",
            "--result",
            str(tmp_path / "result.json"),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def write_src(tmp_path, text):
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "perffarm_bench.c").write_text(text)


def test_zipapp_is_deterministic_and_self_contained(tmp_path, pyz):
    again = shipping.build_zipapp(tmp_path)
    assert again.name == pyz.name and again.read_bytes() == pyz.read_bytes()
    names = zipfile.ZipFile(pyz).namelist()
    assert "__main__.py" in names and "recipes/runner.py" in names and "workers/hostinfo.py" in names
    assert not any("__pycache__" in n for n in names)
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-I", str(pyz), "list"], capture_output=True, text=True, check=True, cwd=tmp_path
        ).stdout
    )
    assert {r["name"] for r in listed} == set(registry.discover())


def test_build_and_bench_write_a_valid_result(tmp_path, pyz):
    write_src(tmp_path, BENCH_C.format(value=1234.5, sleep_us=0))
    build = run_phase(pyz, "build", tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    assert not (tmp_path / "result.json").exists()
    bench = run_phase(pyz, "bench", tmp_path, "--option", "samples=3")
    assert bench.returncode == 0, bench.stdout + bench.stderr
    raw = validate(json.loads((tmp_path / "result.json").read_text()))
    # one schema keyed by side: a run is its commit's side alone when unpaired
    assert raw["schema_version"] == 2 and [(s["label"], s["sha"], s["patch"]) for s in raw["sides"]] == [
        ("run", SHA, None)
    ]
    doc = run_record(raw)  # what the master stores: the commit's side as the run's workloads
    assert doc["workloads"] == raw["sides"][0]["workloads"] and "sides" not in doc
    assert doc["status"] == "ok" and doc["commit"] == {"sha": SHA, "ref": "master"}
    metric = doc["workloads"][0]["metrics"][0]
    assert metric["samples"] == [1234.5] * 3 and metric["direction"] == "higher"
    fixture = registry.get("fixture")
    assert doc["recipe"]["config_hash"] == fixture.config_hash()
    assert doc["workloads"][0]["config_hash"] == fixture.workload_hash("loop") != fixture.config_hash()
    assert doc["recipe"]["options"] == {"samples": "3"}
    assert doc["machine"]["fingerprint"]["cores"] >= 1 and "noisy" in doc["host_checks"]
    assert set(doc["timings"]) == {"build_seconds", "bench_seconds"}
    # milliseconds: [finished_at - bench_seconds, finished_at] is when the run measured (the fleet's lock check)
    started, finished = (dt.datetime.fromisoformat(doc[k]) for k in ("started_at", "finished_at"))
    assert started <= finished - dt.timedelta(seconds=doc["timings"]["bench_seconds"]) <= finished
    assert "." in doc["finished_at"]


def test_compile_error_is_a_build_failed_result_with_the_log(tmp_path, pyz):
    write_src(tmp_path, "int main(void) { return syntax error; }\n")
    build = run_phase(pyz, "build", tmp_path)
    assert build.returncode == 3
    doc = run_record(json.loads((tmp_path / "result.json").read_text()))
    assert doc["status"] == "build-failed" and doc["workloads"] == []
    assert "error" in doc["log_excerpt"] and "perffarm_bench.c" in doc["log_excerpt"]


def test_bench_without_a_build_is_a_usage_error(tmp_path, pyz):
    write_src(tmp_path, BENCH_C.format(value=1, sleep_us=0))
    bench = run_phase(pyz, "bench", tmp_path)
    assert bench.returncode == 2 and "run the build phase first" in bench.stderr
    # one pair of phases for runs and jobs: a bench measures only what its own build built
    assert run_phase(pyz, "build", tmp_path, "--option", "samples=1").returncode == 0
    other = run_phase(pyz, "bench", tmp_path, "--sha", "c" * 40)
    assert other.returncode == 2 and f"no successful build of the run of {'c' * 12}" in other.stderr
    job = run_phase(pyz, "bench", tmp_path, "--job", "3", "--side", f"A={SHA}", "--side", f"B={SHA}")
    assert job.returncode == 2 and "no successful build of job 3" in job.stderr
    assert not (tmp_path / "result.json").exists()


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--side", f"A={SHA}"), "--side and --patch are a job's, with --job"),
        (("--job", "3", "--side", f"A={SHA}"), "a job has 2 to 8 sides, got 1"),
    ],
)
def test_a_run_and_a_job_are_told_apart_by_their_arguments(tmp_path, pyz, extra, says):
    write_src(tmp_path, BENCH_C.format(value=1, sleep_us=0))
    proc = run_phase(pyz, "build", tmp_path, *extra)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_crashing_benchmark_is_a_bench_failed_result(tmp_path, pyz):
    write_src(tmp_path, "#include <stdlib.h>\nint main(void){ abort(); }\n")
    assert run_phase(pyz, "build", tmp_path).returncode == 0
    bench = run_phase(pyz, "bench", tmp_path)
    assert bench.returncode == 3
    doc = validate(json.loads((tmp_path / "result.json").read_text()))
    assert doc["status"] == "bench-failed" and "exited with status" in doc["log_excerpt"]


def test_a_log_with_nul_bytes_is_a_result_the_master_accepts(tmp_path, pyz):
    # the excerpt is the program's output: NUL (which the master refuses to store as text) becomes U+FFFD
    write_src(
        tmp_path, '#include <stdio.h>\nint main(void){ fwrite("bad\\0line \\377\\n", 1, 11, stdout); return 0; }\n'
    )
    assert run_phase(pyz, "build", tmp_path).returncode == 0
    assert run_phase(pyz, "bench", tmp_path).returncode == 3
    doc = validate(json.loads((tmp_path / "result.json").read_text()))
    assert doc["status"] == "bench-failed" and "bad\ufffdline \ufffd" in doc["log_excerpt"]


def test_unknown_recipe_is_named(tmp_path, pyz):
    proc = subprocess.run(
        [
            sys.executable,
            str(pyz),
            "build",
            "--recipe",
            "nope",
            "--src",
            ".",
            "--work",
            "w",
            "--state",
            "s",
            "--sha",
            SHA,
            "--ref",
            "m",
            "--result",
            "r.json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "no recipe named 'nope'" in proc.stderr and "fixture" in proc.stderr


def test_every_recipe_has_a_valid_definition():
    for name, recipe in registry.discover().items():
        assert recipe.name == name and recipe.version >= 1 and recipe.description
        assert len(recipe.config_hash()) == 16
