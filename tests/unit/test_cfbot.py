"""The performance cfbot's first part (issue #31, part 3): a local repository in cfbot's layout (one branch per
proposed patch, rebased on master) becomes one try-job per branch head, measured against its merge base, again on
every push and never twice for one head. Real git repositories and a real results database."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from master import gitmirror, store
from master.jobs import cfbot
from master.jobs.core import TRY
from tests.harness import GitRepo, make_repo

BUILDER = "jobs-pg-quick@local"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[GitRepo, GitRepo, gitmirror.Mirror]:
    """The watched repository, a clone of it with patch branches as cfbot pushes them, and the master's mirror."""
    upstream = make_repo(tmp_path / "postgres")
    upstream.commit("executor: base", {"src/executor.c": "int x = 1;\n"})
    patches = GitRepo(tmp_path / "patches")
    subprocess.run(["git", "clone", "--quiet", str(upstream.path), str(patches.path)], check=True)
    patches.git("config", "user.email", "cfbot@example.org")
    patches.git("config", "user.name", "cfbot")
    for branch, text in (("cf/4711", "int x = 2;\n"), ("cf/4712", "int x = 3;\n")):
        patches.git("checkout", "--quiet", "-b", branch, "master")
        patches.commit(f"[CF {branch}] a proposed patch", {"src/executor.c": text})
    patches.git("checkout", "--quiet", "-b", "cf/4713", "master")
    patches.commit("[CF cf/4713] nothing yet", allow_empty=True)
    patches.git("checkout", "--quiet", "-b", "not-a-patch", "master")
    patches.commit("someone's branch", {"other.c": "x\n"})
    patches.git("checkout", "--quiet", "master")
    mirror = gitmirror.Mirror(str(upstream.path), tmp_path / "mirror.git")
    mirror.ensure()
    mirror.fetch()
    return upstream, patches, mirror


def one_pass(tmp_path: Path, patches: GitRepo, mirror: gitmirror.Mirror) -> list[cfbot.Outcome]:
    conn = store.connect(tmp_path / "results.sqlite")
    try:
        heads = cfbot.patch_branches(tmp_path / "cfbot.git", str(patches.path), "cf/.*", "master")
        return cfbot.queue(conn, tmp_path / "cfbot.git", mirror, heads, "master", BUILDER, [BUILDER])
    finally:
        conn.close()


def test_every_patch_branch_becomes_a_try_job_against_its_merge_base(layout, tmp_path: Path) -> None:
    upstream, patches, mirror = layout
    outcomes = {o.branch: o for o in one_pass(tmp_path, patches, mirror)}
    assert set(outcomes) == {"cf/4711", "cf/4712", "cf/4713"}  # the pattern; not-a-patch is left alone
    assert outcomes["cf/4711"].job_id and outcomes["cf/4712"].job_id
    assert outcomes["cf/4713"].job_id is None and "changes nothing" in outcomes["cf/4713"].reason
    conn = store.connect(tmp_path / "results.sqlite")
    job = store.jobs.get(conn, outcomes["cf/4711"].job_id)
    assert job is not None and job.kind == TRY and job.builder == BUILDER
    base = upstream.head()
    assert [(s.label, s.sha, s.patched) for s in job.sides] == [("A", base, False), ("B", base, True)]
    assert "-int x = 1;" in job.patch and "+int x = 2;" in job.patch
    assert job.requested_by == f"cfbot cf/4711 {outcomes['cf/4711'].head}"


def test_a_second_pass_queues_nothing_and_a_push_queues_the_new_head(layout, tmp_path: Path) -> None:
    _upstream, patches, mirror = layout
    first = {o.branch: o.job_id for o in one_pass(tmp_path, patches, mirror)}
    again = one_pass(tmp_path, patches, mirror)
    assert all(o.job_id is None for o in again)
    assert {o.branch: o.reason for o in again}["cf/4711"] == "this head is measured already"
    patches.git("checkout", "--quiet", "cf/4711")
    patches.commit("[CF cf/4711] v2 of the patch", {"src/executor.c": "int x = 4;\n"})
    patches.git("checkout", "--quiet", "master")
    pushed = {o.branch: o.job_id for o in one_pass(tmp_path, patches, mirror)}
    assert pushed["cf/4711"] not in (None, first["cf/4711"]) and pushed["cf/4712"] is None
    conn = store.connect(tmp_path / "results.sqlite")
    assert "+int x = 4;" in store.jobs.get(conn, pushed["cf/4711"]).patch  # type: ignore[union-attr]


def test_a_patch_whose_base_the_farm_does_not_have_is_skipped_with_the_reason(layout, tmp_path: Path) -> None:
    _upstream, patches, mirror = layout
    patches.commit("a master commit upstream has not got", {"new.c": "y\n"})  # the patches' master moved on
    patches.git("checkout", "--quiet", "cf/4712")
    patches.git("rebase", "--quiet", "master")
    patches.git("checkout", "--quiet", "master")
    by_branch = {o.branch: o for o in one_pass(tmp_path, patches, mirror)}
    assert by_branch["cf/4712"].job_id is None
    assert "is not in the watched repository" in by_branch["cf/4712"].reason
    assert by_branch["cf/4711"].job_id  # the others are still queued


def test_each_queued_head_keeps_its_subject_and_only_safe_thread_links(layout, tmp_path: Path) -> None:
    _upstream, patches, mirror = layout
    patches.git("checkout", "--quiet", "cf/4711")
    message = (
        "[CF 4711] v2 - <b>faster</b> hash\u202e joins\n\n"
        "This branch was generated from the commitfest entry\n"
        "https://commitfest.postgresql.org/patch/4711/.\n\n"
        "Discussion: https://postgr.es/m/CA%2Bfoo%40mail.example.org\n"
        "Discussion: javascript:alert(1)\n"
        'Discussion: https://evil.example.org/"onmouseover="x\n'
    )
    head = patches.commit(message, {"src/executor.c": "int x = 5;\n"})
    patches.git("checkout", "--quiet", "master")
    by_branch = {o.branch: o for o in one_pass(tmp_path, patches, mirror)}
    conn = store.connect(tmp_path / "results.sqlite")
    [(job, stored)] = [
        (j, h) for j, h in store.jobs.requested_with_prefix(conn, "cfbot ", 10) if j.id == by_branch["cf/4711"].job_id
    ]
    assert stored == store.jobs.CfbotHead(
        job.id,
        "cf/4711",
        head,
        "[CF 4711] v2 - <b>faster</b> hash\\u202e joins",  # a bidi override shown as its escape, as commit pages do
        ("https://postgr.es/m/CA%2Bfoo%40mail.example.org", "https://commitfest.postgresql.org/patch/4711/"),
    )
    assert cfbot.parse_requested_by(job.requested_by) == ("cf/4711", head)
    assert cfbot.parse_requested_by("cli") is None and cfbot.parse_requested_by("cfbot x") is None
