"""Series identity is per workload (issue #13, item 1): a workload's config hash covers what that workload
measures, never another workload's entry. Checked on a real copy of the recipes package whose profile, SQL
scripts, postgresql.conf and build flags are edited the way a user would edit them."""

from __future__ import annotations

import dataclasses
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from master import analysis, ingest, store
from master.detect.config import DetectionSettings
from master.publish import publish_all, publish_incremental
from master.publish.source import SeriesRef
from master.settings import load_settings
from master.store.series import MeasureKey
from recipes import registry
from recipes.api import Recipe, SideSupport, listed_workloads
from recipes.pg import insertbench, memprobe
from recipes.pg.profile import identity_of, load_profile, result_names, workload_files, workloads
from tests.harness import make_repo
from tests.unit.test_result_schema import MACHINE_ID, good
from tests.unit.test_store_ingest import put, run_ctx

REPO = Path(__file__).resolve().parents[2]
RECIPES = ("pg-quick", "pg-full")
NOW = 1_800_000_000.0

# Every workload name a recipe's results can carry: the profile's workloads, and the Insert Benchmark's steps.
_HASHES = """
import json, sys
from recipes import registry
from recipes.pg.profile import result_names, workloads
out = {}
for name in sys.argv[1:]:
    r = registry.get(name)
    names = [n for w in workloads(r.config["profile"]) for n in result_names(w)]
    names += [f"{n}-{step}" for n in names if n == "insert-benchmark" for step in ("l.i0", "l.i1", "qp100")]
    out[name] = {"run": r.config_hash(), "workloads": {w: r.workload_hash(w) for w in names}}
print(json.dumps(out))
"""


@pytest.fixture
def recipes_copy(tmp_path: Path) -> Path:
    """A copy of the recipes package to edit (the hashes read its files, as a worker reads the zipapp's)."""
    shutil.copytree(REPO / "recipes", tmp_path / "recipes", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def hashes(root: Path, recipes: tuple[str, ...] = RECIPES) -> dict[str, dict]:
    """Run and workload hashes of the pg recipes as the recipes package under `root` computes them."""
    code = f"import sys; sys.path.insert(0, {str(root)!r})\n" + _HASHES
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, *recipes], capture_output=True, text=True, cwd=root, check=True
    ).stdout
    return json.loads(out)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


def changed(before: dict, after: dict, recipe: str) -> set[str]:
    """Workloads of `recipe` present before whose hash is different after."""
    a, b = before[recipe]["workloads"], after[recipe]["workloads"]
    return {w for w in a if b.get(w) != a[w]}


def test_adding_a_workload_leaves_every_other_workloads_series_identity_unchanged(recipes_copy: Path) -> None:
    before = hashes(recipes_copy)
    quick = recipes_copy / "recipes/pg/profiles/quick.json"
    profile = json.loads(quick.read_text())
    profile["workloads"].append(
        {
            "name": "txid-contention",
            "kind": "pgbench",
            "script": "txid.sql",
            "args": ["-M", "prepared"],
            "clients": [1, 2],
            "duration_s": 5,
            "metric": "tps",
            "unit": "tx/s",
            "direction": "higher",
        }
    )
    profile["description"] += " Plus a txid_current() contention sweep."
    quick.write_text(json.dumps(profile, indent=1))
    after = hashes(recipes_copy)
    assert after["pg-quick"]["run"] != before["pg-quick"]["run"]  # the whole recipe did change...
    assert changed(before, after, "pg-quick") == set()  # ...but no existing workload's series did
    assert set(after["pg-quick"]["workloads"]) - set(before["pg-quick"]["workloads"]) == {
        "txid-contention-c1",
        "txid-contention-c2",
    }
    assert after["pg-full"] == before["pg-full"]
    # a client count added to a workload's `clients` list is a new workload too: the other counts keep theirs
    profile["workloads"][0]["clients"].append(4)
    quick.write_text(json.dumps(profile, indent=1))
    assert changed(after, hashes(recipes_copy), "pg-quick") == set()


