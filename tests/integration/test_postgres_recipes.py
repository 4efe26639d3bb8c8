"""The PostgreSQL recipes on real PostgreSQL 15 from Debian's source package: build, bench, failures, A/B, farm.

One build is shared by every test, and by every other file of the run: the session fixture `pg15`
(tests/pg_support.py) makes the git repository with scripts/pg-source-repo.sh (deterministic shas), checks out its
head in a private clone under a persistent work directory and builds it once; the install cache (keyed by sha) and
ccache live in ~/.cache/perffarm, so a rerun on the same machine starts warm, and a cold machine pays one cold
build (~6 min on 2 cores). Test (e), a whole farm on real PostgreSQL, is tests/integration/test_pg_farm.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from master import compare
from master.explain.counters import is_counter
from recipes.api import BenchFailed, Context, checkout_layout
from recipes.record import run_record
from recipes.result import validate
from tests.benchmarks.pg_inject import busy_loop_patch, lock_hold_patch
from tests.pg_support import PG15_WORK, Pg, git

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
WORK = PG15_WORK
RECIPE_WORK = checkout_layout(WORK)[1]  # the runner's --work, as `perffarm compare --work WORK` lays it out
FAST = [
    "--option",
    "samples=2",
    "--option",
    "duration_s=1",
    "--option",
    "warmup_s=0",
    "--option",
    "scale=1",
    "--option",
    "instruction_samples=2",
]


@pytest.fixture
def pg(pg15: Pg) -> Pg:
    return pg15


def runner(
    phase: str, pg: Pg, tmp: Path, *extra: str, sha: str | None = None, popen: bool = False
) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "recipes",
        phase,
        "--recipe",
        "pg-quick",
        "--src",
        str(pg.src),
        "--work",
        str(RECIPE_WORK),
        "--state",
        str(tmp / "state"),
        "--sha",
        sha or pg.sha,
        "--ref",
        "compare",
        "--result",
        str(tmp / "result.json"),
        *extra,
    ]
    if popen:
        return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)


def processes_running(prefix: Path) -> list[int]:
    """Pids of processes whose executable lives under `prefix` (a server that was not stopped)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.readlink(proc / "exe").startswith(str(prefix)):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


