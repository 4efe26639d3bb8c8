"""Follow the operator's guide (docs/operators.md) as written, on hosts made of network namespaces.

The guide marks what a reader runs: an HTML comment `<!-- guide: HOST [file|output] -->` (invisible when the page
is rendered) before a fenced block. HOST is `master` or a worker host (`bench1`), reached as HOST.example.org. A
plain block is shell commands, run in order as root on that host; a `file` block is a file whose first line is a
comment naming its path; an `output` block holds lines that the host's previous command must print (it is re-run
until it does: a worker takes a moment to connect).

A host is a network namespace of `tests.fleet_support.Fleet` with its own files where the guide puts them: every
command runs in a private mount namespace where /srv/perffarm, /etc/systemd/system and /root are directories of
this run (bind mounts over a tmpfs /srv), so paths stay as the guide writes them and a path the guide gets wrong
fails. Names resolve through the namespace's own /etc/hosts (`ip netns exec` mounts /etc/netns/NS/hosts), so
`--master master.example.org:9989` is used as written. The farm's user `perffarm` is played by an existing
unprivileged user (`FARM_USER`), so an ownership or permission step the guide forgets fails here too.

A few commands cannot run as written in a test; `SUBSTITUTIONS` lists each with what is done instead, and
`tests/unit/test_operators_guide.py` checks every entry still matches a command of the guide.
"""

from __future__ import annotations

import grp
import importlib.metadata
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fleet_support import NETNS_ETC, Fleet, Host
from tests.harness import ROOT

GUIDE = ROOT / "docs" / "operators.md"
DOMAIN = "example.org"
FARM_USER = "nobody"  # plays `perffarm`: an unprivileged user that exists on every Debian system
# What the guide's shell has: root's login PATH on Debian, not the test's virtualenv.
ROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "LANG": "C.UTF-8",
}
# What `sudo -u perffarm` gives a command: the same, with the farm user's home.
FARM_HOME = "/srv/perffarm"  # `adduser --home` in the guide: systemd and sudo set HOME from the account
FARM_ENV = {**ROOT_ENV, "HOME": FARM_HOME, "USER": "perffarm", "LOGNAME": "perffarm"}
# What systemd gives a unit's process (before the unit's Environment=): its default PATH and the User='s account.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
# Directories each host has of its own, as the guide's absolute paths see them.
HOST_DIRS = ("/srv/perffarm", "/etc/systemd/system", "/root")
MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!-- guide: (?P<host>[a-z0-9]+)(?: (?P<kind>file|output))? -->\n"
    r"[ \t]*```[a-z]*\n(?P<body>.*?)^[ \t]*```[ \t]*$",
    re.M | re.S,
)
FENCE = re.compile(r"^[ \t]*```([a-z]*)[ \t]*$", re.M)
# The guide's placeholders, replaced in `file` blocks (each must occur exactly once, or the test fails).
FILE_SUBSTITUTIONS = (
    (
        'url = "https://git.postgresql.org/git/postgresql.git"',
        'url = "{repo}"',
        "a small git repository of the test instead of postgres.git (no network here)",
    ),
    (
        'enabled = ["pg-quick"]',
        'enabled = ["fixture"]',
        "the fixture recipe (a tiny C program) instead of a PostgreSQL build and benchmark (minutes)",
    ),
)
# Commands that are not run as written, with what is done instead. Matched against each command's words.
SUBSTITUTIONS = (
    ("adduser", "not run: creates no system user on the test machine; FARM_USER plays `perffarm`"),
    (
        "apt-get install",
        "`dpkg-query --show` on the same packages instead: they must be installed here already (no network, no "
        "change to the test machine); any error message, such as a package list file that is not there, fails",
    ),
    (
        "git clone https://git.example.org/perffarm.git",
        "a clone of this checkout's HEAD (`git fetch --depth 1`), with its uncommitted changes copied on top",
    ),
    (
        "make setup",
        "no apt-get and no pip from the network: `python3 -m venv --without-pip .venv` with the host's python3, "
        "the test's own site-packages and the checkout on its path (.pth files, as pip's editable install writes), "
        "and the test's console scripts (perffarm, buildbot, ...) copied in with their first line pointing at it",
    ),
    (
        "pip install",
        "not run (no network): the package's version must match the test's own, whose site-packages and console "
        "scripts are put into the virtualenv the guide just made (as for `make setup`)",
    ),
    ("systemctl daemon-reload", "nothing to do: each start reads the unit file the guide installed"),
    (
        "systemctl enable",
        "the unit the guide installed in /etc/systemd/system is parsed and, with --now, started as systemd would: "
        "its WorkingDirectory, its Environment= and systemd's PATH and HOME only, its ExecStart (%i expanded), as "
        "FARM_USER (User=perffarm must be set); the output is the unit's journal. Restart= is not played: a unit "
        "that exits fails the test",
    ),
    ("systemctl restart", "the unit is stopped (SIGTERM, as KillMode says) if it runs, and started as above"),
    ("journalctl -u", "the unit's output so far; for the master, waits for its banner (or fails when it exits)"),
    ("scp", "a copy of the file from that host's directories (no ssh server in a namespace)"),
    ("ssh", "the command runs on that host as root (no ssh server in a namespace)"),
    ("sudo -u perffarm", "run as FARM_USER (setpriv) with the command's own environment assignments"),
    ("perffarm:", "owner FARM_USER: (chown)"),
    ("-o perffarm -g perffarm", "-o FARM_USER -g its group (install)"),
)


