"""PeriodicService on Buildbot's fake master and test reactor: interval, kick, no overlap, survives failures."""

from __future__ import annotations

from buildbot.test.fake import fakemaster
from buildbot.test.reactor import TestReactorMixin
from twisted.internet import defer
from twisted.trial import unittest

from master.periodic import PeriodicService


class Counting(PeriodicService):
    name = "counting"

    def checkConfig(self):  # noqa: N802
        pass

    def reconfigService(self):  # noqa: N802
        self.started = 0
        self.finished = 0
        self.gate: defer.Deferred | None = None
        self.fail = False
        return super().reconfigService()

    def interval_seconds(self) -> float:
        return 10.0

    async def run_pass(self) -> None:
        self.started += 1
        if self.gate is not None:
            await self.gate
        if self.fail:
            raise RuntimeError("boom")
        self.finished += 1


class PeriodicServiceTest(TestReactorMixin, unittest.TestCase):
    @defer.inlineCallbacks
    def setUp(self):
        self.setup_test_reactor()
        self.master = yield fakemaster.make_master(self)
        self.svc = Counting()
        yield self.svc.setServiceParent(self.master)
        yield self.master.startService()
        self.addCleanup(self.master.stopService)

    def test_a_pass_every_interval_not_at_start(self):
        self.assertEqual(self.svc.started, 0)
        self.reactor.advance(10)
        self.reactor.advance(10)
        self.assertEqual(self.svc.finished, 2)

    def test_kick_runs_a_pass_now(self):
        self.svc.kick()
        self.reactor.advance(0)
        self.assertEqual(self.svc.finished, 1)

    def test_kicks_during_a_pass_give_one_more_pass_after_it_never_a_parallel_one(self):
        self.svc.gate = defer.Deferred()
        self.svc.kick()
        self.reactor.advance(0)
        self.svc.kick()
        self.svc.kick()
        self.reactor.advance(0)
        self.assertEqual(self.svc.started, 1)  # still inside the first pass
        gate, self.svc.gate = self.svc.gate, None
        gate.callback(None)
        self.reactor.advance(0)
        self.assertEqual((self.svc.started, self.svc.finished), (2, 2))

    def test_a_failing_pass_is_logged_and_the_next_one_runs(self):
        self.svc.fail = True
        self.reactor.advance(10)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.svc.fail = False
        self.reactor.advance(10)
        self.assertEqual(self.svc.finished, 1)

    @defer.inlineCallbacks
    def test_stop_waits_for_the_running_pass_and_ends_the_schedule(self):
        self.svc.gate = defer.Deferred()
        self.reactor.advance(10)
        stopped = self.svc.disownServiceParent()
        self.assertFalse(stopped.called)
        self.svc.gate.callback(None)
        yield stopped
        self.reactor.advance(100)
        self.assertEqual(self.svc.started, 1)
