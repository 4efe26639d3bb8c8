"""A Buildbot service that runs one pass of work every few seconds, or at once when kicked.

The reconciler, the bisection driver and the alert delivery all have this shape: a pass that does its blocking
work in threads, must never run twice at the same time, must survive its own exceptions, and sometimes should
not wait for the next tick. Buildbot's own `buildbot.util.poll.method` (what its change sources use) does all of
that; this class only names the pass and the interval. Subclasses implement `run_pass()` and `interval_seconds()`.
"""

from __future__ import annotations

from buildbot.util import poll, service
from twisted.internet import defer
from twisted.python import log


class PeriodicService(service.BuildbotService):
    """Calls `run_pass()` every `interval_seconds()`; `kick()` runs one now. Passes never overlap."""

    def interval_seconds(self) -> float:
        raise NotImplementedError

    async def run_pass(self) -> None:
        raise NotImplementedError

    @poll.method
    @defer.inlineCallbacks
    def _pass(self):
        # poll.method logs an exception too, but under its own name; say which service failed and that it goes on
        try:
            yield defer.ensureDeferred(self.run_pass())
        except Exception:
            log.err(None, f"{self.name}: pass failed; will try again")

    @defer.inlineCallbacks
    def startService(self):  # noqa: N802 (Buildbot's API)
        yield super().startService()  # runs reconfigService first
        self._pass.start(interval=self.interval_seconds(), now=False)

    @defer.inlineCallbacks
    def stopService(self):  # noqa: N802
        if self._pass.running:
            yield self._pass.stop()  # waits for a pass that is running
        yield super().stopService()

    def kick(self) -> None:
        """Run a pass now, or once more right after the one running (something it waits for just happened)."""
        self._pass()