class GuideFailed(AssertionError):
    """Following the guide did not work: which line of docs/operators.md, on which host, and what happened."""


@dataclass(frozen=True)
class Block:
    host: str
    kind: str  # "sh", "file" or "output"
    text: str
    line: int  # of the marker in the guide


def blocks(markdown: str) -> list[Block]:
    """The marked blocks of the guide, in order."""
    out = []
    for m in MARKER.finditer(markdown):
        indent = len(m["indent"])
        lines = [line[indent:] if line[:indent].strip() == "" else line for line in m["body"].splitlines()]
        out.append(Block(m["host"], m["kind"] or "sh", "\n".join(lines), markdown.count("\n", 0, m.start()) + 1))
    return out


def unmarked_fences(markdown: str) -> list[int]:
    """Lines of fenced blocks that open without a marker before them (something a reader runs, the test not)."""
    marked = {m.start("body") for m in MARKER.finditer(markdown)}
    lines, opening = [], True
    for m in FENCE.finditer(markdown):
        if opening and m.end() + 1 not in marked:
            lines.append(markdown.count("\n", 0, m.start()) + 1)
        opening = not opening
    return lines


def commands(text: str) -> list[str]:
    """The shell commands of a block: continuation lines joined, split at `&&` (each part stops the rest)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        if line.strip() and not line.strip().startswith("#"):
            out += [part.strip() for part in line.split("&&")]
    return out


def words(command: str) -> list[str]:
    return shlex.split(command, comments=True)


def substitution_for(command: str) -> str | None:
    """The SUBSTITUTIONS entry (its key) that applies to a command, or None when it runs as written. A key matches
    the start of the command's words (the first word without its directory: `/x/bin/pip` is `pip`), or, for an
    owner (`perffarm:`, `-o perffarm ...`), anywhere in them."""
    w = words(command)
    if not w:
        return None
    text = " ".join([w[0].rsplit("/", 1)[-1], *w[1:]])
    for key, _ in SUBSTITUTIONS:
        if text == key or text.startswith(key + " "):
            return key
    for key, _ in SUBSTITUTIONS:
        if key.startswith("-") or key.endswith(":"):
            if f" {key} " in f" {text} ":
                return key
    return None


# ---------------------------------------------------------------------------------------------- systemd units


@dataclass(frozen=True)
class Unit:
    """A unit file as systemd reads it: sections of keys, each key with its values in order."""

    name: str
    sections: dict[str, dict[str, list[str]]]

    def get(self, section: str, key: str, default: str | None = None) -> str | None:
        values = self.sections.get(section, {}).get(key)
        return values[-1] if values else default

    def all(self, section: str, key: str) -> list[str]:
        return self.sections.get(section, {}).get(key, [])


def parse_unit(name: str, text: str, instance: str = "") -> Unit:
    """Parse a unit file; expand the specifiers %i (the instance) and %%; any other specifier is an error."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is None or "=" not in line:
            raise ValueError(f"{name} line {n}: not `[Section]` or `Key=value`: {raw!r}")
        key, value = (s.strip() for s in line.split("=", 1))
        unknown = {m for m in re.findall(r"%(.)", value) if m not in "i%"}
        if unknown:
            raise ValueError(f"{name} line {n}: specifier(s) {sorted(unknown)} are not ones the test expands")
        current.setdefault(key, []).append(re.sub(r"%([i%])", lambda m: instance if m[1] == "i" else "%", value))
    return Unit(name, sections)


