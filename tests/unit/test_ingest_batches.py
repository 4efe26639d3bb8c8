"""Ordering a long branch is written in short transactions: other ingests get in, and a half-ordered branch is
never shown to readers and is resumed after a crash (docs/scale.md, "A postgres.git-sized history").

Real synthetic repositories (tests/benchmarks/synth_history.py) of 600 commits on master, with BATCH_ROWS at 100 so
that master and every stable branch take several transactions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from master import ingest, store
from master.settings import Settings, load_settings
from tests.benchmarks.synth_history import Shape, write_repo
from tests.unit.test_result_schema import good

WIDE = {"PERFFARM_REPOSITORY_BRANCHES": ".*", "PERFFARM_REPOSITORY_TAGS": ".*"}
BATCH = 100
ROOT = Path(__file__).resolve().parents[2]


def g(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def push(repo: Path, branch: str, n: int) -> str:
    old = g(repo, "rev-parse", f"refs/heads/{branch}")
    who = ("-c", "user.name=T", "-c", "user.email=t@example.org")
    new = g(repo, *who, "commit-tree", "-p", old, "-m", f"n{n}", old + "^{tree}")
    g(repo, "update-ref", f"refs/heads/{branch}", new, old)
    return new


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("batches") / "pg.git"
    write_repo(repo, Shape(commits=600, branches=3, tags=5, merges=1, backpatch=0.2))
    return repo


def farm(tmp: Path, source: Path) -> tuple[Path, Settings]:
    """A copy of the repository (tests push to it) and settings for an empty data directory watching every ref."""
    repo = tmp / "repo.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", "--", str(source), str(repo)], check=True)
    env = {"PERFFARM_MASTER_DATA_DIR": str(tmp / "data"), "PERFFARM_REPOSITORY_URL": str(repo), **WIDE}
    settings = load_settings(environ=env)
    settings.incoming_dir.mkdir(parents=True)
    return repo, settings


def ingest_one(settings: Settings, sha: str, ref: str, bid: int) -> ingest.IngestOutcome:
    doc = good()
    doc["commit"] = {"sha": sha, "ref": ref}
    path = settings.incoming_dir / f"b-{bid}.json"
    path.write_text(json.dumps(doc))
    ctx = store.RunContext("fixture@local", "local", "poll", build_id=bid, got_revision=sha, ref=ref)
    return ingest.ingest_file(settings, path, ctx, "fixture")


def orders_match_git(repo: Path, settings: Settings) -> list[str]:
    """Every branch's stored order is git's first-parent order and none is marked; returns the branches."""
    branches = g(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    conn = store.connect(settings.results_db)
    try:
        assert store.commits.indexing(conn) == {}
        for b in branches:
            stored = [sha for _, sha in store.commits.branch_order(conn, b)]
            assert stored == g(repo, "rev-list", "--first-parent", "--reverse", b).split(), b
        assert set(store.commits.branch_heads(conn)) == set(branches)
    finally:
        conn.close()
    return branches


def _positions_written(conn) -> int:
    return conn.execute("SELECT n FROM row_counts WHERE name = 'branch_commits'").fetchone()[0]


@contextmanager
def recording_transactions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bool]]]:
    """Each write transaction: (branch positions it wrote or deleted, whether the mirror lock was held)."""
    seen: list[tuple[int, bool]] = []
    real = store.transaction

    @contextmanager
    def recording(conn):
        with real(conn):
            before = _positions_written(conn)
            yield conn
            seen.append((abs(_positions_written(conn) - before), ingest._mirror_lock.locked()))

    monkeypatch.setattr(store, "transaction", recording)
    yield seen


def test_a_long_branch_is_ordered_in_transactions_of_bounded_size(tmp_path, source, monkeypatch):
    repo, settings = farm(tmp_path, source)
    monkeypatch.setattr(ingest, "BATCH_ROWS", BATCH, raising=False)
    monkeypatch.setattr(ingest, "BATCH_PAUSE", 0, raising=False)
    with recording_transactions(monkeypatch) as seen:
        ingest_one(settings, g(repo, "rev-parse", "master"), "master", 1)
    total = sum(n for n, _ in seen)
    assert total > 6 * BATCH  # master alone is 600 positions
    assert max(n for n, _ in seen) <= BATCH, sorted(n for n, _ in seen)[-5:]
    assert not any(locked for _, locked in seen)  # no transaction runs under the mirror lock
    orders_match_git(repo, settings)


def test_another_ingest_gets_in_while_a_long_branch_is_being_ordered(tmp_path, source, monkeypatch):
    repo, settings = farm(tmp_path, source)
    ingest_one(settings, g(repo, "rev-parse", "master"), "master", 1)  # every branch ordered
    # A new stable branch forks from master's oldest commits: ~100 positions to copy, three more transactions.
    chain = g(repo, "rev-list", "--first-parent", "--reverse", "master").split()
    g(repo, "update-ref", "refs/heads/REL_99_STABLE", chain[120])
    fork = push(repo, "REL_99_STABLE", 1)
    monkeypatch.setattr(ingest, "BATCH_ROWS", 40, raising=False)
    paused, resume = threading.Event(), threading.Event()
    real = store.transaction

    @contextmanager
    def pausing(conn):
        # between two transactions of the new branch (after the first committed), once
        if not paused.is_set() and "REL_99_STABLE" in store.commits.indexing(conn):
            paused.set()
            assert resume.wait(60)
        with real(conn):
            yield conn

    monkeypatch.setattr(store, "transaction", pausing)
    first = threading.Thread(target=ingest_one, args=(settings, fork, "REL_99_STABLE", 2))
    first.start()
    try:
        assert paused.wait(60), "the new branch was not ordered in several transactions"
        # meanwhile: a new commit on master is stored, and readers do not see the half-ordered branch
        outcome = ingest_one(settings, push(repo, "master", 2), "master", 3)
        assert outcome.run_id and first.is_alive()
        conn = store.connect(settings.results_db)
        try:
            assert "REL_99_STABLE" not in store.commits.branch_heads(conn)
            assert "REL_99_STABLE" not in store.commits.positions_of(conn, fork)
            assert store.commits.branch_order(conn, "REL_99_STABLE") == []
            assert (
                _positions_written(conn)
                > conn.execute("SELECT COUNT(*) FROM branch_commits WHERE branch != 'REL_99_STABLE'").fetchone()[0]
            )  # rows of it are stored, only not shown
        finally:
            conn.close()
    finally:
        resume.set()
        first.join(60)
    assert not first.is_alive()
    assert "REL_99_STABLE" in orders_match_git(repo, settings)


KILLER = """
import json, os, signal, sys
from contextlib import contextmanager
from pathlib import Path
from master import ingest, store
from master.settings import load_settings
from tests.unit.test_result_schema import good