def test_changing_one_workloads_sql_script_changes_only_that_workloads_series_identity(recipes_copy: Path) -> None:
    before = hashes(recipes_copy)
    edit(recipes_copy / "recipes/pg/sql/txid.sql", "txid_current()", "txid_current(), 1")
    after = hashes(recipes_copy)
    txid = {w for w in before["pg-full"]["workloads"] if w.startswith("txid-contention-")}
    assert len(txid) == 11
    assert changed(before, after, "pg-full") == txid
    assert after["pg-quick"]["workloads"] == before["pg-quick"]["workloads"]  # pg-quick runs no script
    edit(recipes_copy / "recipes/pg/sql/ib-point.sql", "SELECT", "SELECT /* point */")
    again = hashes(recipes_copy)
    assert changed(after, again, "pg-full") == {
        w for w in before["pg-full"]["workloads"] if w.startswith("insert-benchmark")
    }
    edit(recipes_copy / "recipes/pg/sql/jit-leak.sql", "SELECT", "SELECT /* probe */")
    assert changed(again, hashes(recipes_copy), "pg-full") == {"memory-probe"}


def test_changing_one_workloads_entry_changes_only_that_workload(recipes_copy: Path) -> None:
    before = hashes(recipes_copy)
    quick = recipes_copy / "recipes/pg/profiles/quick.json"
    profile = json.loads(quick.read_text())
    entry = next(e for e in profile["workloads"] if e["name"] == "instr-simple-update")
    entry["count"] = 500
    quick.write_text(json.dumps(profile, indent=1))
    assert changed(before, hashes(recipes_copy), "pg-quick") == {"instr-simple-update"}


@pytest.mark.parametrize("what", ["build flags", "postgresql.conf", "a shared profile setting"])
def test_what_every_workload_shares_changes_every_workloads_series_identity(recipes_copy: Path, what: str) -> None:
    before = hashes(recipes_copy)
    if what == "build flags":
        edit(
            recipes_copy / "recipes/pg/build.py",
            '("-O2", "-fno-omit-frame-pointer")',
            '("-O3", "-fno-omit-frame-pointer")',
        )
    elif what == "postgresql.conf":
        edit(recipes_copy / "recipes/pg/conf/quick.conf", "\n", "\n# tuned\n")
    else:
        edit(recipes_copy / "recipes/pg/profiles/quick.json", '"scale": 10', '"scale": 20')
    after = hashes(recipes_copy)
    assert changed(before, after, "pg-quick") == set(before["pg-quick"]["workloads"])
    assert (changed(before, after, "pg-full") == set(before["pg-full"]["workloads"])) == (what == "build flags")


def test_every_shipped_sql_script_is_part_of_some_workloads_identity() -> None:
    # a script run by a workload but hashed by none would change its numbers without starting a new series
    used = {f for name in ("quick", "full") for e in load_profile(name)["workloads"] for f in workload_files(e)}
    sql = REPO / "recipes/pg/sql"
    shipped = {f"sql/{p.relative_to(sql)}" for p in sql.rglob("*.sql")}
    assert shipped <= used, f"scripts no workload's identity covers: {sorted(shipped - used)}"
    source = (REPO / "recipes/pg/insertbench.py").read_text()
    assert set(re.findall(r'"([\w.-]+\.sql)"', source)) == set(insertbench.SCRIPTS)
    assert set(re.findall(r'"([\w.-]+\.sql)"', (REPO / "recipes/pg/memprobe.py").read_text())) == {memprobe.SCRIPT}


def test_every_result_workload_of_the_pg_recipes_has_its_own_identity() -> None:
    for name in RECIPES:
        recipe = registry.get(name)
        profile = recipe.config["profile"]
        names = [n for w in workloads(profile) for n in result_names(w)]
        found = {w: recipe.workload_hash(w) for w in names}
        assert len(set(found.values())) == len(names)  # distinct: the entry (and client count) is in each
        assert recipe.config_hash() not in found.values()
        if "insert-benchmark" in names:
            assert recipe.workload_hash("insert-benchmark-qp100") == found["insert-benchmark"]
        # a name the profile does not make falls back to the whole recipe's hash: never merged wrongly
        assert identity_of(profile, {}, "no-such-workload") is None
        assert recipe.workload_hash("no-such-workload") == recipe.config_hash()


GOLDEN = REPO / "tests/golden/workload-identities.json"


