"""`perffarm run`: start the Buildbot master and a local worker in the foreground; Ctrl-C stops both.

So do SIGINT, SIGTERM and SIGHUP sent to the launcher's process alone (what a supervisor does), and the
launcher's own death: the master and the worker ask the kernel for SIGTERM when it dies (PR_SET_PDEATHSIG).

Everything the processes need (master directory, worker directory, the local worker's password secret) is
created on first start under the data directory. The repository is checked first so an unreachable URL is
reported within seconds instead of a poller that hangs.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from master import buildbotdb, gitauth, gitmirror, store, webapi
from master.atomicfile import create_once
from master.health import RESTART_STATUS
from master.redact import redact_text, redact_url
from master.settings import REPO_ROOT, Settings, web_user_secret
from recipes.procs import pid_alive

LOCAL_WORKER = "local"
# What stops `perffarm run`, sent to its process alone (a supervisor, `kill PID`) or by its terminal: all three stop
# the master and the worker. A launcher killed outright (SIGKILL, a crash) takes them with it: see `_die_with_us`.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
START_TIMEOUT = 90
MIN_FREE_BYTES = 64 * 1024 * 1024  # free space on the master's file system before a master that asked is restarted
MAX_RESTARTS = 5  # restarts the master may ask for within RESTART_WINDOW before `perffarm run` gives up
RESTART_WINDOW = 3600.0


def say(message: str) -> None:
    print(f"perffarm: {message}", flush=True)


def _bin(name: str) -> str:
    """A console script from this virtualenv (the one running perffarm), else from PATH."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def worker_password(settings: Settings, name: str) -> str:
    """The worker's password secret, created (random, mode 0600) the first time a local worker needs it."""
    settings.secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return create_once(settings.secrets_dir / f"worker-{name}", lambda: secrets.token_urlsafe(24), 0o600)


def unreachable_help(settings: Settings, reason: str) -> str:
    return (
        f"cannot reach the repository {redact_url(settings.repository_url)}\n"
        f"  ({redact_text(reason)})\n"
        "This machine may have no internet access. Point perffarm at a local clone instead, e.g.\n"
        "  git clone --mirror https://git.postgresql.org/git/postgresql.git /srv/postgres.git\n"
        "    (where there is network)\n"
        "  PERFFARM_REPOSITORY_URL=/srv/postgres.git make run\n"
        "or set repository.url in your settings file (PERFFARM_CONFIG). `make demo` builds a local repository "
        "from Debian's PostgreSQL source."
    )


def prepare_master(settings: Settings, env: Mapping[str, str] | None = None) -> Path:
    """Create the Buildbot master directory (once); its buildbot.tac points at this checkout's buildbot.cfg.

    A server database (master.buildbot_db_url) is checked first, so a server that is down or a wrong password is
    reported in one line with what to do (BuildbotDbError) rather than as a traceback of the master. `env`: the
    environment the master will run with (its PERFFARM_* settings), default this process's."""
    basedir = settings.master_dir
    server_db = not buildbotdb.parse(settings.buildbot_db_url).is_sqlite
    if server_db:
        buildbotdb.check_reachable(settings)
    created = not (basedir / "buildbot.tac").exists()
    if created:
        basedir.parent.mkdir(parents=True, exist_ok=True)
        say(f"creating the Buildbot master in {basedir}")
        # create-master makes the database it is given on its command line, where a password would be visible to
        # every user (ps): for a server database it gets a throwaway in-memory one, and upgrade-master, which
        # reads buildbot.cfg and its secrets like the master does, creates the tables on the server.
        db = "sqlite://" if server_db else settings.buildbot_db_url
        subprocess.run(
            [
                _bin("buildbot"),
                "create-master",
                "--quiet",
                f"--config={REPO_ROOT / 'buildbot.cfg'}",
                f"--db={db}",
                str(basedir),
            ],
            check=True,
            env=env,
        )
    if server_db or not created:
        done = subprocess.run(
            [_bin("buildbot"), "upgrade-master", "--quiet", str(basedir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=env,
        )
        if done.returncode != 0:  # its messages (a config error, the database's) say why: show their end
            raise MasterSetupError(
                f"`buildbot upgrade-master {basedir}` failed (status {done.returncode}):\n"
                + redact_text(done.stdout[-3000:])
            )
    return basedir


class MasterSetupError(RuntimeError):
    """Creating or upgrading the master directory and Buildbot's database failed; the message has Buildbot's."""


def prepare_worker(settings: Settings, name: str = LOCAL_WORKER) -> Path:
    """(Re)write the local worker's directory so it points at this master's current port and password."""
    basedir = settings.worker_dir(name)
    basedir.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            _bin("buildbot-worker"),
            "create-worker",
            "--quiet",
            "--force",
            "--umask=0o22",
            str(basedir),
            f"127.0.0.1:{settings.worker_port}",
            name,
            worker_password(settings, name),
        ],
        check=True,
    )
    return basedir


