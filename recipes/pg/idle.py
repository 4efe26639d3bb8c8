"""Idle connections held open while a workload is measured (seed 003: connection scaling).

PostgreSQL before 14 scanned every connected backend to build a snapshot (GetSnapshotData), so the throughput of
a few active clients fell as idle connections piled up; 14 removed most of that cost (Andres Freund: one active
client went from ~15,000 to ~35,000 tps next to 10,000 idle connections). A workload entry with an ``idle`` list
measures its active clients once per count M of idle connections held open for the whole sample.

The idle connections are a second pgbench, ``-c M``, whose clients run ``SELECT 1`` once and then sleep (a
client-side ``\\sleep``: the backend is idle, outside any transaction, as an application's pooled connection is).
The sample starts only when all M backends are connected, and ends with them closed and gone, so one sample's
idle connections never overlap the next workload. The server's ``max_connections`` must leave room: checked
first, with a message naming the setting.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from collections.abc import Iterator

from recipes.api import BenchFailed
from recipes.pg.server import Server

# 600 s, not longer: pgbench 13 keeps the sleep in microseconds in an int, and 3600 s overflowed it into no sleep
# at all (measured here: 1,000 "idle" clients running ~170,000 SELECT 1 per second). A sample never lasts that long;
# a client that wakes runs one SELECT 1 and sleeps again.
IDLE_SQL = "SELECT 1;\n\\sleep 600 s\n"
QUIET_BACKENDS = 5  # idle-connection backends that may still look busy a second after connecting
HEADROOM = 10  # connections kept free for the active clients, psql probes and superuser slots
CONNECT_TIMEOUT_S = 300.0


def _client_backends(srv: Server) -> int:
    return int(srv.psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'") or 0)


def _raise_fd_limit(need: int):
    """A preexec function: pgbench keeps one socket per client, more than the usual soft limit of 1024."""

    def apply() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = need if hard == resource.RLIM_INFINITY else min(need, hard)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    return apply


def check_room(srv: Server, count: int, active: int) -> None:
    """Fail with a clear message when `count` idle plus `active` clients do not fit the server's max_connections."""
    limit = int(srv.psql("SHOW max_connections"))
    if count + active + HEADROOM > limit:
        raise BenchFailed(
            f"{count} idle connections and {active} active clients need max_connections >= "
            f"{count + active + HEADROOM}, the server has {limit}: raise max_connections in the profile's conf "
            "file, or lower the workload's idle counts"
        )


@contextlib.contextmanager
def held(srv: Server, count: int, active: int = 1, threads: int = 2) -> Iterator[int]:
    """Keep `count` idle connections open to `srv` for the duration of the with-block (nothing for 0); yields how
    many client backends beyond those before were connected when the block began (recorded with the sample)."""
    if count <= 0:
        yield 0
        return
    check_room(srv, count, active)
    assert srv.dir is not None
    script = srv.dir / "idle.sql"
    script.write_text(IDLE_SQL)
    errors = srv.dir / f"idle-{count}.log"
    before = _client_backends(srv)
    argv = [str(srv.bin("pgbench")), "-n", "-c", str(count), "-j", str(max(1, min(threads, count))), "-T", "3600"]
    command, env = srv.client([*argv, "-f", str(script)], ro=[script])
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=_raise_fd_limit(count + 64),  # noqa: PLW1509 - only sets a resource limit
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while (connected := _client_backends(srv)) < before + count:
            if proc.poll() is not None:
                raise BenchFailed(
                    f"the pgbench holding {count} idle connections exited (code {proc.returncode}) before they were "
                    "all connected",
                    errors.read_text(errors="replace")[-3000:] + "\n--- server log ---\n" + srv.log_tail(),
                )
            if time.monotonic() > deadline:
                raise BenchFailed(
                    f"{count} idle connections were not all connected after {CONNECT_TIMEOUT_S:.0f} s", srv.log_tail()
                )
            time.sleep(0.2)
        _check_quiet(srv, count)
        yield connected - before
        srv.check_alive(f"the sample with {count} idle connections")
    finally:
        _stop(proc)
        deadline = time.monotonic() + 60
        while srv.alive() and _client_backends(srv) > before and time.monotonic() < deadline:
            time.sleep(0.2)  # backends exit once their client is gone: the next sample starts without them


def _busy(srv: Server) -> int:
    """Backends of pgbench clients that are running a query or finished one in the last half second (read from
    pg_stat_activity, which is live in every version, unlike the cumulative statistics)."""
    return int(
        srv.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND application_name = 'pgbench' AND (state <> 'idle' OR state_change > now() - interval '0.5 s')"
        )
        or 0
    )


def _check_quiet(srv: Server, count: int) -> None:
    """The idle connections must be idle: after their one SELECT 1 they run nothing (a pgbench whose sleep does
    not sleep would turn them into `count` active clients, and the sample into another workload)."""
    time.sleep(1.0)  # each client's first SELECT 1 is done
    busy = max(_busy(srv), _busy(srv))
    if busy > max(QUIET_BACKENDS, count // 20):
        raise BenchFailed(
            f"the {count} idle connections are not idle: {busy} of them ran a query in the last half second, a "
            "second after they connected (their pgbench does not sleep between queries); nothing was measured"
        )


def _stop(proc: subprocess.Popen) -> None:
    """Stop the idle connections' pgbench. SIGTERM, not SIGINT: a worker or test run started in the background by
    a shell without job control inherits SIGINT ignored, and pgbench (no SIGINT handler outside `-i`) kept running
    until the SIGKILL below, 30 s later, once per side and sample."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
