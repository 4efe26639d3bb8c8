"""What a postgres.git-sized history costs the master: poller, mirror, branch indexing, ingest, memory.

Usage: .venv/bin/python -m tests.benchmarks.history_scale [--repo PATH.git | --commits 60000 --branches 40 --tags 810]
       [--filter default|wide|both] [--polls 4] [--poll-interval 10] [--ingests 20] [--skip-poll] [--json FILE]

Without --repo, writes a synthetic repository of that shape first (tests/benchmarks/synth_history.py). Then, per watch
filter ("default": perffarm.toml's branches and tags; "wide": every branch and tag):

* poll: a real Buildbot master (tests/harness.py, no worker) polls the repository every --poll-interval seconds with
  the farm's own GitPoller configuration. A `git` on the master's PATH that logs each call then execs the real git
  counts the git processes. Reported: the first poll (wall seconds, git processes), then per steady-state poll
  interval with nothing new the master's CPU seconds (its own plus its reaped children's, from /proc/PID/stat) and
  its git processes, the same for an interval in which one new commit was pushed, and the master's RSS. The logging
  wrapper's own cost is measured and reported apart (it is inside the CPU figures).
* core (in this process, the master's own functions): master.gitmirror.Mirror.fetch into an empty mirror and with
  nothing new; the first ingest (master.ingest.ingest_file), which indexes the first-parent order of every watched
  branch; then ingest latency for a new commit (pushed to the repository just before, so the ingest fetches it)
  and for old commits deep in history (a bisection probe: master's first-parent position 1,000 and a stable branch's
  oldest back-patch). CPU seconds include git (RUSAGE_CHILDREN); git processes are counted at master.gitmirror.git.

Figures: medians and p95 of the repeated ingests. `--json FILE` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from master import gitmirror, ingest, pipeline, store
from master.publish import publisher as publish
from master.settings import load_settings
from tests.benchmarks.synth_history import Shape, write_repo
from tests.harness import Farm
from tests.unit.test_result_schema import good

WIDE = {"PERFFARM_REPOSITORY_BRANCHES": ".*", "PERFFARM_REPOSITORY_TAGS": ".*"}
SHIM = """#!/bin/bash
# Counts the master's git processes: one line per call (time, first argument), then the real git.
printf '%s %s\\n' "$EPOCHREALTIME" "$1" >> {log}
exec {git} "$@"
"""
TICK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------------ accounting
def _cpu() -> tuple[float, float]:
    """(this process's CPU seconds, its reaped children's CPU seconds)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@contextmanager
def counting_git() -> Iterator[Counter]:
    """Count master.gitmirror.git calls by git subcommand while the block runs (every git the core runs)."""
    calls: Counter = Counter()
    real = gitmirror.git

    def counted(args: list[str], *a: Any, **kw: Any) -> str:
        calls[next((x for x in args if not x.startswith("-")), "?")] += 1
        return real(args, *a, **kw)

    gitmirror.git = counted  # type: ignore[assignment]
    try:
        yield calls
    finally:
        gitmirror.git = real  # type: ignore[assignment]


def timed(fn: Callable[[], Any]) -> dict[str, Any]:
    """Wall seconds, CPU seconds (this process + git children) and git processes of one call."""
    with counting_git() as calls:
        c0, k0, t0 = *_cpu(), time.perf_counter()
        fn()
        t1, (c1, k1) = time.perf_counter(), _cpu()
    return {"wall": t1 - t0, "cpu": (c1 - c0) + (k1 - k0), "git_cpu": k1 - k0, "git": sum(calls.values())}


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    walls = sorted(s["wall"] for s in samples)
    p95 = walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))]
    return {
        "n": len(samples),
        "wall_median": statistics.median(walls),
        "wall_p95": p95,
        "wall_max": walls[-1],
        "cpu_median": statistics.median(s["cpu"] for s in samples),
        "git_median": statistics.median(s["git"] for s in samples),
    }


