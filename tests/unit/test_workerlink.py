"""The master's side of worker connections (master/workerlink.py): refused logins stored and shown, TCP keepalive.

Log events are made by Twisted's own `log.msg` inside the context Buildbot's PB broker logs in, so the parser sees
what the running master sees; the store is a real SQLite file; the keepalive options are set on a real TCP socket
and read back from the kernel. Buildbot's connection object is a stand-in around that real socket (the real one
needs a worker process: tests/integration/test_fleet.py cuts a real link and measures the time to notice it).
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from buildbot.test.fake import fakemaster
from buildbot.test.reactor import TestReactorMixin
from twisted.internet import defer
from twisted.logger import globalLogPublisher
from twisted.python import log
from twisted.trial import unittest

from master import store
from master.publish.pages.health import view
from master.publish.render import render
from master.settings import load_settings
from master.workerlink import (
    MAX_NAME,
    PUBLISH_DELAY,
    PUBLISH_SPACING,
    WorkerWatch,
    keepalive_options,
    refused_login,
    watch_socket,
)


def _pb_log(text: str, system: str = "Broker,4,10.0.0.7") -> dict:
    """The event observers get for a line Buildbot's PB manager logs while the broker's context is active."""
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        log.callWithContext({"system": system}, log.msg, text)
    finally:
        globalLogPublisher.removeObserver(seen.append)
    return seen[-1]


def test_buildbots_refusal_lines_give_name_reason_and_address():
    wrong = refused_login(_pb_log("invalid login from user 'bench1'"))
    unknown = refused_login(_pb_log("invalid login from unknown user 'stranger'", "Broker,9,fd00::5"))
    assert (wrong.name, wrong.reason, wrong.address) == ("bench1", "wrong-password", "10.0.0.7")
    assert (unknown.name, unknown.reason, unknown.address) == ("stranger", "unknown-worker", "fd00::5")


def test_other_lines_are_not_refusals_and_a_missing_address_is_empty():
    assert refused_login(_pb_log("Got workerinfo from 'bench1'")) is None
    assert refused_login({"log_format": "gitpoller: processing changes"}) is None
    assert refused_login(_pb_log("invalid login from user 'x'", "-")).address == ""


def test_a_hostile_name_is_bounded_and_its_control_characters_escaped():
    r = refused_login(_pb_log("invalid login from unknown user '\x1b[31m\u202e" + "x" * 500 + "'"))
    assert "\x1b" not in r.name and "\u202e" not in r.name and r.name.startswith("\\x1b[31m\\u202e")
    assert len(r.name) <= MAX_NAME + 20  # cut before escaping: the escapes may lengthen it a little


@pytest.mark.parametrize("lost_after", [1, 5, 60, 600])
def test_keepalive_gives_up_within_lost_after_on_a_real_socket(lost_after):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        watch_socket(sock, lost_after)
        got = {(level, opt): sock.getsockopt(level, opt) for level, opt, _ in keepalive_options(lost_after)}
    assert got[(socket.SOL_SOCKET, socket.SO_KEEPALIVE)] == 1
    idle = got[(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)]
    probes = got[(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)] * got[(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)]
    assert idle + probes <= max(lost_after, 2)  # a silent peer is dropped in about lost_after seconds
    assert got[(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)] == lost_after * 1000  # unacknowledged data too


def test_the_store_counts_refusals_per_name_and_reason_and_forgets_a_name_that_connects(tmp_path):
    conn = store.connect(tmp_path / "results.sqlite")
    assert store.workers.record_refused(conn, "w1", "wrong-password", "10.0.0.7", 100) is True
    assert store.workers.record_refused(conn, "w1", "wrong-password", "10.0.0.8", 160) is False
    assert store.workers.record_refused(conn, "ghost", "unknown-worker", "", 130) is True
    rows = store.workers.refused_logins(conn)
    assert [(r.name, r.attempts, r.address, r.first_seen, r.last_seen) for r in rows] == [
        ("w1", 2, "10.0.0.8", 100, 160),
        ("ghost", 1, "", 130, 130),
    ]
    assert store.workers.clear_refused(conn, "w1") == 1
    assert [r.name for r in store.workers.refused_logins(conn)] == ["ghost"]
    with pytest.raises(ValueError, match="not one of"):
        store.workers.record_refused(conn, "w1", "bad-mood", "", 1)


def test_a_stream_of_made_up_names_keeps_only_the_newest(tmp_path):
    conn = store.connect(tmp_path / "results.sqlite")
    for i in range(store.workers.KEEP + 30):
        store.workers.record_refused(conn, f"n{i}", "unknown-worker", "", float(i))
    names = [r.name for r in store.workers.refused_logins(conn)]
    assert len(names) == store.workers.KEEP and names[0] == f"n{store.workers.KEEP + 29}" and "n0" not in names


def test_the_health_page_lists_refused_workers_escaped(tmp_path):
    conn = store.connect(tmp_path / "results.sqlite")
    store.workers.record_refused(conn, "<b>w1</b>", "wrong-password", "10.0.0.7", 100)
    store.workers.record_refused(conn, "ghost", "unknown-worker", "10.0.0.9", 200)
    ctx = SimpleNamespace(conn=conn, now=300.0, channels=lambda: [])
    page = render("health.html", root="", title="Farm health", **view(ctx))
    assert 'id="refused"' in page and "&lt;b&gt;w1&lt;/b&gt;" in page and "<b>w1" not in page
    assert "wrong password" in page and "not in workers.names" in page and "10.0.0.9" in page
    empty = render(
        "health.html",
        root="",
        title="t",
        **view(SimpleNamespace(conn=store.connect(tmp_path / "e"), now=1.0, channels=lambda: [])),
    )
    assert 'id="refused"' not in empty


class WorkerWatchTest(TestReactorMixin, unittest.TestCase):
    """The service in a fake master: real log lines in, rows in a real results DB, publishes coalesced."""

    @defer.inlineCallbacks
    def setUp(self):
        self.setup_test_reactor()
        self.dir = Path(tempfile.mkdtemp())
        self.settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(self.dir)})
        self.master = yield fakemaster.make_master(self, wantMq=True)
        self.master.mq.verifyMessages = False
        self.published: list[float] = []
        self.watch = WorkerWatch(settings=self.settings)
        self.watch.in_thread = self._now  # the same calls, run at once instead of in a thread
        yield self.watch.setServiceParent(self.master)
        yield self.master.startService()
        self.addCleanup(self.master.stopService)

    def _now(self, fn, *args):
        if getattr(fn, "__name__", "") == "health_line":
            self.published.append(self.reactor.seconds())
            return defer.succeed("published")
        return defer.maybeDeferred(fn, *args)

    def _rows(self):
        conn = store.connect(self.settings.results_db)
        try:
            return [(r.name, r.reason, r.attempts) for r in store.workers.refused_logins(conn)]
        finally:
            conn.close()

    def test_refusals_are_stored_and_the_health_page_rendered_once_per_new_name(self):
        log.callWithContext({"system": "Broker,1,10.0.0.7"}, log.msg, "invalid login from user 'w1'")
        log.callWithContext({"system": "Broker,2,10.0.0.7"}, log.msg, "invalid login from user 'w1'")
        self.assertEqual(self._rows(), [("w1", "wrong-password", 2)])
        self.reactor.advance(PUBLISH_DELAY)
        self.assertEqual(self.published, [PUBLISH_DELAY])  # a retry of a known name does not publish again
        log.msg("invalid login from unknown user 'ghost'")
        self.reactor.advance(PUBLISH_SPACING - 0.5)
        self.assertEqual(len(self.published), 1)  # a new name soon after: held back to PUBLISH_SPACING
        self.reactor.advance(0.5)
        self.assertEqual(self.published, [PUBLISH_DELAY, PUBLISH_DELAY + PUBLISH_SPACING])

    def test_a_worker_that_connects_is_forgotten_and_its_socket_watched(self):
        log.msg("invalid login from user 'w1'")
        self.reactor.advance(PUBLISH_DELAY)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(sock.close)
        transport = SimpleNamespace(getHandle=lambda: sock)
        self.master.workers.connections = {
            "w1": SimpleNamespace(mind=SimpleNamespace(broker=SimpleNamespace(transport=transport)))
        }
        self.master.mq.callConsumer(("workers", "1", "connected"), {"name": "w1"})
        self.assertEqual(self._rows(), [])
        self.assertEqual(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE), 1)
        self.assertEqual(
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT), self.settings.worker_lost_after * 1000
        )
        self.reactor.advance(PUBLISH_SPACING)
        self.assertEqual(len(self.published), 2)  # the page no longer lists it

    @defer.inlineCallbacks
    def test_a_stopped_watch_no_longer_listens(self):
        yield self.watch.disownServiceParent()
        log.msg("invalid login from user 'w1'")
        self.assertFalse(self.settings.results_db.exists() and self._rows())
