"""The master's side of worker connections: notice a lost host in seconds, remember the logins it refused.

**Lost hosts.** Buildbot 4.3 sends a worker a keepalive once an hour and never times it out; TCP keepalive is off
on the PB port. A host that loses power or its network sends nothing to say so, so the master keeps its build
running — and the host's measurement lock held — until the kernel gives up on unacknowledged data (about 15
minutes with the default `tcp_retries2`) or, with nothing in flight, never. `WorkerWatch` turns on TCP keepalive
with a TCP user timeout on the master's side of every worker connection as it connects, so a silent peer is
dropped after `workers.lost_after` seconds: the build ends as RETRY, its lock is released, Buildbot runs its
request again when the worker is back, and the reconciler never doubles it (a request is pending).

**Refused logins.** Buildbot refuses a worker whose password does not match its secret, or whose name is not in
`workers.names`, and only says so in twistd.log ("invalid login from user 'X'" / "... unknown user 'X'"); the
worker retries with back-off forever. `WorkerWatch` listens for those lines (as `master/health.py` listens for
storage failures), stores each refusal in the results database (`store.workers`: name, reason, the peer's address
from the log line's context, attempts, first and last time) and re-renders the health page; a worker's refusals
are forgotten when it connects. Names come from the network: they are cut to `MAX_NAME` characters and stored
with control characters escaped, and the table keeps the newest `store.workers.KEEP` rows.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from dataclasses import dataclass
from typing import Any

from buildbot.util import service
from twisted.internet import threads
from twisted.logger import globalLogPublisher
from twisted.python import log

from master.publish import logged
from master.textsafe import visible

MAX_NAME = 64
# The health page is re-rendered when a name is refused for the first time (or clears), at most this often.
PUBLISH_DELAY = 2.0
PUBLISH_SPACING = 30.0
_REFUSED = re.compile(r"^invalid login from (unknown )?user '(.*)'$", re.S)


@dataclass(frozen=True)
class Refusal:
    name: str
    reason: str  # "wrong-password" or "unknown-worker" (store.workers.REASONS)
    address: str


def refused_login(event: dict[str, Any]) -> Refusal | None:
    """The refusal a log event reports (Buildbot's PB manager's line), else None."""
    text = event.get("log_text")
    if not isinstance(text, str):
        message = event.get("message")
        text = " ".join(str(m) for m in message) if isinstance(message, tuple) else ""
    m = _REFUSED.match(text)
    if m is None:
        return None
    name = visible(m.group(2)[:MAX_NAME])
    return Refusal(name, "unknown-worker" if m.group(1) else "wrong-password", peer_address(event))


def peer_address(event: dict[str, Any]) -> str:
    """The peer's IP address from a PB log event's system context ("Broker,4,10.0.0.7"), or ""."""
    system = event.get("log_system") or event.get("system") or ""
    last = str(system).rsplit(",", 1)[-1].strip()
    try:
        return str(ipaddress.ip_address(last))
    except ValueError:
        return ""


def keepalive_options(lost_after: int) -> list[tuple[int, int, int]]:
    """(level, option, value) triples that make the kernel drop a connection silent for `lost_after` seconds:
    keepalive probes start after a third of it, and a user timeout bounds data left unacknowledged."""
    idle = max(1, lost_after // 3)
    count = max(1, min(4, lost_after - idle))
    interval = max(1, (lost_after - idle) // count)
    return [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle),
        (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval),
        (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, count),
        (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, lost_after * 1000),
    ]


def watch_socket(sock: socket.socket, lost_after: int) -> None:
    for level, option, value in keepalive_options(lost_after):
        sock.setsockopt(level, option, value)


def _in_store(results_db: str, change: Any, *args: Any) -> Any:
    """Run `change(conn, *args)` in one transaction of the results database (in a thread); its result."""
    from master import store

    conn = store.connect(results_db)
    try:
        with store.transaction(conn):
            return change(conn, *args)
    finally:
        conn.close()


def record(results_db: str, refusal: Refusal, now: float) -> bool:
    """Store one refusal (in a thread); True when the name is newly refused."""
    from master import store

    return bool(_in_store(results_db, store.workers.record_refused, refusal.name, refusal.reason, refusal.address, now))


def forget(results_db: str, name: str) -> bool:
    """Forget a worker's refusals now that it has connected (in a thread); True when there were any."""
    from master import store

    return _in_store(results_db, store.workers.clear_refused, name) > 0


