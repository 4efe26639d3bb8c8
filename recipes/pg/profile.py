"""Profiles as data (recipes/pg/profiles/*.json) and the bench loop shared by single-commit runs and A/B runs.

One loop serves both: a single commit is an A/B run with one side. Every target gets its own server (initdb,
pgbench -i, VACUUM, CHECKPOINT), every pgbench workload is warmed up once and discarded, then samples run in
rounds: each round visits the wall-clock workloads in a shuffled order and, for A/B, runs A and B back to back
in alternating order (AB, BA, ...), with a CHECKPOINT before every sample. Instruction counts run last, on a
pristine copy of each target's data directory taken right after loading.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import shutil
import subprocess
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from recipes import callgrind
from recipes.api import CALLGRIND_OPTION as CALLGRIND_OPTION
from recipes.api import DIRECTIONS, HIGHER, LOWER, BenchFailed, Context, Metric, WorkloadResult, side_file
from recipes.api import callgrind_file as api_callgrind_file
from recipes.pg import (
    counters,
    coverage,
    idle,
    insertbench,
    instructions,
    memprobe,
    operations,
    pgbench,
    queries,
    waits,
)
from recipes.pg.build import Install
from recipes.pg.server import Server, sweep_stale


def _own_script(entry: Mapping[str, Any]) -> tuple[str, ...]:
    return (entry["script"],) if entry.get("script") else ()


def _pgbench_scripts(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """A pgbench entry's script, or its data set and statements (recipes/pg/queries.py)."""
    return _own_script(entry) + (queries.files(entry) if queries.has_statements(entry) else ())


@dataclass(frozen=True)
class WorkloadKind:
    """What the profile loader and the bench loop need to know about one kind of workload."""

    name: str
    phase: str  # "wall": sampled in the shuffled rounds; "instructions": counted under valgrind after them
    scripts: Callable[[Mapping[str, Any]], tuple[str, ...]]  # the SQL scripts (under sql/) an entry of it runs
    pgbench: bool = False  # its samples are pgbench runs: warm-up, A/B slices and CPU pinning apply
    stepped: bool = False  # its result workloads are `<name>-<step>`, one per step
    # a sample of a wall kind that is not pgbench: the server and the entry -> {step ("" for none): StepResult}
    run: Callable[[Server, Mapping[str, Any]], Mapping[str, Any]] | None = None
    # an instruction kind's samples, taken on the pristine copy of the data directory (see _instruction_samples)
    count: Callable[..., None] | None = None
    # loads what its workloads need into the server before the data directory is copied for instruction counts
    prepare: Callable[[Server, Mapping[str, Any]], None] | None = None
    # one result workload per part (`<name>-<step>`), each with its own identity: what it depends on
    parts: Callable[[Mapping[str, Any]], list[operations.Part]] | None = None
    # step -> group, for a kind whose parts carry their own groups (else every result has the entry's `group`)
    groups: Callable[[Mapping[str, Any]], Mapping[str, str]] | None = None


# The workload kinds a profile may use. A new kind is a module with its sampling function and one line here.
WORKLOAD_KINDS: dict[str, WorkloadKind] = {
    k.name: k
    for k in (
        WorkloadKind("pgbench", "wall", _pgbench_scripts, pgbench=True),
        WorkloadKind("instructions", "instructions", _own_script, count=lambda *a, **k: _instruction_samples(*a, **k)),
        WorkloadKind(
            "operations",
            "instructions",
            operations.scripts,
            count=lambda *a, **k: _operation_samples(*a, **k),
            prepare=operations.load,
            parts=operations.parts,
            groups=operations.groups,
        ),
        WorkloadKind("insert-benchmark", "wall", lambda _e: insertbench.SCRIPTS, stepped=True, run=insertbench.run),
        WorkloadKind(
            "memory-probe",
            "wall",
            lambda _e: (memprobe.SCRIPT,),
            run=lambda server, spec: {"": memprobe.run(server, spec)},
        ),
    )
}
TUNABLE = (
    "samples",
    "duration_s",
    "warmup_s",
    "scale",
    "instruction_samples",
    "seed",
    "ab_slices",
    "ab_warmup",
    "ab_rewarm",
)
AB_WARMUP = 0  # slices per side run and discarded before each A/B sample's recorded ones (_sliced_samples)
AB_REWARM = 0  # 1: after each round's restart, every side runs `warmup_s` of load again, discarded


def profile_names() -> list[str]:
    """The profiles shipped in recipes/pg/profiles (quick, full, sweeps, ...)."""
    folder = resources.files("recipes.pg").joinpath("profiles")
    return sorted(f.name.removesuffix(".json") for f in folder.iterdir() if f.name.endswith(".json"))


def load_profile(name: str) -> dict[str, Any]:
    """The profile's JSON data (shipped inside the recipes zipapp, hence importlib.resources)."""
    text = resources.files("recipes.pg").joinpath("profiles", f"{name}.json").read_text()
    return json.loads(text)


def conf_file(name: str) -> str:
    return resources.files("recipes.pg").joinpath("conf", name).read_text()


def overlays_for(profile: Mapping[str, Any], major: int) -> list[str]:
    """The overlay files that apply to this major, oldest first (e.g. since-14.conf, since-18.conf for 18)."""
    return [
        name
        for since, name in sorted(profile.get("overlays", {}).items(), key=lambda kv: int(kv[0]))
        if major >= int(since)
    ]


