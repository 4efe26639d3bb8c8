"""A try-job's untrusted code in a bubblewrap sandbox: it sees its own files and the system's programs, nothing else.

A try-job's patch is someone else's program: its build scripts, its server, its clients and anything they start
run on the worker. Every such command runs through bubblewrap (Debian package ``bubblewrap``, the sandbox of
Flatpak; see docs/security.md for why this one) with:

* the system's programs and libraries read-only (``/usr`` and its merged-usr links, a few named files of ``/etc``),
  a private ``/etc/passwd`` naming one sandbox user, and nothing else of the host's file systems: no home
  directory, no worker directory, no clone, no cache, no data directory or secrets of the master;
* the paths one command needs, named by the caller, at their own places: read-only (``ro``) or writable (``rw``);
* a fresh, empty ``/tmp``, ``/dev/shm``, ``/dev`` and ``/proc`` of its own; everything else read-only;
* its own user namespace (one unprivileged uid, no capabilities, no nested user namespaces, no new privileges),
  pid namespace (it cannot see, signal or trace any process of the farm), network namespace (no network: clients
  reach a sandboxed server through the unix socket in a directory both are given), IPC and UTS namespaces;
* a cleared environment with only the variables the caller names, a new session (no terminal to inject into) and
  SIGKILL when the farm's process that started it dies.

The same sandbox works when the worker runs as root (CI containers) and as an ordinary user. Where it cannot be set
up (no bwrap, user namespaces switched off), ``check()`` says why and what to do, and the job refuses to run the
patch: a try-job never runs unsandboxed.

Stdlib only: this module is shipped to workers inside the recipes zipapp.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

BWRAP = "bwrap"
BWRAP_ENV = "PERFFARM_WORKER_BWRAP"  # in the worker's environment: bwrap's path, when it is not the one on PATH
UID = GID = 1000  # the one user inside; files of the paths given appear as its own
USER = "perffarm-sandbox"
# The directories of a merged-/usr system that are links into /usr (or, on an older layout, directories).
SYSTEM_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What of /etc the tools need, and nothing that could be private: the loader's cache, the alternatives links (cc,
# awk), time zone data. /etc/passwd and /etc/group are the sandbox's own.
SYSTEM_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone")
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}


class SandboxUnavailable(Exception):
    """bubblewrap cannot set up a sandbox on this worker; the message says why and what to do."""


@dataclass(frozen=True)
class Bind:
    """A host path shown inside the sandbox at `inside` (usually the same path), read-only or writable."""

    host: Path
    inside: Path
    writable: bool


@dataclass(frozen=True)
class Sandbox:
    """One sandbox shape: the private /etc files, and the host paths a command may see (read-only or writable)."""

    etc: Path  # holds the sandbox's own passwd and group (made by `create`)
    binds: tuple[Bind, ...] = ()
    bwrap: str = BWRAP

    @staticmethod
    def create(root: Path, bwrap: str | None = None) -> Sandbox:
        """A sandbox whose private files live under `root` (a directory only the farm writes)."""
        etc = root / "etc"
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "passwd").write_text(f"{USER}:x:{UID}:{GID}:perffarm try-job sandbox:/tmp:/bin/sh\n")
        (etc / "group").write_text(f"{USER}:x:{GID}:\n")
        return Sandbox(etc=etc, bwrap=bwrap or shutil.which(BWRAP) or BWRAP)

    def seeing(self, ro: Iterable[str | os.PathLike[str]] = (), rw: Iterable[str | os.PathLike[str]] = ()) -> Sandbox:
        """This sandbox with more host paths at their own places: `ro` read-only, then `rw` writable (a writable
        path under a read-only one stays writable). Each must exist."""
        more = [Bind(Path(p), Path(p), False) for p in ro] + [Bind(Path(p), Path(p), True) for p in rw]
        return replace(self, binds=(*self.binds, *more))

    def mounting(self, host: Path, inside: Path, writable: bool = True) -> Sandbox:
        """This sandbox with the host path `host` shown at `inside` (hiding whatever the host has there)."""
        return replace(self, binds=(*self.binds, Bind(host, inside, writable)))

    def argv(
        self, command: Sequence[str | os.PathLike[str]], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> list[str]:
        """The bwrap command line that runs `command` inside, with only `env` (over a minimal PATH/HOME/LANG)."""
        out = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--uid",
            str(UID),
            "--gid",
            str(GID),
            "--hostname",
            "sandbox",
            "--clearenv",
        ]
        for key, value in {**BASE_ENV, **(env or {})}.items():
            out += ["--setenv", key, value]
        out += ["--ro-bind", "/usr", "/usr"]
        for top in SYSTEM_TOP:
            p = Path("/") / top
            if p.is_symlink():
                out += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                out += ["--ro-bind", str(p), str(p)]
        for name in SYSTEM_ETC:
            out += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        out += ["--ro-bind", str(self.etc / "passwd"), "/etc/passwd"]
        out += ["--ro-bind", str(self.etc / "group"), "/etc/group"]
        out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
        for b in self.binds:
            out += ["--bind" if b.writable else "--ro-bind", str(b.host), str(b.inside)]
        # the sandbox's own root (where the mount points' parents were made) read-only too: what is writable
        # inside is exactly the `rw` paths, /tmp and /dev/shm
        out += ["--remount-ro", "/", "--chdir", str(cwd or "/tmp")]
        return [*out, "--", *(str(a) for a in command)]


def host_env() -> dict[str, str]:
    """The environment bwrap itself runs with: nothing of the worker's (the sandbox's own is set by --setenv)."""
    return {"PATH": os.environ.get("PATH", BASE_ENV["PATH"]), "LANG": "C.UTF-8"}


def check(root: Path) -> Sandbox:
    """A working sandbox under `root`, or SandboxUnavailable saying why and what to do.

    Runs one command inside: bwrap must exist, the kernel must let this user create user namespaces, and the
    command must find /tmp writable and `root` (a host directory it is not given) absent."""
    wanted = os.environ.get(BWRAP_ENV) or BWRAP
    path = shutil.which(wanted)
    if path is None:
        raise SandboxUnavailable(
            f"bubblewrap ({wanted}) is not installed on this worker: apt-get install bubblewrap "
            "(a try-job's patch runs only inside its sandbox; docs/security.md)"
        )
    sandbox = Sandbox.create(root, path)
    probe = ["/bin/sh", "-c", 'test -w /tmp && test ! -e "$1"', "sh", str(root)]
    try:
        proc = subprocess.run(
            sandbox.argv(probe), env=host_env(), capture_output=True, text=True, errors="replace", timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxUnavailable(f"bubblewrap ({path}) could not be started: {e}") from None
    if proc.returncode != 0:
        why = " ".join(proc.stderr.split())[:300] or f"exit status {proc.returncode}"
        raise SandboxUnavailable(
            f"bubblewrap ({path}) cannot set up a sandbox on this worker: {why}. It needs unprivileged user "
            "namespaces (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 where the kernel "
            "has it, and on Ubuntu an AppArmor profile that allows bwrap); docs/security.md"
        )
    return sandbox


# -- reading and removing what sandboxed code wrote ---------------------------------------------------------------


def read_untrusted(path: Path, limit: int = 64 << 20) -> bytes:
    """The bytes of a file sandboxed code could have written: never through a symlink (the farm would read the
    link's target with its own rights), only a regular file, at most `limit` bytes. OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if st.st_size > limit:
            raise OSError(f"{path} is {st.st_size} bytes, over the {limit}-byte limit")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise OSError(f"{path} grew over the {limit}-byte limit")
        return data
    finally:
        os.close(fd)


def append_untrusted(path: Path, text: str) -> None:
    """Append to a file sandboxed code wrote (postgresql.conf after initdb): never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove a directory sandboxed code wrote into, whatever modes it left (a directory it made unreadable would
    stop shutil.rmtree for a worker that is not root). Symlinks are removed, never followed."""

    def unlock(func, p, exc) -> None:  # type: ignore[no-untyped-def]
        parent = Path(p).parent
        try:
            os.chmod(parent, 0o700, follow_symlinks=False)
            if Path(p).is_dir() and not Path(p).is_symlink():
                os.chmod(p, 0o700)
                shutil.rmtree(p, onerror=unlock)
            else:
                os.unlink(p)
        except FileNotFoundError:
            pass

    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=unlock)


# -- processes inside a sandbox, seen from the host ----------------------------------------------------------------


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def _descends_from(pid: int, ancestor: int) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        if pid == ancestor:
            return True
        try:
            pid = int(_status(pid).get("PPid", "0"))
        except ValueError:
            return False
        seen += 1
    return pid == ancestor


def host_pid(sandbox_pid: int, bwrap_pid: int) -> int | None:
    """The host's pid of the process that is `sandbox_pid` in the pid namespace of the sandbox bwrap process
    `bwrap_pid` started, or None. A pid read from a file sandboxed code wrote (postmaster.pid) is only ever
    looked up among that sandbox's own processes, so it can name nothing else."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        ns = _status(int(entry.name)).get("NSpid", "").split()
        if len(ns) >= 2 and ns[-1] == str(sandbox_pid) and _descends_from(int(entry.name), bwrap_pid):
            return int(entry.name)
    return None
