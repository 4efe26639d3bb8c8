"""Job faults (issue #26): release comparisons and try-jobs hit in every phase of their run.

A job fault queues one job (`releases`: two master commits as sides A and B; `try`: a master commit and the same
commit with a patch that makes its program print a value of its own) and then, in the phase chosen, kills the
master or the worker (SIGKILL or SIGTERM) and starts it again:

    queued       right after the job is written to the results DB, before the job service takes it
    check-job    the build's first step (on the master) is running: Buildbot's DB is polled every 10 ms
    job-build    the sides are being built on the worker (REST API)
    job-bench    the sides are being measured (REST API)
    ingest-job   the job's result was just stored and its build is still in ingest-job (the results DB is polled
                 every 10 ms; Buildbot's DB tells whether the build had finished)

Two more variants: `cancel` (the job's build request is cancelled, as the web UI's Cancel button does, while it
waits for the worker, paused for that: the job must fail, saying why) and `unsubmitted` (the state a master
stopped between marking a job running and submitting its build leaves: written with the master down, then the
master started).

`JobLedger` remembers every job the suite queued, what its sides' programs print, and how each job first ended
(the snapshot taken right after every kill too); `tests/chaos/invariants.py` `check_jobs` holds it against the farm:
no job lost (queued or submitted but never ended), none duplicated (measured again after it ended, or its stored
result replaced), none hung (running with no build after the farm settled), none failed because of a fault, and
every side's samples its own program's.
"""

from __future__ import annotations

import difflib
import hashlib
import random
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import requests

from master import store
from master.jobs import core
from tests.harness import BENCH_C, Farm, wait_until

JOB_BUILDER = "jobs-fixture@local"
WORKER = "local"
PHASES = ("queued", "check-job", "job-build", "job-bench", "ingest-job")
TARGETS = ("master", "worker")
JOB_KINDS = ("releases", "try")
OTHER_VARIANTS = ("cancel", "unsubmitted")
CANCEL_REASON = "chaos: cancelled on purpose"
PATCHED_BASE = 5000.0  # a try-job's patched program prints PATCHED_BASE + its number: no commit prints that


def combinations() -> list[tuple[str, str, str]]:
    """Every job fault as (variant, signal, phase): a kill of each target with each signal in each phase, then the
    cancel and the unsubmitted job."""
    return [(t, s, p) for t in TARGETS for s in ("SIGKILL", "SIGTERM") for p in PHASES] + [
        (v, "", "") for v in OTHER_VARIANTS
    ]


@dataclass
class ExpectedJob:
    """A job the suite queued: what each side's program prints, and how the job first ended."""

    id: int
    kind: str
    values: dict[str, float]  # side label -> the value its program prints
    fault: str
    cancelled: bool = False  # its build request was cancelled on purpose: it must fail, saying why
    first_end: tuple | None = None  # (state, build_id, finished_at, digest of the result, error) when first ended


@dataclass
class JobRow:
    id: int
    state: str
    build_id: int | None
    finished_at: float | None
    result: str | None
    error: str | None
    updated_at: float

    def end(self) -> tuple:
        digest = hashlib.sha256(self.result.encode()).hexdigest()[:16] if self.result else None
        return (self.state, self.build_id, self.finished_at, digest, self.error)


def read_jobs(farm: Farm) -> dict[int, JobRow]:
    """Every job row (read-only; only columns every schema since jobs has)."""
    db = farm.settings.results_db
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
    try:
        rows = conn.execute(
            "SELECT id, state, build_id, finished_at, result, error, updated_at FROM jobs ORDER BY id"
        ).fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()
    return {r[0]: JobRow(*r) for r in rows}


@dataclass
class JobLedger:
    jobs: dict[int, ExpectedJob] = field(default_factory=dict)
    n: int = 0

    def snapshot(self, farm: Farm) -> None:
        """Note how each job ended the first time it is seen ended (right after a kill, and at every check)."""
        rows = read_jobs(farm)
        for job in self.jobs.values():
            row = rows.get(job.id)
            if job.first_end is None and row is not None and row.state in ("done", "failed"):
                job.first_end = row.end()


