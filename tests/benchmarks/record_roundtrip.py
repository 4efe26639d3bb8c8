"""Are the runs the master stores now the runs it stored before results were keyed by side? (issue #30)

Before, the worker merged a paired run's reference into the commit's workloads and sent one record
(`perffarm-result` version 1); now it sends the two sides' raw samples (version 2) and the master merges them
(recipes/record.py). This script takes every run stored in a results database, splits its stored record back into
the sides the worker would send today (the commit's own metrics, and each `<metric>.reference` as the reference
side's `<metric>`), has the master's code record them again, and compares the two records byte for byte (sorted-key
JSON, as `runs.result` stores them).

    .venv/bin/python -m tests.benchmarks.record_roundtrip RESULTS.sqlite [RESULTS.sqlite ...]

Prints, per database, the runs read, how many were paired, and how many came back identical; runs stored before
the order-balanced blocks (issue #28: one ratio per round) are counted apart, since today's merge forms blocks.
Exit status 1 when any other run differs. Only a database a farm filled means something here: results that unit
tests plant directly in the store (ratios drawn at random, not computed from their samples) differ by design.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from recipes.paired import BALANCED_FLAG, REFERENCE_SUFFIX
from recipes.record import PAIRED_SUFFIXES, run_record
from recipes.result import CALLGRIND, COVERAGE, PLANS, WAITS, WAITS_REFERENCE


def sides_of(record: dict[str, Any]) -> dict[str, Any]:
    """The version-2 result a worker sends today for the run `record` was made from."""
    own, reference = [], []
    for w in record["workloads"]:
        hashed = {"config_hash": w["config_hash"]} if "config_hash" in w else {}
        flags = [f for f in w.get("flags", []) if f != BALANCED_FLAG]
        metrics = [m for m in w["metrics"] if not m["name"].endswith(PAIRED_SUFFIXES)]
        own.append({"name": w["name"], "metrics": metrics, "flags": flags, **hashed})
        theirs = [
            {**m, "name": m["name"].removesuffix(REFERENCE_SUFFIX)}
            for m in w["metrics"]
            if m["name"].endswith(REFERENCE_SUFFIX)
        ]
        if theirs:
            reference.append({"name": w["name"], "metrics": theirs, "flags": [], **hashed})
    sha = record["commit"]["sha"]
    side: dict[str, Any] = {"label": "run", "sha": sha, "patch": None, "workloads": own}
    for key in (CALLGRIND, COVERAGE, PLANS, WAITS):
        if key in record:
            side[key] = record[key]
    moved = ("workloads", CALLGRIND, COVERAGE, PLANS, WAITS, WAITS_REFERENCE)
    doc = {k: v for k, v in record.items() if k not in moved}
    doc.update(schema_version=2, sides=[side])
    asked = record["recipe"].get("options", {}).get("reference")
    if asked:
        theirs_side: dict[str, Any] = {"label": "reference", "sha": asked, "patch": None, "workloads": reference}
        if WAITS_REFERENCE in record:
            theirs_side[WAITS] = record[WAITS_REFERENCE]
        doc["sides"].insert(0, theirs_side)
    return doc


def check(db: Path) -> tuple[int, int, int, int, list[str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT id, result FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()
    paired = same = per_round = 0
    differ: list[str] = []
    for run_id, text in rows:
        record = json.loads(text)
        is_paired = any(m["name"].endswith(PAIRED_SUFFIXES) for w in record["workloads"] for m in w["metrics"])
        old_method = is_paired and not any(BALANCED_FLAG in w.get("flags", []) for w in record["workloads"])
        paired += is_paired
        again = json.dumps(run_record(sides_of(record)), sort_keys=True)
        if again == json.dumps(record, sort_keys=True):
            same += 1
        elif old_method:
            per_round += 1
        else:
            differ.append(f"run {run_id}")
    return len(rows), paired, same, per_round, differ


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("databases", nargs="+", type=Path, help="results.sqlite files (read only)")
    args = p.parse_args(argv)
    bad = 0
    for db in args.databases:
        runs, paired, same, per_round, differ = check(db)
        print(
            f"{db}: {runs} runs, {paired} paired: {same} recorded again byte-identical, "
            f"{per_round} from before the order-balanced blocks, {len(differ)} different"
            + (f" ({', '.join(differ[:10])})" if differ else "")
        )
        bad += len(differ)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
