"""Query plans as shapes, and what changed between two of them (issue #27: a plan change is an event of its own).

A worker captures the plan of every operation of an entry with `"plans": true` (the analytic queries) once per
run, right after loading its data set: `EXPLAIN (COSTS OFF)` of each statement on the normal server, after the
same session line the counted run reads, on the same data and statistics the single-user backend then counts on.
The result carries each plan's **shape**: the plan tree's nodes, one a line, indented by depth, with what
makes them the node they are (`Hash Join`, `Index Scan using orders_pkey on orders`) and nothing that only
describes it (conditions, sort keys, aliases, costs). Two runs whose shapes differ ran different plans; the master
(master/plans.py) makes that an event, whether or not the counts moved.

Pure functions, stdlib only: the master reads shapes with the same code (`summary`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MARKER = "@@perffarm-plan "
MAX_SHAPE = 16_000  # characters of one shape (the result validates it too)
_ALIAS = re.compile(r"^(?P<head>.*? on )(?P<rel>\S+)(?: \S+)?$")  # "Seq Scan on nation n1": drop the alias
_LABEL = re.compile(r"^(?P<kind>SubPlan|InitPlan)\b.*$")  # "InitPlan 1 (returns $0)" -> "InitPlan"
_ARROW = "->  "
_JOIN = re.compile(r"(?:Join|Nested Loop)$")


def _node(text: str) -> str:
    m = _LABEL.match(text)
    if m:
        return m["kind"]
    text = re.sub(r" \(never executed\)$", "", text)
    m = _ALIAS.match(text)
    return f"{m['head']}{m['rel']}" if m else text


def shape(lines: Iterable[str]) -> str:
    """The shape of one `EXPLAIN (COSTS OFF)` output (its rows, as psql -A -t prints them): one node a line,
    two spaces of indentation per level; detail lines (`Hash Cond: ...`, `Filter: ...`) left out."""
    out: list[str] = []
    stack: list[int] = []
    first = True
    for raw in lines:
        if not raw.strip():
            continue
        stripped = raw.lstrip(" ")
        indent = len(raw) - len(stripped)
        if first:
            text = stripped
            first = False
        elif stripped.startswith(_ARROW.strip()):
            text = stripped[2:].lstrip(" ")
        elif _LABEL.match(stripped) or stripped.startswith("CTE "):
            text = stripped
        else:
            continue  # a detail of the node above
        while stack and stack[-1] >= indent:
            stack.pop()
        out.append("  " * len(stack) + _node(text.strip()))
        stack.append(indent)
    return "\n".join(out)


def node_type(line: str) -> str:
    """`Index Scan using orders_pkey on orders` -> `Index Scan`: what a node is, without what it reads."""
    return re.split(r" (?:on|using) ", line.strip(), maxsplit=1)[0]


def summary(before: str, after: str) -> str:
    """What changed from one shape to another, for people: `Hash Join → Nested Loop`, `+Sort`, `−Materialize`,
    or `same nodes, new shape` (join order, the relations a node reads, where a node sits). When join methods
    changed, only they are named (the Hash under a Hash Join, the scans the new join reads with, follow them)."""
    old = Counter(node_type(x) for x in before.splitlines() if x.strip())
    new = Counter(node_type(x) for x in after.splitlines() if x.strip())
    gone, came = old - new, new - old
    joins_gone = Counter({k: n for k, n in gone.items() if _JOIN.search(k)})
    joins_came = Counter({k: n for k, n in came.items() if _JOIN.search(k)})
    if joins_gone or joins_came:  # the join methods say what happened; the scans and hashes under them follow
        gone, came = joins_gone, joins_came

    def names(c: Counter[str]) -> str:
        return ", ".join(f"{n}× {k}" if n > 1 else k for k, n in sorted(c.items()))

    if gone and came:
        return f"{names(gone)} → {names(came)}"
    if came:
        return f"+{names(came)}"
    if gone:
        return f"−{names(gone)}"
    return "same nodes, new shape"


def script(session_line: str, statements: Sequence[tuple[str, str]]) -> str:
    """The psql script that prints every statement's plan, each after a marker line naming its step."""
    out = [session_line]
    for step, line in statements:
        out.append(f"\\echo '{MARKER}{step}'")
        out.append(f"EXPLAIN (COSTS OFF) {line}")
    return "\n".join(out) + "\n"


def parse(output: str, steps: Sequence[str]) -> dict[str, str]:
    """psql's output of `script` -> step -> shape; ValueError when a step's plan is missing."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith(MARKER):
            current = found.setdefault(line[len(MARKER) :].strip(), [])
            continue
        if current is not None:
            current.append(line)
    missing = [s for s in steps if not found.get(s)]
    if missing:
        raise ValueError(f"no plan printed for {', '.join(missing)}")
    return {s: shape(found[s]) for s in steps}


def check(doc: Any) -> dict[str, str]:
    """A result's `plans` member as the master reads it: workload -> shape (anything else: {})."""
    if not isinstance(doc, Mapping):
        return {}
    return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, str) and v}
