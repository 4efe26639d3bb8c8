"""Branch, tag and revision names from outside: the same verdict as `git check-ref-format`, and never an option."""

from __future__ import annotations

import re
import subprocess

import pytest

from master import refnames
from master.refnames import release_order, release_version
from master.steps import end_of_options, single_branch

NAMES = [
    "master",
    "REL_17_STABLE",
    "REL_17_5",
    "refs/tags/REL_1_0",
    "feature/x",
    "a.b",
    "x@y",
    "ü-branch",
    "a{b}",
    "--upload-pack=touch${IFS}/tmp/x;git-upload-pack",
    "-x",
    "-",
    "a..b",
    "a b",
    "a\tb",
    "a~1",
    "a^",
    "a:b",
    "a?",
    "a*",
    "a[b",
    "a\\b",
    ".hidden",
    "a/.b",
    "a.lock",
    "a/b.lock/c",
    "a/",
    "/a",
    "a//b",
    "a.",
    "@",
    "a@{1}",
    "a\x1b[31m",
    "a\x7f",
    "a\x00b",
    "x" * 256,
    "refs/heads/-x",
    "HEAD",
    "@{-1}",
    "a/-b",
]


def _git_accepts(name: str) -> bool:
    if "\x00" in name:
        return False
    proc = subprocess.run(["git", "check-ref-format", "--allow-onelevel", name], capture_output=True)
    return proc.returncode == 0


@pytest.mark.parametrize("name", NAMES)
def test_ref_names_agree_with_git_and_never_start_with_a_dash(name):
    ours = refnames.ref_problem(name) is None
    if name.startswith("-") or len(name) > refnames.MAX_REF_LENGTH:
        assert not ours  # stricter than git on purpose: git would read it as an option
    else:
        assert ours == _git_accepts(name), (name, refnames.ref_problem(name))


@pytest.mark.parametrize("name", NAMES)
def test_the_force_form_regex_never_lets_an_option_through(name):
    form = re.compile(refnames.FORM_REF_REGEX)
    if form.match(name):
        assert not name.startswith("-") and not re.search(r"[\x00-\x20\x7f]", name)


def test_revisions_are_hex_or_safe_ref_names():
    assert refnames.revision_problem("0123abcd") is None
    assert refnames.revision_problem("a" * 40) is None
    assert refnames.revision_problem("REL_17_5") is None
    assert "neither a commit sha" in refnames.revision_problem("--output=/tmp/x")
    assert refnames.revision_problem("") == "is empty"
    with pytest.raises(refnames.RefNameError, match=r"revision '--output=x' is neither"):
        refnames.check_revision("--output=x")
    with pytest.raises(refnames.RefNameError, match=r"branch '-x' starts with '-'.*check-ref-format"):
        refnames.check_ref("-x")


def test_error_messages_show_control_characters_escaped_and_cut():
    message = refnames.show("\x1b[31mred" + "x" * 200)
    assert "\x1b" not in message and "\\x1b" in message and len(message) <= 80


def test_git_step_commands_get_end_of_options_where_git_takes_it():
    url = "/srv/postgres.git"
    assert end_of_options(["fetch", "-f", "--progress", url, "master"], url) == [
        "fetch",
        "-f",
        "--progress",
        "--end-of-options",
        url,
        "master",
    ]
    assert end_of_options(["cat-file", "-e", "abc"], url) == ["cat-file", "-e", "--end-of-options", "abc"]
    assert end_of_options(["checkout", "-f", "abc"], url) == ["checkout", "-f", "abc"]


def test_git_accepts_the_end_of_options_shapes(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    for cmd in (["fetch", "-f", "--end-of-options", ".", "HEAD"], ["cat-file", "-e", "--end-of-options", "HEAD"]):
        subprocess.run(["git", "-C", str(tmp_path), *cmd], check=True, capture_output=True)
    proc = subprocess.run(
        ["git", "-C", str(tmp_path), "fetch", "-f", "--end-of-options", ".", "--upload-pack=x"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "upload-pack" not in proc.stderr.split("fatal:")[0]


def _git(*args: str, cwd=None, check=True) -> subprocess.CompletedProcess:
    env_args = ["-c", "user.name=a", "-c", "user.email=a@b", "-c", "init.defaultBranch=master"]
    return subprocess.run(["git", *env_args, *args], cwd=cwd, check=check, capture_output=True, text=True)


def test_the_worker_clones_one_branch_so_a_malformed_upstream_ref_does_not_stop_every_build(tmp_path):
    # the chaos run's hostile-refs fault writes a ref file git itself would refuse (a name with a space, holding a
    # sha); a clone of every ref then fails as a whole, and so did every build after the worker's clone was
    # discarded. The clone command is built as Buildbot's Git step builds it.
    upstream = tmp_path / "upstream"
    _git("init", "-q", str(upstream))
    _git("commit", "-q", "--allow-empty", "-m", "x", cwd=upstream)
    sha = _git("rev-parse", "HEAD", cwd=upstream).stdout.strip()
    bad = upstream / ".git" / "refs" / "heads" / "--upload-pack=touch " / "tmp" / "x;x"
    bad.parent.mkdir(parents=True)
    bad.write_text(sha + "\n")
    buildbot_clone = ["clone", "--branch", "master", str(upstream), ".", "--progress"]
    plain, ours = tmp_path / "plain", tmp_path / "ours"
    plain.mkdir()
    ours.mkdir()
    assert _git(*buildbot_clone, cwd=plain, check=False).returncode != 0  # the fault is real on this git
    cmd = single_branch(end_of_options(buildbot_clone, str(upstream)))
    assert cmd[:2] == ["clone", "--single-branch"]
    _git(*cmd, cwd=ours)
    assert _git("rev-parse", "HEAD", cwd=ours).stdout.strip() == sha
    # later builds fetch their branch explicitly, as the Git step does
    _git("fetch", "-f", "-t", "--progress", "--end-of-options", str(upstream), "master", cwd=ours)
    assert single_branch(["fetch", "-f", str(upstream), "master"]) == ["fetch", "-f", str(upstream), "master"]


def test_release_tags_are_ordered_by_version_betas_first_and_other_tags_by_date_after_them() -> None:
    tags = ["REL_16_1", "REL_16_0", "REL_16_RC1", "REL_16_BETA2", "REL_16_BETA1", "REL_10_0", "REL9_6_24", "REL_9_6_3"]
    assert release_order(tags) == [
        "REL_9_6_3",
        "REL9_6_24",
        "REL_10_0",
        "REL_16_BETA1",
        "REL_16_BETA2",
        "REL_16_RC1",
        "REL_16_0",
        "REL_16_1",
    ]
    # a minor of an old major released after a new major's first release is still older by version
    assert release_order(["REL_13_0", "REL_12_22"], {"REL_13_0": 100, "REL_12_22": 200}) == ["REL_12_22", "REL_13_0"]
    # names that are not release tags: by date, then the numbers in the name, after the releases
    assert release_order(["v2", "v10", "REL_15_18", "snapshot"], {"v2": 5, "v10": 5, "snapshot": 1}) == [
        "REL_15_18",
        "snapshot",
        "v2",
        "v10",
    ]
    assert release_version("REL_16_RC1") == ((16,), 2, 1) and release_version("master") is None
    assert release_order(["REL_10_0", "REL_2_0", "REL_1_0"]) == ["REL_1_0", "REL_2_0", "REL_10_0"]  # test fixtures