@pytest.mark.timeout(2400)  # the first test pays for (or waits on) the session's cold 15.18 build: 14 min at load 8
def test_pg_quick_end_to_end_through_the_farm(pg: Pg, tmp_path: Path) -> None:
    """Every workload of the quick profile, with its default sample counts, through a real master and worker: the
    shipped recipes' runner builds (from the install cache) and benches it, and the master ingests the whole
    result. The worker's result document is checked as the runner wrote it: every metric, the waits of every
    sample, repeatable instruction counts, no server or data directory left. Nothing here judges a pgbench figure,
    so the farm's recipe options shorten each pgbench sample to a second with no warm-up (the profile's 6-s samples
    and 3-s warm-ups cost about 3 of this test's 5 minutes); samples stay 5 and instruction samples 2. (Until
    2026-11-27 the runner's phases ran the same profile again, by hand, in a test of their own.)"""
    from tests.harness import Farm

    # the profile's tmpfs, in a directory of this test's own: no other test's servers run there
    pgdata = Path(tempfile.mkdtemp(prefix="perffarm-test-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    env = {
        "PF_PG_INSTALL_CACHE": str(RECIPE_WORK / "installs"),  # reuse the module's build
        "PERFFARM_RECIPES_OPTIONS": f"pg-quick:duration_s=1 pg-quick:warmup_s=0 pg-quick:pgdata={pgdata}",
    }
    try:
        with Farm(tmp_path / "data", str(pg.repo), recipes=("pg-quick",), env=env) as farm:
            farm.force("pg-quick@local", pg.sha, "master")
            runs = farm.wait_for_runs(1, timeout=1200)
            (build,) = farm.builds()
            build_log = farm.step_log(build["buildid"], "build", "stdio")
            (result,) = farm.settings.worker_dir("local").glob("pg-quick*/result.json")
            doc = run_record(json.loads(result.read_text()))  # as the master stores it
        left = list(pgdata.glob("pf-*"))
    finally:
        shutil.rmtree(pgdata, ignore_errors=True)
    assert "reusing the cached install" in build_log, build_log[-3000:]
    run = runs[0]
    assert run["status"] == "ok", run
    assert run["sha"] == pg.sha
    m = run["measurements"]
    assert len(m[("pgbench-ro-prepared-c1", "tps")]) == 5
    instr = m[("instr-point-select", "instructions")]
    assert len(instr) == 2 and instr[0] == pytest.approx(instr[1], rel=1e-4)
    # the whole profile was measured and stored: every result workload it names (op-join-hash, pgbench-tpch-q01, …)
    from recipes.pg.profile import load_profile, result_names, workloads

    quick = {name for w in workloads(load_profile("quick")) for name in result_names(w)}
    stored = {workload for workload, _ in m}
    assert stored == quick, f"missing {sorted(quick - stored)}, unexpected {sorted(stored - quick)}"

    # the runner's result document, as the worker wrote it
    assert doc["status"] == "ok"
    by_name = {w["name"]: {m["name"]: m for m in w["metrics"]} for w in doc["workloads"]}
    for name in (
        "pgbench-ro-prepared-c1",
        "pgbench-ro-prepared-c2",
        "pgbench-ro-simple-c1",
        "pgbench-rw-prepared-c1",
        "pgbench-rw-simple-c1",
    ):
        metrics = by_name[name]
        assert len(metrics["tps"]["samples"]) == 5 and min(metrics["tps"]["samples"]) > 0
        for metric in ("latency_avg", "latency_p95", "latency_p99", "cpu_per_tx", "ctx_switches_per_tx"):
            assert metrics[metric]["direction"] == "lower" and min(metrics[metric]["samples"]) > 0, (name, metric)
        assert metrics["peak_backend_rss"]["samples"][0] > 1000  # KiB: a backend is more than 1 MiB
        # issue #29: each sample's wait events, sampled at 20 Hz by one psql per sample (recipes/pg/waits.py)
        sampled = doc["waits"][name]
        assert len(sampled) == 5 and all(s["hz"] == 20.0 and s["ticks"] >= 5 for s in sampled), (name, sampled)
        assert all(sum(s["shares"].values()) == pytest.approx(1.0, abs=1e-3) for s in sampled if s["observations"])
    assert sum(s["observations"] for s in doc["waits"]["pgbench-ro-prepared-c2"]) > 0, doc["waits"]
    assert set(doc["waits"]) <= set(by_name) and "instr-point-select" not in doc["waits"]
    validate(doc)  # what the master checks at ingest
    for name in ("instr-point-select", "instr-point-select-prepared", "instr-simple-update"):
        s = by_name[name]["instructions"]["samples"]
        assert len(s) == 2 and s[0] > 10_000
        assert abs(s[0] - s[1]) / s[0] < 1e-4, f"{name}: instruction counts not repeatable: {s}"
    # Prepared statements skip parse/plan: fewer instructions per query than the simple protocol.
    assert (
        by_name["instr-point-select-prepared"]["instructions"]["samples"][0]
        < by_name["instr-point-select"]["instructions"]["samples"][0]
    )
    assert doc["host_checks"]["noisy"] in (True, False)
    assert processes_running(pg.install.prefix) == []
    assert left == []  # the run directories under pgdata were removed


def test_server_crash_is_a_bench_failed_result(pg: Pg, tmp_path: Path) -> None:
    assert runner("build", pg, tmp_path).returncode == 0
    pgdata = tmp_path / "pgdata"
    proc = runner(
        "bench",
        pg,
        tmp_path,
        "--option",
        "samples=100",
        "--option",
        "duration_s=1",
        "--option",
        "warmup_s=0",
        "--option",
        "scale=1",
        "--option",
        "workloads=pgbench-ro-simple-c1",
        "--option",
        f"pgdata={pgdata}",
        popen=True,
    )
    assert isinstance(proc, subprocess.Popen)
    try:
        deadline = time.monotonic() + 120
        pid = None
        while time.monotonic() < deadline and pid is None:
            for f in pgdata.glob("pf-*/data/postmaster.pid"):
                try:
                    lines = f.read_text().splitlines()
                    # initdb's standalone backends write this file too; line 8 says a postmaster is ready.
                    if len(lines) >= 8 and lines[7].strip() == "ready":
                        pid = int(lines[0])
                except (OSError, ValueError, IndexError):
                    pass
            time.sleep(0.2)
        assert pid is not None, "the server never started"
        time.sleep(4)  # into the samples
        os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, out[-3000:]
    doc = run_record(json.loads((tmp_path / "result.json").read_text()))
    assert doc["status"] == "bench-failed" and doc["workloads"] == []
    assert "server" in doc["log_excerpt"].lower()
    assert processes_running(pg.install.prefix) == []
    assert list(pgdata.glob("pf-*")) == [], "the run directory was left behind"


def test_compare_separates_injected_work_from_a_vs_a(pg: Pg, tmp_path: Path) -> None:
    patch = tmp_path / "busy.patch"
    patch.write_text(busy_loop_patch(pg.src, 2000, sha=pg.sha))
    # ab_slices=2: nothing here judges pgbench-ro-prepared-c1's figures, only that its rounds were taken; at the
    # profile's 6 slices of at least a second each, its 1-s samples ran 6 s per side (pgbench-tpch has 2 of its own)
    opts = [
        "--option",
        "workloads=instr-point-select,pgbench-ro-prepared-c1",
        "--option",
        "samples=3",
        "--option",
        "duration_s=1",
        "--option",
        "warmup_s=0",
        "--option",
        "ab_slices=2",
        "--option",
        "scale=1",
        "--option",
        "instruction_samples=2",
    ]
    same, slower = tmp_path / "aa.json", tmp_path / "ab.json"
    # A vs A also runs pgbench-tpch: the 22 analytic queries, each one's latency paired (issue #27)
    aa_opts = [o + ",pgbench-tpch" if o.startswith("workloads=") else o for o in opts]
    a_vs_a = compare.main(["--repo", str(pg.repo), "--work", str(WORK), pg.sha, pg.sha, *aa_opts, "--json", str(same)])
    assert a_vs_a in (compare.EXIT_OK, compare.EXIT_FOUND)  # the gate may flag a noisy wall-clock metric; judged below
    assert (
        compare.main(
            [
                "--repo",
                str(pg.repo),
                "--work",
                str(WORK),
                pg.sha,
                pg.sha,
                "--patch",
                str(patch),
                *opts,
                "--json",
                str(slower),
            ]
        )
        == compare.EXIT_FOUND  # the injected work is a regression: compare is a gate
    )

    def instr(path: Path) -> dict:
        doc = json.loads(path.read_text())
        return next(
            c for c in doc["comparisons"] if c["workload"] == "instr-point-select" and c["metric"] == "instructions"
        )

    aa, ab = instr(same), instr(slower)
    assert aa["ratio"] == pytest.approx(1.0, abs=1e-4) and aa["verdict"] == "same"
    assert ab["ratio"] > 1.02 and ab["verdict"] == "regression", ab
    # issue #16: where the instructions went. The busy loop is the only change, so the top grower by self
    # instructions is standard_ExecutorRun, and its delta is the measured change in instructions per query
    (explained,) = [e for e in json.loads(slower.read_text())["explained"] if e["workload"] == "instr-point-select"]
    top = explained["rows"][0]
    measured = statistics.median(ab["b"]) - statistics.median(ab["a"])
    delta_self = top["self_b"] - top["self_a"]
    print(f"\nexplain: {explained['summary']}; measured {measured:+,.1f}/query, profile {delta_self:+,.1f}/query")
    assert top["name"] == "standard_ExecutorRun", explained["rows"][:3]
    assert delta_self == pytest.approx(measured, rel=0.05)
    assert "standard_ExecutorRun" in explained["summary"]
    # the profiles' totals are the measured instructions per query of the sample they profile (issue #16: 0.1%)
    assert explained["reconciled"]["ok"] and abs(explained["reconciled"]["error_b"]) <= 0.001, explained["reconciled"]
    assert (WORK / "explain" / "instr-point-select-B-vs-A.svg").read_text().startswith("<svg")
    tps = [c for c in json.loads(same.read_text())["comparisons"] if c["metric"] == "tps"]
    # samples=3 is rounded up to whole order-balanced blocks of two rounds (issue #28): 4 per side
    assert tps and len(tps[0]["a"]) == 4 and len(tps[0]["b"]) == 4
    # issue #27: paired wall clock per analytic query, from one pgbench workload's per-statement latencies
    per_query = {
        c["workload"]: c
        for c in json.loads(same.read_text())["comparisons"]
        if c["workload"].startswith("pgbench-tpch-") and c["metric"] == "latency_avg"
    }
    assert sorted(per_query) == [f"pgbench-tpch-q{i:02d}" for i in range(1, 23)]
    shown = {w: f"{c['ratio']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}]" for w, c in per_query.items()}
    print("\nA vs A per query: " + ", ".join(f"{w[-3:]} {v}" for w, v in shown.items()))
    for w, c in per_query.items():
        assert len(c["a"]) == len(c["b"]) == 4 and min(c["a"] + c["b"]) > 0, c
        assert c["direction"] == "lower" and c["unit"] == "ms"
        assert c["ci_low"] <= c["ratio"] <= c["ci_high"], (w, shown[w])
        # no query measures one side's latency for the other's: its interval reaches the band [0.67, 1.5]. Not
        # its point estimate, which 4 rounds at load 14 put at 1.521 [0.681, 3.398] with no code change
        assert c["ci_low"] < 1.5 and c["ci_high"] > 0.67, (w, shown[w])
    # A vs A: the 22 queries run in one pgbench session per slice, so their ratios share each round's noise and
    # their median follows the workload's own throughput ratio (latency is its inverse): within 10% of it at any
    # load, where 1 itself is missed by 12% at load 3-7. Not each query's interval: at 2-second slices a query's
    # latency follows the box's load, and in a clean-clone `make test` at load 4-10, 4 of 22 95% intervals missed
    # 1 (0.78-1.33): per query, only large changes show on a shared box (docs/recipes-postgres.md)
    ratios = sorted(c["ratio"] for c in per_query.values())
    (tpch_tps,) = [
        c
        for c in json.loads(same.read_text())["comparisons"]
        if c["workload"] == "pgbench-tpch" and c["metric"] == "tps"
    ]
    print(f"median of the 22 latency ratios {statistics.median(ratios):.3f}; 1 / tps ratio {1 / tpch_tps['ratio']:.3f}")
    assert statistics.median(ratios) * tpch_tps["ratio"] == pytest.approx(1.0, abs=0.1), shown
    assert 0.75 < statistics.median(ratios) < 1.33, shown  # and no gross bias (a side's latency read as the other's)
    missed = [w for w, c in per_query.items() if not c["ci_low"] <= 1.0 <= c["ci_high"]]
    print(f"95% intervals missing 1: {len(missed)} of 22 {[shown[w] for w in missed]}")


def test_a_contention_regression_shows_in_paired_throughput_and_not_in_instructions(
    pg: Pg, tmp_path: Path, capsys
) -> None:
    """Issue #14: the injected executor lock (pg_inject.lock_hold_patch) costs two clients throughput, measured
    paired, while instructions per query move by less than the steady series' 0.5 % floor: only throughput can
    see this kind of regression. The lock is held across a 1 ms sleep (as across I/O), so the clients contend at
    any outside load: the plain hold (~7 % here) left the CI across 1 at load 8. The same patch without the sleep
    through the whole farm (alert, bisection, culprit) is tests/benchmarks/contention_farm.py; docs/throughput.md
    has its figures."""
    patch = tmp_path / "lock.patch"
    patch.write_text(lock_hold_patch(pg.src, hold_us=1000, sha=pg.sha))
    out = tmp_path / "lock.json"
    opts = {
        "workloads": "pgbench-ro-prepared-c2,instr-point-select-prepared",
        "samples": "8",
        "duration_s": "2",
        "warmup_s": "1",
        "scale": "1",
        "instruction_samples": "1",
    }
    argv = ["--repo", str(pg.repo), "--work", str(WORK), pg.sha, pg.sha, "--patch", str(patch), "--json", str(out)]
    assert compare.main([*argv, *[f"--option={k}={v}" for k, v in opts.items()]]) == compare.EXIT_FOUND  # c2 is slower
    got = {(c["workload"], c["metric"]): c for c in json.loads(out.read_text())["comparisons"]}
    c2 = got[("pgbench-ro-prepared-c2", "tps")]
    instr = got[("instr-point-select-prepared", "instructions")]
    print(
        f"\nlock hold: c2 rQPS {c2['ratio']:.4f} [{c2['ci_low']:.4f}, {c2['ci_high']:.4f}], "
        f"instructions/query {instr['ratio']:.5f}"
    )
    assert c2["ratio"] < 0.98 and c2["ci_high"] < 1.0, c2
    assert 1.0 < instr["ratio"] < 1.005, instr  # the acquire and release are counted, but under the floor
    # issue #29: where the backends waited. One backend holds the lock across the sleep (active, no wait event:
    # CPU) while the other waits for it: the injected LWLock is the wait that rose, named first
    waits = json.loads(out.read_text())["waits"]["B"]
    print("waits: " + "; ".join(f"{w['workload']} {w['text']}" for w in waits))
    top = waits[0]
    assert (top["workload"], top["wait"]) == ("pgbench-ro-prepared-c2", "LWLock:AutovacuumSchedule"), waits
    assert top["before"] < 0.02 and top["after"] > 0.2 and top["low"] > 0, top
    printed = capsys.readouterr().out
    assert "Where the backends waited, B vs A: pgbench-ro-prepared-c2: LWLock:AutovacuumSchedule " in printed


def test_a_vs_a_claims_no_change_of_waits(pg: Pg, tmp_path: Path, capsys) -> None:
    """Issue #29: the same build on both sides, two clients: every wait's share stays within its noise, so the
    comparison names none (the intervals are Bonferroni-corrected over the waits: master/explain/waits.py)."""
    out = tmp_path / "aa.json"
    opts = {"workloads": "pgbench-ro-prepared-c2", "samples": "6", "duration_s": "2", "warmup_s": "1", "scale": "1"}
    argv = ["--repo", str(pg.repo), "--work", str(WORK), pg.sha, pg.sha, "--json", str(out)]
    assert compare.main([*argv, *[f"--option={k}={v}" for k, v in opts.items()]]) in (
        compare.EXIT_OK,
        compare.EXIT_FOUND,
    )
    doc = json.loads(out.read_text())
    assert doc["waits"] == {"B": []}, doc["waits"]
    printed = capsys.readouterr().out
    assert "Where the backends waited, B vs A: no wait's share moved beyond its noise" in printed, printed
    assert "no wait's share moved beyond its noise in pgbench-ro-prepared-c2" in printed, printed


def test_ab_samples_are_alternating_slices_pinned_to_one_cpu(pg: Pg, tmp_path: Path) -> None:
    """pg-quick's A/B method on real servers: each sample is slices alternating AB BA ..., the servers restart
    between rounds, a one-client workload runs its backends and pgbench pinned to the last CPU, a two-client
    workload on a 2-CPU worker is not pinned."""
    import threading

    from recipes.pg.profile import load_profile, run_bench

    allowed = sorted(os.sched_getaffinity(0))
    profile = dict(load_profile("quick"))
    profile.update(
        samples=2, duration_s=2, warmup_s=0, scale=1, pgdata=str(tmp_path / "pgdata"), ab_slices=2, ab_warmup=0
    )
    (tmp_path / "state").mkdir()
    ctx = Context(
        src_dir=pg.src,
        work_dir=tmp_path,
        state_dir=tmp_path / "state",
        sha=pg.sha,
        ref="t",
        options={"workloads": "pgbench-ro-prepared-c1,pgbench-ro-prepared-c2"},
    )
    clients: dict[int, tuple[str, str, set[int]]] = {}  # pgbench pid -> (PGPORT, its -c, CPUs it may use)
    backend_cpus: dict[int, set[int]] = {}
    postmasters: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.01):
            for f in (tmp_path / "pgdata").glob("pf-*/data/postmaster.pid"):
                try:
                    lines = f.read_text().splitlines()
                    if len(lines) >= 8 and lines[7].strip() == "ready":  # a postmaster, not initdb's backends
                        postmasters.add(int(lines[0]))
                except (OSError, ValueError, IndexError):
                    pass
            for pid in processes_running(pg.install.prefix):
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                    cpus = set(os.sched_getaffinity(pid))
                    if exe.endswith("/pgbench") and pid not in clients:
                        env = dict(
                            x.split("=", 1) for x in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in x
                        )
                        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
                        clients[pid] = (env["PGPORT"], argv[argv.index("-c") + 1], cpus)
                    elif "postgres: postgres postgres" in Path(f"/proc/{pid}/cmdline").read_text():
                        backend_cpus[pid] = cpus  # a client's backend (not the postmaster or its helpers)
                except (OSError, KeyError, ValueError):
                    continue

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        res = run_bench(ctx, profile, {"A": pg.install, "B": pg.install})
    finally:
        stop.set()
        watcher.join()
    # in the order the watcher saw them start (each runs a second, it looks every 10 ms): not by pid, which wraps
    # at pid_max (32768 here) on a box that has started many processes
    runs = list(clients.values())
    one = [r for r in runs if r[1] == "1"]
    two = [r for r in runs if r[1] == "2"]
    assert len(one) == len(two) == 2 * 2 * 2, runs  # no warm-up; 2 samples x 2 slices x 2 sides
    assert all(r[2] == {allowed[-1]} for r in one), one
    assert all(r[2] == set(allowed[-2:]) for r in two), two  # 2 clients on a 2-CPU worker: every CPU
    ports = [r[0] for r in one]
    # each slice runs both sides, and the order alternates: AB then BA (or BA then AB)
    pairs = [ports[i : i + 2] for i in range(0, len(ports), 2)]
    assert all(len(set(p)) == 2 for p in pairs), ports
    assert any(pairs[i] != pairs[i + 1] for i in range(len(pairs) - 1)), "the order never alternated"
    # the side that takes a round's first slot is A in round 1 and B in round 2 for every workload, whatever its
    # place in the round's shuffled order: each two rounds are one order-balanced block (issue #28)
    firsts = {c: [r[0] for r in runs if r[1] == c][::4] for c in ("1", "2")}  # 4 pgbench runs a sample
    assert firsts["1"] == firsts["2"] and firsts["1"][0] != firsts["1"][1], firsts
    assert {allowed[-1]} in backend_cpus.values()
    assert len(postmasters) == 4, f"2 servers x 2 rounds (a restart between rounds), saw {postmasters}"
    for side in ("A", "B"):
        by = {(w.name, m.name): m.samples for w in res[side] for m in w.metrics}
        assert len(by[("pgbench-ro-prepared-c1", "tps")]) == 2 and min(by[("pgbench-ro-prepared-c1", "tps")]) > 0
    assert processes_running(pg.install.prefix) == []


