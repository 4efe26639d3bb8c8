"""Real PostgreSQL for the tests, built once per suite run and shared by every file that asks for it.

A cold build costs minutes (15.18: ~6 min on 2 cores; 13 and 18 about as much), so each source repository and each
install is made once per `pytest` run, however many files and xdist workers want it:

- the repositories come from scripts/pg-source-repo.sh (15: release, README, a postgres.c comment) and
  scripts/pg-releases-repo.sh (13 and 18), made once in a directory every xdist worker of the run shares;
- the installs are built by the recipes' own code (`recipes.pg.build.build_install`, in the kept tree and build
  directory `perffarm compare` builds its sides in, as the farm's workers do) in a persistent work directory, so
  a rerun on the same machine starts warm: the install cache is keyed by sha (the scripts' shas are
  reproducible) and ccache lives in ~/.cache/perffarm.

Everything is made under an exclusive `flock`, so a second worker waits for the first instead of building the same
tree at once, and then reuses it. The install directories are read-only to the tests; a test that changes the
checkout (`Pg.src`) or checks out another commit in it belongs in the file that owns that work directory
(test_postgres_recipes.py, test_pg_releases.py: pytest-xdist keeps a file in one worker). A test that only reads
the install or clones `Pg.repo` may be in any file: once the install is cached, the fixture never touches the
checkout.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from master import compare
from recipes.api import Context, Side, checkout_layout
from recipes.pg.build import BuildSpec, Install, build_install, cached_install
from recipes.sides import prepare, side_layout

ROOT = Path(__file__).resolve().parents[1]
SOURCE_SCRIPT = ROOT / "scripts" / "pg-source-repo.sh"
RELEASES_SCRIPT = ROOT / "scripts" / "pg-releases-repo.sh"
CACHE = Path.home() / ".cache" / "perffarm"
SOURCE_CACHE = Path(os.environ.get("PF_PG_SOURCE_CACHE") or CACHE / "pg-source")
# Persistent work directories (clone, build trees, install cache), laid out as `perffarm compare --work` does
PG15_WORK = Path(os.environ.get("PF_TEST_PG_WORK") or CACHE / "test-pg")
RELEASES_WORK = Path(os.environ.get("PF_TEST_PG_RELEASES_WORK") or CACHE / "test-pg-releases")
RELEASES = ("13:bullseye", "18:sid")  # an autoconf-only major and a meson major
RELEASE_TAGS = ("REL_13_16", "REL_18_6")


@dataclass(frozen=True)
class Pg:
    """One built commit: its repository, the work directory's checkout, and the install."""

    repo: Path  # the script's repository: clone it to add commits
    work: Path  # `perffarm compare --work`: the checkout and the recipe work directory below it
    src: Path  # the work directory's checkout
    sha: str
    install: Install

    @property
    def recipe_work(self) -> Path:
        """The runner's `--work` (build trees, `installs/`): PF_PG_INSTALL_CACHE=recipe_work/installs reuses it."""
        return checkout_layout(self.work)[1]


@dataclass(frozen=True)
class Releases:
    """The release repository (one commit per release, tagged) and an install of every tag in it."""

    repo: Path
    work: Path
    installs: dict[str, Install]  # tag -> install


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (a lock file), held by one process of the run at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory shared by every xdist worker of this run (the base temp dir itself without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _repo_once(shared: Path, name: str, argv: list[str]) -> Path:
    """The repository `argv` makes at shared/name, made by the first process of the run that asks for it."""
    repo = shared / name
    done = shared / f"{name}.done"
    with locked(shared / f"{name}.lock"):
        if not done.exists():
            subprocess.run([*argv[:1], str(repo), *argv[1:]], check=True, timeout=1200)
            done.touch()
    return repo


def build(repo: Path, rev: str, work: Path, state: Path) -> tuple[str, Install]:
    """(sha, install) of `rev`: checked out in `work`'s clone and built by the recipes' build code, or reused from
    the install cache without touching the clone (another worker's tests may be using it). Holds `work`'s lock:
    one build in a work directory at a time."""
    sha = git(repo, "rev-parse", f"{rev}^{{commit}}")
    state.mkdir(parents=True, exist_ok=True)
    src, recipe_work = checkout_layout(work)
    ctx = Context(src_dir=src, work_dir=recipe_work, state_dir=state, sha=sha, ref="compare", options={})
    with locked(work.parent / f"{work.name}.lock"):
        cached = cached_install(ctx, BuildSpec(), sha)
        if cached is not None:
            return sha, cached
        compare._clone(str(repo), work)
        compare._checkout(src, sha, None)  # Pg.src: the commit checked out, for the tests that read or build it
        # in the kept tree and build directory `perffarm compare` builds its sides in, as the PostgreSQL recipe's
        # build_sides does (ref "job"), so that a test's compare of this commit with a patch builds incrementally
        side = prepare(ctx, Side("A", sha, layout=compare.LAYOUT))
        kept = side_layout(ctx, compare.LAYOUT)[1]
        return sha, build_install(ctx, BuildSpec(), src=side.tree, sha=sha, ref="job", work=kept)


def pg15(tmp_path_factory: pytest.TempPathFactory) -> Pg:
    """PostgreSQL 15 (Debian bookworm's source) at the head of scripts/pg-source-repo.sh's repository, built."""
    shared = run_dir(tmp_path_factory)
    repo = _repo_once(shared, "pg15-repo", [str(SOURCE_SCRIPT), str(SOURCE_CACHE)])
    sha, install = build(repo, "HEAD", PG15_WORK, tmp_path_factory.mktemp("pg15-state"))
    return Pg(repo, PG15_WORK, checkout_layout(PG15_WORK)[0], sha, install)


def releases(tmp_path_factory: pytest.TempPathFactory) -> Releases:
    """13.16 and 18.6 from Debian's source packages (scripts/pg-releases-repo.sh), each built."""
    shared = run_dir(tmp_path_factory)
    repo = _repo_once(shared, "releases-repo", [str(RELEASES_SCRIPT), str(SOURCE_CACHE), *RELEASES])
    tags = git(repo, "tag", "--list", "REL_*").split()
    assert tags == list(RELEASE_TAGS), tags
    state = tmp_path_factory.mktemp("releases-state")
    installs = {tag: build(repo, tag, RELEASES_WORK, state)[1] for tag in RELEASE_TAGS}
    return Releases(repo, RELEASES_WORK, installs)
