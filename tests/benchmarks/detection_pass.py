"""Detection passes on a copy of a results_scale DB: their cost, and what they wrote (issue #17).

    .venv/bin/python -m tests.benchmarks.detection_pass DB --machines 0,0,1,0 --json OUT.json
    .venv/bin/python -m tests.benchmarks.detection_pass --compare BEFORE.json AFTER.json

Each pass is the benchmark's (tests/benchmarks/results_scale.py): one new commit measured on one machine (the
machines in order, so a machine measured again meets the state its earlier pass left), stored by insert_run,
then master.analysis.analyse_run on its series in this process. Per pass it prints the CPU and wall seconds of
analyse_run and the seconds it held the write lock, and writes to --json the events and every stored change
point of the pass's series (position, kind, ratio, CI, p-value, state). --compare checks that two such files,
made by two versions of the code from copies of the same DB, hold the same runs, events and change points,
exactly, and where they differ which change points (series, first commit) and which of their fields. The passes
write to DB: run them on a copy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.results_scale import BRANCH, Fleet, WriteLockClock, next_run


def passes(db: Path, machines: list[int], workloads: int) -> list[dict[str, object]]:
    from master import analysis, store
    from master.settings import load_settings

    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(db.parent)})
    conn = store.connect(db)
    head = store.branch_head(conn, BRANCH)[0] + 1
    conn.close()
    out: list[dict[str, object]] = []
    for k, machine in enumerate(machines):
        run_id = next_run(db, Fleet(machines=max(machines) + 1, workloads=workloads, commits=0), head + k, machine)
        conn = store.connect(db)
        try:
            lock = WriteLockClock(conn)
            t, c = time.perf_counter(), time.process_time()
            events = analysis.analyse_run(conn, run_id, settings.detection)
            wall, cpu, held = time.perf_counter() - t, time.process_time() - c, lock.stop()
            series = sorted(set(store.series.ensure_for_run(conn, run_id)))
            rows = [
                [sid, r.first_sha, r.sha, r.position, r.kind, r.ratio, r.ci_low, r.ci_high, r.pvalue, r.state]
                for sid in series
                for r in store.changes.for_series(conn, sid)
            ]
        finally:
            conn.close()
        out.append(
            {
                "machine": machine,
                "run_id": run_id,
                "wall_s": wall,
                "cpu_s": cpu,
                "lock_s": held,
                "events": [[e.change_point_id, e.series_id, e.action, e.kind, e.sha, e.ratio] for e in events],
                "change_points": rows,
            }
        )
        print(
            f"pass {k} (machine {machine}, run {run_id}): CPU {cpu:.2f} s, wall {wall:.2f} s, write lock held "
            f"{held:.3f} s; {len(events)} events, {len(rows)} change points",
            flush=True,
        )
    cpus, locks = [float(str(p["cpu_s"])) for p in out], [float(str(p["lock_s"])) for p in out]
    print(f"median: CPU {statistics.median(cpus):.2f} s, write lock held {statistics.median(locks):.3f} s")
    return out


def compare(a: list[dict[str, object]], b: list[dict[str, object]]) -> bool:
    if len(a) != len(b):
        print(f"{len(a)} passes against {len(b)}")
        return False
    same = True
    for k, (x, y) in enumerate(zip(a, b)):
        diff = [f for f in ("run_id", "events", "change_points") if x[f] != y[f]]
        verdict = "different " + ", ".join(diff) if diff else "identical"
        print(f"pass {k}: run {x['run_id']}, machine {x['machine']}: {verdict}")
        if "change_points" in diff:
            for line in field_differences(x["change_points"], y["change_points"]):
                print("  " + line)
        same = same and not diff
    return same


CP_FIELDS = ("sha", "position", "kind", "ratio", "ci_low", "ci_high", "pvalue", "state")


def field_differences(a: Any, b: Any) -> list[str]:
    """Which stored change points (series, first commit) two passes hold differently, and in which fields."""
    rows = [{(r[0], r[1]): dict(zip(CP_FIELDS, r[2:])) for r in rs} for rs in (a, b)]
    out = [f"only before: {k}" for k in sorted(rows[0].keys() - rows[1].keys())]
    out += [f"only after: {k} {rows[1][k]}" for k in sorted(rows[1].keys() - rows[0].keys())]
    for key in sorted(rows[0].keys() & rows[1].keys()):
        moved = {f: (rows[0][key][f], rows[1][key][f]) for f in CP_FIELDS if rows[0][key][f] != rows[1][key][f]}
        if moved:
            changes = ", ".join(f"{f} {u} -> {v}" for f, (u, v) in moved.items())
            out.append(f"{key} at {rows[0][key]['position']}: {changes}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path, nargs="?")
    ap.add_argument("--machines", default="0,0,1,0", help="the machine of each pass, in order")
    ap.add_argument("--workloads", type=int, default=100)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        return 0 if compare(*(json.loads(p.read_text()) for p in args.compare)) else 1
    if args.db is None or not args.db.exists():
        ap.error("give the results DB to run the passes on (a copy: they store runs in it), or --compare A B")
    out = passes(args.db, [int(m) for m in args.machines.split(",")], args.workloads)
    if args.json:
        args.json.write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
