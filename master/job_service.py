"""The master's job driver: every few seconds, submit one build for each queued job (scheduler `jobs`), and end
jobs left running with no build.

The build runs on the job's builder, which shares its worker directory (clone, build trees, install cache) and the
per-host measurement lock with the commit builder of the same recipe and worker, so a job never overlaps a
measurement and reuses every install the farm has built. State lives in the results database: a job is marked
running before its build is submitted, and queued again if the submission fails.

A job can be left running with no build: its build request cancelled before it started, or the master stopped
between marking it running and submitting its build. Each pass looks for running jobs with no unfinished build
request on their builders (the build set's `perffarm_job` property); one seen so on two passes at least
`master.reconcile_grace` apart is failed (a cancelled request: cancelled on purpose) or queued again (a lost build),
with the reason (master/jobs/core.py `why_stalled`). This is the job service's pass rather than the reconciler's:
the job service owns a job's state (it alone marks a job running and submits its build, in the same pass, so it
never sees its own submission half-done), while the reconciler works from the poller's changes, which jobs have not.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from buildbot.data import resultspec
from buildbot.process.results import Results
from twisted.internet import threads
from twisted.python import log

from master import buildsets, store
from master.jobs import core
from master.periodic import PeriodicService
from master.publish import logged
from master.settings import Settings
from master.store.jobs import Job

SCHEDULER = "jobs"
JOB_PROPERTY = "perffarm_job"  # the build set property naming the job a build runs (master/job_steps.py JOB)
T = TypeVar("T")


def job_builder_name(recipe: str, worker: str) -> str:
    return f"jobs-{recipe}@{worker}"


def _job_of(properties: dict | None) -> int | None:
    value = (properties or {}).get(JOB_PROPERTY)
    try:
        return int(value[0]) if value else None
    except (TypeError, ValueError):
        return None


class JobService(PeriodicService):
    name = "perffarm-jobs"

    def checkConfig(self, settings: Settings, builders: tuple[str, ...] = (), interval: float = 5.0) -> None:  # noqa: D102
        pass

    def reconfigService(self, settings: Settings, builders: tuple[str, ...] = (), interval: float = 5.0) -> None:  # noqa: D102
        self.settings = settings
        self.builders = builders
        self.interval = interval
        self.stalled_seen: dict[int, float] = {}  # job id -> when first seen running with no build request

    def interval_seconds(self) -> float:
        return self.interval

    async def run_pass(self) -> None:
        await self.submit_queued()
        await self.end_stalled()

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        conn = store.connect(self.settings.results_db)
        try:
            return work(conn)
        finally:
            conn.close()

    def _take(self) -> list[Job]:
        if not self.settings.results_db.exists():
            return []
        conn = store.connect(self.settings.results_db)
        try:
            taken = []
            for job in store.jobs.queued(conn):
                with store.transaction(conn):
                    if job.builder not in self.builders:
                        store.jobs.finish(
                            conn,
                            job.id,
                            result=None,
                            error=f"builder {job.builder!r} does not exist on this master (known: "
                            f"{', '.join(self.builders) or 'none'})",
                            machine_id=None,
                            now=time.time(),
                        )
                    elif store.jobs.mark_running(conn, job.id, time.time()):
                        taken.append(job)
            return taken
        finally:
            conn.close()

    def _requeue(self, job_id: int) -> None:
        def work(conn: sqlite3.Connection) -> None:
            with store.transaction(conn):
                store.jobs.requeue(conn, job_id, time.time())

        self._with_db(work)

    def _set_request(self, job_id: int, brid: int) -> None:
        def work(conn: sqlite3.Connection) -> None:
            with store.transaction(conn):
                store.jobs.set_request(conn, job_id, brid)

        self._with_db(work)

    async def submit_queued(self) -> int:
        """One pass; returns how many job builds were submitted."""
        taken = await threads.deferToThread(self._take)
        for job in taken:
            try:
                builderid = await self.master.data.updates.findBuilderId(job.builder)
                brid = await buildsets.submit(
                    self.master,
                    builderid,
                    repository=self.settings.repository_url,
                    branch=job.branch,
                    revision=job.sides[0].sha,
                    scheduler=SCHEDULER,
                    label="Jobs",
                    source="job",
                    reason=f"perffarm {job.kind} job {job.id}",
                    properties={JOB_PROPERTY: job.id},
                )
            except Exception:
                await threads.deferToThread(self._requeue, job.id)
                raise
            # what the job waits for; a master stopped before this line leaves the request unnamed, which only
            # changes the reason given if that request is later cancelled (master/jobs/core.py why_stalled)
            await threads.deferToThread(self._set_request, job.id, brid)
        return len(taken)

    # ---------------------------------------------------------------------------------- jobs left running
    async def end_stalled(self) -> list[core.Stalled]:
        """Fail or queue again the jobs left running with no build (see the module docstring); what was done."""
        if not self.settings.results_db.exists():
            return []
        running = await threads.deferToThread(self._with_db, store.jobs.running)
        if not running:
            self.stalled_seen = {}
            return []
        alive = await self._jobs_with_a_request()
        act, self.stalled_seen = core.stalled_jobs(
            [j.id for j in running], alive, self.stalled_seen, time.time(), self.settings.reconcile_grace
        )
        by_id = {j.id: j for j in running}
        verdicts = []
        for job_id in act:
            request, builds = await self._request_of(by_id[job_id])
            verdicts.append(core.why_stalled(by_id[job_id], request, builds, self.settings.max_attempts))
        if verdicts:
            await threads.deferToThread(self._end, verdicts)
            for v in verdicts:
                self.stalled_seen.pop(v.job_id, None)
                log.msg(f"perffarm: job {v.job_id} {'queued again' if v.requeue else 'failed'}: {v.reason}")
            if any(v.requeue for v in verdicts):
                self.kick()  # submit it now, not on the next tick
        return verdicts

    async def _jobs_with_a_request(self) -> set[int]:
        """Jobs with a build request not finished yet (waiting, or its build running) on a job builder."""
        jobs: set[int] = set()
        for name in self.builders:
            builderid = await self.master.data.updates.findBuilderId(name)
            requests = await self.master.data.get(
                ("builders", builderid, "buildrequests"), filters=[resultspec.Filter("complete", "eq", [False])]
            )
            for req in requests:
                job_id = _job_of(await self.master.data.get(("buildsets", req["buildsetid"], "properties")))
                if job_id is not None:
                    jobs.add(job_id)
        return jobs

    async def _request_of(self, job: Job) -> tuple[int | None, list[tuple[int, str]]]:
        """The job's newest build request if Buildbot has it and it is this job's, with its builds' results."""
        if job.build_request is None:
            return None, []
        req = await self.master.data.get(("buildrequests", job.build_request))
        if not req:
            return None, []
        if _job_of(await self.master.data.get(("buildsets", req["buildsetid"], "properties"))) != job.id:
            return None, []  # Buildbot's database was recreated: the id names another request now
        builds = await self.master.data.get(("buildrequests", job.build_request, "builds")) or []
        return job.build_request, [
            (b["number"], Results[b["results"]] if b["results"] is not None else "unfinished") for b in builds
        ]

    def _end(self, verdicts: list[core.Stalled]) -> None:
        def work(conn: sqlite3.Connection) -> None:
            for v in verdicts:
                with store.transaction(conn):
                    if v.requeue:
                        store.jobs.requeue(conn, v.job_id, time.time(), note=v.reason)
                    else:
                        store.jobs.finish(conn, v.job_id, result=None, error=v.reason, machine_id=None, now=time.time())

        self._with_db(work)
        log.msg(f"perffarm: {logged.jobs_line(self.settings)}")
