"""Jobs of several sides on the worker (recipes/sides.py, the runner's build and bench phases with --job): real git
repositories and real compiles of the fixture recipe, through the shipped zipapp as a worker runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from master import shipping
from recipes import sandbox
from recipes.api import Context, Side
from recipes.result import ResultError, validate_job
from recipes.sides import UNTRUSTED, parse_sides, prepare, side_layout, sync_tree
from tests.harness import BENCH_C, make_repo
from tests.sandbox_support import hostile_program


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    return shipping.build_zipapp(tmp_path_factory.mktemp("ship"))


@pytest.fixture
def upstream(tmp_path):
    """An upstream repository with three commits of the fixture program (1000, 900 ops) and a worker clone of
    only its first commit's branch (over file://, so no objects are shared), so later sides must be fetched."""
    repo = make_repo(tmp_path / "up", first_value=1000)
    first = repo.head()
    slower = repo.bench_commit("slower", 900)
    subprocess.run(["git", "-C", str(repo.path), "tag", "keep-slower", slower], check=True)  # reachable by a tag
    subprocess.run(["git", "-C", str(repo.path), "reset", "--quiet", "--hard", first], check=True)
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "--quiet", "--single-branch", "--no-tags", f"file://{repo.path}", str(clone)], check=True
    )
    return repo, clone, first, slower


def job(pyz, tmp_path, clone, sides, *extra, phases=("build", "bench"), env=None):
    """Run the job phases as a worker would (with `env` added to the worker's environment)."""
    env = {**os.environ, **(env or {})}
    procs = []
    for phase in phases:
        argv = [
            sys.executable,
            str(pyz),
            phase,
            "--recipe",
            "fixture",
            "--src",
            str(clone),
            "--work",
            str(tmp_path / "work"),
            "--state",
            str(tmp_path / "state"),
            "--sha",
            sides[0].split("=")[1],
            "--job",
            "7",
            "--result",
            str(tmp_path / "job.json"),
            "--option=samples=4",
        ]
        argv += [f"--side={s}" for s in sides] + list(extra)
        procs.append(subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env))
        if procs[-1].returncode != 0:
            break
    return procs


def test_a_job_measures_every_side_interleaved_and_its_result_validates(pyz, tmp_path, upstream):
    _, clone, first, slower = upstream
    patch = tmp_path / "faster.patch"  # C = A + a patch that makes it faster, from a real diff
    src = tmp_path / "p"
    subprocess.run(["git", "clone", "--quiet", str(clone), str(src)], check=True)
    (src / "perffarm_bench.c").write_text(BENCH_C.format(value=1100, sleep_us=0))
    patch.write_text(subprocess.run(["git", "-C", str(src), "diff"], capture_output=True, text=True).stdout)
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={slower}", f"C={first}"], f"--patch=C={patch}")
    assert [p.returncode for p in procs] == [0, 0], procs[-1].stdout + procs[-1].stderr
    doc = validate_job(json.loads((tmp_path / "job.json").read_text()))
    assert doc["job"] == 7 and doc["status"] == "ok"
    ops = {s["label"]: s["workloads"][0]["metrics"][0]["samples"] for s in doc["sides"]}
    assert ops == {"A": [1000.0] * 4, "B": [900.0] * 4, "C": [1100.0] * 4}
    assert doc["sides"][2]["patch"] and doc["sides"][0]["patch"] is None
    assert "fetching it from origin" in procs[0].stdout  # B was not in the clone
    assert set(doc["timings"]) == {"build_seconds", "bench_seconds"}
    assert "bench of job 7 done in" in procs[1].stdout


def test_a_job_bench_without_its_build_is_a_usage_error(pyz, tmp_path, upstream):
    _, clone, first, slower = upstream
    (bench,) = job(pyz, tmp_path, clone, [f"A={first}", f"B={slower}"], phases=("bench",))
    assert bench.returncode == 2
    assert "no successful build of job 7" in bench.stderr and not (tmp_path / "job.json").exists()


