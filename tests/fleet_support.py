"""A fleet of hosts on this one machine: network namespaces on a private bridge, each running buildbot-workers.

A *host* is a network namespace with its own loopback and one veth whose other end sits on a bridge in the root
namespace; the bridge holds the master's address on a private /24 that is not routed anywhere, so nothing leaves
the machine. Workers are provisioned the real way (`workers/create_worker.py`, run inside the namespace) and
started with `ip netns exec NS buildbot-worker start`; they reach the master's PB port over TCP on the bridge.

The namespaces share this machine's kernel, CPU and files, so their machine fingerprints would all be equal. Each
host therefore gets its own `/etc/os-release` the way iproute2 gives a namespace its own /etc files
(`/etc/netns/NS/os-release`, bind-mounted by `ip netns exec`): the fingerprint code in `workers/hostinfo.py` runs
unchanged and reports a different OS name per host, as two real machines would.

Needs root (namespaces, links, /etc/netns). Names start with `pff` followed by the creating process's pid in hex,
so `Fleet.create` can remove what a killed earlier run left behind without touching another live run's hosts.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from master import launcher
from recipes.procs import pid_alive
from tests.harness import BIN, Farm, wait_until

PREFIX = "pff"
NETNS_ETC = Path("/etc/netns")
CREATE_WORKER = Path(__file__).resolve().parent.parent / "workers" / "create_worker.py"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def can_run() -> str | None:
    """Why a fleet cannot be made here (not root, no `ip`), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip`"
    return None


def _owner(name: str) -> int | None:
    """The pid encoded in a fleet object's name (pff<pid hex 6><kind>...), or None for another name."""
    if not name.startswith(PREFIX) or len(name) < len(PREFIX) + 6:
        return None
    try:
        return int(name[len(PREFIX) : len(PREFIX) + 6], 16)
    except ValueError:
        return None


def remove_stale() -> list[str]:
    """Delete namespaces, links and /etc/netns directories of fleets whose creating process is gone."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        owner = _owner(name)
        if owner is not None and not pid_alive(owner):
            _ip("netns", "delete", name, check=False)
            shutil.rmtree(NETNS_ETC / name, ignore_errors=True)
            removed.append(name)
    links = json.loads(_ip("-j", "link", "show", check=False).stdout or "[]")
    for link in links:
        name = link.get("ifname", "")
        owner = _owner(name)
        if owner is not None and not pid_alive(owner):
            _ip("link", "delete", name, check=False)
            removed.append(name)
    return removed


def free_subnet() -> ipaddress.IPv4Network:
    """A 10.x.y.0/24 that no route or address of this machine overlaps."""
    used = []
    for route in json.loads(_ip("-j", "route", "show", "table", "all", check=False).stdout or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default":
            try:
                used.append(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False))
            except ValueError:
                continue
    rng = random.Random()
    for _ in range(200):
        net = ipaddress.ip_network(f"10.{rng.randrange(200, 255)}.{rng.randrange(0, 256)}.0/24")
        if not any(net.overlaps(u) for u in used if u.version == 4):
            return net
    raise RuntimeError("no free 10.x.y.0/24 for the fleet's bridge")


@dataclass(frozen=True)
class Host:
    """One simulated physical host: a network namespace and the root-side end of its link."""

    name: str  # the farm's host name (workers.hosts)
    netns: str
    veth: str  # root-namespace end, on the bridge: take it down to cut the host off
    address: str


@dataclass
class Fleet:
    """`n_hosts` namespaces on one bridge; `create()` makes them, `destroy()` removes every trace."""

    n_hosts: int
    hosts: list[Host] = field(default_factory=list)
    bridge: str = ""
    subnet: ipaddress.IPv4Network | None = None

    @property
    def master_address(self) -> str:
        """The root namespace's address on the bridge: where the master's PB port listens."""
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    def create(self) -> Fleet:
        remove_stale()
        token = f"{PREFIX}{os.getpid():06x}"
        self.bridge = f"{token}b"
        self.subnet = free_subnet()
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.master_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(self.n_hosts):
                host = Host(
                    name=f"host{i}",
                    netns=f"{token}h{i}",
                    veth=f"{token}v{i}",
                    address=str(self.subnet.network_address + 10 + i),
                )
                self._make_host(host, i)
                self.hosts.append(host)
        except BaseException:
            self.destroy()
            raise
        return self

    def _make_host(self, host: Host, i: int) -> None:
        etc = NETNS_ETC / host.netns
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "os-release").write_text(f'PRETTY_NAME="perffarm fleet {host.name} (network namespace {i})"\n')
        _ip("netns", "add", host.netns)
        peer = f"{host.veth}p"
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", host.netns)
        _ip("link", "set", host.veth, "master", self.bridge)
        _ip("link", "set", host.veth, "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")
        _ip("-n", host.netns, "link", "set", peer, "name", "eth0")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.netns, "link", "set", "eth0", "up")

    def cut(self, host: Host) -> None:
        """Pull the host's cable: its link on the bridge goes down, packets both ways are dropped."""
        _ip("link", "set", host.veth, "down")

    def restore(self, host: Host) -> None:
        _ip("link", "set", host.veth, "up")

    def exec_argv(self, host: Host, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", host.netns, *argv]

    def destroy(self) -> None:
        for host in self.hosts:
            _ip("netns", "delete", host.netns, check=False)  # its end of the veth pair goes with it
            _ip("link", "delete", host.veth, check=False)
            shutil.rmtree(NETNS_ETC / host.netns, ignore_errors=True)
        if self.bridge:
            _ip("link", "delete", self.bridge, check=False)
        try:
            NETNS_ETC.rmdir()  # only when empty: another user's namespace files stay
        except OSError:
            pass
        self.hosts = []


@dataclass(frozen=True)
class FleetWorker:
    """A worker of the fleet: its name, its host and how it is provisioned."""

    name: str
    host: Host
    listed: bool = True  # in the master's workers.names
    own_secret: bool = False  # its password was not given to the master (a wrong password)


class FleetFarm(Farm):
    """A real master listening on the fleet's bridge, and workers started inside the hosts' namespaces."""

    def __init__(
        self,
        data_dir: Path,
        repo_url: str,
        fleet: Fleet,
        workers: list[FleetWorker],
        keepalive: int | None = None,
        **kwargs,
    ) -> None:
        listed = [w for w in workers if w.listed]
        env = {
            "PERFFARM_WORKERS_NAMES": ",".join(w.name for w in listed),
            "PERFFARM_WORKERS_HOSTS": ",".join(f"{w.name}={w.host.name}" for w in listed),
            "PERFFARM_WORKERS_RUN_LOCAL": "false",
            "PERFFARM_MASTER_WORKER_HOST": fleet.master_address,
        }
        env.update(kwargs.pop("env", None) or {})
        super().__init__(data_dir, repo_url, env=env, **kwargs)
        self.fleet = fleet
        self.fleet_workers = workers
        self.keepalive = keepalive  # create_worker.py --keepalive (None: its default)
        self.procs: dict[str, subprocess.Popen] = {}

    def worker_basedir(self, w: FleetWorker) -> Path:
        return self.settings.data_dir / "fleet" / w.host.name / w.name

    def provision(self) -> None:
        """`workers/create_worker.py` for every worker, inside its host: the real helper an operator runs. A
        worker whose secret is its own writes it beside its directory, never into the master's secrets."""
        procs = []
        for w in self.fleet_workers:
            basedir = self.worker_basedir(w)
            basedir.parent.mkdir(parents=True, exist_ok=True)
            argv = [sys.executable, str(CREATE_WORKER), w.name]
            argv += ["--master", f"{self.fleet.master_address}:{self.settings.worker_port}", "--basedir", str(basedir)]
            if not w.own_secret:
                argv += ["--secrets-dir", str(self.settings.secrets_dir)]
            if self.keepalive is not None:
                argv += ["--keepalive", str(self.keepalive)]
            proc = subprocess.Popen(self.fleet.exec_argv(w.host, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            procs.append((w, proc))
        for w, proc in procs:
            out, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise RuntimeError(f"create_worker.py {w.name} failed: {err.decode(errors='replace')[-2000:]}")
        for w in self.fleet_workers:
            if w.listed and w.own_secret:
                # the master has a secret for it, just not the worker's: the operator copied the wrong file
                launcher.worker_password(self.settings, w.name)

    def start(self, wait_first_poll: bool = True) -> FleetFarm:
        self.settings.secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.provision()
        self.start_master()
        for w in self.fleet_workers:
            self.start_fleet_worker(w)
        self.wait_connected([w.name for w in self.fleet_workers if w.listed and not w.own_secret])
        if wait_first_poll:
            self.wait_first_poll()
        return self

    def start_master(self) -> None:
        self._start_master_process()  # no "local" worker: the fleet's workers have their own passwords

    def start_fleet_worker(self, w: FleetWorker) -> None:
        basedir = self.worker_basedir(w)
        self.procs[w.name] = subprocess.Popen(
            self.fleet.exec_argv(w.host, [str(BIN / "buildbot-worker"), "start", "--nodaemon", str(basedir)]),
            cwd=basedir,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def connected(self) -> set[str]:
        data = self.api("workers") or {"workers": []}
        return {w["name"] for w in data["workers"] if w.get("connected_to")}

    def wait_connected(self, names: list[str], timeout: float = 90) -> None:
        wait_until(lambda: set(names) <= self.connected(), timeout, f"workers {sorted(names)} to connect")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        super().stop()

    def master_cpu_seconds(self) -> float:
        """User + system CPU time of the master process so far (/proc/PID/stat)."""
        assert self.master is not None
        fields = Path(f"/proc/{self.master.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
