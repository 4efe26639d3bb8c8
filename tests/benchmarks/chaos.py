"""Fault-and-hostile-input suite (issue #12): run a real farm while killing, locking, filling and breaking it.

    .venv/bin/python -m tests.benchmarks.chaos                      # 200 commits, 50 faults, seed 1
    .venv/bin/python -m tests.benchmarks.chaos --smoke              # 12 commits, one fault of each kind (<= 3 min)
    .venv/bin/python -m tests.benchmarks.chaos --commits 40 --faults 10 --seed 7 --kinds master,worker
    .venv/bin/python -m tests.benchmarks.chaos --jobs               # every job fault once (22), seed 1 and 2

A real Buildbot master and worker (tests/harness.py `Farm`, fixture recipe) watch a git repository the suite
pushes to in batches of 1-5 commits. Every commit's program prints a value unique to it (tests/chaos/truth.py),
so a stored run's samples say which commit really ran. At chosen points a fault hits (tests/chaos/faults.py):
SIGKILL/SIGTERM of the master or the worker (idle, during a bench step, right after a run is stored), the
results DB held by `BEGIN EXCLUSIVE` in another process (sometimes past sqlite's 30 s busy timeout), the data dir
(a tmpfs the suite mounts) filled to the last byte, the worker's clone broken, hostile commit text, refs and force
requests; jobs (release comparisons and try-jobs) hit in each phase of their run, their build requests cancelled
(tests/chaos/jobs.py). After each fault the farm is recovered the way an operator would (restart what was killed,
free the disk), allowed to settle (tests/chaos/settle.py) and the invariants are checked
(tests/chaos/invariants.py); new violations are attributed to that fault. The end prints the figures and every
violation with its evidence, and exits 1 when any invariant failed. Choice of faults is reproducible per seed;
timing on a shared machine is not.
Must run as root for the disk-full fault (it mounts a tmpfs); without root that kind is reported as skipped.
docs/reliability.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.alerts_support import HttpReceiver
from tests.chaos.faults import KINDS, Fault, Injection, Injector, kill_orphans, random_fault
from tests.chaos.invariants import Check, Figures, JobsView, Violation, check
from tests.chaos.jobs import JOB_KINDS, job_benches, live_jobs, read_jobs
from tests.chaos.jobs import combinations as job_combinations
from tests.chaos.settle import Settled, known_change, settle, wait_outbox
from tests.chaos.truth import Truth
from tests.harness import Farm, make_repo

BUILDER = "fixture@local"

# The smoke scenario: 12 commits, one fault of each kind, in an order where each still sees a working farm on a
# fixed build (the hostile commit text last: on a farm that chokes on it nothing after it would be measured). Its job
# fault is the cheapest (a cancelled request: no commit, nothing measured); `--jobs` runs them all.
SMOKE = (
    Fault("master", "kill", 2, sig="SIGKILL", window="stored"),
    Fault("worker", "kill", 2, sig="SIGTERM", window="bench"),
    Fault("clone", "stale-result", 1, window="idle"),
    Fault("db-lock", "exclusive", 2, seconds=31),
    Fault("disk-full", "ballast", 2, window="bench", seconds=3),
    # cheap: no commit, nothing measured; the job service must fail the job whose request was cancelled
    Fault("job", "cancel", 0, job="try"),
    Fault("hostile", "all", 3),
)


@dataclass(frozen=True)
class Options:
    commits: int = 200
    faults: int = 50
    seed: int = 1
    smoke: bool = False
    jobs: bool = False
    kinds: tuple[str, ...] = KINDS
    work: Path | None = None
    keep: bool = False
    json_out: Path | None = None
    tmpfs_size: str = "192m"
    no_tmpfs: bool = False
    settle_timeout: float = 240.0
    reconcile_interval: int = 1
    webhook: bool = True


@dataclass(frozen=True)
class Step:
    """Push `batch` commits; with a fault, the fault decides when (and pushes them itself)."""

    batch: int
    fault: Fault | None = None
    pause: float = 0.0  # seconds to wait after a plain push (lets a queue build up between faults)


@dataclass
class FaultRecord:
    index: int
    label: str
    kind: str
    skipped: str
    window_hit: bool | None
    notes: list[str]
    recoveries: list[str]
    pushed: int
    settle_seconds: float
    settled: bool
    stuck: str
    died: list[str]
    new_violations: list[dict]
    healed: list[str]
    error: str = ""


@dataclass
class Report:
    options: dict
    figures: dict = field(default_factory=dict)
    faults: list[FaultRecord] = field(default_factory=list)
    violations: list[dict] = field(default_factory=list)
    site_inconsistent_checks: int = 0
    checks: int = 0
    stuck: int = 0
    died: int = 0
    asked_restarts: int = 0  # the master exited for a restart (master/health.py) and was started as perffarm run does
    skipped: dict[str, str] = field(default_factory=dict)
    recoveries: dict[str, int] = field(default_factory=dict)
    wall_seconds: float = 0.0
    failed: bool = False
    work: str = ""


@dataclass
class Session:
    """What one run works with: the farm, the ground truth, the injector and what was seen so far."""

    opts: Options
    farm: Farm
    truth: Truth
    injector: Injector
    receiver: HttpReceiver | None
    report: Report
    say: Callable[[str], None]
    seen: dict[str, str] = field(default_factory=dict)  # violation key -> the fault after which it appeared
    open_keys: set[str] = field(default_factory=set)  # violations of the last check

    def check(self) -> Check:
        ledger = self.injector.jobs.ledger
        ledger.snapshot(self.farm)
        benches = job_benches(self.farm) if ledger.jobs else {}
        jobs = JobsView(ledger.jobs, read_jobs(self.farm), live_jobs(self.farm) or set(), benches)
        result = check(
            self.farm.settings.data_dir,
            self.farm.settings.site_dir,
            self.truth,
            [BUILDER],
            self.injector.markers,
            self.receiver,
            lambda sha: known_change(self.farm, sha),
            jobs,
        )
        self.report.checks += 1
        if any(v.kind == "site" for v in result.violations):
            self.report.site_inconsistent_checks += 1
        return result

    def count(self, recovery: str) -> None:
        self.report.recoveries[recovery] = self.report.recoveries.get(recovery, 0) + 1


# -------------------------------------------------------------------------------------------- plan
def plan(opts: Options, rng: random.Random) -> list[Step]:
    """The scenario: batches of 1-5 commits, `faults` of them carrying a fault (kinds round-robin in a shuffled
    order, so every kind is hit about equally often; variants drawn at random). Seeded: same seed, same plan."""
    if opts.smoke:
        return [Step(f.batch, f) for f in SMOKE]
    if opts.jobs:
        # every job fault once, a commit with each; the job kinds alternate (seed 2 swaps them: seeds 1 and 2
        # together hit every fault with both kinds); two plain commits first, a job's two sides
        return [Step(2)] + [
            Step(1, Fault("job", variant, 1, sig=sig, window=phase, job=JOB_KINDS[(i + opts.seed) % 2]))
            for i, (variant, sig, phase) in enumerate(job_combinations())
        ]
    sizes: list[int] = []
    while sum(sizes) < opts.commits:
        sizes.append(min(rng.randint(1, 5), opts.commits - sum(sizes)))
    while len(sizes) < opts.faults + 1:  # one plain batch first (the worker has a clone before any clone fault)
        i = max(range(len(sizes)), key=lambda j: sizes[j])
        if sizes[i] == 1:
            sizes.append(0)  # more faults than commits: some faults push nothing
            continue
        sizes[i : i + 1] = [sizes[i] // 2, sizes[i] - sizes[i] // 2]
    with_fault = set(rng.sample(range(1, len(sizes)), opts.faults)) if opts.faults else set()
    kinds: list[str] = []
    steps = []
    for i, n in enumerate(sizes):
        if i in with_fault:
            if not kinds:
                kinds = list(KINDS)  # all kinds, so --kinds leaves the others out without moving the rest
                rng.shuffle(kinds)
            steps.append(Step(n, random_fault(kinds.pop(), n, rng)))
        else:
            steps.append(Step(n, None, pause=round(rng.uniform(0, 4), 1)))
    return steps


# -------------------------------------------------------------------------------------------- the run
class Clock:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.t0:7.1f}s] {message}", flush=True)


def mount_tmpfs(path: Path, size: str) -> str:
    """Mount a tmpfs of `size` at `path`; "" on success, else why not (the disk-full fault is then skipped)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "not root: cannot mount a tmpfs for the data dir (run as root for the disk-full fault)"
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return f"mount -t tmpfs failed: {proc.stderr.strip() or proc.returncode}"
    return ""


