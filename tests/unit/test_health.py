"""The master's storage watch (master/health.py) and the restart policy `perffarm run` applies to it.

The events are made by Twisted's own `log.err`, as Buildbot's DB pool (buildbot/db/pool.py) logs them, with
SQLAlchemy's exception wrapping sqlite3's, so the test sees the event shape the running master sees. The disk
itself is filled by the chaos suite (docs/reliability.md), which needs root for its tmpfs.
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
import tempfile
from pathlib import Path

import sqlalchemy as sa
from buildbot.test.fake import fakemaster
from buildbot.test.reactor import TestReactorMixin
from twisted.internet import defer
from twisted.logger import globalLogPublisher
from twisted.python import log
from twisted.trial import unittest

from master import launcher
from master.health import BUILDBOT_DB_FATAL, RESTART_STATUS, StorageWatch, storage_failure


def _db_error(text: str) -> sa.exc.OperationalError:
    return sa.exc.OperationalError("INSERT INTO logchunks ...", {}, sqlite3.OperationalError(text))


def _logged_event(error: Exception, why: str) -> dict:
    """The event Twisted's log publisher hands to observers for `log.err(error, why)`."""
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        try:
            raise error
        except Exception as e:  # a live exception, as in Buildbot's `except ... as e: log.err(e, ...)`
            log.err(e, why)
    finally:
        globalLogPublisher.removeObserver(seen.append)
    return seen[-1]


class StorageFailureTest(unittest.TestCase):
    def tearDown(self):
        self.flushLoggedErrors()

    def test_buildbots_fatal_disk_errors_are_recognised(self):
        for text in ("disk I/O error", "database or disk is full", "unable to open database file"):
            event = _logged_event(_db_error(text), BUILDBOT_DB_FATAL)
            self.assertIn(text, storage_failure(event))

    def test_a_database_server_that_went_away_is_recognised(self):
        # psycopg 3's texts when PostgreSQL is restarted under a running master, and when it is still down
        for text in (
            "terminating connection due to administrator command",
            'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused',
        ):
            event = _logged_event(_db_error(text), BUILDBOT_DB_FATAL)
            self.assertIn(text.split(":")[0], storage_failure(event))

    def test_other_db_errors_and_other_messages_are_not(self):
        self.assertIsNone(storage_failure(_logged_event(_db_error("no such table: builds"), BUILDBOT_DB_FATAL)))
        self.assertIsNone(storage_failure(_logged_event(_db_error("disk I/O error"), "perffarm-alerts: pass failed")))
        self.assertIsNone(storage_failure({"log_format": "gitpoller: processing changes"}))


class StorageWatchTest(TestReactorMixin, unittest.TestCase):
    @defer.inlineCallbacks
    def setUp(self):
        self.setup_test_reactor()
        self.master = yield fakemaster.make_master(self)
        self.exits: list[int] = []
        self.watch = StorageWatch()
        self.watch.exit = self.exits.append
        yield self.watch.setServiceParent(self.master)
        yield self.master.startService()
        self.addCleanup(self.master.stopService)

    def tearDown(self):
        self.flushLoggedErrors()

    def _log_db_error(self, text: str) -> None:
        try:
            raise _db_error(text)
        except Exception as e:
            log.err(e, BUILDBOT_DB_FATAL)

    def test_a_disk_error_exits_the_master_once_for_a_restart(self):
        self._log_db_error("disk I/O error")
        self._log_db_error("database or disk is full")  # the second error changes nothing
        self.reactor.advance(0.5)
        self.assertEqual(self.exits, [])  # the reason is logged first; the exit comes after the delay
        self.reactor.advance(1.0)
        self.assertEqual(self.exits, [RESTART_STATUS])

    def test_an_unrelated_db_error_does_not(self):
        self._log_db_error("database is locked")
        self.reactor.advance(5)
        self.assertEqual(self.exits, [])

    @defer.inlineCallbacks
    def test_a_stopped_watch_no_longer_listens(self):
        yield self.watch.disownServiceParent()
        self._log_db_error("disk I/O error")
        self.reactor.advance(5)
        self.assertEqual(self.exits, [])


class RestartPolicyTest(unittest.TestCase):
    def test_the_budget_allows_a_few_restarts_per_window(self):
        now = [0.0]
        budget = launcher.RestartBudget(limit=2, window=60, clock=lambda: now[0])
        self.assertTrue(budget.take())
        self.assertTrue(budget.take())
        self.assertFalse(budget.take())  # a master failing over and over is not restarted forever
        now[0] = 61
        self.assertTrue(budget.take())

    def test_waiting_for_room_returns_at_once_when_there_is_room(self):
        self.assertTrue(launcher.wait_for_room(Path(tempfile.gettempdir()), need=1, timeout=0))

    def test_waiting_for_room_says_what_it_waits_for_and_gives_up_at_its_timeout(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            got = launcher.wait_for_room(Path(tempfile.gettempdir()), need=1 << 62, interval=0.01, timeout=0.05)
        self.assertFalse(got)
        self.assertIn("MiB needed", out.getvalue())

    def test_waiting_for_the_database_is_instant_for_sqlite_and_says_why_a_server_does_not_answer(self):
        import socket

        from master.settings import load_settings

        with tempfile.TemporaryDirectory() as tmp:
            self.assertTrue(launcher.wait_for_database(load_settings(environ={"PERFFARM_MASTER_DATA_DIR": tmp})))
            with socket.socket() as closed:  # bound, never listening: refused at once
                closed.bind(("127.0.0.1", 0))
                url = f"postgresql://perffarm@127.0.0.1:{closed.getsockname()[1]}/buildbot"
                settings = load_settings(
                    environ={"PERFFARM_MASTER_DATA_DIR": tmp, "PERFFARM_MASTER_BUILDBOT_DB_URL": url}
                )
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    got = launcher.wait_for_database(settings, interval=0.01, timeout=0.05)
        self.assertFalse(got)
        self.assertIn("waiting for Buildbot's database", out.getvalue())
        self.assertIn("is the server running", out.getvalue())