def conf_text(profile: Mapping[str, Any], major: int, without: Collection[str] = ()) -> str:
    """postgresql.conf for this major: the profile's base file plus every overlay for majors <= `major` (except
    those named in `without`: `perffarm compare --overlay-effects` measures what each one changes)."""
    parts = [conf_file(profile["conf"])]
    since_of = {name: since for since, name in profile.get("overlays", {}).items()}
    for name in overlays_for(profile, major):
        if name in without:
            parts.append(f"# overlay {name} left out: its settings are at PostgreSQL's defaults")
            continue
        parts.append(f"# overlay {name} (PostgreSQL >= {since_of[name]})\n" + conf_file(name))
    return "\n".join(parts)


@dataclass(frozen=True)
class Workload:
    """One benchmark of a profile: what runs and what its primary metric is called, measured in, and wants."""

    name: str
    kind: str
    metric: str
    unit: str
    direction: str
    args: tuple[str, ...] = ()
    script: str | None = None
    duration_s: float | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)


def workloads(profile: Mapping[str, Any], max_threads: int = 2) -> list[Workload]:
    """Expand the profile's workload entries (a `clients` list makes one workload per client count)."""
    out: list[Workload] = []
    for entry in profile["workloads"]:
        kind = entry["kind"]
        if kind not in WORKLOAD_KINDS:
            raise ValueError(
                f"workload {entry.get('name')!r}: unknown kind {kind!r} (known: {', '.join(WORKLOAD_KINDS)})"
            )
        if entry.get("direction", "higher") not in DIRECTIONS:
            raise ValueError(f"workload {entry['name']!r}: direction must be one of {DIRECTIONS}")
        if entry.get("idle") is not None and not WORKLOAD_KINDS[kind].pgbench:
            raise ValueError(f"workload {entry['name']!r}: `idle` applies to pgbench workloads only")
        for name, c, m in _variants(entry):
            extra = ["-c", str(c), "-j", str(max(1, min(c, max_threads)))] if c is not None else []
            spec = {k: v for k, v in entry.items() if k not in ("name", "kind", "args", "clients", "idle")}
            if c is not None:
                spec["clients"] = int(c)  # the active clients (also in args): room for them next to idle ones
            if m is not None:
                spec["idle_connections"] = int(m)
            out.append(
                Workload(
                    name=name,
                    kind=kind,
                    metric=entry.get("metric", "tps"),
                    unit=entry.get("unit", "tx/s"),
                    direction=entry.get("direction", "higher"),
                    args=tuple(entry.get("args", ())) + tuple(extra),
                    script=entry.get("script"),
                    duration_s=entry.get("duration_s"),
                    spec=spec,
                )
            )
    names = [w.name for w in out]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate workload names in profile {profile.get('profile')!r}")
    return out


class Variant(NamedTuple):
    """One workload an entry makes: its name, client count (None: the entry's args decide) and idle connections
    held open while it is measured (None: no `idle` list; recipes/pg/idle.py)."""

    name: str
    clients: int | None
    idle: int | None


def _variants(entry: Mapping[str, Any]) -> list[Variant]:
    """The workloads an entry makes: one per entry of `clients` (`<name>-c<N>`) times one per entry of `idle`
    (`-i<M>`)."""
    clients: list[int | None] = list(entry.get("clients") or [None])
    idle: list[int | None] = list(entry.get("idle") or [None])
    out = []
    for c in clients:
        for m in idle:
            name = entry["name"] + (f"-c{c}" if c is not None else "") + (f"-i{m}" if m is not None else "")
            out.append(Variant(name, c, m))
    return out


def workload_files(entry: Mapping[str, Any]) -> list[str]:
    """The SQL scripts (paths under recipes/pg/) a workload entry runs, so that editing one changes that
    workload's identity and no other's."""
    return [f"sql/{n}" for n in WORKLOAD_KINDS[entry["kind"]].scripts(entry)]


def result_names(w: Workload) -> list[str]:
    """The result workloads a workload reports under (one per part for a kind with parts: `op-join-hash`; a pgbench
    workload with statements reports its own and one per statement: `pgbench-tpch`, `pgbench-tpch-q01`, …)."""
    parts = WORKLOAD_KINDS[w.kind].parts
    if parts is not None:
        return [f"{w.name}-{p.step}" for p in parts(w.spec)]
    return [w.name, *(f"{w.name}-{s}" for s in statement_names(w))]


def statement_names(w: Workload) -> list[str]:
    """The statements of a pgbench workload that reports each line's latency (recipes/pg/queries.py), or []."""
    return queries.statements(w.spec) if WORKLOAD_KINDS[w.kind].pgbench and queries.has_statements(w.spec) else []


def wanted_workloads(options: Mapping[str, str]) -> set[str]:
    """The names the `workloads` option lists (comma-separated); empty: every workload."""
    return {x for x in options.get("workloads", "").split(",") if x}


def is_selected(w: Workload, wanted: Collection[str]) -> bool:
    """Whether `--option workloads=...` (empty: all) selects the workload, by its name or a result's."""
    return not wanted or w.name in wanted or any(n in wanted for n in result_names(w))


def needs_valgrind(profile: Mapping[str, Any], wanted: Collection[str] = ()) -> bool:
    """Whether the selected workloads count instructions (valgrind must be installed)."""
    return any(WORKLOAD_KINDS[w.kind].phase == "instructions" and is_selected(w, wanted) for w in workloads(profile))


# Profile members that do not change what any workload measures: the description names the workloads (adding
# one edits it), and the workloads are each their own part of the identity.
NOT_SHARED = ("description", "workloads")
# Members of a workload entry that only label it (the site groups series by `group`): in no identity, so that
# regrouping never starts a series anew.
LABELS = ("group", "plans")  # `plans`: whether plans are captured, which changes no count


