"""A fleet of workers on several hosts, through a real master: throughput, the per-host lock, a lost host, refusals.

    .venv/bin/python -m tests.benchmarks.fleet_scale [--hosts 4] [--workers 16] [--commits 12]
        [--cut-commits 3] [--bench-ms 150] [--lost-after 10] [--timeout 1800] [--json FILE] [--keep DIR]
    .venv/bin/python -m tests.benchmarks.fleet_scale --small    # 8 workers, 3 hosts: tests/integration/test_fleet.py

Needs root. Each host is a network namespace on a private bridge (tests/fleet_support.py: veth pairs on a
10.x.y.0/24 that nothing routes, so nothing leaves the machine); workers are provisioned with
`workers/create_worker.py` inside their host and reach the master's PB port over TCP on the bridge, each with its
own password; `workers.hosts` groups them for the measurement lock. Every host has its own machine fingerprint (its
own /etc/os-release, the way `ip netns exec` gives a namespace its own /etc files). Two more workers try to join:
one listed with a password that is not the master's secret, one whose name is not listed.

1. **Throughput**: `--commits` commits pushed at once to a real git repository (the fixture recipe, each sample
   sleeping `--bench-ms`); every commit is measured on every worker. Printed: commits fully measured per minute
   and runs per minute, from the push to the last stored run.
2. **Lost host**: `--cut-commits` more commits; when a bench step runs on the last host, its link is cut (its
   veth on the bridge goes down). Printed: when the master dropped its workers (`workers.lost_after`, set to
   `--lost-after`), what the other hosts stored meanwhile, and how long until every interrupted build's commit was
   stored after the link came back (the link stays down `--outage` seconds past the master noticing).
3. **Checks** over every stored run: every (commit, builder) exactly once (lost / duplicates); no two
   measurement windows `[finished_at - bench_seconds, finished_at]` of one host overlap, while different hosts'
   do; one machine id per host and no series mixing hosts; both refused workers on the health page.
4. Master RSS (peak, sampled every 0.5 s) and CPU time over the scenario.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fleet_support import Fleet, FleetFarm, FleetWorker, can_run  # noqa: E402
from tests.harness import make_repo, wait_until  # noqa: E402

BUILDER = "fixture@{}"
AUTOMATIC = ("poll", "requeue")


@dataclass
class Options:
    hosts: int = 4
    workers: int = 16
    commits: int = 12
    cut_commits: int = 3
    bench_ms: int = 150
    samples: int = 5
    lost_after: int = 10
    outage: float = 5.0  # seconds the link stays down after the master dropped the host's workers
    keepalive: int = 10
    timeout: float = 1800.0
    work: Path | None = None
    quiet: bool = False

    @classmethod
    def small(cls, **kw: Any) -> Options:
        # 400 ms samples: 2 s windows, so hosts' measurements surely meet and a bench step is easy to catch
        return cls(**{"hosts": 3, "workers": 8, "commits": 1, "cut_commits": 2, "bench_ms": 400, **kw})


@dataclass
class Report:
    options: dict[str, Any]
    figures: dict[str, Any] = field(default_factory=dict)
    hosts: dict[str, list[str]] = field(default_factory=dict)  # host -> workers
    same_host_overlaps: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    mixed_machines: dict[str, list[str]] = field(default_factory=dict)  # machine id -> hosts, when > 1
    interrupted: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    health_page: dict[str, bool] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class Sampler:
    """Peak RSS of a process, sampled in a thread."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid, self.interval, self.peak_kb = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except OSError:
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def plan_workers(fleet: Fleet, n: int) -> list[FleetWorker]:
    """`n` workers round-robin over the hosts, then the two that must be refused."""
    workers = [FleetWorker(f"w{i:02d}", fleet.hosts[i % len(fleet.hosts)]) for i in range(n)]
    workers.append(FleetWorker("wrongpw", fleet.hosts[0], own_secret=True))
    workers.append(FleetWorker("stranger", fleet.hosts[1 % len(fleet.hosts)], listed=False))
    return workers