settings = load_settings(environ=json.loads(sys.argv[1]))
sha = sys.argv[2]
ingest.BATCH_ROWS, ingest.BATCH_PAUSE = int(sys.argv[3]), 0
real, done = store.transaction, []

@contextmanager
def dying(conn):
    with real(conn):
        yield conn
    done.append(1)
    if len(done) == 3:  # three transactions of master's order are committed: the master is killed
        os.kill(os.getpid(), signal.SIGKILL)

store.transaction = dying
doc = good()
doc["commit"] = {"sha": sha, "ref": "master"}
path = settings.incoming_dir / "b-1.json"
path.write_text(json.dumps(doc))
ctx = store.RunContext("fixture@local", "local", "poll", build_id=1, got_revision=sha, ref="master")
ingest.ingest_file(settings, path, ctx, "fixture")
"""


def test_a_master_killed_while_ordering_leaves_the_branch_hidden_and_the_next_ingest_resumes_it(
    tmp_path, source, monkeypatch
):
    repo, settings = farm(tmp_path, source)
    head = g(repo, "rev-parse", "master")
    env = {"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo), **WIDE}
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, json.dumps(env), head, str(BATCH)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    conn = store.connect(settings.results_db)
    try:
        assert store.commits.indexing(conn) == {"master": head}
        assert _positions_written(conn) == 3 * BATCH  # a prefix of master's order is stored ...
        assert store.commits.branch_heads(conn) == {}  # ... and no reader sees it
        oldest = g(repo, "rev-list", "--first-parent", "--reverse", "master").split()[0]
        assert store.commits.positions_of(conn, oldest) == {}
        assert store.commits.branch_order(conn, "master") == []
        assert store.commits.sha_at(conn, "master", 0) is None
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    finally:
        conn.close()
    monkeypatch.setattr(ingest, "BATCH_ROWS", BATCH, raising=False)
    monkeypatch.setattr(ingest, "BATCH_PAUSE", 0, raising=False)
    with recording_transactions(monkeypatch) as seen:
        outcome = ingest_one(settings, push(repo, "master", 1), "master", 2)
    # resumed where it stopped: master's first 300 positions are not written again
    assert (
        outcome.run_id
        and sum(n for n, _ in seen)
        == sum(len(g(repo, "rev-list", "--first-parent", b).split()) for b in orders_match_git(repo, settings))
        - 3 * BATCH
    )