def _patch(tmp_path: Path, clone: Path, program: str) -> Path:
    """A patch of the fixture program made with git diff in a copy of the clone."""
    src = tmp_path / "p"
    subprocess.run(["git", "clone", "--quiet", str(clone), str(src)], check=True)
    (src / "perffarm_bench.c").write_text(program)
    patch = tmp_path / "side.patch"
    patch.write_text(subprocess.run(["git", "-C", str(src), "diff"], capture_output=True, text=True).stdout)
    return patch


def test_a_patched_sides_program_runs_in_the_sandbox_and_reaches_nothing_of_the_worker(pyz, tmp_path, upstream):
    """Issue #26 items 1-2 on the worker's runner: the patched program tries to read a secret of the worker's
    host, plant a post-checkout hook in the worker's shared clone and overwrite the job's own build marker; all
    refused, the job measures it like any side, and what it built is gone after the bench."""
    _, clone, first, _ = upstream
    secret = tmp_path / "secrets" / "worker-local"
    secret.parent.mkdir()
    secret.write_text("hunter2\n")
    hook = clone / ".git" / "hooks" / "post-checkout"
    marker = tmp_path / "state" / "build-ok.json"
    program = hostile_program(1100, reads=[secret, clone / "perffarm_bench.c"], writes=[hook, marker], pid=os.getpid())
    patch = _patch(tmp_path, clone, program)
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={first}"], f"--patch=B={patch}")
    assert [p.returncode for p in procs] == [0, 0], procs[-1].stdout + procs[-1].stderr
    doc = validate_job(json.loads((tmp_path / "job.json").read_text()))
    ops = {s["label"]: s["workloads"][0]["metrics"][0]["samples"] for s in doc["sides"]}
    assert ops == {"A": [1000.0] * 4, "B": [1100.0] * 4}, procs[1].stdout  # B prints 666666 if anything got out
    assert not hook.exists()
    assert "[sandbox]" in procs[0].stdout and "[sandbox]" in procs[1].stdout
    assert not (tmp_path / "work" / UNTRUSTED).exists()  # the patched tree and program are gone
    assert not (tmp_path / "work" / "sides" / "B").exists()  # never where an unpatched side's tree is kept


@pytest.mark.skipif(os.geteuid() != 0, reason="the tests already run as an ordinary user: the test above is that")
def test_a_worker_running_as_an_ordinary_user_sandboxes_the_patch_the_same_way(pyz, tmp_path, upstream):
    """The same hostile job with the worker's runner started as uid 65534 (setpriv), as `make run` runs it on a
    host where the farm has its own user, with Debian's python3 (the zipapp needs only the standard library)."""
    _, clone, first, _ = upstream
    home = Path(tempfile.mkdtemp(prefix="pf-ordinary-", dir="/tmp"))
    try:
        home.chmod(0o755)
        own = home / "clone"
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(clone), str(own)], check=True)
        secret = home / "secret"
        secret.write_text("hunter2\n")
        secret.chmod(0o644)  # readable by every user of the host: only the sandbox keeps it out
        hook = own / ".git" / "hooks" / "post-checkout"
        patch = _patch(tmp_path, clone, hostile_program(1100, reads=[secret], writes=[hook]))
        shutil.copy(patch, home / "side.patch")
        shutil.copy(pyz, home / "recipes.pyz")
        subprocess.run(["chown", "-R", "65534:65534", str(own), str(home / "side.patch")], check=True)
        (home / "run").mkdir()
        os.chown(home / "run", 65534, 65534)
        procs = []
        for phase in ("build", "bench"):
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/python3"]
            argv += [str(home / "recipes.pyz"), phase, "--recipe", "fixture", "--src", str(own)]
            argv += ["--work", str(home / "run" / "work"), "--state", str(home / "run" / "state"), "--sha", first]
            argv += ["--job", "7", "--result", str(home / "run" / "job.json"), "--option=samples=2"]
            argv += [f"--side=A={first}", f"--side=B={first}", f"--patch=B={home / 'side.patch'}"]
            env = {"PATH": os.environ["PATH"], "HOME": str(home / "run"), "LANG": "C.UTF-8"}
            procs.append(subprocess.run(argv, capture_output=True, text=True, cwd=home / "run", env=env))
            assert procs[-1].returncode == 0, procs[-1].stdout[-3000:] + procs[-1].stderr[-3000:]
        doc = validate_job(json.loads((home / "run" / "job.json").read_text()))
        ops = {s["label"]: s["workloads"][0]["metrics"][0]["samples"] for s in doc["sides"]}
        assert ops == {"A": [1000.0] * 2, "B": [1100.0] * 2}
        assert "[sandbox]" in procs[1].stdout and not hook.exists()
    finally:
        sandbox.remove_tree(home)


