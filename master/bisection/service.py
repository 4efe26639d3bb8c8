"""The master's bisection driver: probes are real builds on the workers (scheduler `bisect`).

A BuildbotService that, every few seconds, advances each running bisection (in a thread: the decision reads
the results database) and, when it asks for a commit, submits a build of that commit on the bisection's
builder unless one is already queued or running. Probe builds go through the same steps as any build, so they
show in the web UI and take the per-host measurement lock. Where the bisection's recipe measures jobs, the
culprit's confirmation is a job (parent and culprit as its two sides) that `state.advance` queues on the job
builder of the bisection's worker; the job service runs it. State lives in the results database: after a
master restart the service carries on from what is stored.
"""

from __future__ import annotations

from twisted.internet import threads
from twisted.python import log

from master import buildsets, store
from master.bisection import state
from master.bisection.core import ConfirmPair, Measure, Policy
from master.periodic import PeriodicService
from master.publish import logged
from master.settings import Settings

SCHEDULER = "bisect"


def probe_options(b: state.Bisection, policy: Policy) -> list[str]:
    """The recipe options of a probe build: only the bisected workload (a probe of a full profile would cost
    minutes more), its callgrind profile kept for an instruction workload (the culprit's diff against its parent
    then needs no run), and for a paired ratio series one order-balanced block of rounds: it is judged against
    the series' levels, and measured again only while it is not sure yet (master/bisection/core.py)."""
    options = [f"workloads={b.workload}", "callgrind=1"]
    if store.series.is_ratio_to_reference(b.metric):
        options.append(f"samples={policy.paired_probe_rounds}")
    return options


class BisectionService(PeriodicService):
    name = "perffarm-bisection"

    def checkConfig(  # noqa: D102
        self, settings: Settings, job_builders: tuple[tuple[str, str], ...] = (), interval: float = 5.0
    ) -> None:
        pass

    def reconfigService(  # noqa: D102
        self, settings: Settings, job_builders: tuple[tuple[str, str], ...] = (), interval: float = 5.0
    ) -> None:
        """`job_builders`: (commit builder, the job builder on its worker) for every recipe that measures jobs."""
        self.settings = settings
        self.policy = Policy.configured(settings.detection)
        self.job_builders = dict(job_builders)
        self.interval = interval

    def interval_seconds(self) -> float:
        return self.interval

    async def run_pass(self) -> None:
        await self.advance_all()

    def _decisions(self) -> list[tuple[state.Bisection, Measure]]:
        if not self.settings.results_db.exists():
            return []
        conn = store.connect(self.settings.results_db)
        ended = 0
        try:
            wanted = []
            for bisection_id in state.running(conn):
                b = state.get(conn, bisection_id)
                decision = state.advance(conn, bisection_id, self.policy, self.job_builders.get(b.builder))
                if isinstance(decision, Measure):
                    wanted.append((state.get(conn, bisection_id), decision))
                elif isinstance(decision, ConfirmPair):
                    continue  # its job is queued: the job service runs it
                else:  # it just ended: update its alert with the outcome and culprit
                    state.report_to_alert(conn, bisection_id, self.settings.alerts)
                    ended += 1
        finally:
            conn.close()
        if ended:  # the last probe's ingest published before the bisection ended: show its outcome now
            log.msg(f"perffarm bisection: {ended} ended; {logged.bisections_line(self.settings)}")
        return wanted

    async def advance_all(self) -> int:
        """One pass; returns how many probe builds were submitted."""
        wanted = await threads.deferToThread(self._decisions)
        if not wanted:
            return 0
        pending = await buildsets.pending_requests(self.master)
        submitted = 0
        for b, measure in wanted:
            builderid = await self.master.data.updates.findBuilderId(b.builder)
            if (builderid, measure.commit) in pending:
                continue
            await buildsets.submit(
                self.master,
                builderid,
                repository=self.settings.repository_url,
                branch=b.branch,
                revision=measure.commit,
                scheduler=SCHEDULER,
                label="Bisection",
                source="bisect",
                reason=f"perffarm bisection {b.id}: {measure.reason}",
                properties={"perffarm_bisection": b.id, "perffarm_options": probe_options(b, self.policy)},
            )
            pending.add((builderid, measure.commit))
            submitted += 1
        return submitted
