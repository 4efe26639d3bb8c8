"""One command-line convention for every verb (issue #31, part 5): exit 0 success, 1 "found something" (a gate:
detect, compare, status with the master down) or the farm's state stopped it, 2 usage or input error; every
message names its verb; no traceback for any hostile argument; sub-commands with the old spellings kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from master import cli, store
from tests.harness import make_repo

HOSTILE = "\x1b]0;pwned\x07'; DROP TABLE runs; --\u202e"
HUGE = "9" * 30


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(data))
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", "9")  # nothing listens there: "master not running"
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", str(tmp_path / "upstream.git"))  # never fetched by these verbs
    return data


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`perffarm ARGV` in this process: its exit code (argparse's SystemExit too), stdout and stderr. Any other
    exception is a traceback the user would have seen, and fails the test."""
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def verb_of(argv: list[str]) -> str:
    argv = argv[2:] if argv[:1] == ["--config"] else argv
    words = [a for a in argv if not a.startswith("-")]
    return words[0] if words else ""


def check(argv: list[str], expected: int, capsys: pytest.CaptureFixture[str]) -> str:
    code, _out, err = run(argv, capsys)
    assert "Traceback" not in err, err
    assert code == expected, (argv, code, err)
    if err.strip() and argv != [
        "no-such-verb"
    ]:  # the first line says which verb (argparse's own usage errors say "usage: perffarm VERB")
        first = err.strip().splitlines()[0]
        assert first.startswith(f"perffarm {verb_of(argv)}") or first.startswith(f"usage: perffarm {verb_of(argv)}"), (
            argv,
            err,
        )
    assert "\x1b" not in err and "\u202e" not in err  # hostile text is shown as escapes, never acted on
    return err


NO_DATABASE = [
    (["results", "list"], 2),
    (["results", "export"], 2),
    (["jobs"], 2),
    (["jobs", "list"], 2),
    (["jobs", "show", "1"], 2),
    (["bisect", "list"], 2),
    (["bisect", "show", "1"], 2),
    (["alerts", "list"], 2),
    (["alerts", "show", "a-1"], 2),
    (["publish", "--quiet"], 2),
    (["status"], 1),  # a gate: the master is down
    (["migrate"], 0),  # nothing to migrate
]


@pytest.mark.parametrize(("argv", "expected"), NO_DATABASE, ids=[" ".join(a) for a, _ in NO_DATABASE])
def test_no_results_database_is_the_same_answer_for_every_verb(argv, expected, env, capsys) -> None:
    err = check(argv, expected, capsys)
    if expected == 2:
        assert "no results database at" in err and "make run" in err


def test_releases_without_a_master_fails_before_fetching_anything(env, capsys) -> None:
    err = check(["releases", "--tags", "REL_*"], 1, capsys)
    assert "no farm has run on" in err and "nothing was fetched" in err
    assert not (env / "mirror.git").exists()  # it used to clone repository.url from the network first