class WorkerWatch(service.BuildbotService):
    """TCP keepalive on every worker connection; refused logins stored and shown on the health page."""

    name = "perffarm-worker-watch"
    in_thread = staticmethod(threads.deferToThread)  # blocking work (SQLite, publishing) never on the reactor

    def checkConfig(self, settings: Any = None):  # noqa: N802 (Buildbot's API)
        pass

    def reconfigService(self, settings: Any = None):  # noqa: N802
        self.settings = settings
        return super().reconfigService()

    def startService(self):  # noqa: N802
        self._publish_call = None
        self._last_publish = float("-inf")
        globalLogPublisher.addObserver(self._observe)
        d = self.master.mq.startConsuming(self._connected, ("workers", None, "connected"))
        d.addCallback(self._consuming)
        return super().startService()

    def _consuming(self, consumer) -> None:
        self._consumer = consumer

    def stopService(self):  # noqa: N802
        globalLogPublisher.removeObserver(self._observe)
        consumer = getattr(self, "_consumer", None)
        if consumer is not None:
            consumer.stopConsuming()
        if self._publish_call is not None and self._publish_call.active():
            self._publish_call.cancel()
        return super().stopService()

    # -------------------------------------------------------------------------------- a worker connects
    def _connected(self, key, worker: dict) -> None:
        name = worker.get("name", "")
        conn = getattr(self.master.workers, "connections", {}).get(name)
        transport = getattr(getattr(getattr(conn, "mind", None), "broker", None), "transport", None)
        handle = transport.getHandle() if transport is not None else None
        if isinstance(handle, socket.socket) and handle.family in (socket.AF_INET, socket.AF_INET6):
            try:
                watch_socket(handle, self.settings.worker_lost_after)
            except OSError as e:
                log.msg(f"perffarm: worker {name!r}: no TCP keepalive ({e}); a lost host is noticed late")
        d = self.in_thread(forget, str(self.settings.results_db), name)
        d.addCallback(self._publish_if)
        d.addErrback(log.err, f"perffarm: could not clear the refused logins of worker {name!r}")

    # -------------------------------------------------------------------------------- a login is refused
    def _observe(self, event: dict) -> None:
        refusal = refused_login(event)
        if refusal is not None:
            self.master.reactor.callFromThread(self._refused, refusal)

    def _refused(self, refusal: Refusal) -> None:
        d = self.in_thread(record, str(self.settings.results_db), refusal, time.time())
        d.addCallback(self._publish_if)
        d.addErrback(log.err, f"perffarm: could not store the refused login of {refusal.name!r}")

    def _publish_if(self, changed: bool) -> None:
        """Re-render the health page when the list of refused names changed (not for every retry of one)."""
        if changed:
            self._publish_soon()

    def _publish_soon(self) -> None:
        if self._publish_call is not None and self._publish_call.active():
            return
        now = self.master.reactor.seconds()
        delay = max(PUBLISH_DELAY, self._last_publish + PUBLISH_SPACING - now)
        self._publish_call = self.master.reactor.callLater(delay, self._publish)

    def _publish(self) -> None:
        self._last_publish = self.master.reactor.seconds()
        d = self.in_thread(logged.health_line, self.settings)
        d.addCallback(lambda line: log.msg(f"perffarm: refused worker logins: {line}"))
        d.addErrback(log.err, "perffarm: health page publish failed")