def test_a_patch_cannot_compile_a_file_of_the_worker_into_its_program(pyz, tmp_path, upstream):
    _, clone, first, _ = upstream
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2\n")
    program = BENCH_C.format(value=1, sleep_us=0) + f'asm(".incbin \\"{secret}\\"");\n'
    patch = _patch(tmp_path, clone, program)
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={first}"], f"--patch=B={patch}")
    assert procs[0].returncode == 3, procs[0].stdout
    doc = validate_job(json.loads((tmp_path / "job.json").read_text()))
    assert doc["status"] == "build-failed" and str(secret) in doc["log_excerpt"]  # "cannot open": not there
    assert "hunter2" not in procs[0].stdout + procs[0].stderr + doc["log_excerpt"]


def test_a_try_job_is_refused_with_what_to_do_where_the_sandbox_cannot_be_set_up(pyz, tmp_path, upstream):
    _, clone, first, _ = upstream
    patch = _patch(tmp_path, clone, BENCH_C.format(value=900, sleep_us=0))
    env = {sandbox.BWRAP_ENV: str(tmp_path / "no-bwrap-here")}
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={first}"], f"--patch=B={patch}", env=env)
    assert procs[0].returncode == 3
    doc = validate_job(json.loads((tmp_path / "job.json").read_text()))
    assert doc["status"] == "build-failed"
    assert "cannot run a try-job's patch" in doc["log_excerpt"] and "apt-get install bubblewrap" in doc["log_excerpt"]
    assert not (tmp_path / "work" / "sides").exists() and not (tmp_path / "work" / UNTRUSTED).exists()
    # a release comparison has no patch and needs no sandbox
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={first}"], env=env)
    assert [p.returncode for p in procs] == [0, 0], procs[-1].stdout + procs[-1].stderr


def test_a_patch_that_does_not_apply_is_a_build_failed_job_result_that_says_so(pyz, tmp_path, upstream):
    _, clone, first, slower = upstream
    patch = tmp_path / "bad.patch"
    patch.write_text("--- a/perffarm_bench.c\n+++ b/perffarm_bench.c\n@@ -1,1 +1,1 @@\n-no such line\n+x\n")
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={first}"], f"--patch=B={patch}")
    assert procs[0].returncode == 3
    doc = validate_job(json.loads((tmp_path / "job.json").read_text()))
    assert doc["status"] == "build-failed" and "side B: the patch does not apply" in doc["log_excerpt"]


def test_a_patch_cannot_write_outside_its_tree(pyz, tmp_path, upstream):
    _, clone, first, _ = upstream
    patch = tmp_path / "escape.patch"
    patch.write_text("--- /dev/null\n+++ b/../../escaped.txt\n@@ -0,0 +1 @@\n+pwned\n")
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={first}"], f"--patch=B={patch}")
    assert procs[0].returncode == 3
    assert not list(tmp_path.rglob("escaped.txt"))


def test_a_side_that_is_no_commit_of_the_repository_fails_the_build_and_says_why(pyz, tmp_path, upstream):
    _, clone, first, _ = upstream
    procs = job(pyz, tmp_path, clone, [f"A={first}", "B=" + "e" * 40])
    assert procs[0].returncode == 3
    doc = json.loads((tmp_path / "job.json").read_text())
    assert "is neither in this worker's clone nor fetchable" in doc["log_excerpt"]