def identities(profile: Mapping[str, Any], build: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What each workload of the profile measures, by workload name: the build settings, the profile's other
    settings and its postgresql.conf files (shared by every workload), the workload's own entry (a `clients` list
    narrowed to this workload's count) and the contents of the scripts it runs. Never another workload's entry,
    so adding or editing one workload leaves every other workload's identity (and series) unchanged."""
    confs = [profile["conf"], *profile.get("overlays", {}).values()]
    shared = {
        "build": build,
        "profile": {k: v for k, v in profile.items() if k not in NOT_SHARED},
        "files": {f"conf/{n}": file_hash(f"conf/{n}") for n in sorted(set(confs))},
    }
    out = {}
    for entry in profile["workloads"]:
        parts = WORKLOAD_KINDS[entry["kind"]].parts
        if parts is not None:
            for part in parts(entry):
                own = {k: v for k, v in part.own.items() if k not in LABELS}
                files = {f"sql/{n}": file_hash(f"sql/{n}") for n in part.scripts}
                out[f"{entry['name']}-{part.step}"] = {"shared": shared, "workload": own, "files": files}
            continue
        for name, c, m in _variants(entry):
            own = {k: v for k, v in entry.items() if k not in ("clients", "idle", *LABELS)}
            if c is not None:
                own["clients"] = c
            if m is not None:
                own["idle"] = m
            out[name] = {"shared": shared, "workload": own, "files": {f: file_hash(f) for f in workload_files(entry)}}
            if WORKLOAD_KINDS[entry["kind"]].pgbench and queries.has_statements(entry):
                # every statement's latency depends on the whole script (they share the connection, its caches and
                # the sample's time): the workload's identity, named for the statement
                for st in queries.statements(entry):
                    out[f"{name}-{st}"] = {**out[name], "statement": st}
    return out


def identity_of(profile: Mapping[str, Any], found: Mapping[str, Any], name: str) -> Any:
    """The identity of result workload `name` (from `identities`), or None for a name the profile does not make:
    an Insert Benchmark workload reports one result workload per step (`insert-benchmark-l.i0`)."""
    if name in found:
        return found[name]
    for entry in profile["workloads"]:
        if WORKLOAD_KINDS[entry["kind"]].stepped:
            for base, _, _ in _variants(entry):
                if name.startswith(base + "-"):
                    return found[base]
    return None


def workload_groups(profile: Mapping[str, Any]) -> dict[str, str]:
    """Result workload (or entry) name -> its group, the subsystem the site lists it under ("" when unset)."""
    out: dict[str, str] = {}
    for entry in profile["workloads"]:
        kind = WORKLOAD_KINDS[entry["kind"]]
        if kind.groups is not None:
            out.update((f"{entry['name']}-{step}", g) for step, g in kind.groups(entry).items())
            continue
        for name, _, _ in _variants(entry):
            out[name] = entry.get("group", "")
            if WORKLOAD_KINDS[entry["kind"]].pgbench and queries.has_statements(entry):
                out.update((f"{name}-{st}", entry.get("group", "")) for st in queries.statements(entry))
    return out


def group_of(profile: Mapping[str, Any], name: str) -> str:
    """The group of result workload `name` ("" for a name the profile does not make)."""
    found = workload_groups(profile)
    if name in found:
        return found[name]
    for entry in profile["workloads"]:
        if WORKLOAD_KINDS[entry["kind"]].stepped:
            for base, _, _ in _variants(entry):
                if name.startswith(base + "-"):
                    return found.get(base, "")
    return ""


def group_descriptions() -> dict[str, str]:
    """The known groups in the order the site lists them, each with what it holds (recipes/pg/groups.json)."""
    return dict(json.loads(resources.files("recipes.pg").joinpath("groups.json").read_text())["groups"])


def workload_info(profile: Mapping[str, Any], name: str) -> dict[str, str]:
    """What the site shows of result workload `name`: its group, and the SQL it runs (an operation's statement,
    a pgbench workload's script; "" for workloads whose queries are generated or built in)."""
    sql = ""
    for entry in profile["workloads"]:
        kind = WORKLOAD_KINDS[entry["kind"]]
        if kind.parts is not None:
            for part in kind.parts(entry):
                if name == f"{entry['name']}-{part.step}":
                    sql = insertbench.sql_file(part.scripts[-1])
        elif entry.get("script") and name in {v.name for v in _variants(entry)}:
            sql = insertbench.sql_file(entry["script"])
        elif WORKLOAD_KINDS[entry["kind"]].pgbench and queries.has_statements(entry):
            for v in _variants(entry):
                if name == v.name:
                    sql = queries.script(entry)
                for st in queries.statements(entry):
                    if name == f"{v.name}-{st}":
                        sql = insertbench.sql_file(f"{entry['dir']}/{st}.sql")
    return {"group": group_of(profile, name), "sql": sql}


@functools.cache
def file_hash(path: str) -> str:
    """Hash of a data file shipped in recipes/pg/ (`conf/quick.conf`, `sql/txid.sql`). Cached: `identities` asks
    for the operation suite's and TPC-H's scripts once per query of every profile, about 5,000 times for some 150
    files, every time a runner starts, and a file inside the shipped zipapp costs a scan of the archive's names
    to find (5 s of every fixture build and bench phase before the cache)."""
    return hashlib.sha256(resources.files("recipes.pg").joinpath(*path.split("/")).read_bytes()).hexdigest()[:16]


def tunables(profile: Mapping[str, Any], options: Mapping[str, str]) -> dict[str, float]:
    """Sampling parameters: the profile's values, overridden by `--option KEY=VALUE` (recorded in the result)."""
    out = {k: float(profile[k]) for k in TUNABLE if k in profile}
    for k in TUNABLE:
        if k in options:
            out[k] = float(options[k])
    return out


@dataclass
class TargetSamples:
    """Samples of one (workload, metric) for one target."""

    unit: str
    direction: str
    values: list[float] = field(default_factory=list)


@dataclass
class Collected:
    """Everything one target measured: (workload, metric) -> TargetSamples, and per-workload flags."""

    series: dict[tuple[str, str], TargetSamples] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def add(self, workload: str, metric: str, unit: str, direction: str, value: float) -> None:
        if workload not in self.order:
            self.order.append(workload)
        self.series.setdefault((workload, metric), TargetSamples(unit, direction)).values.append(float(value))

    def flag(self, workload: str, text: str) -> None:
        lst = self.flags.setdefault(workload, [])
        if text not in lst:
            lst.append(text)

    def results(self) -> list[WorkloadResult]:
        out = []
        for w in self.order:
            metrics = tuple(
                Metric(m, s.unit, s.direction, tuple(s.values))
                for (wn, m), s in self.series.items()
                if wn == w and s.values
            )
            if metrics:
                out.append(WorkloadResult(w, metrics, tuple(self.flags.get(w, ()))))
        return out


@dataclass
class Target:
    """One side of a run: an install, its server, and the pristine data directory copy for instruction counts."""

    label: str
    install: Install
    server: Server
    snapshot: Path | None = None
    collected: Collected = field(default_factory=Collected)
    # group -> functions its instruction workloads exercise (first samples; None: not asked for, recipes/pg/coverage)
    exercised: dict[str, set[str]] | None = None
    # result workload -> the shape of its plan (entries with `"plans": true`: recipes/pg/plans.py)
    plans: dict[str, str] = field(default_factory=dict)
    # pgbench workload -> its samples' waits, in the order taken (recipes/pg/waits.py; the result's `waits`)
    waits: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def exercise(self, group: str, raw: bytes) -> None:
        """Add what one callgrind output exercises to the coverage of `group` (when coverage is asked for)."""
        if self.exercised is not None:
            profile = callgrind.parse_bytes(raw)
            self.exercised.setdefault(group, set()).update(coverage.exercised(profile))


def pgdata_root(ctx: Context, profile: Mapping[str, Any]) -> Path:
    """Where data directories live: tmpfs (/dev/shm) keeps the quick profile off a noisy disk."""
    where = ctx.options.get("pgdata", profile.get("pgdata", "disk"))
    if where == "tmpfs" and Path("/dev/shm").is_dir():
        return Path("/dev/shm") / f"perffarm-{_uid()}"
    if where not in ("tmpfs", "disk"):
        return Path(where)
    return ctx.work_dir / "run"


def _uid() -> int:
    return os.getuid()


def _prepare(
    ctx: Context,
    t: Target,
    scale: int,
    need_snapshot: bool,
    loads: Sequence[Workload] = (),
    wall: Sequence[Workload] = (),
) -> None:
    srv = t.server
    ctx.log(f"[{t.label}] PostgreSQL {t.install.version}: loading pgbench scale {scale}")
    srv.run_client([srv.bin("pgbench"), "-i", "-q", "-s", str(scale)], "pgbench -i", timeout=3600)
    srv.psql("VACUUM ANALYZE", timeout=3600)
    for w in loads:  # data of the instruction workloads that bring their own (the operation suite's database)
        prepare = WORKLOAD_KINDS[w.kind].prepare
        if prepare is not None:
            ctx.log(f"[{t.label}] loading the data set of {w.name}")
            prepare(srv, w.spec)
            shapes = operations.capture_plans(srv, w.spec) if w.kind == "operations" else {}
            t.plans.update((f"{w.name}-{step}", s) for step, s in shapes.items())
            if shapes:
                ctx.log(f"[{t.label}] captured the plans of {len(shapes)} {w.name} queries")
    srv.checkpoint()
    if need_snapshot:
        srv.stop()
        assert srv.dir is not None
        t.snapshot = srv.dir / "snapshot"
        try:  # links are copied as links, never followed: a try-job's server wrote this directory
            shutil.copytree(srv.datadir, t.snapshot, symlinks=True)
        except (OSError, shutil.Error) as e:
            raise BenchFailed(f"[{t.label}] cannot copy the data directory: {str(e)[:300]}") from None
        srv.start()
    for w in wall:  # after the copy: a wall-clock workload's data set changes no instruction count
        if statement_names(w):
            ctx.log(f"[{t.label}] loading the data set of {w.name} into {operations.database(w.spec)}")
            queries.load(srv, w.spec)
    if any(statement_names(w) for w in wall):
        srv.checkpoint()


def _script(t: Target, w: Workload) -> Path | None:
    if not w.script:
        return None
    assert t.server.dir is not None
    script = t.server.dir / Path(w.script).name
    if not script.exists():
        script.write_text(insertbench.sql_file(w.script))
    return script


def _pgbench_run(
    t: Target, w: Workload, duration: float, cpus: Sequence[int] | None, what: str | None = None
) -> pgbench.Sample:
    """One pgbench run of a workload on a target: its script (or its statements, one a line, with -r) in its
    database."""
    statements = statement_names(w)
    script = _script(t, w)
    if statements:
        assert t.server.dir is not None
        script = t.server.dir / f"{w.name}.pgbench"
        if not script.exists():
            script.write_text(queries.script(w.spec))
    return pgbench.run(
        t.server,
        list(w.args),
        duration,
        what or f"{w.name} on {t.label}",
        script=script,
        cpus=cpus,
        statements=statements,
        dbname=operations.database(w.spec) if statements else None,
    )


def _idle(w: Workload) -> int:
    return int(w.spec.get("idle_connections", 0))


def _active(w: Workload) -> int:
    return int(w.spec.get("clients", 1))


def _pgbench_sample(
    t: Target, w: Workload, duration: float, cpus: Sequence[int] | None, record: bool = True, hz: float = 0.0
) -> None:
    what = f"{w.name} on {t.label}"
    with contextlib.ExitStack() as stack:
        held = stack.enter_context(idle.held(t.server, _idle(w) if record else 0, _active(w)))
        sampler = stack.enter_context(waits.Sampler(t.server, hz)) if record and hz > 0 else None
        with sampler.sampling() if sampler is not None else contextlib.nullcontext():
            s = _pgbench_run(t, w, w.duration_s or duration, cpus, what)
        sampled = sampler.result(what) if sampler is not None else None
    if record:
        _record(t, w, s, held)
        if sampled is not None:
            t.waits.setdefault(w.name, []).append(sampled.to_json())


def _sliced_samples(
    targets: Sequence[Target],
    w: Workload,
    duration: float,
    slices: int,
    first: int,
    cpus: Sequence[int] | None,
    warmup: int = 0,
    hz: float = 0.0,
) -> dict[str, list[float]]:
    """One sample of every target, taken as `slices` short slices in alternating order (AB BA AB ...), each
    side's slices summed: a neighbour's burst of load lands on both sides instead of on one whole sample.

    With `warmup`, that many slices per side are run first and discarded, in the pattern's own alternation
    extended backwards (slice -1 is BA when slice 0 is AB): after the restart and CHECKPOINT that open a round, the
    side that takes the first slice paid for it (docs/throughput.md, "The order bias"), and a warm-up in the
    mirrored order leaves every recorded slice of either side preceded alike. With `hz`, each side's wait events are
    sampled during its recorded slices by one psql per side for the whole sample (recipes/pg/waits.py). Returns each
    side's recorded slices' tps, in the order taken (the round's log line shows them)."""
    per_slice = max(1.0, (w.duration_s or duration) / max(1, slices))
    got: dict[str, list[pgbench.Sample]] = {t.label: [] for t in targets}
    held: dict[str, int] = {}
    samplers: dict[str, waits.Sampler] = {}
    sampled: dict[str, waits.Waits] = {}
    with contextlib.ExitStack() as stack:
        for t in targets:  # every side holds its idle connections for the whole sample, as it would alone
            held[t.label] = stack.enter_context(idle.held(t.server, _idle(w), _active(w)))
            if hz > 0:
                samplers[t.label] = stack.enter_context(waits.Sampler(t.server, hz))
        for k in range(-max(0, warmup), max(1, slices)):
            for t in targets if (first + k) % 2 == 0 else list(reversed(targets)):
                sampler = samplers.get(t.label) if k >= 0 else None
                with sampler.sampling() if sampler is not None else contextlib.nullcontext():
                    s = _pgbench_run(t, w, per_slice, cpus)
                if k >= 0:
                    got[t.label].append(s)
        sampled = {label: s.result(f"{w.name} on {label}") for label, s in samplers.items()}
    for t in targets:
        _record(t, w, pgbench.combine(got[t.label]), held[t.label])
        if t.label in sampled:
            t.waits.setdefault(w.name, []).append(sampled[t.label].to_json())
    return {label: [s.out.tps for s in samples] for label, samples in got.items()}


def workload_slices(w: Workload, slices: int) -> int:
    """The slices of one A/B sample of `w`: the run's `ab_slices`, or fewer when its entry asks (`ab_slices` in the
    entry). A slice lasts at least a second (pgbench -T), so a short sample (`duration_s`) of 6 slices would run 6
    seconds: `pgbench-tpch` takes 2 s samples in 2 slices to fit the quick profile's budget."""
    return max(1, min(slices, int(w.spec.get("ab_slices", slices))))


def _whole_blocks(rounds: int, sides: int = 2) -> int:
    """Rounds of an A/B run: whole order-balanced blocks of two (each side first once), so no order wins a
    majority; one round stays one (nothing to balance with)."""
    return rounds + rounds % 2 if sides > 1 and rounds > 1 else rounds


def _first_side(targets: Sequence[Target], r: int) -> Target:
    """The side that takes round r's first slot: the first target in even rounds, the last in odd ones, for every
    workload (never by a workload's place in the round's shuffled order), so that each pair of rounds (2j, 2j+1)
    is one order-balanced block (recipes/stats.py, balanced_ratio)."""
    return targets[0] if r % 2 == 0 else targets[-1]


def _record(t: Target, w: Workload, s: pgbench.Sample, idle_held: int = 0) -> None:
    c = t.collected
    c.add(w.name, w.metric, w.unit, w.direction, s.out.tps)
    if _idle(w):  # how many idle connections the sample really had open next to it (recipes/pg/idle.py)
        c.add(w.name, "idle_connections", "connections", HIGHER, float(idle_held))
    if s.out.latency_avg_ms is not None:
        c.add(w.name, "latency_avg", "ms", LOWER, s.out.latency_avg_ms)
    if s.p95_ms is not None and s.p99_ms is not None:
        c.add(w.name, "latency_p95", "ms", LOWER, s.p95_ms)
        c.add(w.name, "latency_p99", "ms", LOWER, s.p99_ms)
    if s.out.transactions:
        u = s.usage
        c.add(w.name, "cpu_per_tx", "us/tx", LOWER, s.per_tx(u.server_cpu_s + u.client_cpu_s))
        c.add(w.name, "server_cpu_per_tx", "us/tx", LOWER, s.per_tx(u.server_cpu_s))
        c.add(w.name, "ctx_switches_per_tx", "switches/tx", LOWER, s.per_tx(u.context_switches, 1))
    if s.usage.peak_backend_rss_kib:
        c.add(w.name, "peak_backend_rss", "KiB", LOWER, s.usage.peak_backend_rss_kib)
    statements = statement_names(w)
    if statements and len(s.statements_ms) != len(statements):
        raise BenchFailed(f"{w.name} on {t.label}: pgbench reported no latency for each of its {len(statements)} lines")
    for name, ms in zip(statements, s.statements_ms, strict=False):  # one result workload per statement
        c.add(f"{w.name}-{name}", "latency_avg", "ms", LOWER, ms)


def _special_sample(t: Target, w: Workload) -> None:
    run = WORKLOAD_KINDS[w.kind].run
    assert run is not None, w.kind  # every wall kind that is not pgbench has one
    steps = run(t.server, w.spec)
    for step, res in steps.items():
        name = f"{w.name}-{step}" if step else w.name
        for metric, (unit, direction, value) in res.values.items():
            t.collected.add(name, metric, unit, direction, value)
        for f in res.flags:
            t.collected.flag(name, f)


def _instruction_samples(
    ctx: Context,
    t: Target,
    w: Workload,
    n: int,
    scale: int,
    scratch: Path,
    callgrind: bool = False,
    wanted: Collection[str] = (),
) -> None:
    assert t.snapshot is not None
    lines = instructions.queries(w.spec.get("queries", "point-select"), int(w.spec.get("count", 1000)), scale)
    for i in range(n):
        keep = callgrind_file(ctx, t.label, w.name) if callgrind and i == 0 else None
        c = instructions.count(
            ctx,
            t.install,
            t.snapshot,
            lines,
            scratch,
            keep_profile=keep,
            sandbox=t.server.client_sandbox(),
            sink=(lambda raw: t.exercise(str(w.spec.get("group", "")), raw)) if i == 0 else None,
        )
        ctx.log(f"[{t.label}] {w.name} sample {i + 1}/{n}: {c.per_query:,.1f} {w.unit}")
        t.collected.add(w.name, w.metric, w.unit, w.direction, c.per_query)
        if keep is not None:
            # the counted queries, beside the profile: a diff divides by them (instructions per query)
            keep.with_suffix(".queries").write_text(str(len(lines)))
    if ctx.options.get(counters.OPTION, "1") != "0":  # system calls, WAL and buffers per query, as exact
        per = w.unit.split("/", 1)[-1]
        sandbox = t.server.client_sandbox()
        for metric, unit, values in counters.samples(ctx, t.install, t.snapshot, lines, scratch, per, n, sandbox):
            for v in values:
                t.collected.add(w.name, metric, unit, LOWER, v)


def _operation_samples(
    ctx: Context,
    t: Target,
    w: Workload,
    n: int,
    scale: int,
    scratch: Path,
    callgrind: bool = False,
    wanted: Collection[str] = (),
) -> None:
    """The operation suite's samples: one callgrind run each, every selected operation counted separately."""
    assert t.snapshot is not None
    steps = [n_[len(w.name) + 1 :] for n_ in result_names(w) if not wanted or n_ in wanted or w.name in wanted]
    groups = operations.groups(w.spec)

    def exercise(step: str, raw: bytes) -> None:
        t.exercise(groups[step], raw)

    for i in range(n):

        def keep(step: str, first: bool = i == 0) -> Path | None:
            return callgrind_file(ctx, t.label, f"{w.name}-{step}") if callgrind and first else None

        counts = operations.sample(
            ctx,
            t.install,
            t.snapshot,
            w.spec,
            steps,
            scratch,
            keep,
            sandbox=t.server.client_sandbox(),
            sink=exercise if i == 0 else None,
        )
        for step, total in counts.items():
            name = f"{w.name}-{step}"
            t.collected.add(name, w.metric, w.unit, w.direction, float(total))
            path = keep(step)
            if path is not None:
                path.with_suffix(".queries").write_text("1")  # one operation: the profile is per operation
        total = sum(counts.values())
        ctx.log(f"[{t.label}] {w.name} sample {i + 1}/{n}: {len(counts)} operations, {total:,} {w.metric}")


COVERAGE_OPTION = "coverage"  # coverage=0: no coverage figure (it parses every first sample's profile)


def coverage_file(ctx: Context, label: str) -> Path:
    """Where a label's coverage figure is written (the runner puts it in the result's `coverage` member)."""
    return side_file(ctx.state_dir, "coverage", label)


def _write_coverage(ctx: Context, t: Target, src: Path) -> None:
    assert t.exercised is not None
    try:
        functions = coverage.backend(src, t.install.bindir / "postgres")
    except (OSError, subprocess.SubprocessError) as e:
        ctx.log(f"[{t.label}] no coverage figure: {str(e)[:200]}")
        return
    doc = coverage.report(t.exercised, functions)
    path = coverage_file(ctx, t.label)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, sort_keys=True))
    hit, total = doc["groups"][coverage.ALL]["functions"]
    ctx.log(f"[{t.label}] coverage: {hit:,} of {total:,} backend functions exercised ({hit / max(total, 1):.1%})")


