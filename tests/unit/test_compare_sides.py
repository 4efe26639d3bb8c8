"""`perffarm compare` measures its revisions through the recipe registry's side entry points (recipes/api.py
SideSupport), the code a farm job runs on a worker: here with the fixture recipe, a real git repository and real
compiles of its C program, so that the path is shown for a recipe that is not PostgreSQL's (the PostgreSQL recipes
go the same way in tests/integration/test_postgres_recipes.py and test_pg_releases.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from master import compare
from tests.harness import make_repo


@pytest.fixture
def repo(tmp_path):
    repo = make_repo(tmp_path / "repo", first_value=1000)
    first = repo.head()
    slower = repo.bench_commit("slower", 900)
    return repo, first, slower


def _compare(tmp_path, repo, *argv):
    out = tmp_path / "out.json"
    rc = compare.main(
        ["--recipe", "fixture", "--repo", str(repo.path), "--work", str(tmp_path / "work"), *argv, "--json", str(out)]
    )
    return rc, (json.loads(out.read_text()) if out.exists() else None)


def test_compare_measures_any_recipes_sides_and_gates_on_the_slower_one(tmp_path, repo, capsys):
    repo, first, slower = repo
    rc, doc = _compare(tmp_path, repo, first, slower, "--option=samples=4")
    assert rc == compare.EXIT_FOUND  # B does 900 ops where A does 1000: a regression, and compare is a gate
    assert doc["recipe"] == "fixture" and doc["profile"] is None
    (loop,) = [c for c in doc["vs_first"]["B"] if c["workload"] == "loop" and c["metric"] == "throughput"]
    assert loop["ratio"] == pytest.approx(0.9, rel=0.02) and loop["verdict"] == "regression"
    assert [v["sha"] for v in doc["versions"]] == [first, slower]
    # each side was built in the one kept tree, one after the other (recipes/sides.py side_layout)
    sides = tmp_path / "work" / "work" / "sides"
    assert [p.name for p in sides.iterdir() if p.is_dir()] == [compare.LAYOUT]
    assert "B = " in capsys.readouterr().out


def test_a_compare_patch_is_the_callers_own_built_like_a_commit_not_in_the_try_job_sandbox(tmp_path, repo):
    repo, first, slower = repo
    patch = tmp_path / "slower.patch"
    patch.write_text(
        subprocess.run(
            ["git", "-C", str(repo.path), "diff", first, slower], capture_output=True, text=True, check=True
        ).stdout
    )
    rc, doc = _compare(tmp_path, repo, first, first, "--patch", str(patch), "--option=samples=4")
    assert rc == compare.EXIT_FOUND
    (loop,) = [c for c in doc["vs_first"]["B"] if c["workload"] == "loop" and c["metric"] == "throughput"]
    assert loop["ratio"] == pytest.approx(0.9, rel=0.02)
    assert doc["patch"] == str(patch)
    assert not (tmp_path / "work" / "work" / "untrusted").exists()  # no try-job directory: not someone else's code


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--recipe", "no-such"], "no recipe named 'no-such'; known recipes:"),
        (["--recipe", "fixture", "--profile", "quick"], "give --profile or --recipe, not both"),
    ],
)
def test_a_recipe_that_is_not_there_is_a_usage_error_that_lists_the_known_ones(tmp_path, repo, capsys, argv, says):
    repo, first, slower = repo
    argv = [*argv, "--repo", str(repo.path), "--work", str(tmp_path / "work"), first, slower]
    assert compare.main(argv) == compare.EXIT_USAGE
    assert says in capsys.readouterr().err
    assert not (tmp_path / "work").exists()  # nothing cloned or built


def test_overlay_effects_on_a_recipe_without_variants_say_so(tmp_path, repo, capsys):
    repo, first, slower = repo
    rc, _ = _compare(tmp_path, repo, first, slower, "--overlay-effects", "--option=samples=2")
    assert rc == compare.EXIT_FAILED
    assert "recipe fixture offers no variant of B" in capsys.readouterr().err
