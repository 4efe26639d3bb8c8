"""Ten years of results (issue #17): what the results store and its readers cost as history grows.

    .venv/bin/python -m tests.benchmarks.results_scale [--work /tmp/perffarm-scale] [--commits 60,600,6000]
        [--machines 20] [--workloads 100] [--samples 5] [--runs 5] [--json FILE] [--rebuild] [--reuse-site]

The fleet of the issue is 20 machines x 100 series x 60,000 commits of history (one branch, every commit measured
on every machine: 1.2M runs, 120M points, 600M samples). For each history length in --commits this builds a
results DB of that fleet (bulk inserts into the real schema, made by master.store: commits, branch order, release
tags, runs with their result JSON as received, one measurement row of 5 raw samples per series; change points
reported through master.store.changes where the generated series step, and alerts derived from them by the real
master.alerts.sync), then measures, each on its own:

  * the DB file size (after a checkpoint);
  * `perffarm status`, `perffarm results list` and `perffarm alerts list` through the real CLI
    (`python -m master.cli ...`, a fresh interpreter each, median of --runs; the floor is `--help`);
  * storing one run (what ingest does in the store: the commit appended, insert_run, one transaction);
  * a detection pass: one new commit measured on one machine, stored by master.store.insert_run and re-detected
    by master.analysis.analyse_run (its 100 series) and master.alerts.sync, as the pipeline does (median; every
    pass on one machine, so all but the first reuse what an earlier pass of the process computed, as the master
    does), and the seconds analyse_run held the write lock (another result stored meanwhile waits that long);
  * a full publish (`python -m master.cli publish`, wall time and the peak RSS of that process);
  * an incremental publish after one new run (master.publish.publish_incremental, median), and after a run at
    the newest release tag's commit (measured again on one machine: every machine has measured that commit);
  * the site's largest page: the largest HTML file, and the largest page with the local scripts and styles it
    loads (what a browser fetches before any hover).

Then it prints the table of cost per size and the growth factor per 10x data (between the two largest sizes, as
(b/a) ** (1 / log10(size_b / size_a))). DBs are kept in --work/<machines>x<workloads>x<commits>/ and reused
(--rebuild makes them again); check `df -h` first: ~370 bytes per point (4.4 GB at 6,000 commits).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RECIPE, VERSION, CONFIG = "pgbench", 1, "cfg-scale-1"
BRANCH = "master"
TAG_EVERY = 1000  # a release tag every 1,000 commits (about two a year at 60,000 commits in ten years)
STEP_EVERY = 200  # on average one commit in 200 shifts some workloads' level (change points, an alert)


def say(msg: str) -> None:
    print(msg, flush=True)


def sha_of(i: int) -> str:
    return hashlib.sha1(f"scale-commit-{i}".encode()).hexdigest()


def machine_of(m: int) -> str:
    return f"m{m:02d}"


def workload_of(w: int) -> str:
    return f"pgbench-w{w:03d}"


@dataclass
class Fleet:
    machines: int
    workloads: int
    commits: int
    samples: int = 5
    seed: int = 1

    @property
    def points(self) -> int:
        return self.machines * self.workloads * self.commits

    @property
    def name(self) -> str:
        return f"{self.machines}x{self.workloads}x{self.commits}"


def _levels(fleet: Fleet, rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[int, int, int, float]]]:
    """Per (machine, workload) a base level, and the level shifts: (machine, workload, commit, factor).

    A shift is a commit that changes 1-10 workloads on every machine (one alert, a change point per series), on
    average one per STEP_EVERY commits."""
    base = 1000.0 * np.exp(rng.normal(0, 1, (fleet.machines, fleet.workloads)))
    steps = []
    n = max(1, int(rng.poisson(fleet.commits / STEP_EVERY)))
    for c in sorted(set(rng.integers(10, max(fleet.commits - 10, 11), n).tolist())):
        f = float(rng.choice([0.9, 0.95, 0.97, 1.04, 1.08]))
        for w in rng.choice(fleet.workloads, min(int(rng.integers(1, 11)), fleet.workloads), replace=False).tolist():
            steps.extend((m, int(w), int(c), f) for m in range(fleet.machines))
    return base, steps


def _doc_text(sha: str, machine: str, samples: list[str]) -> str:
    """The result JSON as a worker writes it and insert_run stores it (sorted keys), built from text pieces."""
    wl = ",".join(
        f'{{"flags":[],"metrics":[{{"direction":"higher","name":"tps","samples":[{s}],"unit":"tx/s"}}],'
        f'"name":"{workload_of(w)}"}}'
        for w, s in enumerate(samples)
    )
    return (
        f'{{"commit":{{"ref":"{BRANCH}","sha":"{sha}"}},"finished_at":"2026-01-01T00:00:00Z",'
        f'"host_checks":{{"noisy":false}},"log_excerpt":"",'
        f'"machine":{{"fingerprint":{{"cores":16,"cpu_model":"scale"}},"id":"{machine}"}},'
        f'"recipe":{{"config_hash":"{CONFIG}","name":"{RECIPE}","version":{VERSION}}},'
        f'"schema":"perffarm-result","schema_version":1,"started_at":"2026-01-01T00:00:00Z","status":"ok",'
        f'"workloads":[{wl}]}}'
    )


def generate(path: Path, fleet: Fleet, quiet: bool = False) -> dict[str, float]:
    """A results DB of `fleet` in the real schema: bulk inserts, one transaction per 1,000 commits."""
    from master import store
    from master.alerts import sync as alerts
    from master.settings import load_settings
    from master.store.changes import Placement

    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng(fleet.seed)
    conn = store.connect(path)
    conn.execute("PRAGMA synchronous = OFF")  # a generated DB: nothing to lose
    infos = [
        store.CommitInfo(
            sha_of(i),
            f"commit number {i} of ten years",
            f"Author {i % 97} <a{i % 97}@example.org>",
            1_500_000_000 + i * 5000,
            1_500_000_000 + i * 5000,
            (sha_of(i - 1),) if i else (),
        )
        for i in range(fleet.commits)
    ]
    with store.transaction(conn):
        store.append_branch(conn, BRANCH, infos, 0)
        store.set_tags(
            conn, {f"REL_{k // TAG_EVERY + 1}_0": infos[k].sha for k in range(TAG_EVERY - 1, fleet.commits, TAG_EVERY)}
        )
        conn.executemany(
            "INSERT INTO machines (id, fingerprint, first_seen) VALUES (?, ?, ?)",
            [(machine_of(m), json.dumps({"cores": 16, "cpu_model": "scale"}), 1.5e9) for m in range(fleet.machines)],
        )
    base, steps = _levels(fleet, rng)
    factor = np.ones((fleet.machines, fleet.workloads))
    by_commit: dict[int, list[tuple[int, int, float]]] = {}
    for m, w, c, f in steps:
        by_commit.setdefault(c, []).append((m, w, f))
    run_sql = (
        "INSERT INTO runs (id, sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, config_hash, "
        "status, source, build_id, build_url, log_excerpt, host_checks, noisy, started_at, finished_at, ingested_at, "
        "result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'ok', 'poll', ?, ?, '', '{\"noisy\": false}', 0, "
        "'2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', ?, ?)"
    )
    meas_sql = (
        "INSERT INTO measurements (run_id, workload, metric, unit, direction, samples, flags, config_hash) "
        "VALUES (?, ?, 'tps', 'tx/s', 'higher', ?, '[]', ?)"
    )
    names = [workload_of(w) for w in range(fleet.workloads)]
    run_id = 0
    for start in range(0, fleet.commits, 1000):
        runs, meas = [], []
        for i in range(start, min(start + 1000, fleet.commits)):
            for m, w, f in by_commit.get(i, ()):
                factor[m, w] *= f
            noise = 1 + rng.normal(0, 0.01, (fleet.machines, fleet.workloads, fleet.samples))
            values = np.round((base * factor)[:, :, None] * noise, 6)
            sha = infos[i].sha
            for m in range(fleet.machines):
                run_id += 1
                texts = [",".join(map(repr, row)) for row in values[m].tolist()]
                runs.append(
                    (
                        run_id,
                        sha,
                        sha,
                        BRANCH,
                        f"{RECIPE}@{machine_of(m)}",
                        machine_of(m),
                        machine_of(m),
                        RECIPE,
                        VERSION,
                        CONFIG,
                        run_id,
                        f"http://127.0.0.1:8010/#/builders/{m + 1}/builds/{run_id}",
                        1.5e9 + run_id,
                        _doc_text(sha, machine_of(m), texts),
                    )
                )
                meas.extend((run_id, names[w], f"[{t}]", CONFIG) for w, t in enumerate(texts))
        with store.transaction(conn):
            conn.executemany(run_sql, runs)
            conn.executemany(meas_sql, meas)
        if not quiet:
            say(f"    {min(start + 1000, fleet.commits)}/{fleet.commits} commits, {run_id} runs")
    # series (one run per machine names them all), change points where the generated series step, alerts
    series: dict[tuple[int, int], int] = {}
    with store.transaction(conn):
        for m in range(fleet.machines):
            ids = store.series.ensure_for_run(conn, m + 1)
            for w, sid in enumerate(ids):
                series[(m, w)] = sid
        for m, w, c, f in steps:
            if c <= 0 or c >= fleet.commits:
                continue
            p = Placement(
                sha=infos[c].sha,
                prev_sha=infos[c - 1].sha,
                position=c,
                prev_position=c - 1,
                kind="improvement" if f > 1 else "regression",
                ratio=f,
                ci_low=f - 0.005,
                ci_high=f + 0.005,
                pvalue=1e-9,
            )
            store.changes.report(conn, series[(m, w)], infos[c].sha, p, 1.5e9 + c * 5000)
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(path.parent)})
    events = alerts.sync(conn, settings.alerts, now=1.5e9 + fleet.commits * 5000)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"seconds": time.perf_counter() - t0, "change_points": len(steps), "alert_events": len(events)}


def next_run(path: Path, fleet: Fleet, i: int, machine: int = 0) -> int:
    """Commit `i` appended to the branch and measured on one machine, stored by insert_run (what ingest does)."""
    from master import store

    rng = random.Random(i)
    sha = sha_of(i)
    conn = store.connect(path)
    try:
        with store.transaction(conn):
            if BRANCH not in store.commits.positions_of(conn, sha):
                info = store.CommitInfo(
                    sha, f"commit number {i}", "Author <a@example.org>", 1_500_000_000 + i * 5000,
                    1_500_000_000 + i * 5000, (sha_of(i - 1),),
                )  # fmt: skip
                store.append_branch(conn, BRANCH, [info], i)
            doc = json.loads(_doc_text(sha, machine_of(machine), ["1000.0"] * fleet.workloads))
            for k, wl in enumerate(doc["workloads"]):
                wl["metrics"][0]["samples"] = [1000.0 * (1 + k / 50) * (1 + rng.gauss(0, 0.01)) for _ in range(5)]
            return store.insert_run(
                conn,
                doc,
                store.RunContext(builder=f"{RECIPE}@{machine_of(machine)}", worker=machine_of(machine), source="poll"),
            )
    finally:
        conn.close()


def _child(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one child process (with the children it waited for), which must
    exit with a code in `ok`."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _cli(data: Path, runs: int, *args: str) -> tuple[float, float, list[float]]:
    """`perffarm ARGS` in a fresh interpreter `runs` times: (median wall s, median CPU s, every wall time)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env.update(
        PERFFARM_MASTER_DATA_DIR=str(data),
        PERFFARM_MASTER_WEB_PORT="1",  # nothing listens: status reports the master as down at once
        PYTHONPATH=str(ROOT),
    )
    # `perffarm status` exits 1 when the master is not running, as here (master/cli.py): that is its answer
    ok = (0, 1) if args[:1] == ("status",) else (0,)
    got = [_child([sys.executable, "-m", "master.cli", *args], env, ok) for _ in range(runs)]
    walls = [g[0] for g in got]
    return statistics.median(walls), statistics.median(g[1] for g in got), walls