def plans_file(ctx: Context, label: str) -> Path:
    """Where a label's plan shapes are written (the runner puts them in the result's `plans` member)."""
    return side_file(ctx.state_dir, "plans", label)


def waits_file(ctx: Context, label: str) -> Path:
    """Where a label's sampled wait events are written (the runner puts them in the result's `waits` member)."""
    return side_file(ctx.state_dir, "waits", label)


def callgrind_file(ctx: Context, label: str, workload: str) -> Path:
    """Where a side's callgrind output of one instruction workload is kept (recipes.api.callgrind_file)."""
    return api_callgrind_file(ctx.state_dir, label, workload)


PINS = ("auto", "none")


def pin_mode(profile: Mapping[str, Any], options: Mapping[str, str]) -> str:
    """`auto`: a pgbench workload with fewer clients than CPUs runs, server and client, on that many CPUs; `none`."""
    mode = options.get("pin", profile.get("pin", "none"))
    if mode not in PINS:
        raise BenchFailed(f"pin={mode!r}: expected one of {', '.join(PINS)}")
    if mode == "auto" and shutil.which("taskset") is None:
        raise BenchFailed(
            "pin=auto needs taskset (Debian package util-linux) on this worker; install it or run "
            "with --option pin=none"
        )
    return mode


def workload_cpus(w: Workload, mode: str, allowed: Sequence[int]) -> list[int] | None:
    """The CPUs a pgbench workload is pinned to: the last `clients` of the allowed CPUs, or None (all of them).

    Why: with one client on a 2-core VM the scheduler sometimes puts client and backend on one core and
    sometimes on two, and the two cases differ in throughput by tens of percent; on one core the ping-pong is the
    same every time (measured here: tx per CPU-second CV 7-12% -> 3-4% under load).
    """
    if mode != "auto" or not WORKLOAD_KINDS[w.kind].pgbench or w.spec.get("pin") == "none":
        return None  # `"pin": "none"` in an entry: a parallel plan's workers need the other CPUs
    args = list(w.args)
    clients = int(args[args.index("-c") + 1]) if "-c" in args[:-1] else 1
    return sorted(allowed)[-clients:] if clients < len(allowed) else None