def unmount(path: Path) -> None:
    for args in (["umount", str(path)], ["umount", "-l", str(path)]):
        if subprocess.run(args, capture_output=True, check=False).returncode == 0:
            return
        time.sleep(1)


def alert_config(work: Path) -> Path:
    """Alerts without the 300 s hold, delivered to the suite's webhook receiver (counts deliveries per key)."""
    path = work / "farm.toml"
    path.write_text(
        "[alerts]\nsettle_seconds = 0\npoll_interval = 1\n"
        '[[alerts.channels]]\nname = "hook"\nkind = "webhook"\nurl_secret = "alerts-hook-url"\n'
        'kinds = ["regression", "improvement"]\n'
    )
    return path


def run(opts: Options) -> Report:
    clock = Clock()
    say = clock.say
    work = Path(opts.work or tempfile.mkdtemp(prefix="perffarm-chaos-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report = Report(
        options={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()}, work=str(work)
    )
    rng_plan, rng_faults, rng_values = (random.Random(f"{opts.seed}/{p}") for p in ("plan", "faults", "values"))
    steps = plan(opts, rng_plan)
    kinds = Counter(s.fault.kind for s in steps if s.fault and s.fault.kind in opts.kinds)
    n_faults = sum(kinds.values())
    say(
        f"plan: {sum(s.batch for s in steps)} commits in {len(steps)} batches, {n_faults} faults "
        f"({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}); "
        f"seed {opts.seed}; work dir {work}"
    )

    for stale in ("repo", "markers"):
        shutil.rmtree(work / stale, ignore_errors=True)
    data = work / "data"
    tmpfs = "disabled with --no-tmpfs" if opts.no_tmpfs else mount_tmpfs(data, opts.tmpfs_size)
    mounted = not tmpfs
    if mounted:
        say(f"data dir {data} is a {opts.tmpfs_size} tmpfs")
    else:
        say(f"disk-full faults will be skipped: {tmpfs}")
        report.skipped["disk-full"] = tmpfs
    receiver = HttpReceiver().start() if opts.webhook else None
    repo = make_repo(work / "repo")
    env = {"PERFFARM_REPOSITORY_BRANCHES": ".*", "PERFFARM_REPOSITORY_TAGS": ".*"}  # every ref reaches the farm
    if receiver:
        env["PERFFARM_CONFIG"] = str(alert_config(work))
    farm = Farm(data, str(repo.path), reconcile_interval=opts.reconcile_interval, env=env)
    if receiver:
        secret = farm.settings.secrets_dir / "alerts-hook-url"
        secret.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        secret.write_text(receiver.url)
        secret.chmod(0o600)
    pgids: set[int] = set()
    truth = Truth(repo, rng_values)
    injector = Injector(farm, truth, rng_faults, work, BUILDER, tmpfs, say)
    ses = Session(opts, farm, truth, injector, receiver, report, say)
    try:
        farm.start()
        _note_pgids(farm, pgids)
        say("farm started (master, worker, first poll)")
        fault_no = 0
        for i, step in enumerate(steps, 1):
            if step.fault is None or step.fault.kind not in opts.kinds:
                truth.push(step.batch, i)
                say(f"step {i}/{len(steps)}: pushed {step.batch} commit(s) ({len(truth.master_commits())} so far)")
                time.sleep(step.pause)
                continue
            fault_no += 1
            report.faults.append(_one_fault(ses, fault_no, n_faults, i, step.fault))
            _note_pgids(farm, pgids)
        say("all steps done: final settle and check")
        final_settle = settle(farm, truth.repo.head(), opts.settle_timeout)
        _note_pgids(farm, pgids)
        wait_outbox(farm)
        final = ses.check()
        for v in final.violations:
            ses.seen.setdefault(v.key, "final check")
        report.figures = asdict(final.figures)
        report.violations = [dict(asdict(v), after=ses.seen[v.key]) for v in final.violations]
        if not final_settle.ok:
            report.stuck += 1
            report.violations.append(
                {
                    "kind": "stuck",
                    "key": "final-settle",
                    "detail": final_settle.detail,
                    "count": 1,
                    "after": "final check",
                }
            )
        say(f"final check: {_count_kinds(list(final.violations)) or 'invariants hold'}")
    except BaseException as e:
        say(f"ABORTED: {type(e).__name__}: {e}")
        report.violations.append(
            {"kind": "aborted", "key": "aborted", "detail": f"{type(e).__name__}: {e}", "count": 1, "after": "run"}
        )
        if isinstance(e, KeyboardInterrupt):
            raise
    finally:
        report.wall_seconds = time.monotonic() - clock.t0
        _evidence(farm, work)
        farm.stop()
        kill_orphans(pgids)
        if receiver:
            receiver.stop()
        if mounted:
            unmount(data)
    report.failed = bool(report.violations) or report.site_inconsistent_checks > 0 or report.stuck > 0
    if not report.failed and not opts.keep and opts.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _note_pgids(farm: Farm, pgids: set[int]) -> None:
    """Process groups of every master and worker started (start_new_session: pgid == pid), for the orphans."""
    for proc in (farm.master, farm.worker):
        if proc is not None:
            pgids.add(proc.pid)


def _one_fault(ses: Session, no: int, total: int, step: int, fault: Fault) -> FaultRecord:
    """Inject one fault, recover, settle, check; new violations are attributed to this fault."""
    farm, report, say = ses.farm, ses.report, ses.say
    label = f"fault {no}/{total} ({fault.label})"
    error = ""
    try:
        inj = ses.injector.inject(fault, step)
    except Exception as e:  # noqa: BLE001 -- a fault that could not complete is evidence; the farm is recovered below
        inj = Injection(fault)
        error = f"{type(e).__name__}: {e}"
    for r in inj.recoveries:
        ses.count(r)
    if inj.skipped:
        report.skipped[fault.kind] = inj.skipped
    settled = settle(farm, ses.truth.repo.head(), ses.opts.settle_timeout)
    stuck = ""
    if not settled.ok:
        # the farm did not recover by itself: restart both processes (counted, with the reason) and try again
        stuck = settled.detail
        report.stuck += 1
        say(f"  {label}: farm stuck ({settled.detail}); restarting master and worker")
        farm.stop_worker(signal.SIGTERM)
        farm.stop_master(signal.SIGTERM)
        try:
            farm.start_master()
            farm.start_worker()
        except (RuntimeError, TimeoutError) as e:
            error = (error + "; " if error else "") + f"restart after the stall failed: {e}"
        ses.count("restart after a stall")
        again = settle(farm, ses.truth.repo.head(), ses.opts.settle_timeout)
        settled = Settled(
            again.ok,
            settled.seconds + again.seconds,
            again.detail,
            again.unseen,
            settled.died + again.died,
            settled.restarted + again.restarted,
            settled.asked + again.asked,
        )
    report.died += len([d for d in settled.died if "exited by itself" in d])
    report.asked_restarts += len(settled.asked)
    for name in settled.restarted:
        ses.count(f"{name} restarted after exiting by itself")
    wait_outbox(farm)
    result = ses.check()
    now_keys = {v.key for v in result.violations}
    new = [v for v in result.violations if v.key not in ses.seen]
    for v in new:
        ses.seen[v.key] = f"fault {no} ({fault.label})"
    healed = sorted(ses.open_keys - now_keys)
    ses.open_keys = now_keys
    record = FaultRecord(
        index=no,
        label=fault.label,
        kind=fault.kind,
        skipped=inj.skipped,
        window_hit=inj.window_hit,
        notes=inj.notes,
        recoveries=inj.recoveries,
        pushed=len(inj.pushed),
        settle_seconds=round(settled.seconds, 1),
        settled=settled.ok,
        stuck=stuck,
        died=settled.died,
        new_violations=[asdict(v) for v in new],
        healed=healed,
        error=error,
    )
    hit = {True: "window hit", False: "window MISSED", None: ""}[inj.window_hit]
    what = ", ".join(
        p
        for p in (
            f"skipped: {inj.skipped}" if inj.skipped else "",
            hit,
            "; ".join(inj.recoveries),
            f"ERROR {error}" if error else "",
        )
        if p
    )
    verdict = (
        "invariants hold"
        if not result.violations
        else (f"NEW: {_count_kinds(new)}" if new else f"still: {_count_kinds(list(result.violations))}")
    )
    say(
        f"{label}, {len(inj.pushed)} commit(s): {what or 'done'}; settled in {settled.seconds:.1f} s"
        f"{'' if settled.ok else ' (NOT settled)'}; {verdict}" + (f"; healed {len(healed)}" if healed else "")
    )
    for d in settled.died + settled.asked:
        say(f"  {d.splitlines()[0]}")
    if settled.unseen:
        say(f"  the poller never reported {settled.unseen[:12]}, the newest commit pushed")
        record.notes.append(f"the poller never reported {settled.unseen}, the newest commit pushed")
    return record


def _count_kinds(violations: list[Violation]) -> str:
    counts = Counter(v.kind for v in violations)
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def _evidence(farm: Farm, work: Path) -> None:
    """Copy the farm's logs, results DB and reconcile report out of the data dir (a tmpfs that goes away)."""
    out = work / "evidence"
    out.mkdir(parents=True, exist_ok=True)
    for src in (
        farm.settings.master_dir / "twistd.log",
        farm.settings.worker_dir("local") / "twistd.log",
        farm.settings.results_db,
        farm.settings.data_dir / "reconcile.json",
    ):
        if src.exists():
            name = f"{src.parent.name}-{src.name}" if src.name == "twistd.log" else src.name
            try:
                shutil.copy2(src, out / name)
            except OSError:
                pass


# -------------------------------------------------------------------------------------------- output
def table(report: Report) -> str:
    f = Figures(**report.figures) if report.figures else None
    faults = Counter(r.kind for r in report.faults if not r.skipped)
    variants = Counter(r.label for r in report.faults if not r.skipped)
    windows = [r.window_hit for r in report.faults if r.window_hit is not None]
    settles = [r.settle_seconds for r in report.faults]
    rows = []
    if f:
        rows += [
            ("commits pushed (to the watched branch)", f.pushed),
            ("commits with exactly one stored result", f.exactly_one),
            ("commits lost (given up / silently missing)", f"{f.lost} ({f.gave_up} / {f.lost - f.gave_up})"),
            ("duplicate runs", f.duplicate_runs),
            ("results stored under the wrong commit", f.misattributed),
            ("runs stored as failed because of a fault", f.failed_runs),
            ("alerts duplicated", f.alerts_duplicated),
            (
                "site left inconsistent (checks / final problems)",
                f"{report.site_inconsistent_checks} of {report.checks} / {f.site_problems}",
            ),
            ("hostile input that ran or was built", f.hostile_ran),
        ]
        if f.jobs:
            rows += [
                ("jobs queued (releases and try-jobs)", f.jobs),
                ("jobs that ended right (done, or failed when cancelled)", f.jobs_ended_right),
                ("jobs lost (queued or submitted, never ended)", f.jobs_lost),
                ("jobs duplicated (measured again / result replaced)", f.jobs_duplicated),
                ("jobs hung (running with no build)", f.jobs_hung),
                ("jobs failed because of a fault", f.jobs_failed),
                ("jobs with a side's samples not its program's", f.jobs_misattributed),
            ]
    rows += [
        ("farm stuck (needed a restart to settle)", report.stuck),
        ("processes that exited by themselves", report.died),
        ("master restarts it asked for (Buildbot's DB unwritable)", report.asked_restarts),
        ("faults injected", f"{sum(faults.values())}: " + ", ".join(f"{k} {n}" for k, n in sorted(faults.items()))),
        ("  by variant", "; ".join(f"{k} {n}" for k, n in sorted(variants.items()))),
        ("faults skipped", "; ".join(f"{k}: {why}" for k, why in sorted(report.skipped.items())) or "none"),
        ("kill windows hit", f"{sum(windows)} of {len(windows)}"),
        ("recoveries", ", ".join(f"{k} {n}" for k, n in sorted(report.recoveries.items())) or "none"),
        (
            "settle time per fault (median / max)",
            f"{statistics.median(settles):.1f} s / {max(settles):.1f} s" if settles else "-",
        ),
        ("wall time", f"{report.wall_seconds / 60:.1f} min"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"| {name:<{width}} | {value} |" for name, value in rows)


def print_report(report: Report) -> None:
    print()
    print(table(report))
    print()
    with_new = [r for r in report.faults if r.new_violations]
    if with_new:
        print("violations, by the fault after which they appeared (evidence):")
    for r in with_new:
        print(f"  fault {r.index} ({r.label}), {r.pushed} commit(s) pushed with it:")
        for note in r.notes:
            print(f"      note: {note.encode('unicode_escape').decode('ascii')[:300]}")
        for v in r.new_violations:
            print(f"    -> {v['kind']}: {v['detail']}")
    final_only = [v for v in report.violations if v["after"] in ("final check", "run")]
    for v in final_only:
        print(f"  {v['after']} -> {v['kind']}: {v['detail']}")
    for r in report.faults:
        if r.died or r.stuck or r.error:
            print(
                f"  fault {r.index} ({r.label}): "
                + "; ".join(
                    x
                    for x in ([r.error] if r.error else [])
                    + ([f"stuck: {r.stuck}"] if r.stuck else [])
                    + [d for d in r.died]
                    if x
                )
            )
    print(
        f"\n{'FAILED' if report.failed else 'PASSED'}: "
        f"{len(report.violations)} violation(s) at the end, {report.site_inconsistent_checks} check(s) with an "
        f"inconsistent site, {report.stuck} stall(s). Work dir: {report.work}"
    )


def parse_args(argv: list[str] | None) -> Options:
    p = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.chaos",
        description="Run a real farm (fixture recipe) through kills, a locked results DB, a full disk, a broken "
        "worker clone and hostile commits and refs; check after every fault that no commit was lost, "
        "measured twice or stored under another commit, that no alert was duplicated and the site is "
        "consistent. Exits 1 when an invariant failed. See docs/reliability.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--commits",
        type=int,
        default=200,
        help="commits to push to the watched branch, in batches of 1-5 (ignored with --smoke)",
    )
    p.add_argument(
        "--faults", type=int, default=50, help="faults to inject between and during the pushes (ignored with --smoke)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the plan (which faults, where, which variants) and "
        "of the commits' values; the same seed gives the same plan",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="the fixed small scenario `make test` runs: 12 commits, one fault of each kind "
        "(master SIGKILL after a store, worker SIGTERM in bench, broken clone with a stale result, "
        "DB locked 32 s, disk full, a try-job's build request cancelled, hostile commits, refs and force)",
    )
    p.add_argument(
        "--jobs",
        action="store_true",
        help="the job scenario: every job fault once (a kill of the master or the worker with SIGKILL and SIGTERM "
        "in each phase of a job, a cancelled build request, a job left unsubmitted), release and try jobs "
        "alternating (seed 2 swaps them); --commits and --faults are ignored",
    )
    p.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"comma-separated fault kinds to inject (of {', '.join(KINDS)}); faults of other kinds in "
        "the plan are left out, so the same seed gives the same places for the rest",
    )
    p.add_argument(
        "--json",
        dest="json_out",
        type=Path,
        help="also write the report (figures, every fault with its notes and new violations) as JSON to this file",
    )
    p.add_argument(
        "--work",
        type=Path,
        help="work directory (repository, data dir mount point, markers, "
        "evidence); default: a new temp dir, removed after a clean run",
    )
    p.add_argument("--keep", action="store_true", help="keep the temp work directory after a clean run")
    p.add_argument(
        "--tmpfs-size",
        default="192m",
        help="size of the tmpfs mounted as the farm's data dir (what the disk-full fault fills)",
    )
    p.add_argument(
        "--no-tmpfs",
        action="store_true",
        help="do not mount a tmpfs (disk-full faults are skipped, and reported as skipped)",
    )
    p.add_argument(
        "--settle-timeout",
        type=float,
        default=240.0,
        help="seconds to wait for the farm to settle after a fault before calling it stuck",
    )
    p.add_argument(
        "--reconcile-interval",
        type=int,
        default=1,
        help="the farm's master.reconcile_interval (s): the reconciler re-queues on its second pass",
    )
    p.add_argument(
        "--no-webhook",
        action="store_true",
        help="no alert channel (the webhook receiver counts deliveries per idempotency key)",
    )
    a = p.parse_args(argv)
    kinds = tuple(k.strip() for k in a.kinds.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        p.error(f"--kinds: unknown {', '.join(unknown)} (known: {', '.join(KINDS)})")
    if a.commits < 1 or a.faults < 0:
        p.error("--commits must be >= 1 and --faults >= 0")
    return Options(
        commits=a.commits,
        faults=a.faults,
        seed=a.seed,
        smoke=a.smoke,
        jobs=a.jobs,
        kinds=kinds,
        work=a.work,
        keep=a.keep,
        json_out=a.json_out,
        tmpfs_size=a.tmpfs_size,
        no_tmpfs=a.no_tmpfs,
        settle_timeout=a.settle_timeout,
        reconcile_interval=a.reconcile_interval,
        webhook=not a.no_webhook,
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    report = run(opts)
    print_report(report)
    if opts.json_out:
        opts.json_out.write_text(json.dumps(asdict(report), indent=1, sort_keys=True, default=str))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