_LOADS = re.compile(rb'<(?:script[^>]*\ssrc|link[^>]*\shref)="([^"?#:]+)"')


def largest_pages(site: Path) -> dict[str, object]:
    """The largest HTML file, and the largest page counting the local scripts and styles it loads."""
    root = Path(os.path.realpath(site))
    best_html = (0, "")
    best_page = (0, "")
    for p in root.rglob("*.html"):
        data = p.read_bytes()
        rel = str(p.relative_to(root))
        best_html = max(best_html, (len(data), rel))
        total = len(data)
        for ref in set(_LOADS.findall(data)):
            q = (p.parent / ref.decode()).resolve()
            if q.is_file():
                total += q.stat().st_size
        best_page = max(best_page, (total, rel))
    files = sum(1 for _ in root.rglob("*") if _.is_file())
    return {
        "largest_html": best_html[1],
        "largest_html_bytes": best_html[0],
        "largest_page": best_page[1],
        "largest_page_bytes": best_page[0],
        "files": files,
    }


@dataclass
class Figures:
    fleet: dict[str, int]
    points: int
    db_bytes: int = 0
    generate_s: float = 0.0
    cli_floor_s: float = 0.0
    status_s: float = 0.0
    results_list_s: float = 0.0
    alerts_list_s: float = 0.0
    store_run_s: float = 0.0
    detect_s: float = 0.0
    detect_lock_s: float = 0.0  # of analyse_run: seconds between BEGIN IMMEDIATE and COMMIT, summed
    full_publish_s: float = 0.0
    full_publish_rss_mib: float = 0.0
    incremental_s: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds beside each wall time (the box is shared)
    incremental_files: int = 0
    incremental_tag_s: float = 0.0  # after a run at the newest tagged commit, which every machine measured
    incremental_tag_files: int = 0
    site: dict[str, object] = field(default_factory=dict)
    raw: dict[str, list[float]] = field(default_factory=dict)


