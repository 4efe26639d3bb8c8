"""Plan changes on the site (issue 27, item 2): results of the real pg-quick recipe carrying plans, stored through
the real ingest path into a real SQLite store and published. A plan change is a measured commit whose plan shape
differs from the one at the commit before it: marked on the query's chart, listed in its plan history, on the
commit page, in alerts.html and the Atom feed, whether or not the count moved (here it does not)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from master import ingest, plans, store
from master.publish import publish_all
from master.publish.source import SeriesRef
from master.settings import load_settings
from master.store.series import MeasureKey
from recipes import registry
from recipes.pg.plans import shape
from tests.harness import make_repo
from tests.unit.test_pg_plans import Q17, Q17_NO_HASHJOIN
from tests.unit.test_result_schema import MACHINE_ID, good
from tests.unit.test_store_ingest import put, run_ctx

NOW = 1_800_000_000.0
QUICK = registry.get("pg-quick")
HASH, NESTLOOP = shape(Q17.splitlines()), shape(Q17_NO_HASHJOIN.splitlines())
SUMMARY = "Hash Join → Nested Loop"


def result(sha: str, plan: str) -> dict:
    doc = good()
    doc["commit"] = {"sha": sha, "ref": "master"}
    doc["recipe"] = {"name": "pg-quick", "version": QUICK.version, "config_hash": QUICK.config_hash()}
    doc["workloads"] = [
        {
            "name": name,
            "metrics": [
                {"name": "instructions", "unit": "instructions/query", "direction": "lower", "samples": [7e6, 7e6]}
            ],
            "config_hash": QUICK.workload_hash(name),
        }
        for name in ("tpch-q17", "tpch-q01")
    ]
    doc["plans"] = {"tpch-q17": plan, "tpch-q01": "Sort\n  HashAggregate\n    Seq Scan on lineitem"}
    return doc


def farm(tmp_path: Path) -> tuple[Path, list[str], Path]:
    """Four commits; tpch-q17's plan changes at the third (and stays): the site, the shas, the results db."""
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    shas = []
    for i, plan in enumerate([HASH, HASH, NESTLOOP, NESTLOOP]):
        sha = repo.bench_commit(f"c{i}", i)
        shas.append(sha)
        path = put(settings, result(sha, plan), f"b-{i}.json")
        ingest.ingest_file(settings, path, run_ctx(i + 1, sha), "pg-quick")
    out = tmp_path / "site"
    publish_all(settings, out, now=NOW)
    return out, shas, settings.results_db


def sid(workload: str) -> str:
    key = MeasureKey(MACHINE_ID, "pg-quick", QUICK.version, QUICK.workload_hash(workload), workload, "instructions")
    return SeriesRef(key, "master").sid


def test_the_store_keeps_each_runs_plans_and_reads_them_per_series_in_branch_order(tmp_path: Path) -> None:
    _, shas, db = farm(tmp_path)
    conn = store.connect(db)
    try:
        points = {k.workload: v for k, v in store.series.plan_points(conn).items()}
    finally:
        conn.close()
    assert [(sha, s) for _, sha, s in points["tpch-q17"]] == list(zip(shas, [HASH, HASH, NESTLOOP, NESTLOOP]))
    [change] = plans.changes("tpch-q17", points["tpch-q17"])
    assert (change.sha, change.prev_sha, change.summary) == (shas[2], shas[1], SUMMARY)
    assert change.headline == f"tpch-q17: {SUMMARY} at {shas[2][:12]}"
    assert plans.changes("tpch-q01", points["tpch-q01"]) == []
    assert [(s.first_sha, s.last_sha, s.commits) for s in plans.spans(points["tpch-q17"])] == [
        (shas[0], shas[1], 2),
        (shas[2], shas[3], 2),
    ]


def test_a_plan_change_is_marked_on_the_chart_and_in_the_plan_history_of_its_query(tmp_path: Path) -> None:
    site, shas, _ = farm(tmp_path)
    page = (site / f"series/{sid('tpch-q17')}.html").read_text()
    meta = json.loads(re.search(r'<script type="application/json" id="meta">(.*?)</script>', page, re.S)[1])
    [mark] = [m for m in meta["markers"] if m["kind"] == "plan"]
    assert mark["label"] == f"plan: {SUMMARY}"
    history = page.split('<table id="plans">')[1].split("</table>")[0]
    shown = re.findall(r'<pre class="plan">(.*?)</pre>', history, re.S)
    assert shown == [NESTLOOP, HASH]  # newest plan first
    assert f"after {shas[1][:12]}" in history and "Bitmap Index Scan on lineitem_part" in history
    assert "&lt;" not in HASH and "→" in history  # the summary, escaped by the template like any text
    index = json.loads((site / f"data/series/{sid('tpch-q17')}/index.json").read_text())
    found = [(c["position"], c["prev_sha"], c["sha"]) for c in index["plan_changes"]]
    assert found == [(mark["pos"], shas[1], shas[2])]
    unchanged = (site / f"series/{sid('tpch-q01')}.html").read_text()
    assert '"kind": "plan"' not in unchanged and '<table id="plans">' in unchanged  # one plan all along


def test_a_plan_change_is_listed_on_its_commit_page_in_the_alerts_page_and_in_the_feed(tmp_path: Path) -> None:
    site, shas, _ = farm(tmp_path)
    commit = (site / f"data/commits/{shas[2]}.js").read_text()
    assert f'"plans":[["{sid("tpch-q17")}","tpch-q17","{MACHINE_ID}","master","{SUMMARY}","{shas[1]}"' in commit
    assert '"plans":[]' in (site / f"data/commits/{shas[3]}.js").read_text()  # the same plan as before it
    alerts = (site / "alerts.html").read_text()
    assert f"tpch-q17: {SUMMARY} at {shas[2][:12]}" in alerts and "tpch-q01:" not in alerts
    feed = (site / "alerts.atom").read_text()
    assert f"<id>urn:perffarm:plan:{sid('tpch-q17')}:{shas[2]}</id>" in feed
    assert f"[plan] tpch-q17: {SUMMARY} at {shas[2][:12]}" in feed
