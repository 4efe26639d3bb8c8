"""Fault injectors: each pushes its batch of commits around one fault and undoes what it broke.

A fault is data (`Fault`: kind, variant, signal, window, seconds); `Injector.inject` performs it against a running
`Farm` and returns an `Injection` saying what happened (window hit or missed, skipped and why, what was restarted).
Recovery here is only what an operator would do for that fault — restart the process that was killed, free the
disk, end the lock, nothing else; waiting for the farm to settle and checking the invariants is the caller's job.

Windows (when a kill lands): `idle` (nothing building; commits are pushed while the process is down), `bench` (a
build's bench step is running, found through the REST API), `stored` (a run was just stored and its build has not
finished: the ingest step is still in detection, alerts, site), `random` (a random delay after the push). Job
faults (a job queued, then hit in one phase of its run) are in tests/chaos/jobs.py.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tests.chaos.jobs import JOB_KINDS, JobFaults
from tests.chaos.jobs import combinations as job_combinations
from tests.chaos.truth import ALL_IN_ONE_SUBJECT, HOSTILE_AUTHORS, HOSTILE_SUBJECTS, Pushed, Truth
from tests.harness import Farm, wait_until

KINDS = ("master", "worker", "db-lock", "disk-full", "clone", "hostile", "job")
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM}
WINDOWS = ("idle", "bench", "stored", "random")
CLONE_MODES = ("head", "objects", "corrupt", "no-git", "stale-result")
HOSTILE_VARIANTS = ("subject", "author", "refs", "force")
BUSY_TIMEOUT = 30  # seconds: master/store connects with sqlite3.connect(timeout=30)


@dataclass(frozen=True)
class Fault:
    """One fault of the scenario; `batch` commits are pushed with it."""

    kind: str
    variant: str
    batch: int
    sig: str = ""  # SIGKILL or SIGTERM (master, worker; a job fault's master or worker)
    window: str = ""  # idle, bench, stored, random (master, worker); idle or during (clone); a job's phase (job)
    seconds: float = 0.0  # how long the database is locked / the disk stays full
    job: str = ""  # releases or try (job): the kind of job queued

    @property
    def label(self) -> str:
        parts = [self.kind, self.variant]
        if self.sig:
            parts.append(f"{self.sig}@{self.window}")
        elif self.window:
            parts.append(f"@{self.window}")
        if self.seconds:
            parts.append(f"{self.seconds:.0f}s")
        if self.job:
            parts.append(f"({self.job})")
        return " ".join(p for p in parts if p)


@dataclass
class Injection:
    """What injecting one fault did."""

    fault: Fault
    pushed: list[Pushed] = field(default_factory=list)
    skipped: str = ""  # why the fault was not injected (e.g. no tmpfs); never silent
    window_hit: bool | None = None  # for windowed kills: did the kill land in the window asked for
    notes: list[str] = field(default_factory=list)
    recoveries: list[str] = field(default_factory=list)


def random_fault(kind: str, batch: int, rng: random.Random) -> Fault:
    """A fault of `kind` with its variant drawn from `rng` (seeded: the same seed gives the same faults)."""
    if kind in ("master", "worker"):
        sig = rng.choice(sorted(SIGNALS))
        return Fault(kind, "kill", batch, sig=sig, window=rng.choice(WINDOWS))
    if kind == "db-lock":
        # sometimes longer than sqlite's busy timeout, so writers give up instead of waiting
        seconds = rng.uniform(BUSY_TIMEOUT + 1, BUSY_TIMEOUT + 10) if rng.random() < 0.4 else rng.uniform(3, 15)
        return Fault(kind, "exclusive", batch, seconds=round(seconds))
    if kind == "disk-full":
        return Fault(
            kind, "ballast", batch, window=rng.choice(("before-push", "bench")), seconds=round(rng.uniform(3, 12))
        )
    if kind == "clone":
        return Fault(kind, rng.choice(CLONE_MODES), batch, window=rng.choice(("idle", "during")))
    if kind == "hostile":
        return Fault(kind, rng.choice(HOSTILE_VARIANTS), batch)
    if kind == "job":
        variant, sig, phase = rng.choice(job_combinations())
        return Fault(kind, variant, batch, sig=sig, window=phase, job=rng.choice(JOB_KINDS))
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")


class Injector:
    """Performs faults against one farm; `say` prints a progress line."""

    def __init__(
        self,
        farm: Farm,
        truth: Truth,
        rng: random.Random,
        work: Path,
        builder: str,
        tmpfs: str,
        say: Callable[[str], None],
    ) -> None:
        self.farm = farm
        self.truth = truth
        self.rng = rng
        self.work = work
        self.builder = builder
        self.tmpfs = tmpfs  # "" when the data dir is a tmpfs the suite mounted, else why disk-full is skipped
        self.say = say
        self.markers = work / "markers"
        self.markers.mkdir(parents=True, exist_ok=True)
        self.n_refs = 0
        self.jobs = JobFaults(farm, truth, rng, say)

    # ---------------------------------------------------------------------------------------- entry
    def inject(self, fault: Fault, step: int) -> Injection:
        inj = Injection(fault)
        handler = {
            "master": self._kill,
            "worker": self._kill,
            "db-lock": self._db_lock,
            "disk-full": self._disk_full,
            "clone": self._clone,
            "hostile": self._hostile,
            "job": lambda inj, step: self.jobs.inject(inj, lambda n: self.push(inj, n, step)),
        }[fault.kind]
        handler(inj, step)
        return inj

    def push(self, inj: Injection, n: int, step: int, **text: list[str]) -> list[Pushed]:
        pushed = self.truth.push(n, step, **text) if n else []
        inj.pushed.extend(pushed)
        return pushed

    # ---------------------------------------------------------------------------------------- windows
    def wait_idle(self, timeout: float = 120) -> bool:
        """Until no build request is waiting or running (False after `timeout`)."""
        try:
            wait_until(
                lambda: self.farm.pending_requests() == [] and self.farm.running_builds() == [],
                timeout,
                "the farm to be idle",
            )
        except TimeoutError:
            return False
        return True

    def _max_run_id(self) -> int:
        return self._read_db("SELECT COALESCE(MAX(id), 0) FROM runs")[0][0]

    def _read_db(self, sql: str, params: tuple = ()) -> list[tuple]:
        db = self.farm.settings.results_db
        if not db.exists():
            return [(0,)]
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def _wait_stored(self, after_id: int, timeout: float = 120) -> int | None:
        """Poll the results DB (every 10 ms) for a run newer than `after_id`; its build id, or None."""
        db = self.farm.settings.results_db
        deadline = time.monotonic() + timeout
        conn = None
        try:
            while time.monotonic() < deadline:
                try:
                    if conn is None and db.exists():
                        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                    if conn is not None:
                        row = conn.execute(
                            "SELECT build_id FROM runs WHERE id > ? ORDER BY id LIMIT 1", (after_id,)
                        ).fetchone()
                        if row:
                            return row[0]
                except sqlite3.Error:
                    pass
                time.sleep(0.01)
        finally:
            if conn is not None:
                conn.close()
        return None

    # ---------------------------------------------------------------------------------------- kills
    def _kill(self, inj: Injection, step: int) -> None:
        """SIGKILL or SIGTERM the master or the worker in the chosen window, then start it again."""
        f = inj.fault
        sig = SIGNALS[f.sig]
        stop = self.farm.stop_master if f.kind == "master" else self.farm.stop_worker
        if f.window == "idle":
            inj.window_hit = self.wait_idle()
            stop(sig)
            self.push(inj, f.batch, step)  # commits land while it is down
            time.sleep(self.rng.uniform(0.5, 3))
        elif f.window == "bench":
            self.push(inj, f.batch, step)
            inj.window_hit = self._wait_step("bench", inj)
            stop(sig)
        elif f.window == "stored":
            after = self._max_run_id()
            self.push(inj, f.batch, step)
            build_id = self._wait_stored(after)
            stop(sig)
            if build_id is None:
                inj.window_hit = False
                inj.notes.append("no run was stored within 120 s")
            else:
                inj.window_hit = not self.farm.build_complete_in_db(build_id)
                inj.notes.append(
                    f"killed after build {build_id} stored its run; the build was "
                    f"{'still running' if inj.window_hit else 'already finished'}"
                )
        else:  # random
            self.push(inj, f.batch, step)
            time.sleep(self.rng.uniform(0, 6))
            stop(sig)
        self._restart(inj, f.kind)

    def _restart(self, inj: Injection, which: str) -> None:
        if which == "master":
            self.farm.start_master()
            self.farm.wait_worker_connected()
        else:
            self.farm.start_worker()
        inj.recoveries.append(f"{which} restarted")

    # ---------------------------------------------------------------------------------------- database lock
    def _db_lock(self, inj: Injection, step: int) -> None:
        """Hold the results database with BEGIN EXCLUSIVE in another process while commits are built."""
        f = inj.fault
        holder = hold_db_lock(self.farm.settings.results_db, f.seconds)
        try:
            self.push(inj, f.batch, step)
            holder.wait(timeout=f.seconds + 120)
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()
        if holder.returncode != 0:
            inj.notes.append(f"the lock holder exited with status {holder.returncode}")
        inj.recoveries.append("lock released")

    # ---------------------------------------------------------------------------------------- disk full
    def _disk_full(self, inj: Injection, step: int) -> None:
        """Fill the data dir's tmpfs with a ballast file, then delete it after `seconds`. Window `before-push`: the
        disk is full when the commits are pushed (the poller, Buildbot's DB and the checkout hit it); `bench`: it
        fills while a build benchmarks (the result file, its upload and the ingest hit it)."""
        f = inj.fault
        if self.tmpfs:
            inj.skipped = self.tmpfs
            self.push(inj, f.batch, step)
            return
        ballast = self.farm.settings.data_dir / "chaos-ballast"
        try:
            if f.window == "bench":
                self.push(inj, f.batch, step)
                inj.window_hit = self._wait_step("bench", inj)
                self._fill(ballast, inj)
                try:
                    wait_until(lambda: self.farm.running_builds() == [], 20, "the build on the full disk to end")
                except TimeoutError:
                    inj.notes.append("a build was still running 20 s after the disk filled")
            else:
                self._fill(ballast, inj)
                self.push(inj, f.batch, step)
                time.sleep(3)  # a few polls and scheduler passes on the full disk
            time.sleep(f.seconds)
        finally:
            ballast.unlink(missing_ok=True)
        inj.recoveries.append("disk freed")

    def _fill(self, ballast: Path, inj: Injection) -> None:
        filled = fill_disk(ballast)
        inj.notes.append(
            f"disk filled: ballast {filled // 2**20} MiB, {shutil.disk_usage(ballast.parent).free} bytes left"
        )

    def _wait_step(self, name: str, inj: Injection, timeout: float = 120) -> bool:
        """Until some build runs step `name` (then a moment more, to land inside it); False after `timeout`."""
        try:
            wait_until(lambda: self.farm.step_running(name), timeout, f"a {name} step", interval=0.1)
        except TimeoutError:
            inj.notes.append(f"no {name} step seen within {timeout:.0f} s")
            return False
        time.sleep(self.rng.uniform(0, 0.5))  # somewhere inside the ~1 s bench step
        return True

    # ---------------------------------------------------------------------------------------- broken clone
    def clone_dir(self) -> Path:
        """The worker's checkout of the builder: <worker dir>/<builder dir>/source (recipes.api.SOURCE_DIR)."""
        from buildbot.util import safeTranslate

        from recipes.api import SOURCE_DIR

        builddir = safeTranslate(self.builder)
        builddir = builddir.decode() if isinstance(builddir, bytes) else builddir
        return self.farm.settings.worker_dir("local") / builddir / SOURCE_DIR

    def _clone(self, inj: Injection, step: int) -> None:
        """Break the worker's clone (HEAD, objects, packs, the whole .git, or a stale result beside it)."""
        f = inj.fault
        if f.window == "idle":
            self.wait_idle()
            inj.notes.append(break_clone(self.clone_dir(), f.variant, self._stale_result()))
            self.push(inj, f.batch, step)
        else:
            self.push(inj, f.batch, step)
            time.sleep(self.rng.uniform(0, 3))
            inj.notes.append(break_clone(self.clone_dir(), f.variant, self._stale_result()))

    def _stale_result(self) -> str | None:
        rows = self._read_db("SELECT result FROM runs ORDER BY id DESC LIMIT 1") if self._max_run_id() else []
        return rows[0][0] if rows else None

    # ---------------------------------------------------------------------------------------- hostile input
    def _hostile(self, inj: Injection, step: int) -> None:
        """Commits with hostile subjects and author names, hostile refs, hostile force-form fields ("all": each
        once)."""
        f = inj.fault
        every = f.variant == "all"
        want = HOSTILE_VARIANTS if every else (f.variant,)
        left = f.batch
        if "subject" in want and left:
            subjects = [ALL_IN_ONE_SUBJECT] if every else self.rng.sample(HOSTILE_SUBJECTS, min(left, 3))
            self.push(inj, len(subjects), step, subjects=subjects)
            left -= len(subjects)
        if "author" in want and left:
            authors = self.rng.sample(HOSTILE_AUTHORS, 1 if every else min(left, 2))
            self.push(inj, len(authors), step, subjects=["hostile author name"] * len(authors), authors=authors)
            left -= len(authors)
        if "refs" not in want:
            self.push(inj, left, step)
        else:
            # the hostile refs come after the poller has seen the commits (so each part is tested on its own), and
            # at least one plain commit after them: a hostile ref must never stop the farm measuring the others
            self.push(inj, max(0, left - 1), step)
            self._wait_seen(inj)
            inj.notes.extend(self._hostile_refs(step))
            self.push(inj, 1 if left or f.batch else 0, step)
        if "force" in want:
            inj.notes.extend(self._hostile_force())

    def _wait_seen(self, inj: Injection, timeout: float = 30) -> None:
        head = self.truth.repo.head()
        try:
            wait_until(
                lambda: (self.farm.api(f"changes?revision={head}") or {}).get("changes"),
                timeout,
                "the poller to see the push",
            )
        except TimeoutError:
            inj.notes.append(f"the poller had not reported {head[:12]} after {timeout:.0f} s")

    def marker(self, name: str) -> Path:
        return self.markers / f"PWNED-{name}"

    def _hostile_refs(self, step: int) -> list[str]:
        """Branches and tags named like options of git, markup and controls: none may run anything."""
        self.n_refs += 1
        n = self.n_refs
        head = self.truth.repo.head()
        side = self.truth.side_commit(step, subject=f"side commit for hostile refs {n}")
        m1, m2 = self.marker(f"upload-pack-{n}"), self.marker(f"raw-{n}")
        refs = [
            # a valid ref name (${IFS} is the space a ref name cannot hold) that `git fetch` reads as an option
            (f"refs/heads/--upload-pack=touch${{IFS}}{m1};git-upload-pack", side.sha, "update"),
            (f"refs/heads/-x{n}", head, "update"),
            (f"refs/tags/-x{n}" if n > 1 else "refs/tags/-x", head, "update"),
            (f"refs/heads/<script>alert({n})</script>", side.sha, "update"),
            (f"refs/heads/bidi-\u202e{n}", head, "update"),
            # the brief's exact shape, with a space git refuses: written as a file, git must skip it
            (f"refs/heads/--upload-pack=touch {m2};x", head, "raw"),
        ]
        notes = []
        for ref, sha, how in refs:
            try:
                did = self.truth.update_ref(ref, sha) if how == "update" else self.truth.write_raw_ref(ref, sha)
                notes.append(f"ref {ref!r} -> {sha[:12]} ({did})")
            except subprocess.CalledProcessError as e:
                notes.append(f"ref {ref!r}: git refused to create it ({e.stderr.strip()[:120]})")
        return notes

    def _hostile_force(self) -> list[str]:
        """The force form's REST call with hostile branch and revision fields, and one honest forced build."""
        m = self.marker("force")
        attempts = [
            (f"--upload-pack=touch {m}; git-upload-pack", ""),
            (f"--upload-pack=touch${{IFS}}{m};git-upload-pack", self.truth.repo.head()),
            ("master", f"--output={m}"),
            ("master", "0" * 40),  # a sha the repository does not have
            ("-x", self.truth.repo.head()),
        ]
        notes = []
        for branch, revision in attempts:
            try:
                self.farm.force(self.builder, revision=revision, branch=branch, reason="chaos: hostile force")
                notes.append(f"force branch={branch!r} revision={revision!r}: accepted by the form")
            except RuntimeError as e:
                notes.append(f"force branch={branch!r} revision={revision!r}: refused ({str(e)[:80]})")
            except (requests.RequestException, TypeError, KeyError) as e:  # the API is down or answers oddly
                notes.append(f"force branch={branch!r} revision={revision!r}: {type(e).__name__}: {e}")
        # an honest forced build of an older master commit: an extra run, never a duplicate
        older = [c for c in self.truth.master_commits() if c.sha != self.truth.repo.head()]
        if older:
            target = self.rng.choice(older)
            try:
                self.farm.force(self.builder, revision=target.sha, branch="master", reason="chaos: forced rerun")
                notes.append(f"forced a rerun of {target.sha[:12]} on master")
            except (RuntimeError, requests.RequestException, TypeError, KeyError) as e:
                notes.append(f"forced rerun of {target.sha[:12]} failed: {type(e).__name__}: {e}")
        return notes


# -------------------------------------------------------------------------------------------- helpers
LOCK_SCRIPT = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], timeout=120, isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def hold_db_lock(db: Path, seconds: float) -> subprocess.Popen:
    """Start a process holding `BEGIN EXCLUSIVE` on `db` for `seconds`; returns once the lock is held."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_SCRIPT, str(db), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "locked":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"could not lock {db}: the holder said {line!r}")
    return proc


def fill_disk(ballast: Path) -> int:
    """Write `ballast` until the file system is full (ENOSPC); returns its size in bytes."""
    size = 0
    with open(ballast, "wb", buffering=0) as f:
        for chunk in (b"\0" * 2**22, b"\0" * 2**12, b"\0"):
            while True:
                try:
                    f.write(chunk)
                except OSError:
                    break
                size += len(chunk)
    return size


def break_clone(source: Path, mode: str, stale_result: str | None) -> str:
    """Break the worker's git clone at `source` in one of CLONE_MODES; returns what was done."""
    git_dir = source / ".git"
    if not git_dir.is_dir():
        return f"clone {mode}: no clone at {source} (nothing to break)"
    objects = [p for p in (git_dir / "objects").rglob("*") if p.is_file() and p.parent.name != "info"]
    if mode == "head":
        (git_dir / "HEAD").write_text("garbage\n")
        return "clone: .git/HEAD overwritten with garbage"
    if mode == "objects":
        for p in objects:
            p.unlink()
        return f"clone: deleted {len(objects)} object and pack files"
    if mode == "corrupt":
        rng = random.Random(len(objects))
        for p in objects:
            size = p.stat().st_size
            p.chmod(0o644)
            p.write_bytes(bytes(rng.getrandbits(8) for _ in range(min(size, 4096))) + b"\0" * max(0, size - 4096))
        return f"clone: overwrote {len(objects)} object and pack files with garbage"
    if mode == "no-git":
        shutil.rmtree(git_dir)
        return "clone: deleted .git (the work tree stays)"
    if mode == "stale-result":
        for p in objects:
            p.unlink()
        if stale_result is None:
            return f"clone: deleted {len(objects)} object files (no stored result to plant)"
        (source.parent / "result.json").write_text(stale_result)
        return f"clone: deleted {len(objects)} object files and planted the newest stored result as result.json"
    raise ValueError(f"unknown clone mode {mode!r}; known: {', '.join(CLONE_MODES)}")


def kill_orphans(pgids: set[int]) -> None:
    """SIGKILL what is left of process groups the suite started (a killed worker's recipe commands)."""
    for pgid in pgids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