def test_every_workload_the_pg_recipes_had_before_the_operation_suite_keeps_its_series_identity() -> None:
    # issue 27: adding the operation suite, the parallel workload and the groups cut no existing series
    golden = json.loads(GOLDEN.read_text())["recipes"]
    now = hashes(REPO, tuple(golden))
    for recipe, found in golden.items():
        current = now[recipe]["workloads"]
        moved = {w: (h, current.get(w)) for w, h in found.items() if current.get(w) != h}
        assert moved == {}, f"{recipe}: these workloads' series would start anew: {moved}"


def _ops(root: Path) -> tuple[Path, dict]:
    quick = root / "recipes/pg/profiles/quick.json"
    return quick, json.loads(quick.read_text())


def _op_entry(profile: dict) -> dict:
    return next(e for e in profile["workloads"] if e["kind"] == "operations")


def _op_names(profile: dict) -> list[str]:
    entry = _op_entry(profile)
    return [f"{entry['name']}-{o['op']}" for o in entry["operations"]]


def test_an_operation_appended_to_the_suite_leaves_every_other_workloads_series_identity_unchanged(
    recipes_copy: Path,
) -> None:
    before = hashes(recipes_copy)
    quick, profile = _ops(recipes_copy)
    _op_entry(profile)["operations"].append({"op": "scan-seq-again", "group": "executor"})
    quick.write_text(json.dumps(profile, indent=1))
    (recipes_copy / "recipes/pg/sql/ops/scan-seq-again.sql").write_text("SELECT count(*) FROM big;\n")
    after = hashes(recipes_copy)
    assert changed(before, after, "pg-quick") == set()
    assert set(after["pg-quick"]["workloads"]) - set(before["pg-quick"]["workloads"]) == {"op-scan-seq-again"}


def test_editing_an_operation_changes_its_identity_and_that_of_the_operations_after_it_only(
    recipes_copy: Path,
) -> None:
    # an operation's count depends on what ran before it in the session (catalog caches, rows written), never
    # on what runs after it
    before = hashes(recipes_copy)
    names = _op_names(_ops(recipes_copy)[1])
    edit(recipes_copy / "recipes/pg/sql/ops/join-hash.sql", "SELECT count(*)", "SELECT count(*) /* edited */")
    after = hashes(recipes_copy)
    assert changed(before, after, "pg-quick") == set(names[names.index("op-join-hash") :])
    assert after["pg-full"] == before["pg-full"] or changed(before, after, "pg-full") <= set(names)
    edit(recipes_copy / "recipes/pg/sql/ops-data.sql", "CREATE TABLE big (", "CREATE TABLE big ( -- edited\n")
    assert changed(after, hashes(recipes_copy), "pg-quick") == set(names)  # the data set: every operation


def test_a_group_only_labels_a_workload_and_is_in_no_series_identity(recipes_copy: Path) -> None:
    before = hashes(recipes_copy)
    quick, profile = _ops(recipes_copy)
    for e in profile["workloads"]:
        if "group" in e:
            e["group"] = "maintenance"
    for o in _op_entry(profile)["operations"]:
        o["group"] = "dml"
    quick.write_text(json.dumps(profile, indent=1))
    assert changed(before, hashes(recipes_copy), "pg-quick") == set()


def test_a_recipe_without_workload_identities_keeps_the_whole_config_as_identity() -> None:
    def nothing(ctx):
        return []

    plain = Recipe("plain", 1, "d", {"workloads": [{"name": "a"}, {"name": "b"}]}, SideSupport(nothing, nothing))
    assert plain.workload_hash("a") == plain.workload_hash("b") == plain.config_hash()
    listed = Recipe(
        "plain",
        1,
        "d",
        {"cc": "gcc", "workloads": [{"name": "a"}, {"name": "b"}]},
        SideSupport(nothing, nothing),
        workload_identity=listed_workloads({"cc": "gcc", "workloads": [{"name": "a"}, {"name": "b"}]}),
    )
    more = listed_workloads({"cc": "gcc", "workloads": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})
    assert listed.workload_hash("a") != listed.workload_hash("b")
    assert Recipe("plain", 1, "d", {}, SideSupport(nothing, nothing), workload_identity=more).workload_hash(
        "a"
    ) == listed.workload_hash("a")
    other_cc = listed_workloads({"cc": "clang", "workloads": [{"name": "a"}]})
    assert Recipe("plain", 1, "d", {}, SideSupport(nothing, nothing), workload_identity=other_cc).workload_hash(
        "a"
    ) != listed.workload_hash("a")
    assert Recipe("plain", 2, "d", {}, SideSupport(nothing, nothing), workload_identity=more).workload_hash(
        "a"
    ) != listed.workload_hash("a")


