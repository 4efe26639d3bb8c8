"""Wait until the farm has recovered from a fault: processes up, the push seen, the queue drained, no job queued or
just started, and the reconciler given time to re-queue what was lost (it re-queues a commit on its second pass
without a result).

The invariants are only meaningful once this holds: a commit that has no run while its build is still queued
is not lost yet.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field

from master import launcher
from master.health import RESTART_STATUS
from tests.chaos.jobs import read_jobs
from tests.harness import Farm, wait_until

QUIET_PASSES = 3  # reconcile passes with nothing queued, running or re-queued before the farm counts as settled
# A job running with no build for this long is not waited for: the invariants report it as hung (the job service
# fails or re-queues such a job after master.reconcile_grace and two of its 5 s passes).
JOB_STALE = 60
POLL_SEEN_TIMEOUT = 30  # seconds for the poller (polling every second) to turn the newest push into a change


@dataclass
class Settled:
    """How settling went: `ok` False means the farm did not get there within the time allowed."""

    ok: bool
    seconds: float
    detail: str = ""
    unseen: str = ""  # the newest commit pushed, when the poller never made a change of it (evidence, not a stall)
    died: list[str] = field(default_factory=list)  # processes that had exited without the suite killing them
    restarted: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)  # master restarts its StorageWatch asked for, as perffarm run does


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


def ensure_running(farm: Farm, out: Settled) -> bool:
    """Start the master or worker again if it exited by itself (recorded, with the log tail as evidence)."""
    alive = farm.alive()
    for name in ("master", "worker"):
        if alive[name]:
            continue
        rc = (farm.master if name == "master" else farm.worker).returncode
        log = farm.master_log() if name == "master" else _worker_log(farm)
        if name == "master" and rc == RESTART_STATUS:
            # master/health.py: Buildbot's DB could not be written; do what `perffarm run` does
            out.asked.append(f"master asked for a restart (status {rc}); last log lines:\n{_tail(log, 5)}")
            launcher.wait_for_room(farm.settings.master_dir, timeout=120)
        else:
            out.died.append(f"{name} exited by itself (status {rc}); last log lines:\n{_tail(log)}")
        for attempt in range(2):
            try:
                if name == "master":
                    farm.start_master()
                else:
                    farm.start_worker()
                out.restarted.append(name)
                break
            except (RuntimeError, TimeoutError) as e:
                out.died.append(f"{name} did not start again (attempt {attempt + 1}): {e}")
                time.sleep(5)
        else:
            return False
    return True


def _worker_log(farm: Farm) -> str:
    path = farm.settings.worker_dir("local") / "twistd.log"
    return path.read_text(errors="replace") if path.exists() else ""


def settle(farm: Farm, newest_sha: str | None, timeout: float) -> Settled:
    """Wait until the farm is quiet (see the module docstring); `newest_sha` is the last commit pushed to master."""
    start = time.monotonic()
    out = Settled(ok=False, seconds=0.0)
    deadline = start + timeout

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    try:
        if not ensure_running(farm, out):
            out.detail = "a process could not be started again"
            return out
        farm.wait_worker_connected(timeout=min(90, left()))
        if newest_sha:
            try:
                wait_until(lambda: _known(farm, newest_sha), min(POLL_SEEN_TIMEOUT, left()), "the poller")
            except TimeoutError:
                # not a stall of the farm as a whole: the invariants report what the poller never saw
                out.unseen = newest_sha
        _wait_quiet(farm, deadline)
        out.ok = True
    except TimeoutError as e:
        out.detail = str(e)
        if not all(farm.alive().values()):
            ensure_running(farm, out)
    finally:
        out.seconds = time.monotonic() - start
    return out


def known_change(farm: Farm, sha: str) -> bool:
    """Whether Buildbot has a change for commit `sha` (what the reconciler can re-queue from)."""
    return _known(farm, sha)


def _known(farm: Farm, sha: str) -> bool:
    data = farm.api(f"changes?revision={sha}")
    return bool(data and data["changes"])


def _wait_quiet(farm: Farm, deadline: float) -> None:
    """Idle (no request waiting or running) through QUIET_PASSES reconcile passes that re-queued nothing."""
    idle_since: float | None = None
    passes: set[float] = set()
    while True:
        if time.monotonic() > deadline:
            pending = farm.pending_requests()
            raise TimeoutError(
                f"the farm did not settle: {len(pending) if pending is not None else '?'} build "
                f"request(s) unfinished, {len(passes)} quiet reconcile pass(es)"
            )
        pending, running = farm.pending_requests(), farm.running_builds()
        busy = pending is None or running is None or pending or running or _jobs_busy(farm)
        if busy or not all(farm.alive().values()):
            idle_since, passes = None, set()
            if not all(farm.alive().values()):
                raise TimeoutError("a farm process exited while settling")
        else:
            now = time.time()
            idle_since = idle_since or now
            report = farm.reconcile_report() or {}
            at = report.get("at", 0)
            if report.get("requeued"):
                idle_since, passes = None, set()
            elif at > idle_since:
                passes.add(at)
            if len(passes) >= QUIET_PASSES:
                return
        time.sleep(0.3)


def _jobs_busy(farm: Farm) -> bool:
    """A job is queued, or running and touched in the last JOB_STALE seconds (its build may still be submitted)."""
    now = time.time()
    jobs = read_jobs(farm).values()
    return any(j.state == "queued" or (j.state == "running" and now - j.updated_at < JOB_STALE) for j in jobs)


def wait_outbox(farm: Farm, timeout: float = 20) -> bool:
    """Until no alert message is due and unsent (messages held for `settle_seconds` are not due yet)."""

    def drained() -> bool:
        try:
            rows = farm.query(
                "SELECT COUNT(*) FROM alert_outbox WHERE state = 'pending' AND available_at <= ?", (time.time(),)
            )
        except sqlite3.Error:
            return False
        return rows[0][0] == 0

    try:
        wait_until(drained, timeout, "the alert outbox to drain", interval=0.5)
    except TimeoutError:
        return False
    return True
