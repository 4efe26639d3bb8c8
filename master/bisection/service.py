"""The master's bisection driver: probes are real builds on the workers (scheduler `bisect`).

A BuildbotService that, every few seconds, advances each running bisection (in a thread: the decision reads
the results database) and, when it asks for a commit, submits a build of that commit on the bisection's
builder unless one is already queued or running. Probe builds go through the same steps as any build, so they
show in the web UI and take the per-host measurement lock. State lives in the results database: after a
master restart the service carries on from what is stored.
"""

from __future__ import annotations

from buildbot.util import service
from twisted.internet import defer, task, threads
from twisted.python import log

from master import store
from master.bisection import state
from master.bisection.core import Measure
from master.reconcile import pending_requests
from master.settings import Settings

SCHEDULER = "bisect"


class BisectionService(service.BuildbotService):
    name = "perffarm-bisection"

    def checkConfig(self, settings: Settings, interval: float = 5.0) -> None:  # noqa: D102
        pass

    def reconfigService(self, settings: Settings, interval: float = 5.0) -> None:  # noqa: D102
        self.settings = settings
        self.interval = interval

    @defer.inlineCallbacks
    def startService(self):
        yield super().startService()
        self._loop = task.LoopingCall(self._safe_pass)
        self._loop.clock = self.master.reactor
        self._loop.start(self.interval, now=False)

    def stopService(self):
        loop = getattr(self, "_loop", None)
        if loop is not None and loop.running:
            loop.stop()
        return super().stopService()

    def kick(self) -> None:
        """Run a pass now (a probe was just stored): the search need not wait for the next interval."""
        self.master.reactor.callLater(0, self._safe_pass)

    async def _safe_pass(self) -> None:
        if getattr(self, "_busy", False):
            self._again = True
            return
        self._busy = True
        try:
            while True:
                self._again = False
                try:
                    await self.advance_all()
                except Exception:
                    log.err(None, "perffarm bisection pass failed; will try again")
                if not self._again:
                    break
        finally:
            self._busy = False

    def _decisions(self) -> list[tuple[state.Bisection, Measure]]:
        if not self.settings.results_db.exists():
            return []
        conn = store.connect(self.settings.results_db)
        try:
            wanted = []
            for bisection_id in state.running(conn):
                decision = state.advance(conn, bisection_id)
                if isinstance(decision, Measure):
                    wanted.append((state._row_to_bisection(state.get(conn, bisection_id)), decision))
            return wanted
        finally:
            conn.close()

    async def advance_all(self) -> int:
        """One pass; returns how many probe builds were submitted."""
        wanted = await threads.deferToThread(self._decisions)
        if not wanted:
            return 0
        pending = await pending_requests(self.master)
        submitted = 0
        for b, measure in wanted:
            builderid = await self.master.data.updates.findBuilderId(b.builder)
            if (builderid, measure.commit) in pending:
                continue
            await self.master.data.updates.addBuildset(
                waited_for=False,
                scheduler=SCHEDULER,
                sourcestamps=[{"codebase": "", "repository": self.settings.repository_url, "branch": b.branch,
                               "revision": measure.commit, "project": "perffarm"}],
                reason=f"perffarm bisection {b.id}: {measure.reason}",
                properties={"perffarm_source": ("bisect", "Bisection"),
                            "perffarm_bisection": (b.id, "Bisection"),
                            "scheduler": (SCHEDULER, "Bisection")},
                builderids=[builderid],
            )
            pending.add((builderid, measure.commit))
            submitted += 1
        return submitted
