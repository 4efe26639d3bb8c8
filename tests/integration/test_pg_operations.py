"""The operation suite and the analytic queries (issue 27) on real PostgreSQL 15 from Debian's source package, under
real callgrind.

1. The whole suite through the runner: every operation counted separately from one valgrind run per sample, the
   two samples agree as an instruction series must for the steady rule, each operation's kept profile is exactly
   its count, and the result carries the coverage figure.
2. A slower hash join is found by the default profile: a test-only busy loop in ExecScanHashBucket (the probe of a
   hash join's bucket), built incrementally by `perffarm compare`, moves op-join-hash past the detection floor and
   alerts through the farm's own detection and alert rules (tests/benchmarks/pg_recall.judge), while the
   operations whose profiles never call it count exactly what they counted before.
3. A plan change is detected: a build whose planner never picks a hash join (enable_hashjoin's boot value off,
   a test-only patch) runs the analytic queries beside the unpatched build; the plans the worker captured differ
   for exactly the queries that ran a hash join, and the master's plan-change rule (master/plans.py) names each
   change ("tpch-q17: Hash Join → Nested Loop at ...").

The unpatched build is the session's (`pg15`, tests/pg_support.py: read only here); the A/B comparisons clone its
repository into a work directory of their own (~/.cache/perffarm/test-pg-ops; a rerun starts warm), since
test_postgres_recipes.py owns the session's checkout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from master import compare, plans
from recipes import callgrind
from recipes.pg import operations
from recipes.pg.plans import node_type
from recipes.pg.profile import load_profile
from recipes.record import run_record
from tests.benchmarks.pg_inject import boot_value_patch, entry_loop_patch
from tests.benchmarks.pg_recall import judge
from tests.pg_support import CACHE, Pg

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
OPS_WORK = Path(os.environ.get("PF_TEST_PG_OPS_WORK") or CACHE / "test-pg-ops")  # the A/B comparisons' own
ENTRY = next(e for e in load_profile("quick")["workloads"] if e["name"] == "op")
OPS = [f"{ENTRY['name']}-{o.name}" for o in operations.operations(ENTRY)]
TPCH = next(e for e in load_profile("quick")["workloads"] if e["name"] == "tpch")
QUERIES = [f"{TPCH['name']}-{o.name}" for o in operations.operations(TPCH)]


@pytest.fixture(scope="module")
def pg(pg15: Pg) -> Pg:
    return pg15


def runner(phase: str, pg: Pg, tmp: Path, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "recipes", phase, "--recipe", "pg-quick", "--src", str(pg.src)]
    argv += ["--work", str(pg.recipe_work), "--state", str(tmp / "state"), "--sha", pg.sha, "--ref", "compare"]
    argv += ["--result", str(tmp / "result.json")]
    for o in options:
        argv += ["--option", o]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600)


@pytest.mark.timeout(1800)
def test_every_operation_is_counted_exactly_from_one_callgrind_run_per_sample(pg: Pg, tmp_path: Path) -> None:
    assert runner("build", pg, tmp_path).returncode == 0
    bench = runner(
        "bench", pg, tmp_path, "workloads=op", "instruction_samples=2", "scale=1", "callgrind=1",
        f"pgdata={tmp_path / 'pgdata'}",
    )  # fmt: skip
    assert bench.returncode == 0, bench.stdout[-5000:] + bench.stderr[-3000:]
    # one valgrind run per sample for the whole suite, not one per operation
    assert bench.stdout.count("--dump-after=exec_simple_query") == 2
    assert bench.stdout.count("valgrind --tool=callgrind") == 2
    doc = run_record(json.loads((tmp_path / "result.json").read_text()))
    counts = {w["name"]: w["metrics"][0]["samples"] for w in doc["workloads"]}
    assert list(counts) == OPS
    for name, (a, b) in counts.items():
        assert a > 100_000, (name, a)  # a real operation, not an empty dump
        assert abs(a - b) / a < 1e-4, f"{name}: {a} vs {b}: not steady (master/detect/steady.py)"
    assert len({tuple(v) for v in counts.values()}) == len(counts)  # no two operations share a dump
    # each operation's profile is of exactly its count (kept with callgrind=1: the explain diff of an operation)
    for name, kept in doc["callgrind"].items():
        assert kept["queries"] == 1
        assert callgrind.Profile.from_json(kept["profile"]).total == counts[name][0], name
    profile = callgrind.Profile.from_json(doc["callgrind"]["op-join-hash"]["profile"])
    assert profile.functions["ExecScanHashBucket"].inclusive_cost > 0.05 * profile.total
    sort = callgrind.Profile.from_json(doc["callgrind"]["op-sort-memory"]["profile"])
    assert "ExecScanHashBucket" not in sort.functions
    # the coverage figure of what ran (only the suite here: no instr-* workload, no oltp group)
    cov = doc["coverage"]["groups"]
    hit, total = cov["all"]["functions"]
    assert 10_000 < total < 30_000 and hit > 0.1 * total
    assert {"executor", "copy", "index-build", "types"} <= set(cov) and "oltp" not in cov
    assert {"ExecScanHashBucket", "CopyFrom", "btbuild", "heap_vacuum_rel", "jsonb_in"} <= set(cov["all"]["listed"])
    assert cov["all"]["areas"]["access/nbtree"][0] > 0


PREFIX = OPS[: OPS.index("op-agg-hash") + 1]  # the suite up to its hash aggregate: one hash join among them


@pytest.mark.timeout(2400)
def test_a_slower_hash_join_alerts_on_op_join_hash_and_leaves_unrelated_operations_unmoved(
    pg: Pg, tmp_path: Path
) -> None:
    patch = tmp_path / "hash.patch"
    patch.write_text(entry_loop_patch(pg.src, "ExecScanHashBucket", 20, sha=pg.sha))
    out = tmp_path / "ab.json"
    options = [f"workloads={','.join(PREFIX)}", "instruction_samples=2", "scale=1", f"pgdata={tmp_path / 'pgdata'}"]
    argv = ["--repo", str(pg.repo), "--work", str(OPS_WORK), pg.sha, pg.sha, "--patch", str(patch), "--json", str(out)]
    for o in options:
        argv += ["--option", o]
    assert compare.main(argv) == compare.EXIT_FOUND  # a slower hash join: the gate says so
    rows = {c["workload"]: c for c in json.loads(out.read_text())["comparisons"] if c["metric"] == "instructions"}
    assert set(rows) == set(PREFIX)
    base = {w: {"unit": c["unit"], "samples": c["a"]} for w, c in rows.items()}
    patched = {w: {"unit": c["unit"], "samples": c["b"]} for w, c in rows.items()}
    moved = {w: patched[w]["samples"][0] / base[w]["samples"][0] - 1 for w in rows}
    print("\n" + "\n".join(f"{w:<24} {m:+.5%}" for w, m in moved.items()))
    # the farm's judgement: op-join-hash alerts, nothing else does
    assert set(judge(base, patched)) == {"op-join-hash"}
    assert moved["op-join-hash"] > 0.005  # past the detection floor ([detection] min_effect)
    # operations that never call the function count what they counted (to the counts' own ~1e-6 jitter)
    calls = {}
    for w in rows:
        kept = callgrind.parse(OPS_WORK / "state" / "callgrind" / f"A--{w}.out")
        calls[w] = "ExecScanHashBucket" in kept.functions
    assert [w for w, c in calls.items() if c] == ["op-join-hash"]
    assert all(abs(moved[w]) < 1e-5 for w, c in calls.items() if not c), moved


HASH_JOIN = re.compile(r"^Hash(?: \w+)? Join$")  # Hash Join, Hash Semi Join, Hash Right Join, ...


@pytest.mark.timeout(2400)
def test_a_build_that_never_hash_joins_changes_the_plan_of_exactly_the_queries_that_did(pg: Pg, tmp_path: Path) -> None:
    patch = tmp_path / "no-hashjoin.patch"
    patch.write_text(boot_value_patch(pg.src, "enable_hashjoin", "true", "false", sha=pg.sha))
    out = tmp_path / "ab.json"
    options = ["workloads=tpch", "instruction_samples=1", "scale=1", f"pgdata={tmp_path / 'pgdata'}"]
    argv = ["--repo", str(pg.repo), "--work", str(OPS_WORK), pg.sha, pg.sha, "--patch", str(patch), "--json", str(out)]
    for o in options:
        argv += ["--option", o]
    assert compare.main(argv) in (compare.EXIT_OK, compare.EXIT_FOUND)  # 1: a plan costs more
    # the plans each side's worker code captured right after loading (recipes/pg/profile.py plans_file)
    before = json.loads((OPS_WORK / "state" / "plans" / "A.json").read_text())
    after = json.loads((OPS_WORK / "state" / "plans" / "B.json").read_text())
    assert set(before) == set(after) == set(QUERIES)
    # the master's rule on two consecutive commits of each query's series: a change wherever the shape differs
    found = {}
    for w in QUERIES:
        [*changes] = plans.changes(w, [(0, "a" * 40, before[w]), (1, "b" * 40, after[w])])
        if changes:
            found[w] = changes[0]
    hash_joined = {w for w, s in before.items() if any(HASH_JOIN.match(node_type(x)) for x in s.splitlines())}
    print("\n" + "\n".join(c.headline for c in found.values()))
    assert len(hash_joined) >= 10  # most of the 22 join with a hash join at this size
    assert set(found) == hash_joined  # exactly those, and never a query without a join (tpch-q01, tpch-q06)
    assert found["tpch-q17"].headline == f"tpch-q17: Hash Join → Nested Loop at {'b' * 12}"
    for c in found.values():
        assert "Hash" in c.summary.split(" → ")[0] and "Hash Join" not in c.after, c.headline
    assert not any(HASH_JOIN.match(node_type(x)) for s in after.values() for x in s.splitlines())