def _api(settings: Settings, path: str) -> dict | None:
    return webapi.get(settings.web_port, path)


def banner(settings: Settings, master_dir: Path) -> str:
    """What `make run` prints once the farm runs: where to look, and how to measure the head now (the first poll
    only records refs, so a newcomer would otherwise wait for the next commit upstream to see anything)."""
    repo = redact_url(settings.repository_url)
    builder = f"{settings.recipes[0]}@{settings.worker_names[0]}" if settings.recipes and settings.worker_names else ""
    return (
        f"  web UI        {settings.web_url}\n"
        f"  history site  {settings.site_url}  (files: {settings.site_dir})\n"
        f"  REST API      {settings.web_url}api/v2/\n"
        f"  results DB    {settings.results_db}\n"
        f"  master log    {master_dir / 'twistd.log'}\n"
        f"  status        .venv/bin/perffarm status\n"
        f"  watching      {repo} (every {settings.poll_interval} s)\n"
        "  measure now   the first poll only records the refs: nothing is measured until a new commit lands.\n"
        f"                To measure the head now: open {settings.web_url}#/builders, pick {builder or 'a builder'},\n"
        '                "Measure a commit", branch master, revision: the sha that\n'
        f"                git ls-remote {repo} refs/heads/master  prints"
    )


def running_master(settings: Settings) -> str | None:
    """How a master on this data directory shows it is running, in words; None when nothing shows it.

    `perffarm run` (and the tests' farm) start Buildbot with --nodaemon, which writes no pid file: such a master
    shows by answering on its web port (what `perffarm status` and `bisect` ask too). A master daemonized by
    `buildbot start <data_dir>/master` leaves twistd.pid there. Either holds for a master of any perffarm
    version, the older one a newer checkout must not migrate the database under."""
    pidfile = settings.master_dir / "twistd.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        pid = 0
    if pid > 0 and pid_alive(pid):
        return f"process {pid} of {pidfile} is running"
    if _api(settings, "masters") is not None:
        return f"a Buildbot master answers on port {settings.web_port} (http://127.0.0.1:{settings.web_port}/)"
    return None


def _wait(what: str, ready, procs: list[subprocess.Popen], logfile: Path, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: a process exited with status {p.returncode}; see {logfile}")
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not happen within {timeout:.0f} s; see {logfile}")


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):  # the worker first, then the master
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def wait_for_room(
    path: Path,
    need: int = MIN_FREE_BYTES,
    interval: float = 1.0,
    report_every: float = 30.0,
    timeout: float | None = None,
) -> bool:
    """Wait until the file system holding `path` has `need` bytes free, saying so every `report_every` s."""
    start = time.monotonic()
    last: float | None = None
    while True:
        free = shutil.disk_usage(path).free
        if free >= need:
            return True
        now = time.monotonic()
        if last is None or now - last >= report_every:
            say(
                f"waiting for free space: {free // 1024 // 1024} MiB free on the file system of {path}, "
                f"{need // 1024 // 1024} MiB needed (free some, e.g. old twistd.log.* or incoming/rejected/)"
            )
            last = now
        if timeout is not None and now - start >= timeout:
            return False
        time.sleep(interval)


def wait_for_database(
    settings: Settings, interval: float = 2.0, report_every: float = 30.0, timeout: float | None = None
) -> bool:
    """Wait until a server Buildbot database (master.buildbot_db_url) answers, saying why every `report_every` s;
    at once for sqlite."""
    start = time.monotonic()
    last: float | None = None
    while True:
        try:
            buildbotdb.check_reachable(settings, timeout=max(1, int(interval * 5)))
            return True
        except buildbotdb.BuildbotDbError as e:
            now = time.monotonic()
            if last is None or now - last >= report_every:
                say(f"waiting for Buildbot's database: {e}")
                last = now
            if timeout is not None and now - start >= timeout:
                return False
        time.sleep(interval)


