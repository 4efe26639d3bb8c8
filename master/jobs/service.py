"""The master's job driver: every few seconds, submit one build for each queued job (scheduler `jobs`).

The build runs on the job's builder, which shares its worker directory (clone, build trees, install cache) and the
per-host measurement lock with the commit builder of the same recipe and worker, so a job never overlaps a
measurement and reuses every install the farm has built. State lives in the results database: a job is marked
running before its build is submitted, and queued again if the submission fails.
"""

from __future__ import annotations

import time

from twisted.internet import threads

from master import store
from master.periodic import PeriodicService
from master.settings import Settings
from master.store.jobs import Job

SCHEDULER = "jobs"


def job_builder_name(recipe: str, worker: str) -> str:
    return f"jobs-{recipe}@{worker}"


class JobService(PeriodicService):
    name = "perffarm-jobs"

    def checkConfig(self, settings: Settings, builders: tuple[str, ...] = (), interval: float = 5.0) -> None:  # noqa: D102
        pass

    def reconfigService(self, settings: Settings, builders: tuple[str, ...] = (), interval: float = 5.0) -> None:  # noqa: D102
        self.settings = settings
        self.builders = builders
        self.interval = interval

    def interval_seconds(self) -> float:
        return self.interval

    async def run_pass(self) -> None:
        await self.submit_queued()

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
        conn = store.connect(self.settings.results_db)
        try:
            with store.transaction(conn):
                store.jobs.requeue(conn, job_id, time.time())
        finally:
            conn.close()

    async def submit_queued(self) -> int:
        """One pass; returns how many job builds were submitted."""
        taken = await threads.deferToThread(self._take)
        for job in taken:
            try:
                builderid = await self.master.data.updates.findBuilderId(job.builder)
                await self.master.data.updates.addBuildset(
                    waited_for=False,
                    scheduler=SCHEDULER,
                    sourcestamps=[
                        {
                            "codebase": "",
                            "repository": self.settings.repository_url,
                            "branch": job.branch,
                            "revision": job.sides[0].sha,
                            "project": "perffarm",
                        }
                    ],
                    reason=f"perffarm {job.kind} job {job.id}",
                    properties={
                        "perffarm_source": ("job", "Jobs"),
                        "perffarm_job": (job.id, "Jobs"),
                        "scheduler": (SCHEDULER, "Jobs"),
                    },
                    builderids=[builderid],
                )
            except Exception:
                await threads.deferToThread(self._requeue, job.id)
                raise
        return len(taken)
