"""The operation suite: instructions of one SQL operation each (a hash join, a COPY, a CREATE INDEX ...), every
operation counted separately in one valgrind run per sample.

Why one run: valgrind's start-up and a single-user backend's first query cost seconds and millions of
instructions; one run per operation would cost dozens of them per sample. Instead the backend reads the whole
session, one line per operation, under callgrind with `--dump-after=exec_simple_query`: callgrind writes one
profile per line (the first line, the session's set-up, is counted and discarded), each holding exactly that
line's instructions, so every operation gets its own exact count and its own per-function profile from the same
run (the counts repeat to the instruction, as the other instruction workloads do).

What an operation's count depends on: the data set (sql/ops-data.sql, loaded by a normal server into its own
database before the data directory is copied; the copy is pristine for every sample), and everything that ran
before it in the session (catalog caches, plans, the rows earlier operations wrote). Its series identity is
therefore the data set, the session line and the SQL of every operation up to and including its own: operations
appended to the list leave every existing operation's series whole; editing one starts new series for it and
for the operations after it (`parts`). Groups (the subsystem an operation belongs to) only label series and are
in no identity.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from recipes.api import BenchFailed, Context
from recipes.pg import instructions, plans
from recipes.pg.build import Install
from recipes.pg.server import Server

DATABASE = "perffarm_ops"  # the operation suite's database (an entry may name its own: `database`)
DATABASE_NAME = re.compile(r"^perffarm_[a-z0-9_]{1,40}$")
# psql variables of the data set: where it writes the files the COPY FROM operations read (relative to the data
# directory, so every copy of it has them)
COPY_FILES = {"copy_text": "ops-copy.txt", "copy_csv": "ops-copy.csv", "copy_binary": "ops-copy.bin"}
OP_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
OP_DIR = "ops"  # an operation's SQL: sql/ops/<name>.sql (an entry may name its own folder: `dir`)
DIR_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Operation:
    """One operation of the suite: its name (the result workload is `<entry name>-<name>`), group and the folder
    under sql/ that holds its SQL."""

    name: str
    group: str
    folder: str = OP_DIR

    @property
    def script(self) -> str:
        return f"{self.folder}/{self.name}.sql"


def database(entry: Mapping[str, Any]) -> str:
    """The database the entry's data set is loaded into and its operations run in (default perffarm_ops)."""
    name = entry.get("database", DATABASE)
    if not isinstance(name, str) or not DATABASE_NAME.match(name):
        raise ValueError(f"workload {entry.get('name')!r}: `database` must look like perffarm_tpch, got {name!r}")
    return name


def operations(entry: Mapping[str, Any]) -> list[Operation]:
    """The entry's operations in session order; ValueError naming the entry for a malformed list."""
    ops = entry.get("operations")
    if not isinstance(ops, list) or not ops:
        raise ValueError(f"workload {entry.get('name')!r}: `operations` must be a non-empty list")
    folder = entry.get("dir", OP_DIR)
    if not isinstance(folder, str) or not DIR_NAME.match(folder):
        raise ValueError(f"workload {entry.get('name')!r}: `dir` must be a folder name under sql/ like ops")
    database(entry)
    out: list[Operation] = []
    for i, item in enumerate(ops):
        if not isinstance(item, Mapping) or not isinstance(item.get("op"), str) or not OP_NAME.match(item["op"]):
            raise ValueError(f"workload {entry.get('name')!r}: operations[{i}] needs an `op` name like join-hash")
        if not isinstance(item.get("group"), str) or not item["group"]:
            raise ValueError(f"workload {entry.get('name')!r}: operation {item['op']!r} needs a `group`")
        out.append(Operation(item["op"], item["group"], folder))
    names = [o.name for o in out]
    if len(set(names)) != len(names):
        raise ValueError(f"workload {entry.get('name')!r}: an operation is listed twice")
    return out


