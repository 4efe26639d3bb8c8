"""The synthetic postgres.git-sized history has the shape it claims, checked with git itself on a small one."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.benchmarks.synth_history import Shape, branch_names, generate, main, release_prefix, write_repo

SHAPE = Shape(commits=600, branches=6, tags=60, merges=3, backpatch=0.3, seed=7)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("synth") / "pg.git"
    return path, write_repo(path, SHAPE)


def test_branch_names_follow_postgres_spelling_newest_first():
    names = branch_names(12)
    assert names[:3] == ["REL_18_STABLE", "REL_17_STABLE", "REL_16_STABLE"]
    assert names[9:12] == ["REL9_6_STABLE", "REL9_5_STABLE", "REL9_4_STABLE"]
    assert release_prefix("REL9_6_STABLE") + "24" == "REL9_6_24"
    assert len(set(branch_names(60))) == 60  # more than postgres.git has: still distinct names


def test_counts_match_what_git_sees(repo):
    path, summary = repo
    assert git(path, "rev-list", "--first-parent", "--count", "master").strip() == str(SHAPE.commits)
    assert git(path, "rev-list", "--all", "--count").strip() == str(summary.total_commits)
    heads = git(path, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    assert sorted(heads) == sorted(["master", *branch_names(SHAPE.branches)])
    tags = git(path, "for-each-ref", "--format=%(refname:short) %(objecttype)", "refs/tags").split("\n")
    assert len([t for t in tags if t]) == SHAPE.tags
    assert all(t.endswith(" tag") for t in tags if t)  # annotated, as release tags are
    assert git(path, "rev-list", "--merges", "--count", "master").strip() == str(SHAPE.merges)
    assert git(path, "symbolic-ref", "HEAD").strip() == "refs/heads/master"


def test_backpatches_repeat_a_master_commit_on_stable_branches(repo):
    path, _ = repo
    fmt = "--format=%H%x09%an%x09%s"
    master = {tuple(line.split("\t")[1:]): line.split("\t")[0] for line in git(path, "log", fmt, "master").splitlines()}
    newest = branch_names(SHAPE.branches)[0]
    picks = git(path, "log", fmt, f"master..{newest}").splitlines()
    assert picks, "the newest stable branch has back-patches"
    for line in picks:
        sha, author, subject = line.split("\t")
        assert master.get((author, subject)) not in (None, sha)  # same author and subject, another commit
    # The same fix lands on several live branches (postgres.git's back-patch pattern).
    seen = Counter(
        line.split("\t", 1)[1]
        for b in branch_names(SHAPE.branches)
        for line in git(path, "log", "--format=%H%x09%s", f"master..{b}").splitlines()
    )
    assert max(seen.values()) >= 2


def test_release_tags_sit_on_their_branch(repo):
    path, summary = repo
    for tag, branch in list(summary.tags.items())[::7]:
        commit = git(path, "rev-parse", f"{tag}^{{commit}}").strip()
        subprocess.run(["git", "merge-base", "--is-ancestor", commit, branch], cwd=path, check=True)


def test_the_stream_is_deterministic_and_follows_the_seed():
    def stream(shape: Shape) -> bytes:
        chunks: list[bytes] = []
        generate(shape, chunks.append)
        return b"".join(chunks)

    assert stream(SHAPE) == stream(SHAPE)
    assert stream(SHAPE) != stream(Shape(**{**SHAPE.__dict__, "seed": 8}))


def test_command_line_refuses_an_existing_path_and_bad_counts(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "x.git"), "--commits", "0"])
    with pytest.raises(FileExistsError):
        main([str(tmp_path), "--commits", "10"])
    assert main([str(tmp_path / "ok.git"), "--commits", "50", "--branches", "2", "--tags", "5"]) == 0
    out = capsys.readouterr().out
    assert "8 refs" in out and "50 on master's first-parent chain" in out
