"""A results DB for the compare page's tests: two release tags and a commit between, measured with workloads whose
outcome between the tags is known: clear regressions and improvements (throughput and a lower-is-better latency),
unchanged noisy series, a series whose points hold more samples than the commit data carry, and one hostile
workload name. Stored through the store (as tests/site_support.build_archaeology does): the statistics are what
is tested, not the ingest path."""

from __future__ import annotations

import random
from pathlib import Path

from master import store
from master.settings import Settings
from tests.site_support import result_doc, settings_for

BASE_TAG, NEW_TAG = "REL_1_0", "REL_2_0"
HOSTILE = "<img src=x onerror=alert(1)>-c1"
SAMPLES = 7
MANY = 40  # above master.publish.commits.ROW_SAMPLES: the commit data carry no samples for this series

# workload -> (unit, direction, base level, new level, relative noise, samples per point); one metric each
WORKLOADS: dict[str, tuple[str, str, float, float, float, int]] = {
    "pgbench-ro-c1": ("tx/s", "higher", 10_000.0, 9_000.0, 0.005, SAMPLES),  # 10% slower
    "pgbench-ro-c8": ("tx/s", "higher", 40_000.0, 40_000.0, 0.01, SAMPLES),  # unchanged
    "pgbench-rw-c1": ("tx/s", "higher", 1_000.0, 1_150.0, 0.005, SAMPLES),  # 15% faster
    "pgbench-rw-c8": ("tx/s", "higher", 4_000.0, 4_000.0, 0.01, SAMPLES),  # unchanged
    "select1": ("ops/s", "higher", 100.0, 100.0, 0.02, SAMPLES),  # unchanged, noisy
    "latency-c1": ("ms", "lower", 2.0, 2.4, 0.005, SAMPLES),  # 20% slower: a regression of a lower-is-better metric
    "copy-big": ("MB/s", "higher", 300.0, 240.0, 0.005, MANY),  # slower, but too many samples for the page's CI
    HOSTILE: ("ops/s", "higher", 50.0, 50.0, 0.01, SAMPLES),
}
EXPECTED = {
    "pgbench-ro-c1": "regression",
    "pgbench-ro-c8": "same",
    "pgbench-rw-c1": "improvement",
    "pgbench-rw-c8": "same",
    "select1": "same",
    "latency-c1": "regression",
    "copy-big": "no CI",
    HOSTILE: "same",
}


def build_compare(data_dir: Path) -> tuple[Settings, list[str]]:
    """The DB described above: commits 0 (BASE_TAG), 1 and 2 (NEW_TAG) of master, each measured once; commit 1 at
    the base levels. Returns the settings and the commits' shas."""
    from master.store import CommitInfo, RunContext

    settings = settings_for(data_dir, data_dir.parent / "no-repo")
    conn = store.connect(settings.results_db)
    shas = [f"{0xC0FFEE + i:040x}" for i in range(3)]
    commits = [
        CommitInfo(sha, f"commit {i}", "A <a@x>", 1_700_000_000 + i, 1_700_000_000 + i, (shas[i - 1],) if i else ())
        for i, sha in enumerate(shas)
    ]
    with store.transaction(conn):
        store.append_branch(conn, "master", commits, 0)
        store.upsert_commits(conn, commits)
        store.set_tags(conn, {BASE_TAG: shas[0], NEW_TAG: shas[2]})
    for i, sha in enumerate(shas):
        rng = random.Random(i)
        levels = {w: (base if i < 2 else new, noise, n) for w, (_, _, base, new, noise, n) in WORKLOADS.items()}
        doc = result_doc(
            sha, {w: [v * (1 + rng.gauss(0, noise)) for _ in range(n)] for w, (v, noise, n) in levels.items()}
        )
        for w in doc["workloads"]:
            unit, direction = WORKLOADS[w["name"]][:2]
            w["metrics"][0].update(name="tps" if direction == "higher" else "latency", unit=unit, direction=direction)
        with store.transaction(conn):
            store.insert_run(conn, doc, RunContext("fixture@local", "local", "poll", 200 + i))
    conn.close()
    return settings, shas