@pytest.mark.parametrize(
    "sides, patches, says",
    [
        (["A=" + "a" * 40], [], "2 to 8 sides"),
        (["A=" + "a" * 40, "A=" + "b" * 40], [], "given twice"),
        (["A=" + "a" * 40, "Z=" + "b" * 40], [], "LABEL=SHA"),
        (["A=" + "a" * 40, "B=HEAD"], [], "LABEL=SHA"),
        (["A=" + "a" * 40, "B=" + "b" * 40], ["C=x.patch"], "one of the sides AB"),
    ],
)
def test_bad_side_arguments_are_refused(sides, patches, says):
    with pytest.raises(ValueError, match=says):
        parse_sides(sides, patches)


def test_a_job_result_with_sides_out_of_order_is_rejected(pyz, tmp_path, upstream):
    _, clone, first, slower = upstream
    procs = job(pyz, tmp_path, clone, [f"A={first}", f"B={slower}"])
    assert [p.returncode for p in procs] == [0, 0]
    doc = json.loads((tmp_path / "job.json").read_text())
    doc["sides"].reverse()
    with pytest.raises(ResultError, match=r"\$\.sides\[0\]\.label"):
        validate_job(doc)


def _side_context(clone: Path, work: Path) -> Context:
    state = work / "state"
    state.mkdir(parents=True, exist_ok=True)
    return Context(src_dir=clone, work_dir=work, state_dir=state, sha="", ref="job", options={})


def test_a_sides_kept_build_directory_rebuilds_what_the_next_commit_changed(tmp_path):
    """A side's build directory is kept from one job to the next (an incremental build). git archive stamps every
    file with its commit's date, older than the objects of the last build, so a tree exported over the last one
    left make sure that the changed source was built: side A of the second job ran the first job's program."""
    repo = tmp_path / "r"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git[:3], "init", "--quiet"], check=True)
    (repo / "Makefile").write_text("a: a.c\n\tcc -o a $<\n")
    (repo / "gone.txt").write_text("only in the first commit\n")
    shas = []
    for day in (1, 2):
        (repo / "a.c").write_text(f"int main(void) {{ return {day}; }}\n")
        if day == 2:
            (repo / "gone.txt").unlink()
        subprocess.run([*git, "add", "-A"], check=True)
        date = f"2020-01-0{day}T00:00:00"
        env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
        subprocess.run([*git, "commit", "--quiet", "-m", f"day {day}"], check=True, env=env)
        shas.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip())
    ctx = _side_context(repo, tmp_path / "work")
    exits = []
    for sha in shas:
        side = prepare(ctx, Side("A", sha))
        assert side.tree == side_layout(ctx, "A")[0]
        build = side_layout(ctx, "A")[1] / "build"  # kept between jobs, as recipes/pg/recipe.py's is
        build.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["make", "-s", "-C", str(build), "-f", str(side.tree / "Makefile"), f"VPATH={side.tree}"], check=True
        )
        exits.append(subprocess.run([str(build / "a")]).returncode)
    assert exits == [1, 2]
    assert not (side.tree / "gone.txt").exists()  # what the commit removed is gone from the tree
    assert not (side.tree.parent / "source.export").exists()


def test_syncing_a_tree_moves_only_what_differs(tmp_path):
    fresh, tree = tmp_path / "fresh", tmp_path / "tree"
    for root in (fresh, tree):
        (root / "d").mkdir(parents=True)
        (root / "same.c").write_text("same\n")
    (fresh / "d" / "new.c").write_text("new\n")
    (fresh / "changed.c").write_text("after\n")
    (tree / "changed.c").write_text("before\n")
    (tree / "stale").mkdir()
    (tree / "stale" / "x.c").write_text("x\n")
    (fresh / "link").symlink_to("same.c")
    (tree / "link").symlink_to("changed.c")
    os.utime(tree / "same.c", (1_000_000, 1_000_000))
    assert sync_tree(fresh, tree) == 4  # changed.c, d/new.c, link, stale (with what it holds)
    assert (tree / "same.c").stat().st_mtime == 1_000_000  # untouched: make rebuilds nothing for it
    assert (tree / "changed.c").read_text() == "after\n" and (tree / "d" / "new.c").read_text() == "new\n"
    assert os.readlink(tree / "link") == "same.c"
    assert not (tree / "stale").exists() and not fresh.exists()
