"""A pgbench workload that runs a list of queries, each measured on its own: paired wall clock per analytic query.

An entry of kind `pgbench` with `statements` (the 22 TPC-H-derived queries: `"dir": "tpch"`, `"statements": ["q01",
…]`) runs them as one pgbench script, one query a line (sql/<dir>/<name>.sql joined to one line, as the operation
suite's single-user backend reads it), with `-r`: every sample then reports each line's mean latency beside the
script's own throughput. So one workload's time gives one result workload per query (`<name>-<statement>`, metric
`latency_avg` in ms, lower is better), and on a paired run (`reference=`) each of them gets its `latency_avg.ratio`
per order-balanced block like every other wall-clock metric (recipes/paired.py): 22 paired series for the time of
one workload, where 22 paired workloads would have cost about 20 minutes of the bench phase.

The data set (`data`, e.g. sql/tpch-data.sql) is loaded into the entry's own database (`database`) on every server
of the run, the reference's too, after the pristine copy for the instruction counts is taken (so no instruction
series sees it), and the entry's `set` (e.g. `max_parallel_workers_per_gather = 0`) is made that database's
default, so the settings apply to every pgbench connection without a line in the script.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from recipes.pg import operations
from recipes.pg.server import Server

SETTING_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
SETTING_VALUE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def has_statements(entry: Mapping[str, Any]) -> bool:
    return "statements" in entry


def statements(entry: Mapping[str, Any]) -> list[str]:
    """The entry's statements in script order; ValueError naming the entry for a malformed list."""
    names = entry.get("statements")
    if not isinstance(names, list) or not names:
        raise ValueError(f"workload {entry.get('name')!r}: `statements` must be a non-empty list of query names")
    for n in names:
        if not isinstance(n, str) or not operations.OP_NAME.match(n):
            raise ValueError(f"workload {entry.get('name')!r}: statement {n!r} must be a name like q01")
    if len(set(names)) != len(names):
        raise ValueError(f"workload {entry.get('name')!r}: a statement is listed twice")
    folder = entry.get("dir")
    if not isinstance(folder, str) or not operations.DIR_NAME.match(folder):
        raise ValueError(f"workload {entry.get('name')!r}: `dir` must name the folder under sql/ of its statements")
    if entry.get("script"):
        raise ValueError(f"workload {entry.get('name')!r}: `statements` make its script; drop `script`")
    if not isinstance(entry.get("data"), str):
        raise ValueError(f"workload {entry.get('name')!r}: `data` must name the data set its statements read")
    operations.database(entry)
    settings(entry)
    return list(names)


def settings(entry: Mapping[str, Any]) -> dict[str, str]:
    """The entry's `set`: setting -> value, made the default of its database."""
    found = entry.get("set", {})
    if not isinstance(found, Mapping):
        raise ValueError(f"workload {entry.get('name')!r}: `set` must map settings to values")
    for k, v in found.items():
        if not SETTING_NAME.match(str(k)) or not isinstance(v, str) or not SETTING_VALUE.match(v):
            raise ValueError(f"workload {entry.get('name')!r}: `set` {k!r}: expected a setting name and a plain value")
    return dict(found)


def files(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The SQL files (under sql/) the entry runs: its data set and each statement's."""
    return (entry["data"], *(f"{entry['dir']}/{n}.sql" for n in statements(entry)))


def script(entry: Mapping[str, Any]) -> str:
    """The pgbench script: one statement a line, in order (pgbench -r reports per line)."""
    return "".join(operations.one_line(f"{entry['dir']}/{n}.sql") + "\n" for n in statements(entry))


def load(server: Server, entry: Mapping[str, Any]) -> None:
    """The entry's data set into its own database, with the entry's settings as that database's defaults."""
    operations.load(server, entry)
    db = operations.database(entry)
    for k, v in settings(entry).items():
        server.psql(f"ALTER DATABASE {db} SET {k} = '{v}'")