def test_build_failure_is_a_build_failed_result(pg: Pg, tmp_path: Path) -> None:
    target = pg.src / "src/backend/tcop/postgres.c"
    original = target.read_text()
    try:
        target.write_text(original + "\nthis is not C;\n")
        fake_sha = "0" * 40  # not in the install cache: the build must really compile
        res = runner("build", pg, tmp_path, "--option", "retry_fresh=0", sha=fake_sha)
        assert res.returncode == 3, res.stdout[-3000:]
        doc = run_record(json.loads((tmp_path / "result.json").read_text()))
        assert doc["status"] == "build-failed"
        assert "postgres.c" in doc["log_excerpt"] and "error" in doc["log_excerpt"]
    finally:
        target.write_text(original)


def test_paired_bench_measures_the_commit_against_a_reference_build(pg: Pg, tmp_path: Path) -> None:
    """`reference=SHA`: the reference (the release tag, two commits back) is built once and cached, the
    wall-clock workloads run interleaved on both installs, and the result carries the reference's samples and
    the ratios per order-balanced block of every wall-clock metric; instruction counts run on the commit only."""
    reference = git(pg.repo, "rev-parse", "HEAD~2")
    build = runner("build", pg, tmp_path, "--option", f"reference={reference}")
    assert build.returncode == 0, build.stdout[-5000:] + build.stderr[-3000:]
    assert f"reference={reference[:12]}" in build.stdout
    again = runner("build", pg, tmp_path, "--option", f"reference={reference}")
    assert again.returncode == 0 and "reusing the cached install" in again.stdout, again.stdout[-3000:]
    bench = runner(
        "bench",
        pg,
        tmp_path,
        *FAST,
        "--option",
        f"reference={reference}",
        "--option",
        "workloads=pgbench-ro-prepared-c1,instr-point-select,pgbench-tpch",
        "--option",
        f"pgdata={tmp_path / 'pgd'}",
    )
    assert bench.returncode == 0, bench.stdout[-5000:] + bench.stderr[-3000:]
    assert "A/B: every pgbench sample is 6 slices alternating between reference, run" in bench.stdout
    doc = run_record(json.loads((tmp_path / "result.json").read_text()))
    by_name = {w["name"]: {m["name"]: m for m in w["metrics"]} for w in doc["workloads"]}
    tps = by_name["pgbench-ro-prepared-c1"]
    run, ref, rqps = tps["tps"]["samples"], tps["tps.reference"]["samples"], tps["tps.rqps"]["samples"]
    assert len(run) == len(ref) == 2 and min(run + ref) > 0
    # one order-balanced block: the reference went first in round 1, the commit in round 2 (issue #28)
    assert rqps == pytest.approx([(run[0] / ref[0] * run[1] / ref[1]) ** 0.5])
    assert tps["tps.rqps"]["unit"] == "ratio" and tps["tps.rqps"]["direction"] == "higher"
    assert (tps["latency_avg.ratio"]["unit"], tps["latency_avg.ratio"]["direction"]) == ("ratio", "lower")
    assert {"latency_avg.reference", "cpu_per_tx.ratio", "ctx_switches_per_tx.ratio"} <= set(tps)
    assert "peak_backend_rss.ratio" not in tps  # memory is no wall-clock measurement: unpaired
    # issue #27: one pgbench workload, 22 paired series: each analytic query's latency and its ratio per block,
    # each result workload with its own identity; the reference's server had the data set loaded too
    for q in (f"pgbench-tpch-q{i:02d}" for i in range(1, 23)):
        lat = by_name[q]
        assert set(lat) == {"latency_avg", "latency_avg.reference", "latency_avg.ratio"}, lat
        assert (lat["latency_avg.ratio"]["unit"], lat["latency_avg.ratio"]["direction"]) == ("ratio", "lower")
        run_ms, ref_ms = lat["latency_avg"]["samples"], lat["latency_avg.reference"]["samples"]
        assert len(run_ms) == len(ref_ms) == 2 and min(run_ms + ref_ms) > 0
        assert lat["latency_avg.ratio"]["samples"] == pytest.approx(
            [(run_ms[0] / ref_ms[0] * run_ms[1] / ref_ms[1]) ** 0.5]
        )
    hashes = [w["config_hash"] for w in doc["workloads"] if w["name"].startswith("pgbench-tpch")]
    assert len(hashes) == len(set(hashes)) == 23
    assert "[reference] loading the data set of pgbench-tpch into perffarm_tpch_wall" in bench.stdout
    assert (
        "paired:order-balanced" in next(w for w in doc["workloads"] if w["name"] == "pgbench-ro-prepared-c1")["flags"]
    )
    # both sides' waits, each sampled only during its own slices (issue #29)
    for key in ("waits", "waits_reference"):
        assert [s["hz"] for s in doc[key]["pgbench-ro-prepared-c1"]] == [20.0, 20.0], doc[key]
    validate(doc)
    # instructions and the exact counters beside them (issue #29), of the commit alone: nothing of the reference
    counted = by_name["instr-point-select"]
    assert "instructions" in counted and "syscalls" in counted, counted
    assert all(m == "instructions" or is_counter(m) for m in counted), counted
    assert not [m for m in by_name["instr-point-select"] if m.endswith((".reference", ".rqps", ".ratio"))]
    assert bench.stdout.count("instr-point-select sample") == 2  # counted on the commit, not the reference
    assert processes_running(pg.install.prefix) == []