def scripts(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """Every SQL file (under sql/) the entry runs: the data set, the session line, each operation's."""
    return (entry["data"], entry["session"], *(o.script for o in operations(entry)))


def sql_text(name: str) -> str:
    return resources.files("recipes.pg").joinpath("sql", *name.split("/")).read_text()


def one_line(name: str) -> str:
    """A script as the one line the single-user backend reads as one query: comment lines dropped, the rest joined.
    Scripts are written so that this is exact (no string literal spans lines or holds `--`)."""
    kept = [ln.strip() for ln in sql_text(name).splitlines() if ln.strip() and not ln.strip().startswith("--")]
    if not kept:
        raise ValueError(f"sql/{name}: no statement")
    line = " ".join(kept)
    if line.endswith("\\"):
        raise ValueError(f"sql/{name}: a line ending in a backslash continues in a single-user backend")
    return line


@dataclass(frozen=True)
class Part:
    """What one result workload of an entry is: its step (the name after `<entry name>-`), the part of the entry
    that is its own, and the SQL files its numbers depend on (profile.identities hashes both)."""

    step: str
    own: Mapping[str, Any]
    scripts: tuple[str, ...]


def parts(entry: Mapping[str, Any]) -> list[Part]:
    """One part per operation: the entry with the operations up to and including this one (their groups left
    out: a label), and the data set, the session line and those operations' SQL."""
    ops = operations(entry)
    rest = {k: v for k, v in entry.items() if k != "operations"}
    out = []
    for i, op in enumerate(ops):
        upto = ops[: i + 1]
        own = {**rest, "operations": [{"op": o.name} for o in upto]}
        out.append(Part(op.name, own, (entry["data"], entry["session"], *(o.script for o in upto))))
    return out


def groups(entry: Mapping[str, Any]) -> dict[str, str]:
    """step -> group."""
    return {o.name: o.group for o in operations(entry)}


def load(server: Server, entry: Mapping[str, Any]) -> None:
    """The data set, into its own database (the pgbench database, which the other instruction workloads count
    on, is left exactly as it was): run by psql from a file, statement by statement (VACUUM needs that)."""
    assert server.dir is not None
    db = database(entry)
    server.psql(f"CREATE DATABASE {db}")
    script = server.dir / f"{db}-data.sql"
    script.write_text(sql_text(entry["data"]))
    variables: list[str] = []
    for var, name in COPY_FILES.items():
        variables += ["-v", f"{var}={server.datadir / name}"]
    server.run_client(
        [server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db, *variables, "-f", script],
        f"loading the operation suite's data set ({entry['data']})",
        timeout=1800,
        ro=[script],
    )


def capture_plans(server: Server, entry: Mapping[str, Any]) -> dict[str, str]:
    """step -> the shape of its plan (recipes/pg/plans.py), for an entry with `"plans": true` ({} otherwise): one
    psql session on the loaded data set, the session line and then `EXPLAIN (COSTS OFF)` of every operation."""
    if entry.get("plans") is not True:
        return {}
    assert server.dir is not None
    ops = operations(entry)
    script = server.dir / f"{database(entry)}-plans.sql"
    script.write_text(plans.script(one_line(entry["session"]), [(o.name, one_line(o.script)) for o in ops]))
    out = server.run_client(
        [server.bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", database(entry), "-f", script],
        f"capturing the plans of {entry.get('name')}",
        timeout=600,
        ro=[script],
    )
    try:
        return plans.parse(out, [o.name for o in ops])
    except ValueError as e:
        raise BenchFailed(f"capturing the plans of {entry.get('name')}: {e}") from None


def session(entry: Mapping[str, Any], upto: int | None = None) -> list[str]:
    """The lines the backend reads: the session line, then one per operation (the first `upto` only)."""
    ops = operations(entry)[:upto]
    return [one_line(entry["session"]), *(one_line(o.script) for o in ops)]


def sample(
    ctx: Context,
    install: Install,
    snapshot: Path,
    entry: Mapping[str, Any],
    wanted: Sequence[str],
    scratch: Path,
    keep: Callable[[str], Path | None],
    sandbox: Any = None,
    sink: Callable[[str, bytes], None] | None = None,
) -> dict[str, int]:
    """One sample: the session up to the last wanted operation (an operation's count does not depend on those
    after it) in one callgrind run; step -> instructions of each wanted operation. `keep(step)` says where to keep
    that operation's profile (None: not kept); `sink(step, output)` gets each wanted operation's callgrind output."""
    ops = operations(entry)
    last = max(i for i, o in enumerate(ops) if o.name in wanted)
    lines = session(entry, last + 1)
    paths = {i + 1: keep(o.name) for i, o in enumerate(ops[: last + 1]) if o.name in wanted}
    steps = {i + 1: o.name for i, o in enumerate(ops[: last + 1]) if o.name in wanted}

    def each(i: int, raw: bytes) -> None:
        if sink is not None and i in steps:
            sink(steps[i], raw)

    counts = instructions.count_each(
        ctx,
        install,
        snapshot,
        lines,
        scratch,
        database=database(entry),
        keep={i: p for i, p in paths.items() if p},
        sandbox=sandbox,
        sink=each,
    )
    if len(counts) != len(lines):
        raise BenchFailed(f"the operation suite ran {len(lines)} lines but callgrind wrote {len(counts)} profiles")
    return {o.name: counts[i + 1] for i, o in enumerate(ops[: last + 1]) if o.name in wanted}
