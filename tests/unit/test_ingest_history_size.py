"""Nothing on an ingest's path grows with the length of history: the same git work for 600 or 3,000 commits.

Real synthetic repositories (tests/benchmarks/synth_history.py) with the same refs and different history lengths;
every git process the master's ingest runs is recorded at master.gitmirror.git with the size of what it printed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from master import gitmirror, ingest, store
from master.settings import load_settings
from tests.benchmarks.synth_history import Shape, write_repo
from tests.unit.test_result_schema import good

WIDE = {"PERFFARM_REPOSITORY_BRANCHES": ".*", "PERFFARM_REPOSITORY_TAGS": ".*"}


def _push(repo: Path, branch: str, n: int) -> str:
    def g(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()

    old = g("rev-parse", f"refs/heads/{branch}")
    new = g(
        "-c", "user.name=T", "-c", "user.email=t@example.org", "commit-tree", "-p", old, "-m", f"n{n}", old + "^{tree}"
    )
    g("update-ref", f"refs/heads/{branch}", new, old)
    return new


def _ingest_calls(tmp: Path, commits: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[list[str], int]]]:
    """For a new commit and for a commit deep in history: every git call of its ingest (argv, bytes printed)."""
    repo = tmp / f"repo-{commits}.git"
    write_repo(repo, Shape(commits=commits, branches=4, tags=30, merges=1, backpatch=0.2))
    env = {"PERFFARM_MASTER_DATA_DIR": str(tmp / f"data-{commits}"), "PERFFARM_REPOSITORY_URL": str(repo), **WIDE}
    settings = load_settings(environ=env)
    settings.incoming_dir.mkdir(parents=True)
    build = iter(range(1, 100))

    def run_ingest(sha: str, ref: str) -> None:
        doc = good()
        doc["commit"] = {"sha": sha, "ref": ref}
        bid = next(build)
        path = settings.incoming_dir / f"b-{bid}.json"
        path.write_text(json.dumps(doc))
        ctx = store.RunContext("fixture@local", "local", "poll", build_id=bid, got_revision=sha, ref=ref)
        ingest.ingest_file(settings, path, ctx, "fixture")

    master = subprocess.run(
        ["git", "rev-list", "--first-parent", "--reverse", "master"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    run_ingest(master[-1], "master")  # the first ingest indexes every branch: history-sized, once
    calls: dict[str, list[tuple[list[str], int]]] = {}
    real = gitmirror.git

    def recording(key: str):
        def git(args: list[str], *a: Any, **kw: Any) -> str:
            out = real(args, *a, **kw)
            calls[key].append((args, len(out)))
            return out

        return git

    for key, sha in (("new", _push(repo, "master", 1)), ("old", master[100])):
        calls[key] = []
        monkeypatch.setattr(gitmirror, "git", recording(key))
        run_ingest(sha, "master")
        monkeypatch.setattr(gitmirror, "git", real)
    return calls


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, list[tuple[list[str], int]]]]:
    tmp = tmp_path_factory.mktemp("history-size")
    with pytest.MonkeyPatch.context() as mp:
        return {n: _ingest_calls(tmp, n, mp) for n in (600, 3000)}


@pytest.mark.parametrize("kind", ["new", "old"])
def test_ingest_runs_the_same_git_work_for_five_times_the_history(calls, kind):
    short, long = calls[600][kind], calls[3000][kind]
    assert [a[:2] for a, _ in short] == [a[:2] for a, _ in long]  # the same git commands, in the same order
    assert len(long) <= 6
    printed_short, printed_long = sum(n for _, n in short), sum(n for _, n in long)
    assert printed_long <= 1.2 * printed_short + 200, f"git printed {printed_short} then {printed_long} bytes"


@pytest.mark.parametrize("kind", ["new", "old"])
def test_no_ingest_walks_a_whole_branch(calls, kind):
    for args, _ in calls[3000][kind]:
        if args[0] == "log":  # one commit (-1) or the new part of a branch (since..head), never all of it
            assert "-1" in args or any(".." in a for a in args), args


def test_new_branches_copy_the_order_they_share_and_match_git(tmp_path, monkeypatch):
    repo = tmp_path / "pg.git"
    write_repo(repo, Shape(commits=600, branches=4, tags=10, merges=2))

    def g(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()

    side = g("rev-parse", g("rev-list", "--merges", "-1", "master") + "^2")  # merged, not on master's first parents
    g("update-ref", "refs/heads/topic", side)
    _push(repo, "topic", 1)
    env = {"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo), **WIDE}
    settings = load_settings(environ=env)
    settings.incoming_dir.mkdir(parents=True)

    def run_ingest(sha: str, bid: int) -> None:
        doc = good()
        doc["commit"] = {"sha": sha, "ref": "master"}
        path = settings.incoming_dir / f"b-{bid}.json"
        path.write_text(json.dumps(doc))
        ctx = store.RunContext("fixture@local", "local", "poll", build_id=bid, got_revision=sha, ref="master")
        ingest.ingest_file(settings, path, ctx, "fixture")

    def check_orders() -> list[str]:
        branches = g("for-each-ref", "--format=%(refname:short)", "refs/heads").split()
        conn = store.connect(settings.results_db)
        try:
            for b in branches:
                stored = [sha for _, sha in store.commits.branch_order(conn, b)]
                assert stored == g("rev-list", "--first-parent", "--reverse", b).split(), b
        finally:
            conn.close()
        return branches

    run_ingest(g("rev-parse", "master"), 1)
    assert "topic" in check_orders()  # the fork is a merged side commit: ordered from git in full, still right
    g("update-ref", "refs/heads/REL_19_STABLE", g("rev-parse", "master~5"))  # a new stable branch, a year on
    _push(repo, "REL_19_STABLE", 2)
    logs: list[list[str]] = []
    real = gitmirror.git

    def recording(args: list[str], *a: Any, **kw: Any) -> str:
        if args[0] == "log":
            logs.append(args)
        return real(args, *a, **kw)

    monkeypatch.setattr(gitmirror, "git", recording)
    run_ingest(_push(repo, "master", 3), 2)
    monkeypatch.setattr(gitmirror, "git", real)
    assert "REL_19_STABLE" in check_orders()
    assert all("-1" in a or any(x.startswith("^") or ".." in x for x in a) for a in logs), logs


def test_branch_heads_seek_one_entry_per_branch_instead_of_reading_history(tmp_path):
    conn = store.connect(tmp_path / "results.sqlite")
    try:
        with store.transaction(conn):
            for b, n in (("master", 300), ("REL_17_STABLE", 120), ("REL9_6_STABLE", 40), ("z", 1)):
                chain = [store.CommitInfo(f"{b}-{i}", "s", "a", 0, 0, ()) for i in range(n)]
                store.append_branch(conn, b, chain, 0)
        grouped = dict(conn.execute("SELECT branch, MAX(position) FROM branch_commits GROUP BY branch").fetchall())
        ran: list[str] = []
        conn.set_trace_callback(ran.append)
        heads = store.commits.branch_heads(conn)
        conn.set_trace_callback(None)
        assert heads == grouped == {"master": 299, "REL_17_STABLE": 119, "REL9_6_STABLE": 39, "z": 0}
        for sql in ran:  # whatever SQL branch_heads runs: index seeks, never a pass over every stored position
            plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
            assert "SCAN branch_commits" not in plan, plan
    finally:
        conn.close()


def test_health_figures_read_measured_commits_not_every_position(tmp_path):
    conn = store.connect(tmp_path / "results.sqlite")
    try:
        with store.transaction(conn):
            main = [store.CommitInfo(f"{i:040x}", "s", "a", 0, 0, ()) for i in range(300)]
            store.append_branch(conn, "master", main, 0)
            store.append_branch(conn, "REL_17_STABLE", main[:100], 0)
            for n, i in enumerate((50, 120, 250)):
                doc = good()
                doc["commit"] = {"sha": main[i].sha, "ref": "master"}
                store.insert_run(conn, doc, store.RunContext("fixture@local", "local", "poll", build_id=n))
        ran: list[str] = []
        conn.set_trace_callback(ran.append)
        last = store.runs.last_result_per_branch(conn)
        conn.set_trace_callback(None)
        assert {b: v[1:] for b, v in last.items()} == {"master": (299, 250), "REL_17_STABLE": (99, 50)}
        assert last["master"][0] >= last["REL_17_STABLE"][0] > 0
        for sql in ran:
            plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
            assert "SCAN branch_commits" not in plan and "SCAN bc" not in plan, plan
    finally:
        conn.close()