# ---------------------------------------------------------------------------------------------- the hosts


@dataclass
class Service:
    unit: Unit
    proc: subprocess.Popen
    journal: Path


@dataclass
class GuideHost:
    name: str  # as in the guide's markers: master, bench1
    netns: Host
    root: Path  # this host's directories (HOST_DIRS) live under it
    cwd: str = "/root"
    last_command: str = ""
    last_output: str = ""

    @property
    def fqdn(self) -> str:
        return f"{self.name}.{DOMAIN}"

    def local(self, path: str) -> Path:
        """Where a path of this host is in the test's file system."""
        for d in HOST_DIRS:
            if path == d or path.startswith(d + "/"):
                return self.root / d.lstrip("/") / path[len(d) :].lstrip("/")
        raise GuideFailed(f"{path} is outside what host {self.name} has of its own ({', '.join(HOST_DIRS)})")


@dataclass
class GuideRun:
    """One reading of the guide: two hosts on a fleet, the guide's blocks run in order, its services running."""

    work: Path  # readable by FARM_USER
    repo: Path  # the repository the settings file's url is replaced with
    markdown: str = field(default_factory=lambda: GUIDE.read_text())
    expect_timeout: float = 90  # an output block's lines to appear
    start_timeout: float = 180  # the master's banner to appear
    fleet: Fleet | None = None
    hosts: dict[str, GuideHost] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)  # what was run where, and what was substituted

    def __post_init__(self) -> None:
        pw = pwd.getpwnam(FARM_USER)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.group = grp.getgrgid(pw.pw_gid).gr_name

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> GuideRun:
        names = list(dict.fromkeys(b.host for b in blocks(self.markdown)))
        if names[:1] != ["master"]:
            raise GuideFailed(f"the guide's first host should be the master, not {names[:1]}")
        self.fleet = Fleet(len(names)).create()
        try:
            for name, host in zip(names, self.fleet.hosts, strict=True):
                root = self.work / "hosts" / name
                for d in HOST_DIRS:
                    (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
                (root / "root").chmod(0o700)
                self.hosts[name] = GuideHost(name, host, root)
            for h in self.hosts.values():  # each host's own /etc/hosts: every host by its name
                lines = ["127.0.0.1 localhost"] + [f"{o.netns.address} {o.fqdn} {o.name}" for o in self.hosts.values()]
                (NETNS_ETC / h.netns.netns / "hosts").write_text("\n".join(lines) + "\n")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in list(self.services):
            self._stop_service(name)
        for h in self.hosts.values():  # what a unit left running (systemd's cgroup would hold it): the whole host
            pids = subprocess.run(["ip", "netns", "pids", h.netns.netns], capture_output=True, text=True).stdout
            for pid in pids.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        if self.fleet is not None:
            self.fleet.destroy()

    # ------------------------------------------------------------------------------------------ following
    def follow(self) -> None:
        """Every marked block of the guide, in order; GuideFailed names the first step that did not work."""
        for block in blocks(self.markdown):
            host = self.hosts[block.host]
            where = f"docs/operators.md line {block.line} ({block.host})"
            if block.kind == "file":
                self._write_file(host, block, where)
            elif block.kind == "output":
                self._expect(host, block, where)
            else:
                for command in commands(block.text):
                    self.command(host, command, where)

    def command(self, host: GuideHost, command: str, where: str) -> str:
        """Run one command of the guide on `host`, or what SUBSTITUTIONS says instead; returns its output."""
        w = words(command)
        key = substitution_for(command)
        self.log.append(f"{host.name}$ {command}" + (f"\n    (substituted: {key})" if key else ""))
        try:
            out = self._dispatch(host, command, w, key)
        except GuideFailed as e:
            raise GuideFailed(f"{where}: `{command}`:\n{e}") from None
        host.last_command, host.last_output = command, out
        return out

    def _dispatch(self, host: GuideHost, command: str, w: list[str], key: str | None) -> str:
        if not w:
            return ""
        if key == "adduser":
            return ""
        if key == "apt-get install":
            r = self.run(host, re.sub(r"^\s*apt-get install\b", "dpkg-query --show --", command))
            if r.stderr.strip():
                raise GuideFailed(r.stderr)
            return r.stdout
        if key == "git clone https://git.example.org/perffarm.git":
            self._clone(host.local(w[3]))
            return ""
        if key == "make setup":
            self._venv_from_tests(host, host.local(host.cwd) / ".venv", f"{host.cwd}/.venv", checkout=host.cwd)
            return ""
        if key == "pip install":
            venv = w[0][: -len("/bin/pip")]
            for spec in w[2:]:
                self._check_pinned(spec)
            self._venv_from_tests(host, host.local(venv), venv, checkout=None)
            return ""
        if key == "systemctl daemon-reload":
            return ""
        if w[0] == "systemctl":
            return self._systemctl(host, w)
        if key == "journalctl -u":
            return self._journal(w[w.index("-u") + 1])
        if key == "scp":
            return self._scp(host, w[1:])
        if key == "ssh":
            other = self._host_named(w[1])
            return self.run(other, shlex.join(w[2:]), check=True).stdout
        if w[0] == "cd":
            target = w[1] if w[1].startswith("/") else f"{host.cwd}/{w[1]}"
            self.run(host, "true", cwd=target, check=True)
            host.cwd = target
            return ""
        text = command
        if key == "sudo -u perffarm":
            text = re.sub(r"\bsudo -u perffarm\s+", "", text)
            return self.run(host, text, check=True, user=True).stdout
        text = re.sub(r"(?<=\s)perffarm:(?=\s|$)", f"{FARM_USER}:", text)
        text = re.sub(r"-o perffarm -g perffarm\b", f"-o {FARM_USER} -g {self.group}", text)
        if re.search(r"(^|\s)(sudo|su|runuser)\s", text):
            raise GuideFailed("a command runs as another user in a way this test does not know")
        return self.run(host, text, check=True).stdout

    # ------------------------------------------------------------------------------------------ running on a host
    def host_argv(self, host: GuideHost, argv: list[str], cwd: str | None = None, user: bool = False) -> list[str]:
        """argv run on `host`: its network namespace, its own directories mounted, `cwd`, as root or FARM_USER."""
        mounts = [
            "mount -t tmpfs -o mode=755 perffarm-guide /srv",
            "mkdir /srv/perffarm",
            *(f'mount --bind "{host.root / d.lstrip("/")}" "{d}"' for d in HOST_DIRS),
            'cd -- "$1"',
            "shift",
            'exec "$@"',
        ]
        drop = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"] if user else []
        assert self.fleet is not None
        return self.fleet.exec_argv(
            host.netns,
            ["unshare", "-m", "--propagation", "private", "sh", "-ec", " && ".join(mounts), "sh", cwd or host.cwd]
            + drop
            + argv,
        )

    def run(
        self,
        host: GuideHost,
        script: str,
        cwd: str | None = None,
        check: bool = False,
        user: bool = False,
        env: dict[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess:
        """A shell command on `host` (as the guide's root shell, or as FARM_USER)."""
        r = subprocess.run(
            self.host_argv(host, ["sh", "-ec", script], cwd=cwd, user=user),
            env=env or (FARM_ENV if user else ROOT_ENV),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and r.returncode != 0:
            raise GuideFailed(f"exit status {r.returncode} on {host.name}:\n{r.stdout[-2000:]}{r.stderr[-3000:]}")
        return r

    def _host_named(self, target: str) -> GuideHost:
        name = target.split("@", 1)[-1]
        for h in self.hosts.values():
            if name in (h.fqdn, h.name):
                return h
        raise GuideFailed(f"no host {name!r} in this guide (hosts: {', '.join(h.fqdn for h in self.hosts.values())})")

    def _scp(self, host: GuideHost, args: list[str]) -> str:
        if len(args) != 2 or ":" not in args[0] or args[0].startswith("-"):
            raise GuideFailed("expected `scp HOST:PATH DEST`")
        remote, path = args[0].split(":", 1)
        src = self._host_named(remote).local(path)
        dest_path = args[1] if args[1].startswith("/") else f"{host.cwd}/{args[1]}"
        dest = host.local(dest_path)
        if dest.is_dir():
            dest = dest / src.name
        if not src.is_file():
            raise GuideFailed(f"scp: {remote}:{path}: No such file")
        shutil.copyfile(src, dest)
        dest.chmod(src.stat().st_mode & 0o777 & ~0o022)  # scp without -p: the mode less the umask
        return ""

    # ------------------------------------------------------------------------------------------ substitutions
    def _write_file(self, host: GuideHost, block: Block, where: str) -> None:
        first, _, body = block.text.partition("\n")
        m = re.fullmatch(r"#\s*(/\S+)\s*", first)
        if not m:
            raise GuideFailed(f"{where}: a file block starts with a comment naming its path, not {first!r}")
        text = block.text
        for old, new, _ in FILE_SUBSTITUTIONS:
            if text.count(old) != 1:
                raise GuideFailed(f"{where}: the test replaces `{old}` in {m[1]}, which is not there once")
            text = text.replace(old, new.format(repo=self.repo))
        host.local(m[1]).write_text(text + "\n")
        self.log.append(f"{host.name}: wrote {m[1]}")

    def _clone(self, dest: Path) -> None:
        """This checkout as `git clone` would give it, uncommitted edits included (the code under test)."""
        dest.mkdir(parents=True)
        git = ["git", "-C", str(dest)]
        subprocess.run(["git", "init", "--quiet", str(dest)], check=True)
        subprocess.run([*git, "fetch", "--quiet", "--depth", "1", f"file://{ROOT}", "HEAD"], check=True)
        subprocess.run([*git, "checkout", "--quiet", "FETCH_HEAD"], check=True)
        ls = ["git", "-C", str(ROOT), "ls-files", "-z", "--exclude-standard"]
        for rel in subprocess.run([*ls, "-m", "-o"], check=True, capture_output=True).stdout.split(b"\0"):
            if rel and (ROOT / rel.decode()).is_file():
                (dest / rel.decode()).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel.decode(), dest / rel.decode())
        for rel in subprocess.run([*ls, "-d"], check=True, capture_output=True).stdout.split(b"\0"):
            if rel:
                (dest / rel.decode()).unlink(missing_ok=True)

    def _venv_from_tests(self, host: GuideHost, local: Path, path: str, checkout: str | None) -> None:
        """A virtualenv at `path` (host's view) with the test's packages, made without the network."""
        if not (local / "bin" / "python3").exists():
            self.run(host, f"python3 -m venv --without-pip {shlex.quote(path)}", check=True)
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        site = local / "lib" / version / "site-packages"
        if not site.is_dir():
            raise GuideFailed(f"{path} is not a virtualenv of {version} (the test's packages are for it)")
        ours = Path(sys.prefix) / "lib" / version / "site-packages"
        if checkout:  # what `pip install -e .` puts in: the checkout on the path
            (site / "perffarm-checkout.pth").write_text(checkout + "\n")
        (site / "zz-test-packages.pth").write_text(f"import site; site.addsitedir({str(ours)!r})\n")
        shebang = f"#!{sys.prefix}/bin/python".encode()
        for script in (Path(sys.prefix) / "bin").iterdir():
            if script.is_symlink() or not script.is_file():
                continue
            with open(script, "rb") as f:
                if f.read(len(shebang)) != shebang:
                    continue  # a console script pip wrote starts with the virtualenv's python
            rest = script.read_text().split("\n", 1)[1]
            target = local / "bin" / script.name
            target.write_text(f"#!{path}/bin/python\n{rest}")
            target.chmod(0o755)

    def _check_pinned(self, spec: str) -> None:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9.]+)(\.\*)?", spec)
        if not m:
            raise GuideFailed(f"pip install {spec}: the test knows only NAME==VERSION[.*]")
        have = importlib.metadata.version(m[1])
        if not (have.startswith(m[2] + ".") if m[3] else have == m[2]):
            raise GuideFailed(f"the guide installs {spec}, the farm is tested with {m[1]} {have}")

    # ------------------------------------------------------------------------------------------ systemd
    def _systemctl(self, host: GuideHost, w: list[str]) -> str:
        verb, rest = w[1], w[2:]
        now = "--now" in rest
        names = [a for a in rest if not a.startswith("-")]
        if verb not in ("enable", "start", "restart") or len(names) != 1:
            raise GuideFailed(f"systemctl {' '.join(w[1:])}: the test plays only enable [--now], start, restart")
        unit = self._unit(host, names[0])
        if verb == "enable" and not now:
            return ""
        if verb == "restart" and unit.name in self.services:
            self._stop_service(unit.name)
        if unit.name not in self.services:
            self._start_service(host, unit)
        return ""

    def _unit(self, host: GuideHost, name: str) -> Unit:
        full = name if name.endswith(".service") else f"{name}.service"
        base, instance = full, ""
        if "@" in full:
            prefix, instance = full[: -len(".service")].split("@", 1)
            base = f"{prefix}@.service"
        path = host.local("/etc/systemd/system") / base
        if not path.is_file():
            raise GuideFailed(f"Unit {full} not found (no /etc/systemd/system/{base} on {host.name})")
        return parse_unit(full, path.read_text(), instance)

    def _start_service(self, host: GuideHost, unit: Unit) -> None:
        if unit.get("Service", "Type", "simple") != "simple":
            raise GuideFailed(f"{unit.name}: Type={unit.get('Service', 'Type')}: the test plays only Type=simple")
        if unit.get("Service", "User") != "perffarm" or unit.get("Service", "Group", "perffarm") != "perffarm":
            raise GuideFailed(f"{unit.name}: User=/Group= should be perffarm, the user the guide creates")
        exec_start = unit.get("Service", "ExecStart")
        if not exec_start or exec_start[0] in "-@+!:":
            raise GuideFailed(f"{unit.name}: ExecStart={exec_start!r}: the test plays one plain command")
        argv = shlex.split(exec_start)
        env = {"PATH": SYSTEMD_PATH, "HOME": FARM_HOME, "USER": "perffarm", "LOGNAME": "perffarm", "LANG": "C.UTF-8"}
        for line in unit.all("Service", "Environment"):
            for item in shlex.split(line):
                k, _, v = item.partition("=")
                env[k] = v
        cwd = unit.get("Service", "WorkingDirectory", FARM_HOME)
        assert cwd is not None
        journal = self.work / "journal" / f"{unit.name}.log"
        journal.parent.mkdir(parents=True, exist_ok=True)
        with open(journal, "ab") as out:
            proc = subprocess.Popen(
                self.host_argv(host, argv, cwd=cwd, user=True),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.services[unit.name] = Service(unit, proc, journal)
        self.log.append(f"{host.name}: started {unit.name}: {exec_start} (in {cwd})")

    def _stop_service(self, name: str) -> None:
        service = self.services.pop(name)
        proc = service.proc
        if proc.poll() is None:
            timeout = float(service.unit.get("Service", "TimeoutStopSec", "90") or 90)
            if service.unit.get("Service", "KillMode", "control-group") == "mixed":
                proc.send_signal(signal.SIGTERM)  # the main process only; the rest is killed after it
            else:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=min(timeout, 60))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def journal(self, name: str) -> str:
        full = name if name.endswith(".service") else f"{name}.service"
        service = self.services.get(full)
        return service.journal.read_text(errors="replace") if service else ""

    def _journal(self, name: str) -> str:
        full = name if name.endswith(".service") else f"{name}.service"
        service = self.services.get(full)
        if service is None:
            raise GuideFailed(f"{full} was never started")
        if not full.startswith("perffarm-master"):
            return self.journal(full)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            text = self.journal(full)
            if re.search(r"git ls-remote \S+ refs/heads/master\s+prints", text):
                return text
            if service.proc.poll() is not None:
                raise GuideFailed(f"{full} exited with status {service.proc.returncode}; its journal:\n{text[-3000:]}")
            time.sleep(0.5)
        raise GuideFailed(f"{full} printed no banner within {self.start_timeout:.0f} s; its journal:\n{text[-3000:]}")

    # ------------------------------------------------------------------------------------------ output blocks
    def _expect(self, host: GuideHost, block: Block, where: str) -> None:
        """The host's previous command prints every line of the block (re-run until it does, up to a timeout)."""
        want = [line.rstrip() for line in block.text.splitlines() if line.strip()]
        deadline = time.monotonic() + self.expect_timeout
        while True:
            got = {line.rstrip() for line in host.last_output.splitlines()}
            missing = [line for line in want if line not in got]
            if not missing:
                return
            dead = [n for n, s in self.services.items() if s.proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"{', '.join(dead)} exited" if dead else f"not within {self.expect_timeout:.0f} s"
                raise GuideFailed(
                    f"{where}: `{host.last_command}` does not print {missing} ({why}); it printed:\n"
                    f"{host.last_output}\n{self.diagnostics()}"
                )
            time.sleep(2)
            self.command(host, host.last_command, where)

    def diagnostics(self) -> str:
        """The end of every unit's journal and of every worker's twistd.log."""
        parts = []
        for name, service in self.services.items():
            parts.append(f"--- journal of {name}:\n{service.journal.read_text(errors='replace')[-2500:]}")
        for h in self.hosts.values():
            for log in sorted(h.local("/srv/perffarm").glob("workers/*/twistd.log")):
                parts.append(f"--- {h.name}:{log}:\n{log.read_text(errors='replace')[-2500:]}")
        return "\n".join(parts)
