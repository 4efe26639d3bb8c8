"""The master stops itself when Buildbot's own database can no longer be written, so that it restarts clean.

(Also when Buildbot's database is a server that went away: `SERVER_FAILURES`.)

Buildbot (4.3) treats an SQLite "disk I/O error" or "database or disk is full" as fatal: the query's Deferred
fails, and when that query was a build's step log or step completion the build never finishes. It holds the
worker's lock until the master restarts, so nothing else is measured on that worker (found by the chaos suite's
disk-full fault, docs/reliability.md). Retrying inside Buildbot is not ours to change; restarting is safe: the
results DB survives a killed master (request keys make the retried build store nothing twice) and Buildbot
re-queues the requests its previous instance had claimed.

So `StorageWatch` listens to the master's log for Buildbot's "Got fatal OperationalError on DB" with one of the
storage failures below, says why, and exits with `RESTART_STATUS`. `perffarm run` (master/launcher.py) waits
until the file system has room again and starts the master again; a supervisor such as systemd does the same
with `Restart=on-failure`.
"""

from __future__ import annotations

import os

from buildbot.util import service
from twisted.logger import globalLogPublisher
from twisted.python import log

RESTART_STATUS = 75  # EX_TEMPFAIL: "try again later"
BUILDBOT_DB_FATAL = "Got fatal OperationalError on DB"
# sqlite3's texts for a write that failed for want of disk (ENOSPC surfaces as either) or a file it lost
SQLITE_FAILURES = ("disk I/O error", "database or disk is full", "unable to open database file")
# A database server (master.buildbot_db_url) that went away: restarted, crashed, unreachable. Buildbot 4.3 does not
# retry these either, and a master that lived through a PostgreSQL restart measured nothing afterwards (a commit
# pushed during the outage was never built; tests/integration/test_buildbot_db.py). psycopg 3 / psycopg2 / MySQL.
SERVER_FAILURES = (
    "terminating connection due to administrator command",
    "server closed the connection unexpectedly",
    "the database system is shutting down",
    "the database system is starting up",
    "connection failed",
    "could not connect to server",
    "consuming input failed",
    "server has gone away",
    "Lost connection to MySQL server",
    "Can't connect to MySQL server",
)
STORAGE_FAILURES = SQLITE_FAILURES + SERVER_FAILURES


def storage_failure(event: dict) -> str | None:
    """The failure's text when `event` is Buildbot's fatal DB error caused by storage, else None."""
    why = event.get("why") or ""
    if not isinstance(why, str) or not why.startswith(BUILDBOT_DB_FATAL):
        return None
    failure = event.get("log_failure") or event.get("failure")
    value = getattr(failure, "value", None)
    text = str(value) if value is not None else ""
    if any(marker in text for marker in STORAGE_FAILURES):
        return text.splitlines()[0][:300]
    return None


class StorageWatch(service.BuildbotService):
    """Exit the master (status `RESTART_STATUS`) at the first fatal storage error of Buildbot's database."""

    name = "perffarm-storage-watch"
    exit = staticmethod(os._exit)  # a clean stop would wait forever for the build the error wedged

    def checkConfig(self, delay: float = 1.0):  # noqa: N802 (Buildbot's API)
        pass

    def reconfigService(self, delay: float = 1.0):  # noqa: N802
        self.delay = delay
        return super().reconfigService()

    def startService(self):  # noqa: N802
        self._stopping = False
        globalLogPublisher.addObserver(self._observe)
        return super().startService()

    def stopService(self):  # noqa: N802
        globalLogPublisher.removeObserver(self._observe)
        return super().stopService()

    def _observe(self, event: dict) -> None:
        # called in whichever thread logged: Buildbot's DB pool logs from its own threads
        if self._stopping:
            return
        reason = storage_failure(event)
        if reason is None:
            return
        self._stopping = True
        self.master.reactor.callFromThread(self._stop, reason)

    def _stop(self, reason: str) -> None:
        log.msg(
            f"perffarm: Buildbot's database could not be written ({reason}). A build whose step was being recorded "
            "can no longer finish, so the master exits now (status 75) and is started again once the disk has "
            "room and a database server (master.buildbot_db_url) answers again: `perffarm run` does that; under "
            "another supervisor restart on failure. Free space on the file system of the master directory if it "
            "is full; start the database server if it is down. Nothing stored is lost: interrupted builds are re-run."
        )
        self.master.reactor.callLater(self.delay, self.exit, RESTART_STATUS)