@pytest.mark.parametrize(
    "value, says",
    [("REL_15_0", "expected the reference commit's full 40-hex sha"), ("ab" * 20, "is not in this worker's clone")],
)
def test_a_bad_reference_is_a_build_failed_result_that_says_why(pg: Pg, tmp_path: Path, value: str, says: str) -> None:
    res = runner("build", pg, tmp_path, "--option", f"reference={value}")
    assert res.returncode == 3, res.stdout[-3000:]
    doc = run_record(json.loads((tmp_path / "result.json").read_text()))
    assert doc["status"] == "build-failed" and says in doc["log_excerpt"], doc["log_excerpt"][-2000:]


def test_full_profile_kinds_run_at_small_sizes(pg: Pg, tmp_path: Path) -> None:
    """The full profile's contention, connection, Insert Benchmark and memory kinds, shrunk to seconds."""
    from recipes.pg.profile import load_profile, run_bench

    small = dict(load_profile("full"))
    small.update(samples=1, scale=1, warmup_s=0, duration_s=1, pgdata=str(tmp_path / "pgdata"))
    small["workloads"] = [
        {
            "name": "txid-contention",
            "kind": "pgbench",
            "script": "txid.sql",
            "args": ["-M", "prepared"],
            "clients": [4],
            "metric": "tps",
            "unit": "tx/s",
            "direction": "higher",
        },
        {
            "name": "connect-rate",
            "kind": "pgbench",
            "args": ["-C", "-S"],
            "clients": [2],
            "metric": "connections",
            "unit": "conn/s",
            "direction": "higher",
        },
        {
            "name": "ib",
            "kind": "insert-benchmark",
            "rows": 20000,
            "load_batch": 1000,
            "l_i1_rows": 2000,
            "l_i2_rows": 500,
            "query_seconds": 3,
            "rates": [50, 1000000],
            "sla": 0.95,
            "metric": "qps",
            "unit": "queries/s",
            "direction": "higher",
        },
        {
            "name": "memory-probe",
            "kind": "memory-probe",
            "rows": 2000,
            "queries": 400,
            "metric": "rss_growth",
            "unit": "KiB",
            "direction": "lower",
        },
    ]
    (tmp_path / "state").mkdir()
    ctx = Context(src_dir=pg.src, work_dir=tmp_path, state_dir=tmp_path / "state", sha=pg.sha, ref="t", options={})
    res = {w.name: w for w in run_bench(ctx, small, {"x": pg.install})["x"]}
    metric = {(w, m.name): m.samples[0] for w, r in res.items() for m in r.metrics}
    assert metric[("txid-contention-c4", "tps")] > 0
    assert metric[("connect-rate-c2", "connections")] > 0
    for step, m in (
        ("l.i0", "inserts"),
        ("l.x", "indexed"),
        ("l.i1", "inserts"),
        ("l.i2", "inserts"),
        ("qr50", "qps"),
        ("qp50", "qps"),
        ("qr50", "background_inserts"),
    ):
        assert metric[(f"ib-{step}", m)] > 0, (step, m)
    assert any(f.startswith("sla-miss") for f in res["ib-qr1000000"].flags), "an impossible rate must be flagged"
    assert metric[("memory-probe", "rss_peak")] > 1000
    assert res["memory-probe"].flags and "jit" in res["memory-probe"].flags[0]
    assert processes_running(pg.install.prefix) == []


