"""The CLI's verbs, their --help, and documentation that matches the code."""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from master import cli
from master.settings import _SCHEMA

ROOT = Path(__file__).resolve().parents[2]


def verbs(parser: argparse.ArgumentParser, prefix=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from verbs(sub, (*prefix, name))


ALL_VERBS = [v for v, _ in verbs(cli.build_parser())]


@pytest.mark.parametrize("verb", ALL_VERBS, ids=[" ".join(v) for v in ALL_VERBS])
def test_every_verb_has_help(verb):
    proc = subprocess.run([sys.executable, "-m", "master.cli", *verb, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "usage: perffarm" in proc.stdout


def test_every_verb_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for verb in ALL_VERBS:
        assert f"perffarm {' '.join(verb)}" in readme, f"README does not mention `perffarm {' '.join(verb)}`"


def test_every_setting_is_documented_in_perffarm_toml():
    text = (ROOT / "perffarm.toml").read_text()
    for section, key in _SCHEMA:
        block = text.split(f"[{section}]", 1)[1]
        # a comment block above the key, or above the group of keys it belongs to (warn and critical)
        m = re.search(rf"((?:^#.*\n)+)(?:^\w+ = .*\n)*^{key} = ", block, re.M)
        assert m, f"{section}.{key} has no comment above it in perffarm.toml"


def test_invalid_setting_exits_2_naming_the_key():
    proc = subprocess.run(
        [sys.executable, "-m", "master.cli", "settings"],
        capture_output=True,
        text=True,
        env={"PERFFARM_MASTER_WEB_PORT": "x", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2 and "master.web_port" in proc.stderr


def test_results_export_csv_has_one_row_per_sample(tmp_path, monkeypatch, capsys):
    from master import ingest
    from master.settings import load_settings
    from tests.harness import make_repo
    from tests.unit.test_store_ingest import put, result_for, run_ctx

    repo = make_repo(tmp_path / "repo")
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", str(repo.path))
    settings = load_settings()
    settings.incoming_dir.mkdir(parents=True)
    sha = repo.head()
    ingest.ingest_file(settings, put(settings, result_for(sha, samples=(3.0, 4.0, 5.0))), run_ctx(1, sha), "fixture")
    assert cli.main(["results", "export"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["value"] for r in rows] == ["3.0", "4.0", "5.0"] and [r["sample"] for r in rows] == ["0", "1", "2"]
    assert {r["commit"] for r in rows} == {sha} and rows[0]["subject"] == "initial commit"
    assert cli.main(["results", "export", "--format", "json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert docs[0]["measurements"][0]["samples"] == [3.0, 4.0, 5.0]
    assert cli.main(["results", "list"]) == 0
    assert sha[:12] in capsys.readouterr().out
    assert cli.main(["status"]) == 1  # the master is not running: status exits 1 (a gate)
    out = capsys.readouterr().out
    assert "NOT running" in out and sha[:12] in out
