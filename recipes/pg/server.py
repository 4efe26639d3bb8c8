"""PostgreSQL server lifecycle for one benchmark run: initdb in a private directory, start, always stop and remove.

Why this care: a benchmark that leaves a server running steals the CPU from every later run on that host, and a
data directory left behind fills the disk. The server listens only on a unix socket in a private 0700 directory
(no TCP, no fixed port: two runs never collide, nothing else can connect), on a free port number. Directories
carry the pid of the process that owns them, so a run killed with SIGKILL is cleaned up by the next one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from recipes import sandbox as sandboxing
from recipes.api import BenchFailed, CommandFailed, Context
from recipes.pg.build import Install
from recipes.procs import pid_alive

OWNER_FILE = "owner.pid"
JAILED_FILE = "sandboxed"  # in a server's directory: its processes ran in a sandbox, and died with it


def as_server_user(argv: Sequence[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """Prefix server-side programs so they never run as root (initdb, pg_ctl and postgres refuse to).

    Under root (a CI container, a worker started by root) they run in a fresh user namespace: there geteuid()
    is the overflow uid, so PostgreSQL's root check passes, while file access still uses the caller's own
    uid, so the install and data directories need no chown and no world-readable parents.
    """
    if os.geteuid() != 0:
        return list(argv)
    if shutil.which("unshare") is None:
        raise BenchFailed(
            "running as root needs unshare(1) from util-linux (apt-get install util-linux), "
            "or run the worker as an unprivileged user"
        )
    return ["unshare", "--user", "--", *argv]


def free_port() -> int:
    """A TCP port number nobody is listening on right now (used only to name the unix socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pid_file(datadir: Path) -> list[str]:
    """The lines of postmaster.pid; read as a file a sandboxed server may have written (never through a link)."""
    try:
        return sandboxing.read_untrusted(datadir / "postmaster.pid", 1 << 16).decode(errors="replace").splitlines()
    except OSError:
        return []


def _postmaster_pid(datadir: Path) -> int | None:
    try:
        return int(_pid_file(datadir)[0].strip())
    except (ValueError, IndexError):
        return None


def _kill_postmaster(datadir: Path) -> None:
    """SIGKILL a postmaster still running on `datadir` (its backends exit when they notice it died)."""
    pid = _postmaster_pid(datadir)
    if pid is None or not pid_alive(pid):
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"postgres" not in cmdline:
        return  # the pid was reused by something else
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        if not pid_alive(pid):
            break
        time.sleep(0.05)


def owned_dir(root: Path, prefix: str) -> Path:
    """A fresh directory under `root` named `prefix`..., owned by this process: `sweep_stale` (another run's, or
    the next one's) removes it only once this process is gone. Every directory a run makes under the pgdata root
    must be made this way (an instruction count's copy of the data directory too)."""
    root.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    (d / OWNER_FILE).write_text(str(os.getpid()))
    return d


def sweep_stale(root: Path) -> list[Path]:
    """Remove run directories (and stop their servers) whose owning process is gone; returns what was removed."""
    removed = []
    if not root.is_dir():
        return removed
    for d in root.glob("pf-*"):
        try:
            owner = int((d / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            owner = -1
        if owner > 0 and pid_alive(owner):
            continue
        if not (d / JAILED_FILE).exists():  # a sandboxed server died with its sandbox; its pid file is not ours
            _kill_postmaster(d / "data")
        try:
            sock = Path((d / "sockdir").read_text().strip())
            if sock.name.startswith("pf-sock-"):
                shutil.rmtree(sock, ignore_errors=True)
        except OSError:
            pass
        sandboxing.remove_tree(d)
        removed.append(d)
    return removed


class Server:
    """One PostgreSQL server: `with Server(...) as s:` initdb + start, and always stop + remove on exit."""

    def __init__(self, ctx: Context, install: Install, conf_text: str, root: Path, name: str = "pg") -> None:
        self.ctx = ctx
        self.install = install
        self.conf_text = conf_text
        self.root = root
        self.name = name
        self.dir: Path | None = None
        self.sockdir: Path | None = None
        self.port = 0
        self.running = False
        self.pgoptions = ""  # PGOPTIONS for clients (e.g. a probe that forces JIT on)
        # A try-job's install runs inside the job's sandbox (recipes/sandbox.py): the postmaster is the sandbox's
        # command, started and stopped by the farm itself (pg_ctl's daemon would die with its sandbox), and every
        # client of this server (psql, pgbench) runs in a sandbox that sees the socket directory.
        self.jail: sandboxing.Sandbox | None = None
        if install.jailed:
            if ctx.sandbox is None:
                raise BenchFailed("this install runs only inside a try-job's sandbox, and the job has none")
            self.jail = ctx.sandbox.seeing(ro=[install.prefix])
        self._proc: subprocess.Popen[bytes] | None = None
        self._host_pid: int | None = None

    # -- paths and environment -------------------------------------------------------------------------
    @property
    def datadir(self) -> Path:
        assert self.dir is not None
        return self.dir / "data"

    @property
    def logfile(self) -> Path:
        assert self.dir is not None
        return self.dir / "server.log"

    def bin(self, program: str) -> Path:
        return self.install.bindir / program

    def env(self) -> dict[str, str]:
        """Environment for clients: this install's libpq, this server's socket; no password files, no service."""
        return {
            **self.install.env(),
            "PGHOST": str(self.sockdir),
            "PGPORT": str(self.port),
            "PGUSER": "postgres",
            "PGDATABASE": "postgres",
            "PGPASSFILE": str(self.dir / "no-passfile") if self.dir else "",  # absent: no warning, no password
            "PGSERVICEFILE": str(self.dir / "no-servicefile") if self.dir else "",
            "PGOPTIONS": self.pgoptions,
        }

    def client(
        self,
        argv: Sequence[str | os.PathLike[str]],
        ro: Sequence[Path] = (),
        rw: Sequence[Path] = (),
    ) -> tuple[list[str], dict[str, str]]:
        """(argv, environment) to start a client of this server by hand (subprocess.Popen): inside the sandbox,
        seeing `ro` and `rw` and the socket directory, for a jailed install; as it is otherwise."""
        if self.jail is None:
            return [str(a) for a in argv], {**os.environ, **self.env()}
        assert self.sockdir is not None
        box = self.jail.seeing(ro=ro, rw=[self.sockdir, *rw])
        return box.argv(argv, self.env()), sandboxing.host_env()

    def client_sandbox(self, ro: Sequence[Path] = (), rw: Sequence[Path] = ()) -> sandboxing.Sandbox | None:
        """The sandbox a client of this server runs in (for Context.run), or None for an install that is not jailed."""
        if self.jail is None:
            return None
        assert self.sockdir is not None
        return self.jail.seeing(ro=ro, rw=[self.sockdir, *rw])

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    # -- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> Server:
        try:
            self.create()
            self.start()
        except BaseException:
            self.destroy()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def create(self) -> None:
        """initdb into a fresh private directory and write the recipe's postgresql.conf."""
        self.dir = owned_dir(self.root, f"pf-{self.name}-")
        # Socket paths are limited to ~107 bytes, so the socket lives in a short private directory in /tmp.
        self.sockdir = Path(tempfile.mkdtemp(prefix="pf-sock-"))
        (self.dir / "sockdir").write_text(str(self.sockdir))
        self.port = free_port()
        box = None
        if self.jail is not None:
            (self.dir / JAILED_FILE).write_text("1")
            self.datadir.mkdir(mode=0o700)
            box = self.jail.seeing(rw=[self.datadir])
        initdb = [
            self.bin("initdb"),
            *("-D", self.datadir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"),
        ]
        try:
            self.ctx.run(
                initdb if box is not None else as_server_user(initdb),
                env=self.install.env(),
                timeout=300,
                capture=True,
                sandbox=box,
            )
        except CommandFailed as e:
            raise BenchFailed(f"initdb failed: {e.message}", e.log_excerpt) from None
        settings = (
            "\n# ---- perffarm recipe settings ----\n"
            + self.conf_text.rstrip()
            + "\n\n# ---- perffarm run settings ----\n"
            + "listen_addresses = ''\n"
            + f"port = {self.port}\n"
            + f"unix_socket_directories = '{self.sockdir}'\n"
        )
        try:  # the file initdb wrote: for a jailed install, sandboxed code wrote it (never follow a link it left)
            sandboxing.append_untrusted(self.datadir / "postgresql.conf", settings)
        except OSError as e:
            raise BenchFailed(f"cannot write postgresql.conf after initdb: {e}") from None

    def start(self) -> None:
        if self.jail is not None:
            self._start_jailed()
            return
        argv = as_server_user([self.bin("pg_ctl"), "-D", self.datadir, "-l", self.logfile, "-w", "-t", "120", "start"])
        try:
            self.ctx.run(argv, env=self.install.env(), timeout=180, capture=True)
        except CommandFailed as e:
            raise BenchFailed(f"the server did not start: {e.message}", self.log_tail()) from None
        self.running = True

    def _start_jailed(self) -> None:
        """The postmaster as the command of its own sandbox, which sees the install, the data directory and the
        socket directory; ready when its pid file says so (what `pg_ctl -w` waits for)."""
        assert self.sockdir is not None and self.dir is not None and self.jail is not None
        box = self.jail.seeing(rw=[self.datadir, self.sockdir])
        argv = box.argv([self.bin("postgres"), "-D", self.datadir], self.install.env())
        self.ctx.log(f"$ [sandbox] {self.bin('postgres')} -D {self.datadir}")
        with self.logfile.open("ab") as log:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=sandboxing.host_env()
            )
        self._host_pid = None
        socket_file = self.sockdir / f".s.PGSQL.{self.port}"
        deadline = time.monotonic() + 120
        while True:
            lines = _pid_file(self.datadir)
            ready = len(lines) >= 8 and lines[7].strip() == "ready"
            if ready and socket_file.exists():
                break
            if self._proc.poll() is not None:
                raise BenchFailed(
                    f"the server did not start: it exited with status {self._proc.returncode}", self.log_tail()
                )
            if time.monotonic() > deadline:
                self._stop_jailed(signal.SIGQUIT)
                raise BenchFailed("the server did not start within 120 s", self.log_tail())
            time.sleep(0.05)
        try:
            inner = int(lines[0].strip())
        except ValueError:
            inner = -1
        self._host_pid = sandboxing.host_pid(inner, self._proc.pid)
        if self._host_pid is None:
            self._stop_jailed(signal.SIGQUIT)
            raise BenchFailed(f"the server's pid file names pid {lines[0][:20]!r}, no process of its sandbox")
        self.running = True

    def _stop_jailed(self, first: int) -> None:
        """SIGINT (fast shutdown) or SIGQUIT (immediate) to the postmaster, then SIGKILL to its sandbox."""
        proc = self._proc
        if proc is None:
            return
        for sig, wait in ((first, 60.0), (signal.SIGQUIT, 30.0)):
            if proc.poll() is not None:
                break
            if self._host_pid is not None and pid_alive(self._host_pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._host_pid, sig)
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        if proc.poll() is None:
            proc.kill()  # bwrap's --die-with-parent takes every process of the sandbox with it
            proc.wait()
        self._proc = None
        self._host_pid = None
        self.running = False

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (fast, then immediate, then SIGKILL): never leaves it running."""
        if self.jail is not None:
            self._stop_jailed(signal.SIGINT if mode == "fast" else signal.SIGQUIT)
            return
        if self.dir is None or not self.datadir.exists():
            return
        for m in (mode, "immediate"):
            if _postmaster_pid(self.datadir) is None:
                break
            proc = self.ctx.run(
                as_server_user([self.bin("pg_ctl"), "-D", self.datadir, "-m", m, "-w", "-t", "60", "stop"]),
                env=self.install.env(),
                timeout=90,
                capture=True,
                check=False,
            )
            if proc.returncode == 0:
                break
        _kill_postmaster(self.datadir)
        self.running = False

    def destroy(self) -> None:
        """Stop and remove every directory this server created (also after a failure)."""
        try:
            self.stop()
        finally:
            for d in (self.dir, self.sockdir):
                if d is not None:
                    sandboxing.remove_tree(d)
            self.dir = self.sockdir = None

    # -- health and queries --------------------------------------------------------------------------------
    def postmaster_pid(self) -> int | None:
        """The postmaster's pid as the host sees it (for a jailed install, not the one in its pid file)."""
        if self.jail is not None:
            return self._host_pid if self._proc is not None and self._proc.poll() is None else None
        return _postmaster_pid(self.datadir) if self.dir else None

    def alive(self) -> bool:
        pid = self.postmaster_pid()
        return pid is not None and pid_alive(pid)

    def check_alive(self, what: str) -> None:
        if not self.alive():
            raise BenchFailed(f"the server died during {what}", self.log_tail())

    def psql(self, sql: str, timeout: float = 600, db: str = "postgres") -> str:
        """Run SQL through this install's psql (ON_ERROR_STOP); returns unaligned tuples-only output."""
        try:
            proc = self.ctx.run(
                [self.bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql],
                env=self.env(),
                timeout=timeout,
                capture=True,
                sandbox=self.client_sandbox(),
            )
        except CommandFailed as e:
            raise BenchFailed(
                f"SQL failed: {sql[:120]!r}: {e.message}", f"{e.log_excerpt}\n--- server log ---\n{self.log_tail()}"
            ) from None
        return proc.stdout.strip()

    def run_client(
        self,
        argv: Sequence[str | os.PathLike[str]],
        what: str,
        timeout: float,
        capture: bool = True,
        ro: Sequence[Path] = (),
        rw: Sequence[Path] = (),
    ) -> str:
        """Run a client program against this server; a failure carries the client output and the server log. For a
        jailed install it runs in the sandbox, seeing the socket directory, `ro` and `rw`."""
        try:
            proc = self.ctx.run(
                argv, env=self.env(), timeout=timeout, capture=capture, sandbox=self.client_sandbox(ro, rw)
            )
        except CommandFailed as e:
            alive = "running" if self.alive() else "NOT running (crashed?)"
            raise BenchFailed(
                f"{what}: {e.message}; the server is {alive}", f"{e.log_excerpt}\n--- server log ---\n{self.log_tail()}"
            ) from None
        return proc.stdout

    def pin(self, cpus: Sequence[int]) -> None:
        """Let the postmaster run only on `cpus`; backends forked from now on inherit it (the next sample's)."""
        pid = self.postmaster_pid()
        if pid is None:
            raise BenchFailed("cannot pin the server to CPUs: it is not running", self.log_tail())
        try:
            os.sched_setaffinity(pid, cpus)
        except OSError as e:
            raise BenchFailed(
                f"cannot pin the server (pid {pid}) to CPUs {list(cpus)}: {e}; run with --option pin=none"
            ) from None

    def checkpoint(self) -> None:
        self.psql("CHECKPOINT")
