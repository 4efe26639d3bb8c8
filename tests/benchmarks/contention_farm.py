"""A regression that instruction counts do not see, through the farm on real PostgreSQL (issues #14 and #28).

    .venv/bin/python -m tests.benchmarks.contention_farm --repo /tmp/pgrepo [--culprit-kind lock|open-close]
        [--baseline 10] [--push 16] [--culprit 11] [--samples N] [--keep DIR] [--json out.json]

R is the repository scripts/pg-source-repo.sh makes (PostgreSQL 15 from Debian's source, tagged REL_15_N). The
script clones it, adds `--baseline` documentation-only commits, and starts a real master and worker (the test
harness, tests/harness.py) that pair every build of `master` with the release tag (`throughput.references`) and
measure the newest commit of a push (`master.queued = newest`).

1. The baseline commits are forced one by one: each is measured paired against the tag.
2. A push of `--push` commits at once; commit `--culprit` is the regression:
   * `lock` (issue #14): `pg_inject.lock_hold_patch`, every query's outermost executor run holds one LWLock
     exclusively. Two clients serialise their executor phases; one client pays an uncontended acquire and release
     (+0.2 % instructions per query, under the 0.5 % floor of steady series). Workloads: `pgbench-ro-prepared-c2`
     and `instr-point-select-prepared` (`--with-c1` adds `pgbench-ro-prepared-c1`).
   * `open-close` (issue #28): `pg_inject.open_close_patch`, one open and close of a file per executor run: two
     system calls, 10-15 % of a one-client point select, +0.08 % instructions. Workloads: `pgbench-ro-prepared-c1`
     and `instr-point-select-prepared`, as the issue ran them.
3. One more commit, so the level has stayed moved for two measured commits (the paired gate's persistence).

The farm must raise an alert on the paired throughput's `tps.rqps`, start one bisection by itself (its probes
are paired builds too) and name the culprit; the instruction series must not alert, nor any absolute series.
Printed: the times from the push to the alert, to the bisection's start and to the culprit, the probes and
rounds, every commit the bisections measured and how often, the culprit's ratio with its CI, the
instructions-per-query change at the culprit, and every alert and bisection the farm made.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.pg_inject import doc_commits, make_history  # noqa: E402
from tests.harness import Farm, wait_until  # noqa: E402

C2, C1, INSTR = "pgbench-ro-prepared-c2", "pgbench-ro-prepared-c1", "instr-point-select-prepared"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def say(t0: float, message: str) -> None:
    print(f"[{time.monotonic() - t0:7.0f} s] {message}", flush=True)


def medians(farm: Farm, sha: str, workload: str, metric: str) -> list[float]:
    """The median of every stored run's samples of one commit's workload and metric."""
    rows = farm.query(
        "SELECT m.samples FROM runs r JOIN measurements m ON m.run_id = r.id "
        "WHERE r.sha = ? AND m.workload = ? AND m.metric = ? AND r.status = 'ok' ORDER BY r.id",
        (sha, workload, metric),
    )
    return [statistics.median(json.loads(r[0])) for r in rows]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=Path, required=True, help="a repository made by scripts/pg-source-repo.sh")
    p.add_argument("--baseline", type=int, default=10, help="documentation commits measured first (default 10)")
    p.add_argument("--push", type=int, default=16, help="commits in the push (default 16)")
    p.add_argument("--culprit", type=int, default=11, help="which commit of the push is the culprit (default 11)")
    p.add_argument("--culprit-kind", choices=("lock", "open-close"), default="lock", help="what the culprit does")
    p.add_argument("--samples", type=int, help="paired rounds per measured commit (default: the profile's)")
    p.add_argument("--with-c1", action="store_true", help="lock: also measure pgbench-ro-prepared-c1")
    p.add_argument("--keep", type=Path, help="work directory to keep (default: a temporary one, removed)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = p.parse_args(argv)

    tag = git(args.repo, "describe", "--tags", "--abbrev=0", "HEAD")
    work = args.keep or Path(subprocess.run(["mktemp", "-d"], capture_output=True, text=True).stdout.strip())
    work.mkdir(parents=True, exist_ok=True)
    repo = work / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    subprocess.run(["git", "clone", "--quiet", str(args.repo), str(repo)], check=True)
    baseline = doc_commits(repo, args.baseline)
    if args.culprit_kind == "open-close":
        wall = C1
    else:
        wall = f"{C2},{C1}" if args.with_c1 else C2
    options = f"pg-quick:workloads={wall},{INSTR}" + (f" pg-quick:samples={args.samples}" if args.samples else "")
    env = {
        "PERFFARM_MASTER_QUEUED": "newest",
        "PERFFARM_THROUGHPUT_REFERENCES": f"master={tag}",
        "PERFFARM_RECIPES_OPTIONS": options,
    }
    data = work / "data"
    if data.exists():
        shutil.rmtree(data)
    farm = Farm(data, str(repo), recipes=("pg-quick",), reconcile_interval=5, env=env)
    t0 = time.monotonic()
    figures: dict[str, object] = {"baseline": args.baseline, "push": args.push, "culprit_index": args.culprit}
    farm.start()
    try:
        say(t0, f"farm up; {args.baseline} baseline commits paired against {tag}")
        for sha in baseline:
            farm.force("pg-quick@local", sha, "master")
        farm.wait_for_runs(len(baseline), timeout=300 * len(baseline))
        t_base = time.monotonic() - t0
        say(t0, f"baseline measured ({t_base / len(baseline):.0f} s per commit)")
        early = farm.query("SELECT COUNT(*) FROM change_points")[0][0]

        shas = make_history(
            repo,
            args.push,
            args.culprit,
            lock=args.culprit_kind == "lock",
            open_close=args.culprit_kind == "open-close",
        )
        t_push = time.monotonic()
        load_at_push = os.getloadavg()[0]
        say(
            t0,
            f"pushed {args.push} commits; #{args.culprit} {shas[args.culprit][:12]} is the {args.culprit_kind} culprit",
        )
        wait_until(lambda: farm.query("SELECT 1 FROM runs WHERE sha = ?", (shas[-1],)), 1800, "the push's head")
        say(t0, "the push's head is measured; one more commit")
        after = doc_commits(repo, 1, first=2000)[0]
        alert = wait_until(
            lambda: farm.query(
                "SELECT a.id, s.workload, s.metric, c.ratio, c.ci_low, c.ci_high FROM alerts a "
                "JOIN alert_lines l ON l.alert_id = a.id JOIN change_points c ON c.id = l.change_point_id "
                "JOIN series s ON s.id = c.series_id"
            ),
            1800,
            "an alert",
        )
        t_alert = time.monotonic() - t_push
        say(t0, f"alert: {alert}")
        started = wait_until(lambda: farm.query("SELECT id, commits FROM bisections"), 600, "a bisection")
        t_bisect = time.monotonic() - t_push
        done = wait_until(
            lambda: farm.query(
                "SELECT state, culprit, workload, metric, probes, rounds, samples, ratio, ci_low, ci_high, log "
                "FROM bisections WHERE state != 'running' ORDER BY id DESC"
            ),
            3600,
            "the bisection to end",
        )[0]
        t_culprit = time.monotonic() - t_push
        state, culprit, workload, metric, probes, rounds, samples, ratio, lo, hi, log = done
        say(t0, f"bisection {state}: {culprit}")
        instr_before = medians(farm, baseline[-1], INSTR, "instructions")
        instr_after = medians(farm, shas[-1], INSTR, "instructions")
        instr_change = instr_after[-1] / instr_before[-1] - 1 if instr_before and instr_after else None
        searched = farm.query(
            "SELECT s.workload, s.metric, c.kind, c.ratio, c.state FROM change_points c "
            "JOIN series s ON s.id = c.series_id"
        )
        every_alert = farm.query(
            "SELECT a.id, a.kind, a.severity, a.active, a.prev_sha, a.sha, a.culprit_sha, "
            "group_concat(s.workload || '/' || s.metric) FROM alerts a JOIN alert_lines l ON l.alert_id = a.id "
            "JOIN change_points c ON c.id = l.change_point_id JOIN series s ON s.id = c.series_id GROUP BY a.id"
        )
        bisections = farm.query("SELECT id, state, workload, metric, culprit, probes, rounds FROM bisections")
        probe_runs = farm.query(
            "SELECT r.sha, COUNT(*) FROM bisection_runs br JOIN runs r ON r.id = br.run_id GROUP BY r.sha"
        )
        order = {sha: i for i, sha in enumerate(shas)}
        c1_after = medians(farm, after, C1, "tps.rqps")
        figures.update(
            {
                "load_average": [round(load_at_push, 2), round(os.getloadavg()[0], 2)],
                "every_alert": [list(a) for a in every_alert],
                "bisections": [list(b) for b in bisections],
                "probe_runs": sorted([order.get(sha, -1), n] for sha, n in probe_runs),
                "alert_range_holds_culprit": any(
                    a[6] == shas[args.culprit]
                    or (a[4] in order and a[5] in order and order[a[4]] < args.culprit <= order[a[5]])
                    for a in every_alert
                ),
            }
        )
        c2_after = medians(farm, after, C2, "tps.rqps")
        figures.update(
            {
                "early_change_points": early,
                "seconds_per_baseline_commit": round(t_base / len(baseline), 1),
                "alerts": [list(a[1:]) for a in alert],
                "change_points": [list(r) for r in searched],
                "range": len(json.loads(started[0][1])) - 1,
                "state": state,
                "culprit_named": culprit,
                "culprit_expected": shas[args.culprit],
                "correct": culprit == shas[args.culprit],
                "bisected": f"{workload}/{metric}",
                "probes": probes,
                "rounds": rounds,
                "samples": samples,
                "ratio": ratio,
                "ci": [lo, hi],
                "instructions_change": instr_change,
                "c1_rqps_after": c1_after,
                "c2_rqps_after": c2_after,
                "push_to_alert_s": round(t_alert),
                "push_to_bisection_s": round(t_bisect),
                "push_to_culprit_s": round(t_culprit),
                "log": json.loads(log),
            }
        )
    finally:
        farm.stop()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print()
    for key in (
        "alerts",
        "change_points",
        "every_alert",
        "bisections",
        "probe_runs",
        "alert_range_holds_culprit",
        "load_average",
        "bisected",
        "range",
        "state",
        "correct",
        "probes",
        "rounds",
        "samples",
    ):
        print(f"{key:>28}: {figures[key]}")
    print(f"{'culprit ratio [95% CI]':>28}: {figures['ratio']:.4f} [{lo:.4f}, {hi:.4f}]")
    ic = figures["instructions_change"]
    print(f"{'instructions/query at head':>28}: {ic * 100:+.3f} %" if ic is not None else "no instruction counts")
    print(f"{'rQPS of the last commit':>28}: c1 {c1_after} c2 {c2_after}")
    print(f"{'seconds per baseline commit':>28}: {figures['seconds_per_baseline_commit']}")
    for key in ("push_to_alert_s", "push_to_bisection_s", "push_to_culprit_s"):
        print(f"{key:>28}: {figures[key]}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return 0 if figures["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