def run_bench(
    ctx: Context,
    profile: Mapping[str, Any],
    installs: Mapping[str, Install],
    threads: int = 2,
    count_instructions: Collection[str] | None = None,
    confs: Mapping[str, str] | None = None,
    coverage_src: Path | None = None,
) -> dict[str, list[WorkloadResult]]:
    """Run the profile on every install (interleaved), returning each label's workload results.

    With more than one install (A/B) and `ab_slices` > 1, each pgbench sample is taken as that many short slices
    alternating between the sides (AB BA AB ...), so a neighbour's burst of load lands on both sides; the servers
    restart between rounds so that no side keeps one memory layout for the whole job. With
    `pin` = auto, a workload with fewer clients than CPUs runs pinned, server and client, to that many CPUs.
    Instruction counts run on the labels in `count_instructions` (default: every install); they are exact, so a
    reference measured only for paired throughput need not be counted. `confs` gives a label its own
    postgresql.conf (default: the profile's for the install's major). With `coverage_src` (the commit's source
    tree), each counted label's coverage figure is written to `coverage_file` (recipes/pg/coverage.py).
    """
    tun = tunables(profile, ctx.options)
    samples, scale = int(tun.get("samples", 5)), int(tun.get("scale", 1))
    duration, warmup = tun.get("duration_s", 10.0), tun.get("warmup_s", 5.0)
    slices = int(tun.get("ab_slices", 1)) if len(installs) > 1 else 1
    slice_warmup = int(tun.get("ab_warmup", AB_WARMUP))
    rewarm = int(tun.get("ab_rewarm", AB_REWARM)) > 0 and warmup > 0
    if len(installs) > 1:
        samples = _whole_blocks(samples)
    wanted = wanted_workloads(ctx.options)
    wls = [w for w in workloads(profile, threads) if is_selected(w, wanted)]
    if not wls:
        raise BenchFailed(f"no workloads selected (workloads={ctx.options.get('workloads')!r})")
    pin = pin_mode(profile, ctx.options)
    allowed = sorted(os.sched_getaffinity(0))
    instr = [w for w in wls if WORKLOAD_KINDS[w.kind].phase == "instructions"]
    wall = [w for w in wls if WORKLOAD_KINDS[w.kind].phase == "wall"]
    root = pgdata_root(ctx, profile)
    for stale in sweep_stale(root):
        ctx.log(f"removed a stale run directory left by a killed run: {stale}")
    rng = random.Random(int(tun.get("seed", 1)))
    shutil.rmtree(ctx.state_dir / "callgrind", ignore_errors=True)  # a result never carries another run's profile
    shutil.rmtree(ctx.state_dir / "coverage", ignore_errors=True)  # nor another run's coverage
    shutil.rmtree(ctx.state_dir / "plans", ignore_errors=True)  # nor another run's plans
    shutil.rmtree(ctx.state_dir / "waits", ignore_errors=True)  # nor another run's waits
    hz = waits.rate(ctx.options)
    targets: list[Target] = []
    with contextlib.ExitStack() as stack:
        for label, inst in installs.items():
            conf = (confs or {}).get(label) or conf_text(profile, inst.major)
            srv = stack.enter_context(Server(ctx, inst, conf, root, name=label))
            targets.append(Target(label, inst, srv))
            if coverage_src is not None and instr and (count_instructions is None or label in count_instructions):
                targets[-1].exercised = {}
            targets[-1].collected.order.extend(n for w in wls for n in result_names(w))  # results in profile order
            counted = count_instructions is None or label in count_instructions
            loads = instr if counted else []
            _prepare(ctx, targets[-1], scale, need_snapshot=bool(instr) and counted, loads=loads, wall=wall)

        def pinned(w: Workload) -> list[int] | None:
            cpus = workload_cpus(w, pin, allowed)
            for t in targets:
                t.server.pin(cpus or allowed)
            return cpus

        for t in targets:
            for w in wall:
                if WORKLOAD_KINDS[w.kind].pgbench and warmup > 0:
                    ctx.log(f"[{t.label}] warm-up {w.name} ({warmup:.0f} s, discarded)")
                    _pgbench_sample(t, w, warmup, pinned(w), record=False)
        if slices > 1:
            ctx.log(
                f"A/B: every pgbench sample is {slices} slices alternating between "
                f"{', '.join(t.label for t in targets)}"
            )
        for r in range(samples):
            order = list(wall)
            rng.shuffle(order)
            if len(targets) > 1 and r > 0 and wall:
                # A fresh postmaster per round: its memory layout (ASLR, shared memory pages) is drawn anew, so a
                # lucky or unlucky layout becomes round-to-round noise inside the CI instead of a bias of one
                # side (measured here before this: A-vs-A pgbench -S simple 0.982 with a CI of +-0.7%).
                for t in targets:
                    t.server.stop()
                    t.server.start()
                first = next((w for w in order if WORKLOAD_KINDS[w.kind].pgbench), None)
                if rewarm and first is not None:
                    # a fresh postmaster starts with empty shared buffers: every side runs the round's first
                    # workload again, discarded, the side that takes the round's first slot last (as the slices
                    # alternate), so no recorded slice of either side pays for the cold start
                    for t in sorted(targets, key=lambda t: t is _first_side(targets, r)):
                        ctx.log(f"[{t.label}] warm-up after the restart: {first.name} ({warmup:.0f} s, discarded)")
                        _pgbench_sample(t, first, warmup, pinned(first), record=False)
            for w in order:
                if r >= min(samples, _whole_blocks(int(w.spec.get("samples", samples)), len(targets))):
                    continue  # a long workload (e.g. the Insert Benchmark) may ask for fewer samples
                if WORKLOAD_KINDS[w.kind].pgbench and slices > 1:
                    cpus = pinned(w)
                    for t in targets:
                        t.server.checkpoint()
                    taken = _sliced_samples(targets, w, duration, workload_slices(w, slices), r, cpus, slice_warmup, hz)
                    for t in targets:
                        ctx.log(
                            f"[{t.label}] round {r + 1}/{samples} {w.name}: {_summary(t.collected, w)}; "
                            f"{'first' if t is _first_side(targets, r) else 'later'}; slices "
                            + " ".join(f"{x:.1f}" for x in taken[t.label])
                        )
                    continue
                sides = list(targets) if r % 2 == 0 else list(reversed(targets))
                for t in sides:
                    t.server.checkpoint()
                    if WORKLOAD_KINDS[w.kind].pgbench:
                        _pgbench_sample(t, w, duration, pinned(w), hz=hz)
                    else:
                        _special_sample(t, w)
                    ctx.log(f"[{t.label}] round {r + 1}/{samples} {w.name}: " + _summary(t.collected, w))
        if instr:
            for t in targets:
                t.server.stop()  # nothing else runs while valgrind counts
            n = int(tun.get("instruction_samples", 2))
            keep = ctx.options.get(CALLGRIND_OPTION, "0") == "1"
            for w in instr:
                count = WORKLOAD_KINDS[w.kind].count
                assert count is not None, w.kind  # every instruction kind has one
                for t in targets:
                    if count_instructions is None or t.label in count_instructions:
                        count(ctx, t, w, n, scale, root, callgrind=keep, wanted=wanted)
            for t in targets:
                if t.exercised is not None and coverage_src is not None:
                    _write_coverage(ctx, t, coverage_src)
            selected = set(selected_names(profile, ctx.options))
            for t in targets:
                shapes = {k: v for k, v in t.plans.items() if k in selected}
                if shapes:
                    plans_file(ctx, t.label).parent.mkdir(parents=True, exist_ok=True)
                    plans_file(ctx, t.label).write_text(json.dumps(shapes, sort_keys=True))
        for t in targets:
            if t.waits:
                waits_file(ctx, t.label).parent.mkdir(parents=True, exist_ok=True)
                waits_file(ctx, t.label).write_text(json.dumps(t.waits, sort_keys=True))
    return {t.label: t.collected.results() for t in targets}


def _summary(c: Collected, w: Workload) -> str:
    s = c.series.get((w.name, w.metric))
    return f"{w.metric}={s.values[-1]:,.1f} {s.unit}" if s and s.values else "done"


def describe(profile: Mapping[str, Any]) -> str:
    names = ", ".join(w.name for w in workloads(profile))
    return f"{profile.get('description', '')} Workloads: {names}."


def selected_names(profile: Mapping[str, Any], options: Mapping[str, str]) -> Sequence[str]:
    """The result workloads the options select (the operation suite's one by one)."""
    wanted = wanted_workloads(options)
    return [
        n
        for w in workloads(profile)
        if is_selected(w, wanted)
        for n in result_names(w)
        if not wanted or n in wanted or w.name in wanted
    ]
