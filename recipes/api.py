"""The recipe contract: what a recipe file defines and what the runner hands it.

A recipe is a module in this package that defines ``RECIPE = Recipe(...)``. It runs on a worker with only the
standard library (it is shipped to the worker inside a zipapp with every build), so nothing here may import a
third-party package. Adding a recipe means adding a file; the master discovers it by name.

A recipe measures **sides** and nothing else (``SideSupport``): it builds the sides it is given, then measures them
all interleaved. Every measurement is such a call: a commit's run is one side (``run``, the commit checked out
for the builder), a paired run two (``reference``, ``run``; recipes/paired.py), a release job or a try-job 2 to 8
(recipes/sides.py), ``perffarm compare`` any number, locally, and bisection's confirmation is a job of two.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes import sandbox as sandboxing

HIGHER = "higher"  # higher values are better (throughput)
LOWER = "lower"  # lower values are better (latency, instructions, memory)
DIRECTIONS = (HIGHER, LOWER)


class RecipeFailure(Exception):
    """A failure that is a result (stored, shown), not a crash of the farm."""

    status = "bench-failed"

    def __init__(self, message: str, log_excerpt: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log_excerpt = log_excerpt


class BuildFailed(RecipeFailure):
    """The commit could not be built: stored as status build-failed, never a performance change."""

    status = "build-failed"


class BenchFailed(RecipeFailure):
    """The benchmark could not run (crash, timeout, bad output): stored as status bench-failed."""

    status = "bench-failed"


@dataclass(frozen=True)
class Metric:
    """Every raw sample of one metric of one workload, with its unit and which direction is better."""

    name: str
    unit: str
    direction: str
    samples: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "direction": self.direction,
            "samples": list(self.samples),
        }


@dataclass(frozen=True)
class WorkloadResult:
    """What one workload measured; `flags` carries per-run observations such as an SLA miss."""

    name: str
    metrics: tuple[Metric, ...]
    flags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metrics": [m.to_json() for m in self.metrics],
            "flags": list(self.flags),
        }


# Where a recipe's checkout and work directory live, relative to one root: a Buildbot worker's builder directory
# (master/farm.py checks out into SOURCE_DIR and runs the runner with --src SOURCE_DIR --work WORK_DIR).
SOURCE_DIR, WORK_DIR = "source", "work"


def checkout_layout(root: Path) -> tuple[Path, Path]:
    """(checkout, recipe work directory) under `root`, laid out as on a farm worker. ccache hashes compile command
    lines with paths made relative to CCACHE_BASEDIR, so only the same layout gives the same command lines: then
    the farm's workers, `perffarm compare` and `perffarm bisect --local` share ccache hits (a fresh build
    directory compiles nothing it has seen)."""
    return root / SOURCE_DIR, root / WORK_DIR


# make's recursion variables, never passed on to a recipe's commands (see Context.run)
MAKE_VARIABLES = frozenset({"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR"})


@dataclass
class Context:
    """What a recipe gets from the runner: where things are, and helpers to run commands and log."""

    src_dir: Path  # the checked-out commit (read-only for recipes by convention)
    work_dir: Path  # persistent across builds of this builder on this worker (build dirs, caches)
    state_dir: Path  # this build's scratch; the build phase can leave files here for the bench phase
    sha: str
    ref: str
    options: Mapping[str, str]
    # set for a job with a patched side (recipes/sandbox.py): what runs that side's code runs inside it
    sandbox: sandboxing.Sandbox | None = None
    log_tail_lines: int = 60
    _tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=400))

    def log(self, message: str) -> None:
        """Progress for the Buildbot log (flushed at once so a watcher sees it live)."""
        line = f"[{time.strftime('%H:%M:%S')}] {message}"
        self._tail.append(line)
        print(line, flush=True)

    def tail(self, lines: int | None = None) -> str:
        """The last lines of everything logged and run so far (for failure excerpts)."""
        n = lines or self.log_tail_lines
        return "\n".join(list(self._tail)[-n:])

    def run(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        capture: bool = False,
        check: bool = True,
        sandbox: sandboxing.Sandbox | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command (an argv list, never a shell string), echoing its output to the log.

        With `sandbox`, the command runs inside it (recipes/sandbox.py) with only `env` as its environment.
        Raises CommandFailed when it exits non-zero (and check is set) or exceeds `timeout` seconds.
        """
        args = shown = [str(a) for a in argv]
        self.log(("$ [sandbox] " if sandbox is not None else "$ ") + " ".join(args))
        if sandbox is not None:
            full_env = sandboxing.host_env()
            args, cwd = sandbox.argv(args, env, cwd), None
        else:
            # A recipe's commands are never sub-makes of whatever started us: `make run` / `make test` export
            # MAKELEVEL and MAKEFLAGS, and PostgreSQL's makefiles then skip generating headers (utils/errcodes.h:
            # No such file) as a sub-make would — a cold build under `make test` failed that way.
            full_env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
            if env:
                full_env.update(env)
        try:
            proc = subprocess.run(
                args,
                cwd=cwd,
                env=full_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            self._echo(out)
            raise CommandFailed(f"{shown[0]} timed out after {timeout:.0f} s", self.tail()) from None
        except FileNotFoundError:
            raise CommandFailed(f"{shown[0]}: command not found on this worker", self.tail()) from None
        self._echo(proc.stdout, quiet=capture)
        if check and proc.returncode != 0:
            raise CommandFailed(f"{' '.join(shown[:3])} exited with status {proc.returncode}", self.tail())
        return proc

    def _echo(self, text: str, quiet: bool = False) -> None:
        for line in text.splitlines():
            self._tail.append(line)
            if not quiet:
                print(line)
        sys.stdout.flush()


class CommandFailed(RecipeFailure):
    """A command run through Context.run failed; the runner maps it to the current phase's status."""


# What a bench may leave in ctx.state_dir beside its results, per side label (the runner adds them to the result,
# `perffarm compare` explains from them): one JSON document per kind and label, and callgrind profiles.
SIDE_FILE_KINDS = ("waits", "plans", "coverage")  # sampled wait events, plan shapes, coverage figure
CALLGRIND_OPTION = "callgrind"  # callgrind=1: keep each side's per-function profile of its instruction workloads


def side_file(state_dir: Path, kind: str, label: str) -> Path:
    """Where a side's document of `kind` (SIDE_FILE_KINDS) is: state/<kind>/<label>.json."""
    if kind not in SIDE_FILE_KINDS:
        raise ValueError(f"unknown side file kind {kind!r}; expected one of {', '.join(SIDE_FILE_KINDS)}")
    return state_dir / kind / f"{label}.json"


def callgrind_file(state_dir: Path, label: str, workload: str) -> Path:
    """Where a side's callgrind output of one instruction workload is kept (its first sample, recipes/callgrind.py
    reads it), with the number of counted queries beside it (`.queries`)."""
    return state_dir / "callgrind" / f"{label}--{workload}.out"


@dataclass(frozen=True)
class Side:
    """One side of a job (recipes/sides.py): a commit, maybe patched, and the tree the build uses."""

    label: str
    sha: str
    patch: Path | None = None  # a unified diff applied on top of `sha`
    tree: Path | None = None  # set by prepare(): the side's own source tree
    # The patch is the caller's own (`perffarm compare` on the caller's machine): built like a commit, in the kept
    # tree and build directory, and its install cached. A farm job never sets it: a try-job's patch is someone
    # else's program and is built and run in the sandbox (recipes/sandbox.py).
    own_patch: bool = False
    # Which kept tree and build directory under work/sides/ the side is built in (recipes/sides.py side_layout):
    # its label by default; a caller that prepares and builds its sides one at a time may give them one, so that
    # each side's build is incremental from the last (`perffarm compare`).
    layout: str = ""
    # A way of measuring the side's build that the recipe offers (SideSupport.variants), or "" for its own: the
    # PostgreSQL recipes measure an install without one of its conf overlays (`perffarm compare --overlay-effects`).
    variant: str = ""
    # The commit checked out for the builder (Context.src_dir, a commit's run): built from that checkout in the
    # builder's own build directory (Context.work_dir, named after Context.ref), never exported (recipes/sides.py).
    checkout: bool = False
    # Measured only so that the other sides' wall-clock metrics have a ratio (a paired run's reference,
    # recipes/paired.py): exact metrics, which need no partner (instruction counts), are not taken on it.
    ratio_only: bool = False

    @property
    def untrusted(self) -> bool:
        """Whether the side runs someone else's code: a patch that is not the caller's own."""
        return self.patch is not None and not self.own_patch

    @property
    def place(self) -> str:
        """The name of the kept tree and build directory the side uses (`layout`, else its label)."""
        return self.layout or self.label

    @property
    def patch_id(self) -> str | None:
        """The patch's sha256 (the first 16 hex), which keys its build and names it in the result."""
        if self.patch is None:
            return None
        return hashlib.sha256(self.patch.read_bytes()).hexdigest()[:16]

    @property
    def key(self) -> str:
        """What identifies the side's build: the sha, plus the patch's hash when patched."""
        pid = self.patch_id
        return self.sha if pid is None else f"{self.sha}-p{pid}"


@dataclass(frozen=True)
class SideSupport:
    """A recipe's entry points, the only ones a measurement calls: build every side given (leaving what bench needs
    in ctx.state_dir; sides may come in one call or one at a time), then measure them all interleaved and return
    each side's results by label. build exports a side's tree only when it has to compile it (recipes/sides.py
    `prepared`): a build it has cached leaves the kept tree as it is, and with it the files' times. The runner
    calls them on a worker for runs and jobs (recipes/runner.py), `perffarm compare` locally.
    Besides the results, bench may leave per side what `side_file` and `callgrind_file` name."""

    build: Callable[[Context, Sequence[Side]], None]
    bench: Callable[[Context, Sequence[Side]], Mapping[str, Sequence[WorkloadResult]]]
    # after build: what a built side is, to show beside its results ({"version": "18.6", "major": 18}); {} unknown
    describe: Callable[[Context, Side], Mapping[str, Any]] | None = None
    # after build: the variants (Side.variant) a built side can also be measured under, each with what it changes
    variants: Callable[[Context, Side], Mapping[str, str]] | None = None


@dataclass(frozen=True)
class Recipe:
    """A named, versioned build-and-bench procedure. Bump `version` when results stop being comparable.

    `workload_identity(name)` says what one result workload's numbers depend on (JSON data: the settings every
    workload shares and that workload's own entry and files, never another workload's), or None for a name the
    recipe does not know. Without it, every workload's identity is the whole config, as `config_hash`.
    """

    name: str
    version: int
    description: str
    config: Mapping[str, Any]
    sides: SideSupport  # build and measure sides: a run's, a paired run's, a job's (module docstring)
    workload_identity: Callable[[str], Any] | None = None
    # what the site shows of one result workload: {"group": the subsystem it is listed under, "sql": the SQL it
    # runs}, "" where there is none; and the groups in the order the site lists them, each with what it holds
    workload_info: Callable[[str], Mapping[str, str]] | None = None
    groups: Mapping[str, str] = field(default_factory=dict)

    def config_hash(self) -> str:
        """A stable hash of the recipe's data (name, version, config): the whole recipe, shown with each run."""
        return _hash({"name": self.name, "version": self.version, "config": self.config})

    def workload_hash(self, workload: str) -> str:
        """The identity of one workload's series: results of that workload compare only within one hash.

        Per workload, so that adding a workload to a recipe, or editing another workload's entry or script,
        leaves this workload's series (and its history) whole; a change to what it measures starts a new one.
        """
        identity = self.workload_identity(workload) if self.workload_identity is not None else None
        if identity is None:
            return self.config_hash()
        return _hash({"name": self.name, "version": self.version, "workload": identity})


def listed_workloads(config: Mapping[str, Any]) -> Callable[[str], Any]:
    """A `workload_identity` for a config that lists its workloads under "workloads" as entries with a "name":
    the rest of the config is shared by every workload, each entry is its own workload's."""
    shared = {k: v for k, v in config.items() if k != "workloads"}
    entries = {e["name"]: e for e in config.get("workloads", ())}

    def identity(workload: str) -> Any:
        entry = entries.get(workload)
        return None if entry is None else {"shared": shared, "workload": entry}

    return identity


def _hash(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