class RestartBudget:
    """At most `limit` restarts within `window` seconds: a master that keeps failing is not restarted forever."""

    def __init__(self, limit: int = MAX_RESTARTS, window: float = RESTART_WINDOW, clock=time.monotonic):
        self.limit, self.window, self.clock = limit, window, clock
        self.times: list[float] = []

    def take(self) -> bool:
        now = self.clock()
        self.times = [t for t in self.times if now - t < self.window]
        if len(self.times) >= self.limit:
            return False
        self.times.append(now)
        return True


# Run in a fresh interpreter between fork and the real program: PR_SET_PDEATHSIG asks the kernel to send SIGTERM to
# this process when the launcher dies, however it dies, and survives the exec. If the launcher died before the
# request was made, the parent is already someone else: exit instead of running unowned. A separate interpreter
# rather than Popen's preexec_fn, which is unsafe with the site server's threads running in the launcher.
_PDEATHSIG_EXEC = """
import ctypes, os, signal, sys
PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
    sys.exit("perffarm: prctl(PR_SET_PDEATHSIG) failed: " + os.strerror(ctypes.get_errno()))
if os.getppid() != int(sys.argv[1]):
    sys.exit("perffarm: the launcher exited before " + sys.argv[2] + " started; not starting it")
os.execvp(sys.argv[2], sys.argv[2:])
"""


def _die_with_us(argv: list[str]) -> list[str]:
    """`argv`, run so that it gets SIGTERM when this process dies, even by SIGKILL: the master and the worker run
    in their own sessions (a terminal's Ctrl-C reaches only the launcher, which stops the worker before the
    master), so nothing else would stop them once the launcher is gone (Linux only, like the farm)."""
    return [sys.executable, "-c", _PDEATHSIG_EXEC, str(os.getpid()), *argv]


def _start_master(settings: Settings, master_dir: Path, procs: list[subprocess.Popen]) -> subprocess.Popen:
    # Own session: Ctrl-C reaches only us, and we stop the worker before the master.
    proc = subprocess.Popen(
        _die_with_us([_bin("buildbot"), "start", "--nodaemon", str(master_dir)]),
        cwd=master_dir,
        start_new_session=True,
    )
    try:
        _wait("master start", lambda: _api(settings, "masters") is not None, [proc, *procs], master_dir / "twistd.log")
    except BaseException:
        _stop([proc])
        raise
    return proc


def _start_site(settings: Settings):
    """Publish the site (so its URL works at once) and serve it on 127.0.0.1 from a thread of this process.

    The first publish of an empty farm is quick and runs before the URL is printed; an existing site is
    served as it is while a full re-publish (templates may have changed) runs in the background.
    """
    import threading

    from master.publish import publish_all, serve

    def publish() -> None:
        try:
            report = publish_all(settings)
            say(f"site published: {report.files_written} files in {report.seconds:.1f} s{report.failed()}")
        except Exception as e:  # noqa: BLE001 - the farm runs without a site; say why
            say(f"publishing the site failed: {type(e).__name__}: {e} (retry with `perffarm publish`)")

    if settings.site_dir.is_symlink():
        threading.Thread(target=publish, name="perffarm-publish", daemon=True).start()
    else:
        publish()
    _, _, server = serve(settings.site_dir, "127.0.0.1", settings.site_port)
    return server