def parse_time(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def bench_window(run: dict[str, Any]) -> tuple[float, float] | None:
    """When a stored run measured: [finished_at - bench_seconds, finished_at] (epoch seconds)."""
    try:
        timings = json.loads(run["result"]).get("timings", {})
        end = parse_time(run["finished_at"])
    except (TypeError, ValueError, KeyError):
        return None
    seconds = timings.get("bench_seconds")
    return None if seconds is None else (end - float(seconds), end)


def overlaps(windows: list[tuple[str, tuple[float, float]]]) -> list[tuple[str, str, float]]:
    """Every pair of (label, window) that overlaps, with the overlap in seconds."""
    out = []
    ordered = sorted(windows, key=lambda w: w[1][0])
    for i, (a, (_, a1)) in enumerate(ordered):
        for b, (b0, b1) in ordered[i + 1 :]:
            if b0 >= a1:
                break
            out.append((a, b, min(a1, b1) - b0))
    return out


def stored_runs(farm: FleetFarm) -> list[dict[str, Any]]:
    cols = ("id", "sha", "builder", "worker", "machine_id", "source", "status", "finished_at", "ingested_at", "result")
    rows = farm.query(f"SELECT {', '.join(cols)} FROM runs ORDER BY id")
    return [dict(zip(cols, r)) for r in rows]


def automatic_counts(runs: list[dict[str, Any]]) -> Counter:
    return Counter((r["sha"], r["builder"]) for r in runs if r["source"] in AUTOMATIC)


def wait_measured(farm: FleetFarm, shas: list[str], builders: list[str], timeout: float) -> float:
    """Wait until every (commit, builder) has an automatic run; the time the last one was stored."""

    def done() -> float | None:
        runs = stored_runs(farm)
        have = {(r["sha"], r["builder"]) for r in runs if r["source"] in AUTOMATIC}
        if all((s, b) in have for s in shas for b in builders):
            return max(r["ingested_at"] for r in runs if r["sha"] in shas)
        if farm.master is not None and farm.master.poll() is not None:
            raise RuntimeError("the master died:\n" + farm.master_log()[-3000:])
        return None

    return wait_until(done, timeout, f"{len(shas)} commits on {len(builders)} builders", interval=0.5)


def bench_running_on(farm: FleetFarm, names: set[str]) -> list[dict[str, Any]]:
    """Builds of workers `names` whose bench step is running: [{build, worker, revision}]."""
    workers = {w["workerid"]: w["name"] for w in (farm.api("workers") or {"workers": []})["workers"]}
    found = []
    for b in farm.running_builds() or []:
        name = workers.get(b.get("workerid"))
        if name not in names:
            continue
        steps = (farm.api(f"builds/{b['buildid']}/steps") or {"steps": []})["steps"]
        if any(s["name"] == "bench" and s["started_at"] and not s["complete"] for s in steps):
            props = (farm.api(f"builds/{b['buildid']}/properties") or {"properties": [{}]})["properties"][0]
            found.append({"build": b["buildid"], "worker": name, "revision": (props.get("revision") or [None])[0]})
    return found


def run(opts: Options) -> Report:
    report = Report(options={k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(opts).items()})
    why = can_run()
    if why:
        report.errors.append(f"cannot run: {why}")
        return report
    say = (
        (lambda m: None) if opts.quiet else (lambda m: print(f"[{time.monotonic() - t_start:6.1f} s] {m}", flush=True))
    )
    t_start = time.monotonic()
    work = opts.work or Path(tempfile.mkdtemp(prefix="fleet-"))
    fleet = Fleet(opts.hosts)
    farm: FleetFarm | None = None
    try:
        fleet.create()
        workers = plan_workers(fleet, opts.workers)
        good = [w for w in workers if w.listed and not w.own_secret]
        for w in good:
            report.hosts.setdefault(w.host.name, []).append(w.name)
        builders = [BUILDER.format(w.name) for w in good]
        host_of = {BUILDER.format(w.name): w.host.name for w in good}
        repo = make_repo(work / "repo")
        farm = FleetFarm(
            work / "data",
            str(repo.path),
            fleet,
            workers,
            keepalive=opts.keepalive,
            reconcile_interval=2,
            # a production-like grace: a burst of 12 commits takes this loaded 2-core master's scheduler up to a
            # minute to queue on 16 builders, and the reconciler must not double what it is still queueing
            reconcile_grace=60,
            env={
                "PERFFARM_WORKERS_LOST_AFTER": str(opts.lost_after),
                "PERFFARM_RECIPES_OPTIONS": f"fixture:samples={opts.samples}",
            },
        )
        t0 = time.monotonic()
        farm.start()
        report.figures["start_seconds"] = round(time.monotonic() - t0, 1)
        say(f"fleet up: {len(good)} workers on {opts.hosts} hosts ({fleet.subnet}), first poll done")
        assert farm.master is not None
        cpu0 = farm.master_cpu_seconds()
        with Sampler(farm.master.pid) as rss:
            # ---------------------------------------------------------------- 1. throughput
            sleep_us = opts.bench_ms * 1000
            pushed = time.time()
            shas = [repo.bench_commit(f"fleet {i}", 1000 + i, sleep_us=sleep_us) for i in range(opts.commits)]
            cpu_push = farm.master_cpu_seconds()
            last = wait_measured(farm, shas, builders, opts.timeout)
            elapsed = last - pushed
            cpu_phase1 = farm.master_cpu_seconds() - cpu_push
            report.figures.update(
                throughput_commits=opts.commits,
                throughput_seconds=round(elapsed, 1),
                commits_per_minute=round(opts.commits / elapsed * 60, 2),
                runs_per_minute=round(opts.commits * len(builders) / elapsed * 60, 1),
                master_cpu_percent_throughput=round(100 * cpu_phase1 / elapsed, 1),
            )
            say(f"{opts.commits} commits x {len(builders)} workers in {elapsed:.1f} s")

            # ---------------------------------------------------------------- 2. lost host
            cut = fleet.hosts[-1]
            cut_names = {w.name for w in good if w.host == cut}
            more = [repo.bench_commit(f"cut {i}", 2000 + i, sleep_us=sleep_us) for i in range(opts.cut_commits)]
            shas += more
            running = wait_until(lambda: bench_running_on(farm, cut_names), 120, f"a bench step on {cut.name}", 0.2)
            t_cut = time.time()
            fleet.cut(cut)
            at_cut = stored_runs(farm)
            stored_at_cut = len(at_cut)
            say(f"cut {cut.name} ({', '.join(sorted(cut_names))}) while {running[0]['worker']} measured")
            wait_until(lambda: not (cut_names & farm.connected()), opts.lost_after * 6 + 60, "the master to drop them")
            noticed = time.time() - t_cut
            time.sleep(opts.outage)
            during = [r for r in stored_runs(farm)[stored_at_cut:] if host_of.get(r["builder"]) != cut.name]
            fleet.restore(cut)
            t_restore = time.time()
            say(f"master dropped {cut.name}'s workers after {noticed:.1f} s; link restored")
            wait_until(lambda: cut_names <= farm.connected(), 300, f"{cut.name}'s workers to reconnect", 0.5)
            reconnected = time.time() - t_restore
            # a build of a (commit, builder) stored before the cut (a repeated build) interrupts nothing
            done_at_cut = {(x["sha"], x["builder"]) for x in at_cut}
            interrupted = [
                (r["revision"], BUILDER.format(r["worker"]))
                for r in running
                if r["revision"] and (r["revision"], BUILDER.format(r["worker"])) not in done_at_cut
            ]

            def recovered() -> float | None:
                runs = stored_runs(farm)
                at = [
                    max((x["ingested_at"] for x in runs if (x["sha"], x["builder"]) == pair), default=None)
                    for pair in interrupted
                ]
                return max(a for a in at if a is not None) if at and all(a is not None for a in at) else None

            recovered_at = None
            if interrupted:
                recovered_at = wait_until(recovered, opts.timeout, "the interrupted commits to be stored", 0.5)
            wait_measured(farm, shas, builders, opts.timeout)
            report.interrupted = [{"commit": s, "builder": b} for s, b in interrupted]
            report.figures.update(
                lost_after_setting=opts.lost_after,
                lost_noticed_seconds=round(noticed, 1),
                outage_seconds=round(t_restore - t_cut, 1),
                reconnect_seconds=round(reconnected, 1),
                recovery_seconds=None if recovered_at is None else round(recovered_at - t_cut, 1),
                runs_stored_elsewhere_during_outage=len(during),
            )
            say(
                "the cut interrupted no unmeasured commit"
                if recovered_at is None
                else f"interrupted builds re-measured {recovered_at - t_cut:.1f} s after the cut"
            )
            time.sleep(3)  # a few reconcile passes: a duplicate would show up now
            cpu_total = farm.master_cpu_seconds() - cpu0
            wall_total = time.monotonic() - t0 - report.figures["start_seconds"]
        report.figures.update(
            master_rss_peak_mib=round(rss.peak_kb / 1024, 1),
            master_cpu_seconds=round(cpu_total, 1),
            master_cpu_percent=round(100 * cpu_total / wall_total, 1),
        )
        check(farm, report, shas, builders, host_of)
        report.figures["wall_seconds"] = round(time.monotonic() - t_start, 1)
    except Exception as e:  # the report says what failed; the caller decides
        report.errors.append(f"{type(e).__name__}: {e}")
    finally:
        if farm is not None:
            farm.stop()
        fleet.destroy()
        if opts.work is None and not report.errors:
            shutil.rmtree(work, ignore_errors=True)
        elif report.errors:
            report.errors.append(f"evidence kept in {work}")
    return report


def check(farm: FleetFarm, report: Report, shas: list[str], builders: list[str], host_of: dict[str, str]) -> None:
    """The invariants over every stored run, into `report`."""
    runs = stored_runs(farm)
    counts = automatic_counts(runs)
    report.missing = [f"{s[:12]} {b}" for s in shas for b in builders if counts[(s, b)] == 0]
    report.duplicates = [f"{s[:12]} {b} x{n}" for (s, b), n in counts.items() if n > 1]
    for i in report.interrupted:
        i["runs"] = counts[(i["commit"], i["builder"])]
    report.figures.update(
        workers=len(builders),
        hosts=len(set(host_of.values())),
        commits=len(shas),
        runs_expected=len(shas) * len(builders),
        runs_stored=len(runs),
        lost=len(report.missing),
        duplicates=len(report.duplicates),
        failed_runs=sum(r["status"] != "ok" for r in runs),
        requeued_runs=sum(r.get("source") == "requeue" for r in runs),
    )
    # builds, from Buildbot: a (commit, builder) built more than once is work the farm did twice (the interrupted
    # builds are retried by Buildbot itself, one each)
    builds = (farm.api("builds?property=revision") or {"builds": []})["builds"]
    per_pair = Counter((b["builderid"], ((b.get("properties") or {}).get("revision") or [None])[0]) for b in builds)
    report.figures.update(builds=len(builds), builds_repeated=sum(n - 1 for n in per_pair.values()))
    # the measurement lock, from the stored windows
    windows = []
    for r in runs:
        w = bench_window(r)
        if w is not None and r["builder"] in host_of:
            windows.append((f"{host_of[r['builder']]}:{r['builder']}:{r['sha'][:8]}", w))
    pairs = overlaps(windows)
    same = [(a, b, s) for a, b, s in pairs if a.split(":")[0] == b.split(":")[0]]
    cross = [(a, b, s) for a, b, s in pairs if a.split(":")[0] != b.split(":")[0]]
    report.same_host_overlaps = [{"a": a, "b": b, "seconds": round(s, 3)} for a, b, s in same]
    per_host: dict[str, float] = defaultdict(float)
    for label, (w0, w1) in windows:
        per_host[label.split(":")[0]] += w1 - w0
    report.figures.update(
        windows=len(windows),
        same_host_overlaps=len(same),
        cross_host_overlaps=len(cross),
        max_hosts_measuring_at_once=max_concurrency(windows),
        bench_seconds_per_host=", ".join(f"{h} {s:.0f}" for h, s in sorted(per_host.items())),
    )
    # fingerprints: one machine per host, no series mixing hosts
    hosts_of_machine: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        hosts_of_machine[r["machine_id"]].add(host_of.get(r["builder"], "?"))
    report.mixed_machines = {m: sorted(h) for m, h in hosts_of_machine.items() if len(h) > 1}
    machine_of_host = {h: sorted(m for m, hs in hosts_of_machine.items() if h in hs) for h in set(host_of.values())}
    series = farm.query(
        "SELECT machine_id, COUNT(*) FROM series WHERE workload = 'loop' AND metric = 'throughput' "
        "AND branch = 'master' GROUP BY machine_id"
    )
    report.figures.update(
        machine_ids=len(hosts_of_machine),
        machines_mixing_hosts=len(report.mixed_machines),
        hosts_with_one_machine=sum(len(m) == 1 for m in machine_of_host.values()),
        throughput_series=len(series),
    )
    # refused workers: stored, and on the health page
    report.refused = [
        {"name": n, "reason": r, "address": a, "attempts": k}
        for n, r, a, k in farm.query("SELECT name, reason, address, attempts FROM refused_logins ORDER BY name")
    ]
    page_path = farm.settings.site_dir / "health.html"
    page = page_path.read_text() if page_path.exists() else ""
    refused_section = page.split("<h2>Refused workers</h2>", 1)[-1].split("<h2>", 1)[0] if page else ""
    report.health_page = {
        "wrongpw": bool(re.search(r"<td>wrongpw</td><td[^>]*>wrong password", refused_section)),
        "stranger": bool(re.search(r"<td>stranger</td><td[^>]*>not in workers.names", refused_section)),
    }


def max_concurrency(windows: list[tuple[str, tuple[float, float]]]) -> int:
    """The most hosts measuring at one moment."""
    events = sorted(
        [(w[0], 1, label.split(":")[0]) for label, w in windows]
        + [(w[1], -1, label.split(":")[0]) for label, w in windows]
    )
    active: Counter = Counter()
    best = 0
    for _, delta, host in sorted(events, key=lambda e: (e[0], e[1])):
        active[host] += delta
        best = max(best, sum(1 for v in active.values() if v > 0))
    return best


ROWS = [
    ("workers / hosts", lambda f: f"{f['workers']} / {f['hosts']}"),
    (
        "commits (throughput phase + lost-host phase)",
        lambda f: f"{f['commits']} ({f['throughput_commits']} + {f['commits'] - f['throughput_commits']})",
    ),
    ("runs expected / stored", lambda f: f"{f['runs_expected']} / {f['runs_stored']}"),
    ("lost (commit x builder without a run)", lambda f: f["lost"]),
    ("duplicate runs", lambda f: f["duplicates"]),
    (
        "builds / of a (commit, builder) built before / runs stored by a re-queue",
        lambda f: f"{f['builds']} / {f['builds_repeated']} / {f['requeued_runs']}",
    ),
    ("throughput: commits fully measured per minute", lambda f: f["commits_per_minute"]),
    ("throughput: runs per minute", lambda f: f["runs_per_minute"]),
    ("throughput phase, push to last run", lambda f: f"{f['throughput_seconds']} s"),
    ("measurement windows: overlapping on one host", lambda f: f"{f['same_host_overlaps']} of {f['windows']} windows"),
    ("measurement windows: overlapping across hosts", lambda f: f["cross_host_overlaps"]),
    ("most hosts measuring at one moment", lambda f: f["max_hosts_measuring_at_once"]),
    (
        "machine ids / mixing hosts / throughput series",
        lambda f: f"{f['machine_ids']} / {f['machines_mixing_hosts']} / {f['throughput_series']}",
    ),
    (
        "lost host: master dropped its workers after",
        lambda f: f"{f['lost_noticed_seconds']} s (workers.lost_after = {f['lost_after_setting']})",
    ),
    ("lost host: link down for", lambda f: f"{f['outage_seconds']} s"),
    ("lost host: runs stored by other hosts meanwhile", lambda f: f["runs_stored_elsewhere_during_outage"]),
    ("lost host: workers back after the link", lambda f: f"{f['reconnect_seconds']} s"),
    ("lost host: cut to interrupted commits stored (recovery)", lambda f: f"{f['recovery_seconds']} s"),
    ("master RSS peak", lambda f: f"{f['master_rss_peak_mib']} MiB"),
    (
        "master CPU (whole scenario / throughput phase)",
        lambda f: (
            f"{f['master_cpu_seconds']} s, {f['master_cpu_percent']} % of a core"
            f" / {f['master_cpu_percent_throughput']} %"
        ),
    ),
    ("fleet start (provision, master, connect, first poll)", lambda f: f"{f['start_seconds']} s"),
    ("wall time", lambda f: f"{f['wall_seconds']} s"),
]


def print_report(report: Report) -> None:
    f = report.figures
    print()
    print("| figure | value |")
    print("|---|---|")
    for label, get in ROWS:
        try:
            value = get(f)
        except KeyError:
            value = "–"
        print(f"| {label} | {value} |")
    print()
    for host, names in sorted(report.hosts.items()):
        print(f"{host}: {', '.join(names)}")
    for i in report.interrupted:
        print(f"interrupted: {i['commit'][:12]} on {i['builder']}, {i.get('runs')} run(s) stored")
    for r in report.refused:
        print(f"refused: {r['name']} ({r['reason']}) from {r['address']}, {r['attempts']} attempts")
    print(f"on the health page: {report.health_page}")
    for o in report.same_host_overlaps:
        print(f"OVERLAP on one host: {o['a']} and {o['b']} by {o['seconds']} s")
    for m in report.missing:
        print(f"LOST: {m}")
    for d in report.duplicates:
        print(f"DUPLICATE: {d}")
    for m, hosts in report.mixed_machines.items():
        print(f"MACHINE {m} ON SEVERAL HOSTS: {hosts}")
    for e in report.errors:
        print(f"ERROR: {e}")


def failed(report: Report) -> bool:
    f = report.figures
    return bool(
        report.errors
        or f.get("lost")
        or f.get("duplicates")
        or f.get("same_host_overlaps")
        or not f.get("cross_host_overlaps")
        or report.mixed_machines
        or not all(report.health_page.values())
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--small", action="store_true", help="8 workers on 3 hosts, 1 + 2 commits, 400 ms samples (the make-test size)"
    )
    ap.add_argument("--hosts", type=int, help="hosts (network namespaces); default 4")
    ap.add_argument("--workers", type=int, help="workers, round-robin over the hosts; default 16")
    ap.add_argument("--commits", type=int, help="commits pushed at once for the throughput phase; default 12")
    ap.add_argument("--cut-commits", type=int, help="commits pushed before the link is cut; default 3")
    ap.add_argument("--bench-ms", type=int, help="milliseconds each of the 5 samples sleeps; default 150")
    ap.add_argument("--lost-after", type=int, help="workers.lost_after for this farm, seconds; default 10")
    ap.add_argument("--outage", type=float, help="seconds the link stays down after the master noticed; default 5")
    ap.add_argument("--timeout", type=float, help="seconds each phase may take before the run fails; default 1800")
    ap.add_argument("--json", type=Path, help="write the whole report here")
    ap.add_argument("--keep", type=Path, help="keep the repository and the farm's data dir here")
    args = ap.parse_args(argv)
    chosen = {
        k: v
        for k, v in {
            "hosts": args.hosts,
            "workers": args.workers,
            "commits": args.commits,
            "cut_commits": args.cut_commits,
            "bench_ms": args.bench_ms,
            "lost_after": args.lost_after,
            "outage": args.outage,
            "timeout": args.timeout,
            "work": args.keep,
        }.items()
        if v is not None
    }
    opts = Options.small(**chosen) if args.small else Options(**chosen)
    report = run(opts)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(dataclasses.asdict(report), indent=1, sort_keys=True, default=str))
    return 1 if failed(report) else 0


if __name__ == "__main__":
    sys.exit(main())