def g(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def push_commit(repo: Path, branch: str, n: int) -> str:
    """A new commit on `branch` of the bare repository (same tree, new message), as a push would make it."""
    old = g(repo, "rev-parse", "--verify", "--end-of-options", f"refs/heads/{branch}")
    env = dict(os.environ, GIT_AUTHOR_NAME="Bench", GIT_AUTHOR_EMAIL="b@example.org")
    env.update(GIT_COMMITTER_NAME="Bench", GIT_COMMITTER_EMAIL="b@example.org")
    new = subprocess.run(
        ["git", "commit-tree", "-p", old, "-m", f"New commit {n}", f"{old}^{{tree}}"],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    g(repo, "update-ref", f"refs/heads/{branch}", new, old)
    return new


# ------------------------------------------------------------------------------------------------ core
def measure_core(repo: Path, work: Path, environ: dict[str, str], ingests: int) -> dict[str, Any]:
    env = {"PERFFARM_MASTER_DATA_DIR": str(work / "data"), "PERFFARM_REPOSITORY_URL": str(repo), **environ}
    settings = load_settings(environ=env)
    settings.incoming_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    mirror = gitmirror.Mirror(settings.repository_url, settings.mirror_dir)
    out["mirror_fetch_first"] = timed(mirror.fetch)
    out["mirror_fetch_steady"] = summary([timed(mirror.fetch) for _ in range(5)])
    branches, tags = mirror.refs()
    watched = sorted(b for b in branches if settings.ref_matches("refs/heads/" + b))
    out["watched_branches"] = len(watched)
    out["watched_tags"] = sum(settings.ref_matches("refs/tags/" + t) for t in tags)
    build = iter(range(1, 1_000_000))
    after: list[dict[str, Any]] = []

    def ingest_one(sha: str, ref: str, source: str = "poll", after_ingest: bool = False) -> dict[str, Any]:
        doc = good()
        doc["commit"] = {"sha": sha, "ref": ref}
        bid = next(build)
        path = settings.incoming_dir / f"b-{bid}.json"
        path.write_text(json.dumps(doc))
        run = store.RunContext("fixture@local", "local", source, build_id=bid, got_revision=sha, ref=ref)
        stored: list[ingest.IngestOutcome] = []
        figures = timed(lambda: stored.append(ingest.ingest_file(settings, path, run, "fixture")))
        if after_ingest:  # what the ingest step runs next: detection, bisection, alerts, the site's partial publish
            after.append(timed(lambda: pipeline.after_ingest(settings, stored[0].run_id)))
        return figures

    out["first_ingest"] = ingest_one(branches["master"], "master")  # indexes every watched branch
    conn = store.connect(settings.results_db)
    try:
        out["indexed_positions"] = conn.execute("SELECT COUNT(*) FROM branch_commits").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    out["results_db_bytes"] = settings.results_db.stat().st_size
    out["ingest_new"] = summary([ingest_one(push_commit(repo, "master", i), "master") for i in range(ingests)])
    # Then the stages after ingest, for new commits on master (the site is published first in full, once).
    after.clear()
    out["publish_all"] = timed(lambda: publish.publish_all(settings, jobs=1))
    for i in range(min(ingests, 5)):
        ingest_one(push_commit(repo, "master", 1000 + i), "master", after_ingest=True)
    out["after_ingest_new"] = summary(after)
    deep = g(repo, "rev-list", "--first-parent", "--reverse", "refs/heads/master").split()[1000]
    out["ingest_old_master"] = summary([ingest_one(deep, "master", "bisect") for _ in range(ingests)])
    stable = next((b for b in reversed(watched) if b != "master"), None)
    if stable:
        first = g(repo, "rev-list", "--first-parent", "--reverse", f"refs/heads/master..refs/heads/{stable}").split()[0]
        out["ingest_old_stable"] = summary([ingest_one(first, stable, "bisect") for _ in range(ingests)])
        out["ingest_old_stable_branch"] = stable
    # A new stable branch appears (a year's branching: five commits back from master's head, one back-patch on
    # it); the next ingest orders it. REL_19_STABLE is watched by the default filter too.
    g(repo, "update-ref", "refs/heads/REL_19_STABLE", g(repo, "rev-parse", "refs/heads/master~5"))
    push_commit(repo, "REL_19_STABLE", 0)
    out["ingest_new_branch"] = ingest_one(push_commit(repo, "master", 2000), "master")
    return out


# ------------------------------------------------------------------------------------------------ poll
def _master_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _poll_starts(log: Path) -> list[int]:
    """Line numbers where a poll starts (GitPoller runs `git --version` first thing in every poll)."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [i for i, line in enumerate(lines) if line.split(" ", 1)[-1] == "--version"]


def shim_cost(shim: Path, n: int = 100) -> float:
    """CPU seconds the logging wrapper adds to one git process (wrapper+git minus git alone)."""

    def run(cmd: str) -> float:
        k0 = _cpu()[1]
        for _ in range(n):
            subprocess.run([cmd, "--version"], check=True, capture_output=True)
        return (_cpu()[1] - k0) / n

    return max(0.0, run(str(shim)) - run("git"))


def measure_poll(repo: Path, work: Path, environ: dict[str, str], polls: int, interval: int) -> dict[str, Any]:
    shim_dir, log = work / "shim", work / "git-calls.log"
    shim_dir.mkdir(parents=True)
    real_git = subprocess.run(["which", "git"], check=True, capture_output=True, text=True).stdout.strip()
    shim = shim_dir / "git"
    shim.write_text(SHIM.format(log=log, git=real_git))
    shim.chmod(0o755)
    out: dict[str, Any] = {"shim_cpu_per_process": shim_cost(shim)}
    log.unlink(missing_ok=True)
    env = {**environ, "PATH": f"{shim_dir}:{os.environ['PATH']}"}
    farm = Farm(work / "data", str(repo), poll_interval=interval, reconcile_interval=3600, env=env)
    t0 = time.time()
    farm.start_master()
    try:
        assert farm.master is not None
        pid = farm.master.pid
        farm.wait_first_poll(timeout=1800)
        out["first_poll_seen_after_start"] = time.time() - t0
        out["rss_after_first_poll_kb"] = _status_kb(pid, "VmRSS")

        def wait_polls(k: int, timeout: float) -> None:
            want = len(_poll_starts(log)) + k
            deadline = time.monotonic() + timeout
            while len(_poll_starts(log)) < want:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no poll start within {timeout:.0f} s")
                time.sleep(0.05)

        # Align on a poll start, then take CPU and git counts poll start to poll start.
        wait_polls(1, 1800)
        starts = [(_master_cpu(pid), len(log.read_text().splitlines()))]
        for _ in range(polls):
            wait_polls(1, 1800)
            starts.append((_master_cpu(pid), len(log.read_text().splitlines())))
        lines = log.read_text().splitlines()
        first_poll = lines[: _poll_starts(log)[1]]
        out["first_poll_git"] = len(first_poll)
        out["first_poll_wall"] = float(first_poll[-1].split()[0]) - float(first_poll[0].split()[0])
        per = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(starts, starts[1:], strict=False)]
        out["steady_cpu_per_interval"] = [round(c, 3) for c, _ in per]
        out["steady_git_per_interval"] = [n for _, n in per]
        out["steady_cpu_median"] = statistics.median(c for c, _ in per)
        out["steady_git_median"] = statistics.median(n for _, n in per)
        # A poll's wall time: its `--version` to the start of its last git process.
        ps = _poll_starts(log)
        first, last = (max(i for i in ps if i < n) for n in (starts[0][1], starts[-1][1]))
        at = [i for i in ps if first <= i <= last]
        walls = [float(lines[b - 1].split()[0]) - float(lines[a].split()[0]) for a, b in zip(at, at[1:], strict=False)]
        out["steady_poll_wall_median"] = statistics.median(walls)
        kinds = Counter(line.split(" ", 1)[-1] for line in lines[at[-2] : at[-1]])
        out["steady_git_kinds"] = dict(kinds.most_common())
        # A new commit arrives on master: the poll that sees it is the costliest of the next two intervals.
        push_commit(repo, "master", 10_000)
        marks = [(_master_cpu(pid), len(log.read_text().splitlines()))]
        for _ in range(3):
            wait_polls(1, 1800)
            marks.append((_master_cpu(pid), len(log.read_text().splitlines())))
        # (the poll running at the push may be the one that sees it: every interval from the push on counts)
        cpu, git = max((b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:], strict=False))
        out["new_commit_cpu"], out["new_commit_git"] = cpu, git
        out["rss_kb"] = _status_kb(pid, "VmRSS")
        out["hwm_kb"] = _status_kb(pid, "VmHWM")
    finally:
        farm.stop()
    return out


# ------------------------------------------------------------------------------------------------ report
def report(name: str, r: dict[str, Any]) -> None:
    print(f"\n== watch filter: {name}")
    p = r.get("poll")
    if p:
        print(
            f"poll: first {p['first_poll_wall']:.1f} s wall, {p['first_poll_git']} git processes; steady "
            f"{p['steady_cpu_median']:.2f} s CPU and {p['steady_git_median']:.0f} git per interval, "
            f"{p['steady_poll_wall_median']:.2f} s wall per poll "
            f"(each: {p['steady_cpu_per_interval']}); with one new commit {p['new_commit_cpu']:.2f} s CPU, "
            f"{p['new_commit_git']} git; master RSS {p['rss_kb'] / 1024:.0f} MiB (peak {p['hwm_kb'] / 1024:.0f}); "
            f"wrapper {p['shim_cpu_per_process'] * 1000:.1f} ms CPU per git process"
        )
        print(f"  git per steady poll by subcommand: {p['steady_git_kinds']}")
    c = r["core"]
    f, s = c["mirror_fetch_first"], c["mirror_fetch_steady"]
    print(f"watched: {c['watched_branches']} branches, {c['watched_tags']} tags")
    print(f"mirror fetch: first {f['wall']:.1f} s wall ({f['cpu']:.1f} s CPU); nothing new {s['wall_median']:.3f} s")
    fi = c["first_ingest"]
    print(
        f"first ingest (indexes {c['indexed_positions']} branch positions): {fi['wall']:.1f} s wall, "
        f"{fi['cpu']:.1f} s CPU, {fi['git']} git processes; results.sqlite {c['results_db_bytes'] / 2**20:.0f} MiB"
    )
    nb = c["ingest_new_branch"]
    print(
        f"ingest that first sees a new stable branch: {nb['wall']:.2f} s wall, {nb['cpu']:.2f} s CPU, {nb['git']} git"
    )
    pa = c["publish_all"]
    print(
        f"publish_all (whole site, {c['indexed_positions']} positions): {pa['wall']:.1f} s wall, {pa['cpu']:.1f} s CPU"
    )
    for key in ("ingest_new", "ingest_old_master", "ingest_old_stable", "after_ingest_new"):
        if key in c:
            x = c[key]
            print(
                f"{key}: median {x['wall_median']:.3f} s, p95 {x['wall_p95']:.3f} s, max {x['wall_max']:.3f} s wall; "
                f"{x['cpu_median']:.3f} s CPU, {x['git_median']:.0f} git processes (n={x['n']})"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, help="an existing bare repository (not written to except new commits)")
    shape = Shape()
    parser.add_argument("--commits", type=int, default=shape.commits)
    parser.add_argument("--branches", type=int, default=shape.branches)
    parser.add_argument("--tags", type=int, default=shape.tags)
    parser.add_argument("--filter", choices=("default", "wide", "both"), default="both")
    parser.add_argument("--polls", type=int, default=4, help="steady-state poll intervals to measure")
    parser.add_argument("--poll-interval", type=int, default=10, help="seconds (the farm's default is 300)")
    parser.add_argument("--ingests", type=int, default=20, help="ingests of each kind")
    parser.add_argument("--skip-poll", action="store_true", help="only the in-process figures")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="perffarm-history-") as tmp:
        base = Path(tmp)
        source = args.repo
        if source is None:
            source = base / "synth.git"
            made = write_repo(source, Shape(args.commits, args.branches, args.tags), lambda s: None)
            results["generate_seconds"] = made.seconds
            print(f"generated {made.total_commits} commits, {len(made.tags)} tags in {made.seconds:.1f} s")
        for name in ("default", "wide") if args.filter == "both" else (args.filter,):
            environ = WIDE if name == "wide" else {}
            # Each filter gets its own copy: the benchmark pushes commits to it.
            repo = base / f"repo-{name}.git"
            subprocess.run(["git", "clone", "--quiet", "--bare", "--", str(source), str(repo)], check=True)
            r: dict[str, Any] = {}
            if not args.skip_poll:
                r["poll"] = measure_poll(repo, base / f"poll-{name}", environ, args.polls, args.poll_interval)
            r["core"] = measure_core(repo, base / f"core-{name}", environ, args.ingests)
            results[name] = r
            report(name, r)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