class JobFaults:
    """Queues jobs and hits them; `truth` gives the commits and their values."""

    def __init__(self, farm: Farm, truth, rng: random.Random, say: Callable[[str], None]) -> None:
        self.farm = farm
        self.truth = truth
        self.rng = rng
        self.say = say
        self.ledger = JobLedger()

    # ---------------------------------------------------------------------------------------- queueing
    def queue(self, kind: str, fault: str) -> ExpectedJob:
        """Queue a job the way `perffarm releases` / the try form's step do (master/jobs/core.py), on two commits
        of master the farm has seen (the newest two; the try-job's base is the newest)."""
        self.ledger.n += 1
        n = self.ledger.n
        chain = set(self.truth.first_parent_chain())
        commits = [c for c in self.truth.commits.values() if c.on_master and c.sha in chain]  # the first one too
        a, b = (commits[-2], commits[-1]) if len(commits) >= 2 else (commits[-1], commits[-1])
        conn = store.connect(self.farm.settings.results_db)
        try:
            if kind == "releases":
                tags = {f"CHAOS_{n}_1": a.sha, f"CHAOS_{n}_2": b.sha}
                job_id = core.create_releases(conn, tags, [f"CHAOS_{n}_*"], JOB_BUILDER, [JOB_BUILDER])
                values = {"A": a.value, "B": b.value}
            else:
                patched = PATCHED_BASE + n
                patch = self._patch(b.sha, patched)
                # the patch applies (made from the base's own file); the form's `git apply --check` in the
                # master's mirror is tested in tests/integration/test_try.py
                job_id = core.create_try(
                    conn, "master", b.sha, patch, lambda _sha, _patch: None, JOB_BUILDER, [JOB_BUILDER]
                )
                values = {"A": b.value, "B": patched}
        finally:
            conn.close()
        job = ExpectedJob(job_id, kind, values, fault)
        self.ledger.jobs[job_id] = job
        return job

    def _patch(self, sha: str, value: float) -> str:
        old = self.truth.repo.git("show", f"{sha}:perffarm_bench.c") + "\n"
        from tests.chaos.truth import SLEEP_US

        new = BENCH_C.format(value=f"{value:.3f}", sleep_us=SLEEP_US)
        diff = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), "a/perffarm_bench.c", "b/perffarm_bench.c"
        )
        return "".join(diff)

    # ---------------------------------------------------------------------------------------- the fault
    def inject(self, inj, push: Callable[[int], object]) -> None:
        """Perform job fault `inj.fault` (variant, sig, window = phase, job = kind); `push(n)` pushes commits."""
        f = inj.fault
        if f.variant == "cancel":
            self._cancel(inj, push)
            return
        if f.variant == "unsubmitted":
            self._unsubmitted(inj, push)
            return
        push(f.batch)
        self._wait_seen()
        sig = signal.SIGKILL if f.sig == "SIGKILL" else signal.SIGTERM
        stop = self.farm.stop_master if f.variant == "master" else self.farm.stop_worker
        if f.window == "ingest-job":
            job = self.queue(f.job, f.label)
            build_id = self._wait_job_stored(job.id)
            running = build_id is not None and not self.farm.build_complete_in_db(build_id)
            stop(sig)
            if build_id is None:
                inj.window_hit = False
                inj.notes.append(f"job {job.id} was not stored within 300 s")
            else:
                # SIGKILL: the build is unfinished in Buildbot's DB after the kill; SIGTERM lets the master finish
                # it on the way down, so: it was unfinished when the signal was sent
                inj.window_hit = not self.farm.build_complete_in_db(build_id) if sig == signal.SIGKILL else running
                inj.notes.append(
                    f"killed after job {job.id} was stored by build {build_id}; the build was "
                    f"{'still running' if inj.window_hit else 'already finished'}"
                )
        elif f.window == "queued":
            job = self.queue(f.job, f.label)
            state = read_jobs(self.farm)[job.id].state
            stop(sig)
            inj.window_hit = state == "queued"
            inj.notes.append(f"job {job.id} was {state} when the {f.variant} was stopped")
        else:
            job = self.queue(f.job, f.label)
            inj.window_hit = self._wait_step(f.window, inj)
            stop(sig)
            inj.notes.append(f"job {job.id}: {f.window} {'was running' if inj.window_hit else 'not seen'}")
        self.ledger.snapshot(self.farm)
        if f.variant == "master":
            self.farm.start_master()
            self.farm.wait_worker_connected()
        else:
            self.farm.start_worker()
        inj.recoveries.append(f"{f.variant} restarted")

    def _wait_seen(self, timeout: float = 30) -> None:
        """Until the poller has seen the newest commit (a job's sides must be commits of the master's mirror)."""
        head = self.truth.repo.head()
        try:
            wait_until(lambda: (self.farm.api(f"changes?revision={head}") or {}).get("changes"), timeout, "the poll")
        except TimeoutError:
            pass

    def _wait_job_stored(self, job_id: int, timeout: float = 300) -> int | None:
        """Poll the results DB every 10 ms until the job has ended; its build id, or None."""
        db = self.farm.settings.results_db
        deadline = time.monotonic() + timeout
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            while time.monotonic() < deadline:
                try:
                    row = conn.execute("SELECT state, build_id FROM jobs WHERE id = ?", (job_id,)).fetchone()
                    if row and row[0] in ("done", "failed"):
                        return row[1]
                except sqlite3.Error:
                    pass
                time.sleep(0.01)
        finally:
            conn.close()
        return None

    def _wait_step(self, name: str, inj, timeout: float = 300) -> bool:
        """Until a job build's step `name` has started and not finished, read from Buildbot's own DB every 10 ms
        (check-job lasts a fraction of a second: the REST API is too slow to see it); False after `timeout`."""
        sql = (
            "SELECT s.id FROM steps s JOIN builds b ON b.id = s.buildid JOIN builders r ON r.id = b.builderid "
            "WHERE r.name = :builder AND s.name = :step AND s.started_at IS NOT NULL AND s.complete_at IS NULL"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.farm.buildbot_db_query(sql, {"builder": JOB_BUILDER, "step": name}):
                if name != "check-job":
                    time.sleep(self.rng.uniform(0, 0.3))  # somewhere inside the step
                return True
            time.sleep(0.01)
        inj.notes.append(f"no {name} step seen within {timeout:.0f} s")
        return False

    def _cancel(self, inj, push: Callable[[int], object]) -> None:
        """Cancel the job's build request while it waits, as Buildbot's Cancel button does. The worker is paused
        meanwhile (Buildbot's Pause: it takes no new build), so the request waits for sure."""
        f = inj.fault
        push(f.batch)
        self._wait_seen()
        try:
            wait_until(
                lambda: self.farm.pending_requests() == [] and self.farm.running_builds() == [], 120, "an idle farm"
            )
        except TimeoutError:
            inj.notes.append("the farm was not idle within 120 s")
        self._control(f"workers/{WORKER}", "pause")
        try:
            job = self.queue(f.job, f.label)
            job.cancelled = True
            try:
                brid = wait_until(lambda: self._request_of(job.id), 60, "the job's build request", interval=0.2)
            except TimeoutError:
                inj.window_hit = False
                inj.notes.append(f"job {job.id}: no build request seen within 60 s")
                return
            claimed = self.farm.api(f"buildrequests/{brid}")
            was_claimed = bool(claimed and claimed["buildrequests"] and claimed["buildrequests"][0].get("claimed"))
            status = self._control(f"buildrequests/{brid}", "cancel", reason=CANCEL_REASON)
            inj.window_hit = not was_claimed and status == 200
            inj.notes.append(
                f"job {job.id}: cancelled its build request {brid} ({'claimed' if was_claimed else 'waiting'}): "
                f"HTTP {status}"
            )
        finally:
            self._control(f"workers/{WORKER}", "unpause")
        inj.recoveries.append("worker paused and unpaused")

    def _control(self, path: str, method: str, **params: str) -> int:
        """A control call of Buildbot's REST API (JSON-RPC), as its web UI makes; the HTTP status."""
        r = requests.post(
            f"http://127.0.0.1:{self.farm.settings.web_port}/api/v2/{path}",
            json={"jsonrpc": "2.0", "method": method, "id": 1, "params": params},
            timeout=10,
        )
        return r.status_code

    def _request_of(self, job_id: int) -> int | None:
        """The unfinished build request of a job, if Buildbot has one."""
        for req in self.farm.pending_requests() or []:
            props = self.farm.api(f"buildsets/{req['buildsetid']}/properties") or {}
            value = (props.get("properties") or [{}])[0].get("perffarm_job")
            if value and int(value[0]) == job_id:
                return req["buildrequestid"]
        return None

    def _unsubmitted(self, inj, push: Callable[[int], object]) -> None:
        """The state a master stopped between marking a job running and submitting its build leaves: with the
        master down, the job is queued and marked running (what the job service does just before it submits),
        then the master is started."""
        f = inj.fault
        push(f.batch)
        self._wait_seen()
        self.farm.stop_master(signal.SIGTERM)
        job = self.queue(f.job, f.label)
        conn = store.connect(self.farm.settings.results_db)
        try:
            with store.transaction(conn):
                inj.window_hit = store.jobs.mark_running(conn, job.id, time.time())
        finally:
            conn.close()
        inj.notes.append(f"job {job.id} marked running with no build request, the master down")
        self.farm.start_master()
        self.farm.wait_worker_connected()
        inj.recoveries.append("master restarted")


def live_jobs(farm: Farm) -> set[int] | None:
    """Jobs with an unfinished build request (REST API); None when the API does not answer."""
    pending = farm.pending_requests()
    if pending is None:
        return None
    out = set()
    for req in pending:
        props = farm.api(f"buildsets/{req['buildsetid']}/properties") or {}
        value = (props.get("properties") or [{}])[0].get("perffarm_job")
        if value:
            out.add(int(value[0]))
    return out


def job_benches(farm: Farm) -> dict[int, list[tuple[int, float]]]:
    """Per job, its builds whose job-bench step finished with success: (build id, when the step started)."""
    data = farm.api(f"builders/{JOB_BUILDER}")
    if not data or not data["builders"]:
        return {}
    builderid = data["builders"][0]["builderid"]
    builds = (farm.api(f"builders/{builderid}/builds?property=perffarm_job") or {"builds": []})["builds"]
    out: dict[int, list[tuple[int, float]]] = {}
    for b in builds:
        value = (b.get("properties") or {}).get("perffarm_job")
        if not value:
            continue
        steps = (farm.api(f"builds/{b['buildid']}/steps") or {"steps": []})["steps"]
        for s in steps:
            if s["name"] == "job-bench" and s["results"] == 0 and s["started_at"]:
                out.setdefault(int(value[0]), []).append((b["buildid"], float(s["started_at"])))
    return out
