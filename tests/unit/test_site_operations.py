"""Reading the operation suite on the site (issue 27, item 7): the overview lists series by group and an
operation's series page shows its SQL (only for a series of the current definition). Results of the real pg-quick
recipe (its workload hashes), stored through the real ingest path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from master import ingest
from master.publish import publish_all
from master.publish.source import SeriesRef
from master.settings import load_settings
from master.store.series import MeasureKey
from recipes import registry
from tests.harness import make_repo
from tests.unit.test_result_schema import MACHINE_ID, good
from tests.unit.test_store_ingest import put, run_ctx

NOW = 1_800_000_000.0
QUICK = registry.get("pg-quick")


def result(sha: str, stale_op: bool = False) -> dict:
    doc = good()
    doc["commit"] = {"sha": sha, "ref": "master"}
    doc["recipe"] = {"name": "pg-quick", "version": QUICK.version, "config_hash": QUICK.config_hash()}
    doc["workloads"] = []
    for name, unit, direction, value in (
        ("op-join-hash", "instructions/op", "lower", 34_357_840.0),
        ("op-scan-seq", "instructions/op", "lower", 8_542_479.0),
        ("instr-point-select", "instructions/query", "lower", 94_797.2),
        ("pgbench-ro-simple-c1", "tx/s", "higher", 9000.0),
    ):
        metric = "tps" if unit == "tx/s" else "instructions"
        doc["workloads"].append(
            {
                "name": name,
                "metrics": [{"name": metric, "unit": unit, "direction": direction, "samples": [value, value]}],
                # op-scan-seq as an earlier definition of the suite measured it: its SQL is not today's
                "config_hash": "0" * 16 if stale_op and name == "op-scan-seq" else QUICK.workload_hash(name),
            }
        )
    return doc


def farm(tmp_path: Path, make_result=result) -> Path:
    """Three commits' pg-quick results stored through the real ingest path, then a full publish: the site."""
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    for i in range(3):
        sha = repo.bench_commit(f"c{i}", i)
        path = put(settings, make_result(sha, stale_op=True), f"b-{i}.json")
        ingest.ingest_file(settings, path, run_ctx(i + 1, sha), "pg-quick")
    out = tmp_path / "site"
    publish_all(settings, out, now=NOW)
    return out


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return farm(tmp_path)


def sid(workload: str, config_hash: str, metric: str = "instructions") -> str:
    return SeriesRef(MeasureKey(MACHINE_ID, "pg-quick", QUICK.version, config_hash, workload, metric), "master").sid


def test_the_overview_lists_series_under_their_groups_in_the_recipes_order(site: Path) -> None:
    page = (site / f"overview/{MACHINE_ID}.html").read_text()
    heads = re.findall(r'<tbody data-group="([^"]+)">', page)
    assert heads == ["oltp", "executor"]  # groups.json's order: oltp first
    executor = page.split('<tbody data-group="executor">')[1].split("</tbody>")[0]
    assert 'data-workload="op-join-hash"' in executor and 'data-workload="instr-point-select"' not in executor
    oltp = page.split('<tbody data-group="oltp">')[1].split("</tbody>")[0]
    assert 'data-workload="instr-point-select"' in oltp and 'data-workload="pgbench-ro-simple-c1"' in oltp
    assert '<select data-filter="group">' in page and "Executor nodes" in page


def test_an_operations_series_page_shows_its_sql_only_for_the_current_definition(site: Path) -> None:
    join = (site / f"series/{sid('op-join-hash', QUICK.workload_hash('op-join-hash'))}.html").read_text()
    assert 'id="sql"' in join and "FROM big b JOIN other o ON o.big_id = b.id" in join
    assert f'group <a href="../overview/{MACHINE_ID}.html#group-executor"><b>executor</b></a>' in join
    stale = (site / f"series/{sid('op-scan-seq', '0' * 16)}.html").read_text()
    assert 'id="sql"' not in stale  # measured by another definition of the suite: today's SQL would be a lie
    plain = (site / f"series/{sid('instr-point-select', QUICK.workload_hash('instr-point-select'))}.html").read_text()
    assert 'id="sql"' not in plain and "<b>oltp</b>" in plain