# ------------------------------------------------------------------------------------------------ the master


def _recipe(workloads: list[dict]) -> Recipe:
    """A recipe as a recipe file defines one: shared settings plus a list of workload entries."""

    def nothing(ctx):
        return []

    config = {"cflags": ["-O2"], "samples": 5, "workloads": workloads}
    sides = SideSupport(nothing, nothing)
    return Recipe("fixture", 1, "test", config, sides, workload_identity=listed_workloads(config))


def _result(recipe: Recipe, sha: str, values: dict[str, float], per_workload: bool = True) -> dict:
    """A result as the runner writes it for `recipe` (workloads[].config_hash unless `per_workload` is off: the
    results of a recipe older than per-workload identity)."""
    doc = good()
    doc["commit"] = {"sha": sha, "ref": "master"}
    doc["recipe"]["config_hash"] = recipe.config_hash()
    doc["workloads"] = [
        {
            "name": w,
            "metrics": [
                {"name": "throughput", "unit": "ops/s", "direction": "higher", "samples": [v, v * 1.001, v * 0.999]}
            ],
        }
        for w, v in values.items()
    ]
    if per_workload:
        for w in doc["workloads"]:
            w["config_hash"] = recipe.workload_hash(w["name"])
    return doc


@pytest.fixture
def farm(tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    return repo, settings


def _store(settings, doc: dict, build_id: int) -> int:
    path = put(settings, doc, f"b-{build_id}.json")
    run_id = ingest.ingest_file(settings, path, run_ctx(build_id, doc["commit"]["sha"]), "fixture").run_id
    conn = store.connect(settings.results_db)
    try:
        analysis.analyse_run(conn, run_id, DetectionSettings())
    finally:
        conn.close()
    return run_id


def test_a_workload_added_to_the_recipe_keeps_the_other_workloads_in_their_series(farm, tmp_path):
    repo, settings = farm
    pgbench = {"name": "pgbench", "args": ["-S"]}
    select1 = {"name": "select1", "script": "select1.sql", "script_hash": "v1"}
    before = _recipe([pgbench, select1])
    # later: a workload is added, and select1's script is edited
    after = _recipe([pgbench, {**select1, "script_hash": "v2"}, {"name": "txid", "script": "txid.sql"}])
    assert after.config_hash() != before.config_hash()  # one series per recipe config would break everything
    shas = [repo.bench_commit(f"c{i}", i) for i in range(6)]
    for i, sha in enumerate(shas):
        recipe = before if i < 3 else after
        values = {"pgbench": 1000.0, "select1": 500.0} | ({"txid": 80.0} if i >= 3 else {})
        _store(settings, _result(recipe, sha, values), i + 1)
    conn = store.connect(settings.results_db)
    series = {}
    for r in conn.execute("SELECT id, workload, config_hash FROM series WHERE branch = 'master' ORDER BY id"):
        series.setdefault(r["workload"], []).append(r)
    # pgbench: one series through the change of the recipe, with all six commits
    assert [r["config_hash"] for r in series["pgbench"]] == [before.workload_hash("pgbench")]
    assert analysis.load_series(conn, series["pgbench"][0]["id"]).series.commits == tuple(shas)
    # select1: what it measures changed at commit 3, so a new series starts there; txid starts with its first run
    assert [r["config_hash"] for r in series["select1"]] == [
        before.workload_hash("select1"),
        after.workload_hash("select1"),
    ]
    assert [analysis.load_series(conn, r["id"]).series.commits for r in series["select1"]] == [
        tuple(shas[:3]),
        tuple(shas[3:]),
    ]
    assert len(series["txid"]) == 1
    # the run keeps the whole recipe's hash (shown with the run)
    assert [r[0] for r in conn.execute("SELECT DISTINCT config_hash FROM runs ORDER BY id")] == [
        before.config_hash(),
        after.config_hash(),
    ]
    conn.close()
    # the site: pgbench is one series with no break; select1's break is marked in its own series only, naming the
    # machine as every page does (workers.about, issue #31), not by its id
    out = tmp_path / "site"
    about = (("local", "tern", "Alice <alice@example.org>", ""),)
    publish_all(
        dataclasses.replace(settings, alerts=dataclasses.replace(settings.alerts, machine_about=about)), out, now=NOW
    )

    def page(workload: str, recipe: Recipe) -> dict:
        key = SeriesRef(
            MeasureKey(MACHINE_ID, "fixture", 1, recipe.workload_hash(workload), workload, "throughput"), "master"
        )
        return json.loads((out / f"data/series/{key.sid}/index.json").read_text())

    pg = page("pgbench", before)
    assert (pg["series"]["first_position"], pg["series"]["last_position"]) == (1, 6)
    assert [m for m in pg["markers"] if m["kind"] == "config"] == []
    old_select1 = page("select1", before)
    assert [m["pos"] for m in old_select1["markers"] if m["kind"] == "config"] == [4]
    assert old_select1["markers"][0]["label"] == f"tern fixture v1 {after.workload_hash('select1')[:8]} starts"
    assert page("select1", after)["series"]["first_position"] == 4


def test_results_without_per_workload_hashes_still_ingest_under_the_recipes_hash(farm):
    repo, settings = farm
    recipe = _recipe([{"name": "pgbench"}])
    a, b = repo.bench_commit("a", 1), repo.bench_commit("b", 2)
    _store(settings, _result(recipe, a, {"pgbench": 1000.0}, per_workload=False), 1)
    _store(settings, _result(recipe, b, {"pgbench": 1000.0}, per_workload=False), 2)
    conn = store.connect(settings.results_db)
    assert [tuple(r) for r in conn.execute("SELECT DISTINCT config_hash FROM measurements")] == [
        (recipe.config_hash(),)
    ]
    [sid] = [r[0] for r in conn.execute("SELECT id FROM series")]
    assert analysis.load_series(conn, sid).series.commits == (a, b)


def test_upgrading_to_per_workload_hashes_keeps_the_stored_history_in_its_series(farm, tmp_path):
    # a farm that stored results before results carried per-workload hashes (their series keyed by the recipe's
    # whole hash), then its first result with them, then a workload added: pgbench stays one series throughout
    repo, settings = farm
    pgbench, select1 = {"name": "pgbench"}, {"name": "select1"}
    recipe = _recipe([pgbench, select1])
    grown = _recipe([pgbench, select1, {"name": "txid"}])
    shas = [repo.bench_commit(f"c{i}", i) for i in range(5)]
    for i in range(3):
        _store(settings, _result(recipe, shas[i], {"pgbench": 1000.0, "select1": 500.0}, per_workload=False), i + 1)
    conn = store.connect(settings.results_db)
    before = {r["workload"]: r["id"] for r in conn.execute("SELECT id, workload FROM series")}
    assert len(before) == 2
    inc, full = tmp_path / "inc", tmp_path / "full"
    publish_all(settings, inc, now=NOW)
    run_id = _store(settings, _result(recipe, shas[3], {"pgbench": 1000.0, "select1": 500.0}), 4)
    after = {
        r["workload"]: (r["id"], r["config_hash"]) for r in conn.execute("SELECT id, workload, config_hash FROM series")
    }
    assert after == {w: (before[w], recipe.workload_hash(w)) for w in ("pgbench", "select1")}  # same series rows
    assert (
        conn.execute("SELECT COUNT(*) FROM measurements WHERE config_hash = ?", (recipe.config_hash(),)).fetchone()[0]
        == 0
    )
    assert analysis.load_series(conn, before["pgbench"]).series.commits == tuple(shas[:4])
    # the site: the moved series' old pages go, so the incremental publish is a full one, equal to a fresh one
    report = publish_incremental(settings, run_id, inc, now=NOW)
    assert report.incremental is False
    publish_all(settings, full, now=NOW)
    a, b = _files(inc), _files(full)
    assert sorted(a) == sorted(b) and [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)] == []
    # and then a workload is added: pgbench's series goes on
    _store(settings, _result(grown, shas[4], {"pgbench": 1000.0, "select1": 500.0, "txid": 80.0}), 5)
    assert analysis.load_series(conn, before["pgbench"]).series.commits == tuple(shas)
    assert conn.execute("SELECT COUNT(*) FROM series").fetchone()[0] == 3
    conn.close()


def _files(root: Path) -> dict[str, Path]:
    root = Path(os.path.realpath(root))
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
