"""The PostgreSQL recipes' data: profiles, workloads, postgresql.conf overlays, pgbench parsing, build keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recipes import registry
from recipes.api import HIGHER, LOWER, BenchFailed, BuildFailed
from recipes.pg import build, deps, instructions, pgbench, procstat
from recipes.pg import profile as pgprofile
from recipes.pg.profile import (
    WORKLOAD_KINDS,
    WorkloadKind,
    conf_text,
    load_profile,
    pin_mode,
    tunables,
    workload_cpus,
    workloads,
)

REPO = Path(__file__).resolve().parents[2]
PROFILES = ("quick", "full")

PGBENCH_15 = """\
pgbench (15.18)
transaction type: <builtin: select only>
scaling factor: 10
query mode: prepared
number of clients: 2
number of threads: 2
maximum number of tries: 1
duration: 10 s
number of transactions actually processed: 212345
number of failed transactions: 0 (0.000%)
latency average = 0.094 ms
initial connection time = 3.210 ms
tps = 21234.567890 (without initial connection time)
"""

PGBENCH_12 = """\
number of transactions actually processed: 1000/1000
latency average = 1.234 ms
tps = 810.123456 (including connections establishing)
tps = 812.654321 (excluding connections establishing)
"""


def test_both_recipes_are_registered_with_distinct_config_hashes() -> None:
    found = registry.discover()
    quick, full = found["pg-quick"], found["pg-full"]
    assert quick.config_hash() != full.config_hash()
    assert quick.config["profile"]["profile"] == "quick"


@pytest.mark.parametrize("name", PROFILES)
def test_every_workload_is_well_formed(name: str) -> None:
    profile = load_profile(name)
    wls = workloads(profile, max_threads=2)
    assert wls, "a profile without workloads"
    for w in wls:
        assert w.kind in WORKLOAD_KINDS
        assert w.direction in (HIGHER, LOWER)
        assert w.unit and w.metric
        if w.kind == "instructions":
            assert w.direction == LOWER
            assert instructions.queries(w.spec["queries"], 3, 1), w.name
        if w.script:
            from recipes.pg.insertbench import sql_file

            assert sql_file(w.script).strip()


def test_quick_profile_has_what_the_issue_asks_for() -> None:
    names = {w.name for w in workloads(load_profile("quick"))}
    for needed in (
        "pgbench-ro-prepared-c1",
        "pgbench-ro-simple-c1",
        "pgbench-rw-prepared-c1",
        "pgbench-rw-simple-c1",
        "instr-point-select",
    ):
        assert needed in names


def test_full_profile_has_matrix_contention_connections_insert_benchmark_and_memory() -> None:
    wls = {w.name: w for w in workloads(load_profile("full"), max_threads=8)}
    assert {
        "pgbench-ro-prepared-c64",
        "pgbench-rw-simple-c1",
        "txid-contention-c1024",
        "connect-rate-c4",
        "insert-benchmark",
        "memory-probe",
    } <= set(wls)
    assert wls["txid-contention-c1024"].args[-4:] == ("-c", "1024", "-j", "8")
    assert "-C" in wls["connect-rate-c4"].args
    assert wls["insert-benchmark"].spec["sla"] == 0.95


def test_unknown_kind_is_rejected_with_its_name() -> None:
    with pytest.raises(ValueError, match="bogus"):
        workloads({"workloads": [{"name": "x", "kind": "bogus"}]})


def test_a_new_workload_kind_is_one_table_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    # a kind that runs one step per phase of its own script: loading, identity and step naming follow the table
    monkeypatch.setitem(
        WORKLOAD_KINDS,
        "vacuum-probe",
        WorkloadKind("vacuum-probe", "wall", lambda _e: ("txid.sql",), stepped=True, run=lambda server, spec: {}),
    )
    profile = {
        "conf": "quick.conf",
        "workloads": [{"name": "vac", "kind": "vacuum-probe", "metric": "s", "unit": "s", "direction": "lower"}],
    }
    (w,) = workloads(profile)
    assert (w.kind, w.direction) == ("vacuum-probe", "lower")
    assert pgprofile.workload_files(profile["workloads"][0]) == ["sql/txid.sql"]
    found = pgprofile.identities(profile, {"cflags": "-O2"})
    assert found["vac"]["files"] == {"sql/txid.sql": pgprofile.file_hash("sql/txid.sql")}
    assert pgprofile.identity_of(profile, found, "vac-phase1") is found["vac"]  # stepped: <name>-<step>
    assert workload_cpus(w, "auto", [0, 1]) is None  # not pgbench: never pinned
    monkeypatch.delitem(WORKLOAD_KINDS, "vacuum-probe")
    with pytest.raises(ValueError, match="unknown kind 'vacuum-probe'"):
        workloads(profile)


def test_every_wall_kind_but_pgbench_has_a_sampling_function() -> None:
    for kind in WORKLOAD_KINDS.values():
        assert kind.phase in ("wall", "instructions"), kind.name
        assert (kind.run is not None) == (kind.phase == "wall" and not kind.pgbench), kind.name


def test_conf_overlays_follow_the_major_version() -> None:
    profile = load_profile("quick")
    c13, c15, c18 = conf_text(profile, 13), conf_text(profile, 15), conf_text(profile, 18)
    assert "fsync = off" in c13
    assert "compute_query_id" not in c13 and "compute_query_id" in c15
    assert "io_method" not in c15 and "io_method = 'sync'" in c18


def test_tunables_take_options_over_profile() -> None:
    t = tunables(load_profile("quick"), {"samples": "10", "duration_s": "2.5"})
    assert t["samples"] == 10 and t["duration_s"] == 2.5 and t["scale"] == 10


def test_pgbench_output_parsing_across_versions() -> None:
    o = pgbench.parse_output(PGBENCH_15)
    assert (o.tps, o.latency_avg_ms, o.transactions, o.failed) == (21234.56789, 0.094, 212345, 0)
    assert pgbench.parse_output(PGBENCH_12).tps == 812.654321
    with pytest.raises(BenchFailed):
        pgbench.parse_output("connection to server failed\n")
    # 1000 clients still connecting when -T ran out (seen with the sweeps profile): say what to change
    zero = "number of clients: 1000\nduration: 2 s\nnumber of transactions actually processed: 0\n"
    with pytest.raises(BenchFailed, match="longer duration_s"):
        pgbench.parse_output(zero)


def test_pgbench_log_latencies(tmp_path: Path) -> None:
    (tmp_path / "pgbench_log.123").write_text("0 1 250 0 1700000000 1\n0 2 failed 0 1700000000 2\n")
    (tmp_path / "pgbench_log.123.1").write_text("1 1 750 0 1700000000 3\n")
    assert pgbench.log_latencies_us(tmp_path) == [250, 750]


def test_instruction_queries_are_deterministic() -> None:
    assert instructions.queries("point-select", 50, 10) == instructions.queries("point-select", 50, 10)
    prepared = instructions.queries("point-select-prepared", 5, 1)
    assert prepared[0].startswith("PREPARE") and len(prepared) == 6
    assert all("\n" not in q for q in instructions.queries("simple-update", 5, 1))


def test_build_keys_and_names() -> None:
    spec = build.BuildSpec()
    assert spec.key() == build.BuildSpec().key()
    assert spec.key() != build.BuildSpec(cflags=("-O3",)).key()
    assert "-fno-omit-frame-pointer" in spec.cflags and "-O2" in spec.cflags
    assert "--enable-cassert" not in spec.configure_args and "-Dcassert=false" in spec.meson_args
    weird = build.safe_name("feature/../../x; rm -rf /")
    assert "/" not in weird and " " not in weird and ";" not in weird
    assert build.safe_name("a/b") != build.safe_name("a_b")
    assert build._meson_flags(("-O2", "-fno-omit-frame-pointer")) == [
        "-Doptimization=2",
        "-Dc_args=-fno-omit-frame-pointer",
    ]


def test_every_install_slot_has_the_length_of_a_commits(tmp_path: Path) -> None:
    # the backend keeps strings made from its install's path; a longer path moved later allocations and with them
    # what glibc's vectorised memcmp counts (-0.87% on op-fts-match for one binary under two paths)
    from recipes.api import Context

    ctx = Context(tmp_path, tmp_path / "work", tmp_path / "state", "a" * 40, "master", {})
    spec = build.BuildSpec()
    commit = build.install_slot(ctx, spec, "a" * 40)
    assert commit.name == f"{'a' * 40}-{spec.key()}"  # a commit's slot is where it always was: caches stay warm
    patched = build.install_slot(ctx, spec, f"{'a' * 40}-p0123456789abcdef")
    recall = build.install_slot(ctx, spec, f"{'a' * 40}-recall-ExecScanHashBucket-100")
    assert len(str(patched)) == len(str(recall)) == len(str(commit))
    assert len({commit, patched, recall}) == 3


def test_dependency_check_names_debian_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deps.shutil, "which", lambda prog: None if prog in ("bison", "ninja") else "/usr/bin/x")
    (tmp_path / "src/backend/parser").mkdir(parents=True)  # a git checkout: no gram.c
    with pytest.raises(BuildFailed) as e:
        deps.check_build(tmp_path, use_meson=True)
    assert "apt-get install bison ninja-build" in e.value.message
    (tmp_path / "src/backend/parser/gram.c").write_text("")  # a release tarball: bison not needed
    with pytest.raises(BuildFailed) as e:
        deps.check_build(tmp_path, use_meson=True)
    assert "bison" not in e.value.message and "ninja-build" in e.value.message
    deps.check_build(tmp_path, use_meson=False)


SCRIPTED = ("txid-contention-c1", "insert-benchmark-l.i0", "memory-probe")
OPERATIONS = ("op-scan-seq", "op-join-hash", "op-analyze")  # their identities hash sql/ops/*.sql


def test_data_files_are_readable_from_the_shipped_zipapp(tmp_path: Path) -> None:
    from master import shipping

    pyz = shipping.build_zipapp(tmp_path)
    code = (
        "import json, sys\n"
        "from recipes.pg.profile import load_profile, conf_text\n"
        "from recipes import registry\n"
        "p = load_profile('quick')\n"
        "full = registry.get('pg-full')\n"
        "from recipes.pg import coverage\n"
        "from recipes.pg.profile import group_descriptions\n"
        "quick = registry.get('pg-quick')\n"
        "print(json.dumps({'conf': conf_text(p, 18), 'hash': quick.config_hash(),\n"
        f"                  'workloads': {{w: full.workload_hash(w) for w in {SCRIPTED!r}}},\n"
        f"                  'ops': {{w: quick.workload_hash(w) for w in {OPERATIONS!r}}},\n"
        "                  'sql': quick.workload_info('op-join-hash')['sql'],\n"
        "                  'groups': list(group_descriptions()), 'listed': len(coverage.listed())}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(pyz)},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout
    doc = json.loads(out)
    assert "io_method" in doc["conf"]
    assert doc["hash"] == registry.get("pg-quick").config_hash()
    # a workload's hash covers the scripts it runs, read from the zipapp as from the checkout
    assert doc["workloads"] == {w: registry.get("pg-full").workload_hash(w) for w in SCRIPTED}
    # the operation suite's SQL (sql/ops/), the groups and the named functions of the coverage figure ship too
    assert doc["ops"] == {w: registry.get("pg-quick").workload_hash(w) for w in OPERATIONS}
    assert "JOIN other" in doc["sql"] and doc["groups"][0] == "oltp" and doc["listed"] >= 49


def _slice(tx: int, tps: float, lat_ms: float, lats: list[int], srv: float, cli: float, rss: int) -> pgbench.Sample:
    out = pgbench.PgbenchOutput(tps=tps, latency_avg_ms=lat_ms, transactions=tx, failed=0)
    usage = procstat.Usage(
        server_cpu_s=srv, client_cpu_s=cli, context_switches=int(tx / 10), peak_backend_rss_kib=rss, wall_s=tx / tps
    )
    return pgbench._sample(out, lats, usage)


def test_combined_slices_weigh_throughput_by_time_and_merge_latencies() -> None:
    # 1,000 tx in 1 s and 3,000 tx in 1 s: 2,000 tx/s over the two seconds, not the mean of per-slice rates
    # weighted any other way; the slower slice's latency counts for its transactions only.
    a = _slice(1000, 1000.0, 1.0, [900, 1000, 1100], 0.5, 0.2, 9000)
    b = _slice(3000, 3000.0, 0.333, [300, 330, 5000], 0.6, 0.3, 12000)
    c = pgbench.combine([a, b])
    assert c.out.transactions == 4000 and c.out.tps == pytest.approx(2000.0)
    assert c.out.latency_avg_ms == pytest.approx((1000 * 1.0 + 3000 * 0.333) / 4000)
    assert c.latencies_us == (300, 330, 900, 1000, 1100, 5000) and c.p99_ms == pytest.approx(4.805)
    assert c.usage.server_cpu_s == pytest.approx(1.1) and c.usage.client_cpu_s == pytest.approx(0.5)
    assert c.usage.peak_backend_rss_kib == 12000 and c.usage.context_switches == 400
    assert c.per_tx(c.usage.server_cpu_s) == pytest.approx(275.0)  # µs per transaction
    with pytest.raises(ValueError):
        pgbench.combine([])


def test_pinning_puts_few_clients_on_the_last_cpus_and_is_checked() -> None:
    quick, full = load_profile("quick"), load_profile("full")
    assert pin_mode(quick, {}) == "auto" and pin_mode(full, {}) == "none"
    assert pin_mode(quick, {"pin": "none"}) == "none"
    with pytest.raises(BenchFailed, match="pin='sideways'"):
        pin_mode(quick, {"pin": "sideways"})
    by_name = {w.name: w for w in workloads(quick, max_threads=2) + workloads(full, max_threads=2)}
    c1, c2, instr = by_name["pgbench-ro-prepared-c1"], by_name["pgbench-ro-prepared-c2"], by_name["instr-point-select"]
    assert workload_cpus(c1, "auto", [0, 1]) == [1]
    assert workload_cpus(c2, "auto", [0, 1]) is None  # as many clients as CPUs: not pinned
    assert workload_cpus(c2, "auto", [0, 1, 2, 3]) == [2, 3]
    assert workload_cpus(by_name["pgbench-ro-prepared-c64"], "auto", [0, 1, 2, 3]) is None
    assert workload_cpus(c1, "none", [0, 1]) is None and workload_cpus(instr, "auto", [0, 1]) is None


def test_recipe_commands_do_not_inherit_makes_recursion_variables(tmp_path, monkeypatch):
    """Under `make test` / `make run`, PostgreSQL's make would think it is a sub-make and skip its generated
    headers (a cold build failed with `utils/errcodes.h: No such file`)."""
    from recipes.api import Context

    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("MAKEFLAGS", "w -- jobserver-auth=3,4")
    monkeypatch.setenv("PF_KEEP_ME", "yes")
    ctx = Context(src_dir=tmp_path, work_dir=tmp_path, state_dir=tmp_path, sha="0" * 40, ref="t", options={})
    out = ctx.run(["env"], capture=True).stdout
    assert "PF_KEEP_ME=yes" in out
    assert "MAKELEVEL=" not in out and "MAKEFLAGS=" not in out