class WriteLockClock:
    """Seconds a connection holds SQLite's write lock: from each BEGIN IMMEDIATE to its COMMIT or ROLLBACK, summed
    (from the statement trace, so it times whatever code runs, not what that code says it does)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.held, self._since = conn, 0.0, None
        conn.set_trace_callback(self._statement)

    def _statement(self, sql: str) -> None:
        word = sql.lstrip().upper()
        if word.startswith("BEGIN IMMEDIATE"):
            self._since = time.perf_counter()
        elif word.startswith(("COMMIT", "ROLLBACK")) and self._since is not None:
            self.held += time.perf_counter() - self._since
            self._since = None

    def stop(self) -> float:
        self.conn.set_trace_callback(None)
        return self.held


def measure(
    fleet: Fleet, work: Path, runs: int, rebuild: bool, skip_publish: bool, reuse_site: bool = False
) -> Figures:
    from master import analysis, store
    from master.alerts import sync as alerts
    from master.publish.writer import wait_for_cleanup
    from master.settings import load_settings

    data = work / fleet.name
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
    db = settings.results_db
    fig = Figures(asdict(fleet), fleet.points)
    if rebuild or not db.exists():
        say(f"  building {fleet.name}: {fleet.points:,} points, {fleet.points * fleet.samples:,} samples")
        for p in (data / "site", data / ".site.versions", data / "publish-cache.sqlite"):
            if p.is_symlink() or p.is_file():
                p.unlink()
            elif p.exists():
                shutil.rmtree(p)
        g = generate(db, fleet)
        fig.generate_s = g["seconds"]
        say(f"  built in {g['seconds']:.1f} s: {g['change_points']} change points, {g['alert_events']} alert events")
    conn = store.connect(db)
    head = store.branch_head(conn, BRANCH)[0] + 1  # earlier measurements appended commits
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    fig.db_bytes = db.stat().st_size
    say(f"  DB {fig.db_bytes / 1e9:.2f} GB")

    for name, args in (
        ("cli_floor", ["--help"]),
        ("status", ["status"]),
        ("results_list", ["results", "list"]),
        ("alerts_list", ["alerts", "list"]),
    ):
        wall, fig.cpu[name], fig.raw[name] = _cli(data, runs, *args)
        setattr(fig, f"{name}_s", wall)
    say(
        f"  CLI (floor {fig.cli_floor_s:.2f} s): status {fig.status_s:.2f} s, results list {fig.results_list_s:.2f} s, "
        f"alerts list {fig.alerts_list_s:.2f} s (CPU {fig.cpu})"
    )

    detect, detect_cpu, loads, stores, locked = [], [], [], [], []
    for k in range(runs):
        t = time.perf_counter()  # storing one result: connect, append the commit, insert_run, commit (WAL, fsync)
        # every pass on one machine, as the master meets a machine's runs: its first pass is the one after a start
        # (nothing remembered), the next ones find the CIs of the series' settled change points (master.analysis)
        run_id = next_run(db, fleet, head + k, machine=0)
        stores.append(time.perf_counter() - t)
        conn = store.connect(db)
        try:
            lock = WriteLockClock(conn)
            t, c = time.perf_counter(), time.process_time()
            analysis.analyse_run(conn, run_id, settings.detection)
            locked.append(lock.stop())
            alerts.sync(conn, settings.alerts)
            detect.append(time.perf_counter() - t)
            detect_cpu.append(time.process_time() - c)
            t = time.perf_counter()  # of which: loading the run's series from the store
            for sid in store.series.ensure_for_run(conn, run_id):
                analysis.load_series(conn, sid)
            loads.append(time.perf_counter() - t)
        finally:
            conn.close()
    head += runs
    fig.store_run_s, fig.raw["store_run"] = statistics.median(stores), stores
    say(f"  storing one run ({fleet.workloads} measurements): {fig.store_run_s * 1000:.0f} ms median")
    fig.detect_s, fig.raw["detect"] = statistics.median(detect), detect
    fig.cpu["detect"], fig.cpu["detect_load_wall"] = statistics.median(detect_cpu), statistics.median(loads)
    fig.cpu["detect_first"] = detect_cpu[0]
    fig.detect_lock_s, fig.raw["detect_lock"] = statistics.median(locked), locked
    say(
        f"  detection pass (one run, {fleet.workloads} series): {fig.detect_s:.2f} s median ({detect}), CPU "
        f"{fig.cpu['detect']:.2f} s (the first {fig.cpu['detect_first']:.2f} s); loading its series alone "
        f"{fig.cpu['detect_load_wall']:.2f} s; write lock held {fig.detect_lock_s:.3f} s ({locked})"
    )
    if skip_publish:
        return fig

    if reuse_site and (data / "site").exists():
        say("  full publish: skipped (--reuse-site: the incremental publishes build on the site already there)")
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
        env.update(PERFFARM_MASTER_DATA_DIR=str(data), PYTHONPATH=str(ROOT))
        fig.full_publish_s, fig.cpu["full_publish"], fig.full_publish_rss_mib = _child(
            [sys.executable, "-m", "master.cli", "publish", "--quiet"], env
        )
        wait_for_cleanup()
        say(
            f"  full publish: {fig.full_publish_s:.1f} s, CPU {fig.cpu['full_publish']:.1f} s, peak RSS "
            f"{fig.full_publish_rss_mib:.0f} MiB"
        )
    fig.incremental_s, fig.cpu["incremental"], fig.incremental_files = incremental_publishes(
        settings, fleet, [head + k for k in range(runs)], "new commit"
    )
    tag = newest_tag(fleet)
    if tag is not None:  # every machine measured it: a re-run, a bisection probe, a run at a release tag
        fig.incremental_tag_s, fig.cpu["incremental_tag"], fig.incremental_tag_files = incremental_publishes(
            settings, fleet, [tag] * runs, f"run at the tagged commit {tag}", first_machine=1
        )
    fig.site = largest_pages(data / "site")
    say(
        f"  largest page: {fig.site['largest_page']} {fig.site['largest_page_bytes'] / 1e6:.2f} MB with what it "
        f"loads; largest HTML {fig.site['largest_html']} {fig.site['largest_html_bytes'] / 1e6:.2f} MB; "
        f"{fig.site['files']} files"
    )
    return fig


def newest_tag(fleet: Fleet) -> int | None:
    """The commit of the newest release tag generate() made (REL_<n>_0 at every TAG_EVERY-th commit), if any."""
    last = fleet.commits // TAG_EVERY * TAG_EVERY - 1
    return last if last >= 0 else None


def incremental_publishes(
    settings: Any, fleet: Fleet, commits: list[int], what: str, first_machine: int = 0
) -> tuple[float, float, int]:
    """One run stored at each of `commits` (a new one appended to the branch, or one there measured again) on
    machines first_machine, +1, ..., each followed by its incremental publish: medians of (wall s, CPU s, files
    written)."""
    from master.publish import publish_incremental
    from master.publish.writer import wait_for_cleanup

    inc, inc_cpu, files = [], [], []
    for k, i in enumerate(commits):
        run_id = next_run(settings.results_db, fleet, i, machine=(first_machine + k) % fleet.machines)
        c = time.process_time()
        r = publish_incremental(settings, run_id)
        inc_cpu.append(time.process_time() - c)
        wait_for_cleanup()
        if not r.incremental:
            raise RuntimeError(f"publish after run {run_id} was not incremental: {r}")
        inc.append(r.seconds)
        files.append(r.files_written)
    got = statistics.median(inc), statistics.median(inc_cpu), int(statistics.median(files))
    say(
        f"  incremental publish, {what}: {got[0]:.2f} s median, CPU {got[1]:.2f} s ({inc_cpu}), {got[2]} files "
        f"({files})"
    )
    return got


ROWS = [
    ("DB size (GB)", lambda f: f.db_bytes / 1e9),
    ("`perffarm status` (s)", lambda f: f.status_s),
    ("`perffarm results list` (s)", lambda f: f.results_list_s),
    ("`perffarm alerts list` (s)", lambda f: f.alerts_list_s),
    ("CLI CPU: `--help` (the floor) (s)", lambda f: f.cpu.get("cli_floor", 0)),
    ("CLI CPU: status (s)", lambda f: f.cpu.get("status", 0)),
    ("CLI CPU: results list (s)", lambda f: f.cpu.get("results_list", 0)),
    ("CLI CPU: alerts list (s)", lambda f: f.cpu.get("alerts_list", 0)),
    ("storing one run (ms)", lambda f: f.store_run_s * 1000),
    ("detection pass, one run (s)", lambda f: f.detect_s),
    ("detection pass, CPU (s)", lambda f: f.cpu.get("detect", 0)),
    ("detection pass, the first after a start, CPU (s)", lambda f: f.cpu.get("detect_first", 0)),
    ("detection pass, write lock held (s)", lambda f: f.detect_lock_s),
    ("full publish (s)", lambda f: f.full_publish_s),
    ("full publish, CPU (s)", lambda f: f.cpu.get("full_publish", 0)),
    ("full publish, peak RSS (MiB)", lambda f: f.full_publish_rss_mib),
    ("incremental publish (s)", lambda f: f.incremental_s),
    ("incremental publish, CPU (s)", lambda f: f.cpu.get("incremental", 0)),
    ("incremental publish, files", lambda f: f.incremental_files),
    ("incremental publish at a tagged commit, CPU (s)", lambda f: f.cpu.get("incremental_tag", 0)),
    ("incremental publish at a tagged commit, files", lambda f: f.incremental_tag_files),
    ("largest page + what it loads (MB)", lambda f: f.site.get("largest_page_bytes", 0) / 1e6),
]


def growth(a: float, b: float, pa: int, pb: int) -> float | None:
    """Factor per 10x data between two sizes, (b/a) ** (1 / log10(pb/pa))."""
    if a <= 0 or b <= 0 or pb == pa:
        return None
    return (b / a) ** (1 / math.log10(pb / pa))


def table(figs: list[Figures], cli_floor: float) -> str:
    head = ["cost"] + [f"{f.fleet['commits']:,} commits ({f.points / 1e6:g}M points)" for f in figs]
    head.append("x per 10x data")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, get in ROWS:
        vals = [get(f) for f in figs]
        g = growth(vals[-2], vals[-1], figs[-2].points, figs[-1].points) if len(figs) > 1 else None
        lines.append(
            "| " + " | ".join([label, *(f"{v:.3g}" for v in vals), f"{g:.2f}" if g is not None else "-"]) + " |"
        )
    lines.append(f"\n(CLI figures include the interpreter's start and imports: `--help` takes {cli_floor:.2f} s.)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/perffarm-scale"))
    ap.add_argument("--commits", default="60,600,6000", help="history lengths, comma-separated")
    ap.add_argument("--machines", type=int, default=20)
    ap.add_argument("--workloads", type=int, default=100)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5, help="repetitions of each latency (median)")
    ap.add_argument("--rebuild", action="store_true", help="generate the DBs again even when present")
    ap.add_argument("--skip-publish", action="store_true")
    ap.add_argument(
        "--reuse-site",
        action="store_true",
        help="no full publish where an earlier run left a site: measure the incremental publishes on it",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write every figure to this file")
    args = ap.parse_args(argv)
    figs = []
    for n in [int(x) for x in args.commits.split(",")]:
        fleet = Fleet(args.machines, args.workloads, n, args.samples)
        say(f"\n{fleet.name} ({fleet.points / 1.2e8:.4g} of 20 x 100 x 60,000), load average {os.getloadavg()[0]:.2f}")
        figs.append(measure(fleet, args.work, args.runs, args.rebuild, args.skip_publish, args.reuse_site))
    say("\n" + table(figs, statistics.median(f.cli_floor_s for f in figs)))
    if args.json:
        args.json.write_text(json.dumps([asdict(f) for f in figs], indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