def test_a_try_jobs_servers_and_clients_run_in_the_sandbox_and_see_nothing_of_the_worker(
    pg: Pg, tmp_path: Path
) -> None:
    """Issue #26 on real PostgreSQL: a try-job's installs (here the module's build, as a try-job's unpatched side
    would be) run their initdb, server, pgbench, psql, idle connections and valgrind inside the sandbox, and the
    pair is measured like any job. A superuser's SQL is a shell on the server's host (COPY ... TO PROGRAM,
    pg_read_file): inside the sandbox it reaches no file of the worker."""
    import dataclasses

    from recipes import sandbox
    from recipes.pg.profile import load_profile, run_bench
    from recipes.pg.server import Server

    secret = tmp_path / "secrets" / "worker-local"
    secret.parent.mkdir()
    secret.write_text("hunter2\n")
    marker = tmp_path / "escaped"
    (tmp_path / "state").mkdir()
    box = sandbox.check(tmp_path / "box")
    opts = {
        "samples": "1",
        "duration_s": "1",
        "warmup_s": "0",
        "scale": "1",
        "instruction_samples": "1",
        "workloads": "pgbench-ro-prepared-c1,instr-point-select",
    }
    ctx = Context(pg.src, tmp_path / "work", tmp_path / "state", pg.sha, "t", opts, sandbox=box)
    jailed = dataclasses.replace(pg.install, jailed=True)
    res = run_bench(ctx, load_profile("quick"), {"A": jailed, "B": jailed})
    for label in "AB":
        got = {(w.name, m.name): m.samples for w in res[label] for m in w.metrics}
        assert got[("pgbench-ro-prepared-c1", "tps")][0] > 0 and got[("pgbench-ro-prepared-c1", "cpu_per_tx")][0] > 0
        assert got[("instr-point-select", "instructions")][0] > 10_000
    assert processes_running(pg.install.prefix) == []

    with Server(ctx, jailed, "", tmp_path / "run", name="B") as srv:
        pid = srv.postmaster_pid()
        assert pid is not None and b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
        with pytest.raises(BenchFailed) as read:
            srv.psql(f"SELECT pg_read_file('{secret}')")
        assert "No such file" in read.value.log_excerpt, read.value.log_excerpt
        shell = f"cat {secret} > {marker}; kill -0 {os.getpid()} && echo seen >> {marker}"
        with pytest.raises(BenchFailed) as copy:
            srv.psql(f"COPY (SELECT 1) TO PROGRAM '{shell}'")
        assert "No such file" in copy.value.log_excerpt and "failed" in copy.value.log_excerpt, copy.value.log_excerpt
        srv.psql("SELECT 1")  # the server and this test are both still there
    assert not marker.exists() and processes_running(pg.install.prefix) == []


