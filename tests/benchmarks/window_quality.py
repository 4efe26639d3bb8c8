"""Windowed against whole-history detection on a results_scale DB (issue #17, `[detection] window`).

    .venv/bin/python -m tests.benchmarks.window_quality DB --machines m01,m02,...

For each series of the machines (take machines no detection pass has touched: their stored change points are the
generator's steps, results_scale.generate), the detector's raw list (Tracker.detections, before the FDR step) over
the whole history and over the window a pass re-detects (analysis.window_start, _windowed, _not_settled), both
compared in the window's judged part (past its settled edge) with the stored steps (±2 commits). Prints true
points, exact commits, missed steps and false points per method, the false ones, and on how many series the two
lists are the same. Reads DB only.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from master import analysis, store
    from master.detect.config import DetectionSettings
    from master.detect.tracker import Tracker

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--machines", required=True, help="machine ids, comma-separated (m01,m02)")
    ap.add_argument("--window", type=int, default=DetectionSettings().window)
    args = ap.parse_args(argv)
    det = DetectionSettings(window=args.window)
    conn = store.connect(args.db)
    machines = args.machines.split(",")
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT id FROM series WHERE machine_id IN ({','.join('?' * len(machines))}) ORDER BY id", machines
        )
    ]
    tally: collections.Counter[str] = collections.Counter()
    false: list[tuple[str, int, int, str]] = []
    t = time.perf_counter()
    for sid in ids:
        data = analysis.load_series(conn, sid)
        reported = analysis._reported(data, tuple(store.changes.for_series(conn, sid)))
        tracker = Tracker.configured(str(sid), data.direction, det, window=analysis.IDENTITY_WINDOW)
        lo = analysis.window_start(len(data.series), reported, det.window)
        settled = [r for r in reported if r.current.index < lo + analysis.EDGE]
        part, _ = analysis._windowed(data, reported, lo)
        judged = lo + analysis.EDGE if lo else 0
        truth = {r.current.index for r in reported if r.current.index >= judged}
        lists = {
            "whole": [(c.index, c.kind.value) for c in tracker.detections(data.series) if c.index >= judged],
            "window": [
                (c.index + lo, c.kind.value)
                for c in analysis._not_settled(tracker.detections(part.series), settled, lo)
            ],
        }
        for name, found in lists.items():
            for i, kind in found:
                if any(abs(i - j) <= 2 for j in truth):
                    tally[f"{name} true"] += 1
                    tally[f"{name} exact"] += i in truth
                else:
                    tally[f"{name} false"] += 1
                    false.append((name, sid, i, kind))
            tally[f"{name} missed"] += sum(1 for j in truth if not any(abs(i - j) <= 2 for i, _ in found))
        tally["steps"] += len(truth)
        tally["same list"] += lists["whole"] == lists["window"]
    print(f"{len(ids)} series in {time.perf_counter() - t:.0f} s, window {det.window}")
    for key in sorted(tally):
        print(f"{key}: {tally[key]}")
    for name, sid, i, kind in false:
        print(f"false ({name}): series {sid}, index {i}, {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