def data_dir_problem(path: Path) -> str | None:
    """Why this user cannot keep the farm's state in `path` (master.data_dir), in one line; None when it can.

    A service runs the farm as its own user (docs/operators.md), which need not own the directory someone made
    for it as root: say so, rather than a traceback of mkdir or SQLite's "unable to open database file"."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        reason = e.strerror or type(e).__name__
    else:
        if os.access(path, os.W_OK | os.X_OK):
            return None
        reason = "not writable"
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = str(os.geteuid())
    return (
        f"master.data_dir {path}: {reason} for user {user}, who runs the farm: create it owned by that user "
        f"(e.g. install -d -o {user} {path}) or point master.data_dir elsewhere"
    )


def run(settings: Settings, check_repo: bool = True) -> int:
    """Start master (+ local worker), print where to look, wait for Ctrl-C; returns the exit status."""
    problem = data_dir_problem(settings.data_dir)
    if problem is not None:
        print(f"perffarm: {problem}", file=sys.stderr)
        return 2
    if check_repo:
        say(f"checking the repository {redact_url(settings.repository_url)} ...")
        try:
            credentials = gitauth.read_credentials(settings)
        except gitauth.CredentialsError as e:
            print(f"perffarm: {e}", file=sys.stderr)
            return 2
        reason = gitmirror.check_reachable(settings.repository_url, timeout=15, credentials=credentials)
        if reason is not None:
            print("perffarm: " + unreachable_help(settings, reason), file=sys.stderr)
            return 2
    if settings.run_local_worker:
        worker_password(settings, LOCAL_WORKER)
    missing = [w for w in settings.worker_names if not (settings.secrets_dir / f"worker-{w}").exists()]
    if missing:
        print(
            "perffarm: no password secret for worker(s) " + ", ".join(missing) + ".\n"
            f"Create {settings.secrets_dir}/worker-NAME (mode 0600) holding each worker's password, "
            "the one given to `buildbot-worker create-worker` on that host (see workers/README.md).",
            file=sys.stderr,
        )
        return 2
    missing = [u for u in settings.web_users if not (settings.secrets_dir / web_user_secret(u)).exists()]
    if missing:
        print(
            "perffarm: no password secret for web user(s) " + ", ".join(missing) + ".\n"
            f"Create {settings.secrets_dir}/{web_user_secret('NAME')} (mode 0600) holding each user's password; "
            "they log in to the web UI to force builds (see docs/security.md).",
            file=sys.stderr,
        )
        return 2
    try:  # the results database at this code's schema now: the other perffarm verbs never migrate it
        store.connect(settings.results_db, migrate=True).close()
    except (store.StoreError, sqlite3.Error) as e:
        print(f"perffarm: the results database {settings.results_db}: {e}", file=sys.stderr)
        return 2
    try:
        master_dir = prepare_master(settings)
    except buildbotdb.BuildbotDbError as e:
        print(f"perffarm: {e}", file=sys.stderr)
        return 2
    except MasterSetupError as e:
        print(f"perffarm: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(
            f"perffarm: preparing the Buildbot master failed ({e.cmd[1]} exited with status {e.returncode}); "
            "see the messages above",
            file=sys.stderr,
        )
        return 1
    procs: list[subprocess.Popen] = []
    site_server = None
    interrupted = stopping = False

    def on_signal(signum, frame):  # noqa: ARG001
        nonlocal interrupted
        if interrupted or stopping:  # a second signal (a supervisor's escalation) must not cut the stop short
            return  # and orphan the master (no message: a print in a handler can land inside another print)
        interrupted = True
        raise KeyboardInterrupt

    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        try:
            site_server = _start_site(settings)
        except OSError as e:
            print(
                f"perffarm: cannot serve the site on 127.0.0.1:{settings.site_port}: {e}\n"
                "Another process holds the port? Set PERFFARM_SITE_PORT (or [site] port) to a free one.",
                file=sys.stderr,
            )
            return 2
        say("starting the Buildbot master ...")
        procs.append(_start_master(settings, master_dir, []))
        if settings.run_local_worker:
            worker_dir = prepare_worker(settings)
            say("starting the local worker ...")
            procs.append(
                subprocess.Popen(
                    _die_with_us([_bin("buildbot-worker"), "start", "--nodaemon", str(worker_dir)]),
                    cwd=worker_dir,
                    start_new_session=True,
                )
            )

            def connected() -> bool:
                data = _api(settings, f"workers/{LOCAL_WORKER}")
                return bool(data and data.get("workers") and data["workers"][0].get("connected_to"))

            _wait("local worker connection", connected, procs, worker_dir / "twistd.log")
        say("running. Ctrl-C stops it.")
        print(banner(settings, master_dir), flush=True)
        budget = RestartBudget()
        while True:
            for i, p in enumerate(procs):
                if p.poll() is None:
                    continue
                if i == 0 and p.returncode == RESTART_STATUS and budget.take():
                    say(
                        f"the master stopped itself: Buildbot's database could not be written (see "
                        f"{master_dir / 'twistd.log'}); starting it again once the disk has room and the "
                        "database answers"
                    )
                    wait_for_room(master_dir)
                    wait_for_database(settings)
                    procs[0] = _start_master(settings, master_dir, procs[1:])
                    say("the master is running again; interrupted builds are re-run")
                    continue
                say(f"a farm process exited with status {p.returncode}; stopping (see the logs above)")
                return 1
            time.sleep(1)
    except KeyboardInterrupt:
        say("stopping ...")
        return 0 if interrupted else 130
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"perffarm: {e}", file=sys.stderr)
        return 1
    finally:
        stopping = True
        _stop(procs)
        if site_server is not None:
            site_server.shutdown()
            site_server.server_close()
        for s, handler in old.items():
            signal.signal(s, handler)
        if procs:
            say("stopped.")