def test_compare_names_the_system_calls_an_injected_commit_adds(pg: Pg, tmp_path: Path, capsys) -> None:
    """Issue #29: one open and one close of /dev/null per executor run costs a few dozen user-space instructions
    (within the noise floor of instruction counts) and two system calls per query. The exact counters of the
    instruction workload name them, first, with their size, and claim nothing else: no WAL, no buffers."""
    from tests.benchmarks.pg_inject import syscall_patch

    patch = tmp_path / "syscalls.patch"
    patch.write_text(syscall_patch(pg.src, 1, sha=pg.sha))  # the file as committed, whatever pg.src holds now
    out = tmp_path / "ab.json"
    opts = ["--option", "workloads=instr-point-select", "--option", "scale=1", "--option", "instruction_samples=2"]
    argv = ["--repo", str(pg.repo), "--work", str(WORK), pg.sha, pg.sha, "--patch", str(patch), *opts]
    assert compare.main([*argv, "--json", str(out)]) == compare.EXIT_FOUND  # the system-call counters regressed
    doc = json.loads(out.read_text())
    instr = next(c for c in doc["comparisons"] if c["metric"] == "instructions")
    assert abs(instr["ratio"] - 1) < 0.005, instr  # callgrind barely sees it
    changes = doc["counters"]["B"]
    print("\ncounters: " + "; ".join(c["text"] for c in changes))
    assert {c["metric"] for c in changes[:2]} == {"syscalls.close", "syscalls.openat"}, changes
    for c in changes[:2]:
        # one per executor run; a catalog file opened once more in the 1,000-query run may add 0.001
        assert c["after"] - c["before"] == pytest.approx(1.0, abs=0.002) and c["workload"] == "instr-point-select"
    # nothing else moved: no WAL, no buffers, no other system call
    assert len(changes) == 2, changes
    printed = capsys.readouterr().out
    assert "What the exact counters say, B vs A: instr-point-select: +1.00 " in printed, printed
    assert "+1.00 close per query" in printed and "+1.00 openat per query" in printed, printed
