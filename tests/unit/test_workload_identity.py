"""Series identity is per workload (issue #13, item 1): a workload's config hash covers what that workload
measures, never another workload's entry. Checked on a real copy of the recipes package whose profile, SQL
scripts, postgresql.conf and build flags are edited the way a user would edit them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recipes import registry
from recipes.api import Recipe, listed_workloads
from recipes.pg import insertbench, memprobe
from recipes.pg.profile import identity_of, load_profile, workload_files, workloads

REPO = Path(__file__).resolve().parents[2]
RECIPES = ("pg-quick", "pg-full")

# Every workload name a recipe's results can carry: the profile's workloads, and the Insert Benchmark's steps.
_HASHES = """
import json, sys
from recipes import registry
from recipes.pg.profile import workloads
out = {}
for name in sys.argv[1:]:
    r = registry.get(name)
    names = [w.name for w in workloads(r.config["profile"])]
    names += [f"{n}-{step}" for n in names if n == "insert-benchmark" for step in ("l.i0", "l.i1", "qp100")]
    out[name] = {"run": r.config_hash(), "workloads": {w: r.workload_hash(w) for w in names}}
print(json.dumps(out))
"""


@pytest.fixture
def recipes_copy(tmp_path: Path) -> Path:
    """A copy of the recipes package to edit (the hashes read its files, as a worker reads the zipapp's)."""
    shutil.copytree(REPO / "recipes", tmp_path / "recipes", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def hashes(root: Path) -> dict[str, dict]:
    """Run and workload hashes of the pg recipes as the recipes package under `root` computes them."""
    code = f"import sys; sys.path.insert(0, {str(root)!r})\n" + _HASHES
    out = subprocess.run([sys.executable, "-I", "-c", code, *RECIPES], capture_output=True, text=True, cwd=root,
                         check=True).stdout
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
    profile["workloads"].append({"name": "txid-contention", "kind": "pgbench", "script": "txid.sql",
                                 "args": ["-M", "prepared"], "clients": [1, 2], "duration_s": 5,
                                 "metric": "tps", "unit": "tx/s", "direction": "higher"})
    profile["description"] += " Plus a txid_current() contention sweep."
    quick.write_text(json.dumps(profile, indent=1))
    after = hashes(recipes_copy)
    assert after["pg-quick"]["run"] != before["pg-quick"]["run"]  # the whole recipe did change...
    assert changed(before, after, "pg-quick") == set()  # ...but no existing workload's series did
    assert set(after["pg-quick"]["workloads"]) - set(before["pg-quick"]["workloads"]) == {
        "txid-contention-c1", "txid-contention-c2"}
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
    assert changed(after, again, "pg-full") == {w for w in before["pg-full"]["workloads"]
                                                if w.startswith("insert-benchmark")}
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
        edit(recipes_copy / "recipes/pg/build.py", '("-O2", "-fno-omit-frame-pointer")',
             '("-O3", "-fno-omit-frame-pointer")')
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
    shipped = {f"sql/{p.name}" for p in (REPO / "recipes/pg/sql").glob("*.sql")}
    assert shipped <= used, f"scripts no workload's identity covers: {sorted(shipped - used)}"
    source = (REPO / "recipes/pg/insertbench.py").read_text()
    assert set(re.findall(r'"([\w.-]+\.sql)"', source)) == set(insertbench.SCRIPTS)
    assert set(re.findall(r'"([\w.-]+\.sql)"', (REPO / "recipes/pg/memprobe.py").read_text())) == {memprobe.SCRIPT}


def test_every_result_workload_of_the_pg_recipes_has_its_own_identity() -> None:
    for name in RECIPES:
        recipe = registry.get(name)
        profile = recipe.config["profile"]
        names = [w.name for w in workloads(profile)]
        found = {w: recipe.workload_hash(w) for w in names}
        assert len(set(found.values())) == len(names)  # distinct: the entry (and client count) is in each
        assert recipe.config_hash() not in found.values()
        if "insert-benchmark" in names:
            assert recipe.workload_hash("insert-benchmark-qp100") == found["insert-benchmark"]
        # a name the profile does not make falls back to the whole recipe's hash: never merged wrongly
        assert identity_of(profile, {}, "no-such-workload") is None
        assert recipe.workload_hash("no-such-workload") == recipe.config_hash()


def test_a_recipe_without_workload_identities_keeps_the_whole_config_as_identity() -> None:
    def nothing(ctx):
        return []

    plain = Recipe("plain", 1, "d", {"workloads": [{"name": "a"}, {"name": "b"}]}, nothing, nothing)
    assert plain.workload_hash("a") == plain.workload_hash("b") == plain.config_hash()
    listed = Recipe("plain", 1, "d", {"cc": "gcc", "workloads": [{"name": "a"}, {"name": "b"}]}, nothing, nothing,
                    workload_identity=listed_workloads({"cc": "gcc", "workloads": [{"name": "a"}, {"name": "b"}]}))
    more = listed_workloads({"cc": "gcc", "workloads": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})
    assert listed.workload_hash("a") != listed.workload_hash("b")
    assert Recipe("plain", 1, "d", {}, nothing, nothing, workload_identity=more).workload_hash("a") == \
        listed.workload_hash("a")
    other_cc = listed_workloads({"cc": "clang", "workloads": [{"name": "a"}]})
    assert Recipe("plain", 1, "d", {}, nothing, nothing, workload_identity=other_cc).workload_hash("a") != \
        listed.workload_hash("a")
    assert Recipe("plain", 2, "d", {}, nothing, nothing, workload_identity=more).workload_hash("a") != \
        listed.workload_hash("a")
