"""A Buildbot service that runs one pass of work every few seconds, or at once when kicked.

The reconciler, the bisection driver and the alert delivery all have this shape: a pass that does its blocking
work in threads, must never run twice at the same time, must survive its own exceptions, and sometimes should
not wait for the next tick. Subclasses implement `run_pass()` and `interval_seconds()`.
"""

from __future__ import annotations

from buildbot.util import service
from twisted.internet import defer, task
from twisted.python import log


class PeriodicService(service.BuildbotService):
    """Calls `run_pass()` every `interval_seconds()`; `kick()` runs one now. Passes never overlap."""

    def interval_seconds(self) -> float:
        raise NotImplementedError

    async def run_pass(self) -> None:
        raise NotImplementedError

    @defer.inlineCallbacks
    def startService(self):
        yield super().startService()  # runs reconfigService first
        self._busy = False
        self._again = False
        self._loop = task.LoopingCall(self._safe_pass)
        self._loop.clock = self.master.reactor
        self._loop.start(self.interval_seconds(), now=False)

    def stopService(self):
        loop = getattr(self, "_loop", None)
        if loop is not None and loop.running:
            loop.stop()
        return super().stopService()

    def kick(self) -> None:
        """Run a pass as soon as the reactor is free (something it waits for just happened)."""
        self.master.reactor.callLater(0, self._safe_pass)

    async def _safe_pass(self) -> None:
        if self._busy:
            self._again = True  # one more pass after the running one, not a second one in parallel
            return
        self._busy = True
        try:
            while True:
                self._again = False
                try:
                    await self.run_pass()
                except Exception:
                    log.err(None, f"{self.name}: pass failed; will try again")
                if not self._again:
                    break
        finally:
            self._busy = False