def _hostile_cases(tmp_path: Path) -> list[tuple[list[str], int]]:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "binary.csv").write_bytes(b"\x00\xff\xfe" * 100)
    (tmp_path / "not-git").mkdir()
    return [
        (["results", "list", "--ref", HOSTILE, "--builder", HOSTILE, "--commit", "%' OR 1=1 --"], 0),
        (["results", "list", "--limit", "-1"], 2),
        (["results", "list", "--limit", HUGE], 2),
        (["results", "export", "-o", str(tmp_path / "no" / "such" / "dir.csv")], 2),
        (["results", "export", "--format", "xml"], 2),
        (["alerts", "show", HOSTILE], 2),
        (["alerts", "show", "%"], 2),
        (["alerts", "ack", HUGE], 2),
        (["alerts", "set-state", "a-1", HOSTILE], 2),
        (["jobs", "show", "-5"], 2),
        (["jobs", "show", HUGE], 2),
        (["jobs", "show", "7"], 2),  # no such job
        (["jobs", "--status", "7"], 2),  # the old spelling: the same answer
        (["bisect", "show", "0"], 2),
        (["bisect", "show", "7"], 2),
        (["bisect", "--status", "7"], 2),
        (["bisect", "start", "--good", HOSTILE, "--bad", "HEAD", "--workload", HOSTILE], 2),
        (["bisect", "start", "--good", "a"], 2),
        (["detect", str(tmp_path)], 2),  # a directory
        (["detect", str(tmp_path / "binary.csv")], 2),
        (["detect", "/nonexistent.csv"], 2),
        (["compare", "--repo", "/nonexistent", "A", "B"], 2),
        (["compare", "--repo", str(tmp_path / "not-git"), "A", "B"], 2),
        (["compare", "--repo", str(repo.path), "no-such-revision", "HEAD", "--work", str(tmp_path / "w")], 2),
        (["compare", "--repo", str(repo.path), "HEAD", HOSTILE, "--work", str(tmp_path / "w")], 2),
        (["compare", "--repo", str(repo.path), "HEAD", "HEAD", "--option", "no-equals"], 2),
        (["compare", "--repo", str(repo.path), "HEAD", "HEAD", "--patch", "/nonexistent.patch"], 2),
        (["compare", "--repo", str(repo.path), "HEAD"], 2),
        (["compare", "--repo", "https://127.0.0.1:9/x.git", "A", "B", "--work", str(tmp_path / "w2")], 1),
        (["cfbot", "--repo", str(repo.path), "--branches", "(unclosed"], 2),
        (["cfbot", "--repo", str(repo.path), "--base", "a..b"], 2),
        (["cfbot", "--repo", HOSTILE], 1),  # no master: stops before fetching anything
        (["try", "--patch", "/nonexistent.patch"], 2),
        (["try", "--status", HUGE], 2),
        (["settings", "--format", "xml"], 2),
        (["--config", "/nonexistent.toml", "settings"], 2),
        (["status", "--format", "xml"], 2),
        (["no-such-verb"], 2),
        (["publish", "--out", "/proc/no/such/dir", "--quiet"], 2),
    ]


def test_every_verb_answers_hostile_arguments_with_one_line_and_no_traceback(env, tmp_path, capsys) -> None:
    """Issue #31: `compare --repo /nonexistent` ended in a FileNotFoundError traceback, a bad revision printed
    `git rev-parse --verify --quiet failed:` with no reason, and the exit codes differed per verb."""
    store.connect(env / "results.sqlite").close()  # an empty farm's database: the verbs reach their own checks
    cases = _hostile_cases(tmp_path)
    for argv, expected in cases:
        check(argv, expected, capsys)
    verbs = {verb_of(a) for a, _ in cases}
    parser_verbs = set(cli.build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert parser_verbs - {"run"} <= verbs | {"releases", "migrate"}, parser_verbs - verbs  # every verb is tried


def test_a_bad_revision_says_why(env, tmp_path, capsys) -> None:
    repo = make_repo(tmp_path / "repo")
    err = check(["compare", "--repo", str(repo.path), "HEAD", "no-such-revision"], 2, capsys)
    assert "'no-such-revision' is not a commit, branch or tag of" in err
    err = check(["compare", "--repo", "/nonexistent", "A", "B"], 2, capsys)
    assert "--repo /nonexistent: no such directory" in err


def test_old_spellings_and_sub_commands_give_the_same_answers(env, capsys) -> None:
    store.connect(env / "results.sqlite").close()
    for a, b in (
        (["jobs"], ["jobs", "list"]),
        (["jobs", "--format", "json"], ["jobs", "list", "--format", "json"]),
        (["jobs", "--format", "json"], ["jobs", "--format", "json", "list"]),  # an option before the action stays
        (["bisect", "--list", "--format", "json"], ["bisect", "list", "--format", "json"]),
        (["bisect", "--status", "3"], ["bisect", "show", "3"]),
        (["jobs", "--status", "3"], ["jobs", "show", "3"]),
    ):
        assert run(a, capsys) == run(b, capsys), (a, b)
    code, out, _ = run(["jobs", "list", "--format", "json"], capsys)
    assert code == 0 and json.loads(out) == []


def test_version_names_the_release_and_the_commit(capsys) -> None:
    code, out, _ = run(["--version"], capsys)
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert code == 0 and out.startswith("perffarm 0.") and head in out, out


def test_settings_json_keeps_each_values_type_and_source(env, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PERFFARM_ALERTS_WARN", "0.05")
    code, out, _ = run(["settings", "--format", "json"], capsys)
    shown = json.loads(out)
    assert code == 0
    assert shown["alerts.warn"] == {"value": 0.05, "source": "env PERFFARM_ALERTS_WARN"}
    assert shown["master.web_port"] == {"value": 9, "source": "env PERFFARM_MASTER_WEB_PORT"}
    assert shown["alerts.enabled"] == {"value": True, "source": "default"}
