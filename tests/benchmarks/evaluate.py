"""Side-by-side evaluation of our change detection against Apache Otava and MongoDB E-divisive.

Run: ``tests/benchmarks/run_eval.sh`` (creates .venv-eval) or, inside that venv,
``python tests/benchmarks/evaluate.py [--sets dev,heldout] [--scale 1.0] [--jobs 2]``.
Prints per-detector tables: F1 exact/±2, offline false alarms on no-change series, online delay,
live false alerts, runtime at 300 and 10,000 commits, and TCPD F1 (margin 5).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]

import adapters
from generator import Labelled, build_suite, make_series
from metrics import Counts, score, tcpd_f_measure

from master.detect.model import Series
from master.detect.tracker import Tracker

SEED_SETS = {"dev": 20261122, "heldout": 4242}
TCPD_DIR = Path(os.environ.get("TCPD_DIR", ROOT.parent / "shared" / "data" / "tcpd"))
DELAY_HORIZON = 30
LIVE_START = 10


def _finder(name: str) -> Callable[[Sequence[np.ndarray]], list[int]]:
    return {d.name: d.find for d in adapters.DETECTORS}[name]


def _offline_task(args: tuple[str, Labelled]) -> tuple[list[int], float]:
    name, series = args
    t = time.perf_counter()
    found = _finder(name)(series.samples)
    return found, time.perf_counter() - t


def _delay_task(args: tuple[str, Labelled, int]) -> float:
    """Commits after the change (0 = the change commit itself) until a detection lands within ±2."""
    name, series, index = args
    for last in range(index, min(series.n, index + DELAY_HORIZON + 1)):
        prefix = series.samples[: last + 1]
        if name == "ours":
            found = [cp.index for cp in Tracker("eval").detections(Series.from_samples(list(prefix)))]
        else:
            found = _finder(name)(prefix)
        if any(abs(i - index) <= 2 for i in found):
            return float(last - index)
    return math.inf


def _live_task(args: tuple[str, Labelled]) -> tuple[dict[str, int], int]:
    """Replay a series commit by commit; return (alerts ever created per variant, commits fed)."""
    name, series = args
    alerts: dict[str, int] = {}
    if name == "ours":
        live = adapters.LiveOurs()
        alerts["ours"] = 0
        for last in range(LIVE_START, series.n):
            alerts["ours"] += live.step(series.samples[: last + 1])
    else:
        variants = {name: adapters.LivePeer(confirm=0)}
        if name == "otava":
            variants["otava+confirm5"] = adapters.LivePeer(confirm=5)
        alerts = {k: 0 for k in variants}
        find = _finder(name)
        for last in range(LIVE_START, series.n):
            prefix = series.samples[: last + 1]
            found = find(prefix)
            for key, peer in variants.items():
                alerts[key] += peer.update(found, prefix)
    return alerts, series.n - LIVE_START


def _map(jobs: int, fn: Callable, tasks: list) -> list:
    if jobs <= 1:
        return [fn(t) for t in tasks]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(fn, tasks, chunksize=max(1, len(tasks) // (jobs * 8))))


def _fmt(x: float, digits: int = 3) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    if isinstance(x, float) and math.isnan(x):
        return "n/a"
    return f"{x:.{digits}f}"


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n## {title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def oracle_exact_rate(group: list[Labelled]) -> float:
    """Exact-commit hit rate of an oracle that knows both levels and searches ±10 commits (an upper bound)."""
    hits = 0
    for s in group:
        (e,) = s.episodes
        means = np.array([np.mean(x) for x in s.samples])
        lo, hi = max(1, e.index - 10), min(s.n - 1, e.index + 10)
        before = float(np.median(means[: e.index]))
        after = before * e.ratio
        mid = (before + after) / 2.0
        sign = 1.0 if after > before else -1.0
        end = min(s.n, hi + 10)
        gain = [np.sum(sign * (means[t:end] - mid)) for t in range(lo, hi + 1)]
        hits += int(lo + int(np.argmax(gain)) == e.index)
    return hits / len(group)


def exact_hit_bound(step: float, cv: float, k: int, draws: int = 50_000, seed: int = 0) -> float:
    """Best achievable exact-commit rate for one known step at Gaussian noise: P(the likelihood-ratio argmax is right).

    With both levels and the noise known, the maximum-likelihood split is the Bayes (MAP) estimate under a
    uniform prior on the position, so no detector can beat it on average. Moving the split j commits off
    the truth changes the log-likelihood by a random walk with drift -d²/2 and step sd d (d = the step in
    sd of a commit mean); the argmax is exact when both one-sided walks stay below 0.
    """
    d = step / (cv / math.sqrt(k))
    rng = np.random.default_rng(seed)
    walk = np.cumsum(-(d * d) / 2.0 + d * rng.standard_normal((draws, 2, 60)), axis=2)
    return float(np.mean(walk.max(axis=2).max(axis=1) < 0.0))


def evaluate_set(label: str, seed: int, scale: float, jobs: int, names: list[str]) -> dict:
    suite = build_suite(seed, scale)
    g = suite.groups
    out: dict = {"set": label, "seed": seed}
    print(
        f"\n# Seed set '{label}' (seed {seed}); series per group: " + ", ".join(f"{k}={len(v)}" for k, v in g.items())
    )

    # Offline accuracy.
    rows = []
    times300: dict[str, list[float]] = {n: [] for n in names}
    null_rows = []
    step3_rows = []
    for name in names:
        res: dict[str, tuple[Counts, Counts]] = {}
        for gname in ("hard-1", "easy-1", "mixed-1", "mixed-5"):
            found = _map(jobs, _offline_task, [(name, s) for s in g[gname]])
            times300[name] += [t for _, t in found]
            exact = sum((score(s.episodes, f, 0) for s, (f, _) in zip(g[gname], found)), Counts())
            near = sum((score(s.episodes, f, 2) for s, (f, _) in zip(g[gname], found)), Counts())
            res[gname] = (exact, near)
        allx = res["mixed-1"][0] + res["mixed-5"][0]
        alln = res["mixed-1"][1] + res["mixed-5"][1]
        res["mixed-all"] = (allx, alln)
        for gname, (ex, nr) in res.items():
            rows.append(
                [
                    name,
                    gname,
                    _fmt(ex.precision),
                    _fmt(ex.recall),
                    _fmt(ex.f1),
                    _fmt(nr.precision),
                    _fmt(nr.recall),
                    _fmt(nr.f1),
                    str(nr.tp + nr.fn),
                ]
            )
            out[f"{name}.{gname}.f1_exact"] = ex.f1
            out[f"{name}.{gname}.f1_pm2"] = nr.f1
        found = _map(jobs, _offline_task, [(name, s) for s in g["null"]])
        times300[name] += [t for _, t in found]
        fa = sum(len(f) for f, _ in found)
        commits = sum(s.n for s in g["null"])
        null_rows.append([name, str(fa), str(commits), _fmt(1000 * fa / commits, 3)])
        out[f"{name}.null_fa_per_1000"] = 1000 * fa / commits
        found = _map(jobs, _offline_task, [(name, s) for s in g["step3-cv2-k5"]])
        hit = sum(int(s.episodes[0].index in f) for s, (f, _) in zip(g["step3-cv2-k5"], found))
        near = sum(
            int(any(abs(i - s.episodes[0].index) <= 2 for i in f)) for s, (f, _) in zip(g["step3-cv2-k5"], found)
        )
        n3 = len(g["step3-cv2-k5"])
        step3_rows.append([name, _fmt(hit / n3), _fmt(near / n3), str(n3)])
        out[f"{name}.step3_exact"] = hit / n3
    step3_rows.append(
        ["oracle (knows levels)", _fmt(oracle_exact_rate(g["step3-cv2-k5"])), "-", str(len(g["step3-cv2-k5"]))]
    )
    bound = exact_hit_bound(0.03, 0.02, 5)
    step3_rows.append(["bound (Bayes, known levels)", _fmt(bound), "-", "∞"])
    out["step3_bound"] = bound
    _table(
        "Offline accuracy (P/R/F1 at the exact commit and within ±2 commits; peers get commit medians)",
        ["detector", "group", "P exact", "R exact", "F1 exact", "P ±2", "R ±2", "F1 ±2", "changes"],
        rows,
    )
    _table(
        "Offline false alarms on no-change series",
        ["detector", "false alarms", "commits", "per 1000 commits"],
        null_rows,
    )
    _table(
        "3% steps at CV 2% with 5 samples per commit: share found at the exact commit",
        ["detector", "exact", "±2", "series"],
        step3_rows,
    )

    # Online delay.
    delay_rows = []
    for name in names:
        per_group: dict[str, list[float]] = {}
        for gname in ("mixed-1", "mixed-5"):
            changes = [(s, e.index) for s in g[gname] for e in s.episodes if not e.is_drift]
            if name == "mongodb":
                changes = changes[:: max(1, len(changes) // 24)]
            per_group[gname] = _map(jobs, _delay_task, [(name, s, i) for s, i in changes])
        per_group["mixed-all"] = per_group["mixed-1"] + per_group["mixed-5"]
        for gname, delays in per_group.items():
            finite = [d for d in delays if math.isfinite(d)]
            med = statistics.median(delays) if delays else math.nan
            p90 = float(np.quantile(np.array(delays), 0.9, method="higher")) if delays else math.nan
            delay_rows.append([name, gname, _fmt(med, 1), _fmt(p90, 1), f"{len(finite)}/{len(delays)}"])
            out[f"{name}.{gname}.delay_median"] = med
            out[f"{name}.{gname}.delay_p90"] = p90
    _table(
        f"Online delay (commits after the change until reported within ±2; not found in {DELAY_HORIZON} = inf)",
        ["detector", "group", "median", "p90", f"found ≤{DELAY_HORIZON}"],
        delay_rows,
    )

    # Live false alerts.
    live_rows = []
    null = g["null"]
    live_share = {"ours": 1.0, "otava": 1 / 3, "mongodb": 1 / 20}
    for name in names:
        step = max(1, round(1 / live_share.get(name, 1.0)))
        subset = null[::step]
        res2 = _map(jobs, _live_task, [(name, s) for s in subset])
        fed = sum(c for _, c in res2)
        for key in res2[0][0]:
            alerts = sum(a[key] for a, _ in res2)
            live_rows.append([key, str(alerts), str(fed), _fmt(1000 * alerts / fed, 3)])
            out[f"{key}.live_fa_per_1000"] = 1000 * alerts / fed
    _table(
        "Live false alerts (no-change series replayed commit by commit; distinct change points ever reported)",
        ["detector", "alerts", "new commits", "per 1000 new commits"],
        live_rows,
    )

    # Runtime.
    rt_rows = []
    rng = np.random.default_rng(seed + 1)
    long1 = make_series(rng, "long-1", n=10_000, k=1, n_changes=(20, 30))
    long5 = make_series(rng, "long-5", n=10_000, k=5, n_changes=(20, 30))
    for name in names:
        med300 = statistics.median(times300[name]) * 1000
        t10 = []
        t10k5 = []
        if name != "mongodb":
            for _ in range(3):
                t = time.perf_counter()
                _finder(name)(long1.samples)
                t10.append(time.perf_counter() - t)
            if name == "ours":
                for _ in range(3):
                    t = time.perf_counter()
                    _finder(name)(long5.samples)
                    t10k5.append(time.perf_counter() - t)
        m10 = statistics.median(t10) * 1000 if t10 else math.nan
        m10k5 = statistics.median(t10k5) * 1000 if t10k5 else math.nan
        note = "" if name != "mongodb" else "10k not run: O(n²) distance matrix (0.8 GB) and permutations"
        rt_rows.append([name, _fmt(med300, 1), _fmt(m10, 1), _fmt(m10k5, 1), note])
        out[f"{name}.ms_300"] = med300
        out[f"{name}.ms_10k"] = m10
    _table(
        f"Runtime per series, ms (median; 300 = all evaluated series, {jobs} worker(s); 10k = 3 runs, "
        "1 sample/commit; 10k×5 = 5 samples/commit)",
        ["detector", "300 commits", "10,000 commits", "10,000×5", "note"],
        rt_rows,
    )
    return out


def evaluate_tcpd(names: list[str]) -> dict:
    ann = json.loads((TCPD_DIR / "annotations.json").read_text())
    rows = []
    out = {}
    datasets = []
    for path in sorted(TCPD_DIR.glob("*.json")):
        if path.name == "annotations.json":
            continue
        data = json.loads(path.read_text())
        if data["n_dim"] != 1:
            continue
        raw = data["series"][0]["raw"]
        keep = [i for i, v in enumerate(raw) if v is not None and not (isinstance(v, float) and math.isnan(v))]
        values = [np.array([float(raw[i])]) for i in keep]
        datasets.append((data["name"], keep, values))
    scores: dict[str, list[float]] = {}
    scores["zero"] = [tcpd_f_measure(ann[name], []) for name, _, _ in datasets]
    for name in names:
        scores[name] = []
        for dname, keep, values in datasets:
            found = _finder(name)(values)
            scores[name].append(tcpd_f_measure(ann[dname], [keep[i] for i in found]))
    for name, vals in scores.items():
        rows.append([name, _fmt(statistics.mean(vals)), str(len(vals))])
        out[f"{name}.tcpd_f1"] = statistics.mean(vals)
    _table(
        "TCPD F1 (TCPDBench definition, margin 5, univariate series of ../shared/data/tcpd; "
        "published: binseg 0.738, zero 0.668 on all 37+)",
        ["detector", "F1", "datasets"],
        rows,
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", default="dev,heldout", help="comma-separated seed sets: dev, heldout")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink/grow series counts (quick runs)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--detectors", default="ours,otava,mongodb")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--no-tcpd", action="store_true")
    args = parser.parse_args(argv)
    names = [n for n in args.detectors.split(",") if n]
    results = []
    for label in [s for s in args.sets.split(",") if s]:
        results.append(evaluate_set(label, SEED_SETS[label], args.scale, args.jobs, names))
    if not args.no_tcpd:
        results.append(evaluate_tcpd(names))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
