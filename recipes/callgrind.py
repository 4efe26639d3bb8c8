"""Callgrind output as per-function self and inclusive costs plus the call graph (standard library only).

Workers profile the instruction workloads of both sides of a culprit (or of `perffarm compare`) under
`valgrind --tool=callgrind`, read the files with `parse`, `merge` the processes of one run and ship the bounded
JSON of `Profile.to_json`; the master diffs two profiles (master/profiles). The format is Valgrind's "Callgrind
Format Specification" (valgrind.org/docs/manual/cl-format.html); this module ships to workers that only have
python3, hence no third-party parser.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JSON_VERSION = 1
DEFAULT_MIN_FRACTION = 1e-4  # to_json keeps functions with at least this share of the total, inclusive
MAX_JSON_FUNCTIONS = 20_000  # and at most this many (inclusive costs nest, so the share alone bounds nothing)

# "(id) name" defines a compressed name, "(id)" refers to it (cl-format "Name Compression")
_COMPRESSED = re.compile(r"\((\d+)\)(?:[ \t]+(.*))?$")
# A body line "key=value" or a header line "key: value": letters, then the separator.
_KEYED = re.compile(r"([A-Za-z]+)([=:])[ \t]*(.*)$")
# Position specifications and the name table their "(id)"s share: callgrind numbers a file once for
# fl/fi/fe/cfi/cfl/jfi, a function once for fn/cfn/jfn, an object once for ob/cob.
_TABLE = {
    "fl": "fl",
    "fi": "fl",
    "fe": "fl",
    "cfi": "fl",
    "cfl": "fl",
    "jfi": "fl",
    "fn": "fn",
    "cfn": "fn",
    "jfn": "fn",
    "ob": "ob",
    "cob": "ob",
}
_SUBPOSITIONS = ("instr", "bb", "line")

_Id = tuple[str, str, str]  # a function as callgrind tells them apart: object, file, name


@dataclass(frozen=True)
class FunctionCost:
    """One function: cost of its own code (``self_cost``) and with everything it called (``inclusive_cost``)."""

    name: str
    file: str  # its fl= file ("" when unknown)
    line: int  # first line with cost in that file, 0 when the profile has no line positions
    self_cost: int
    inclusive_cost: int


@dataclass(frozen=True)
class EdgeCost:
    """All calls from one function to another: how many, and their inclusive cost."""

    calls: int
    inclusive_cost: int


@dataclass(frozen=True)
class Profile:
    """One event's costs per function and per call edge, from one or more callgrind files.

    ``total`` is the sum of every self cost, including ``dropped_self``: the self cost of the ``dropped_functions``
    that `to_json` left out, so totals reconcile after a round trip. Functions are keyed by name, so that two
    builds' profiles line up; where one profile has several functions of one name (callgrind tells functions
    apart by object, file and name: every glibc program has two ``(below main)``, and static functions of
    different files may share a name), each is keyed ``name [label]`` with the shortest of file base name,
    object base name, or more, that tells them apart. Summing them instead would join unrelated call chains.
    """

    event: str
    total: int
    functions: dict[str, FunctionCost]
    edges: dict[tuple[str, str], EdgeCost]  # (caller, callee)
    dropped_functions: int = 0
    dropped_self: int = 0

    def to_json(
        self, min_fraction: float = DEFAULT_MIN_FRACTION, max_functions: int = MAX_JSON_FUNCTIONS
    ) -> dict[str, Any]:
        """The versioned, size-bounded form that workers ship: functions whose inclusive cost is at least
        ``min_fraction`` of the total (the ``max_functions`` largest of them) and the edges between them.

        Layout: ``files`` is a list of file names; ``functions`` maps a name to ``[file index, line, self,
        inclusive]``; ``edges`` lists ``[caller, callee, calls, inclusive]``; ``dropped_functions`` and
        ``dropped_self`` count what was left out. Names and edges are sorted, so equal profiles give equal JSON.
        """
        if not 0 <= min_fraction <= 1:
            raise ValueError(f"min_fraction must be within [0, 1], not {min_fraction!r}")
        if max_functions < 0:
            raise ValueError(f"max_functions must not be negative, not {max_functions!r}")
        threshold = min_fraction * self.total
        wide = [f for f in self.functions.values() if f.inclusive_cost >= threshold]
        kept = sorted(wide, key=lambda f: (-f.inclusive_cost, f.name))[:max_functions]
        names = {f.name for f in kept}
        files = sorted({f.file for f in kept})
        index = {name: i for i, name in enumerate(files)}
        dropped = [f for f in self.functions.values() if f.name not in names]
        return {
            "version": JSON_VERSION,
            "event": self.event,
            "total": self.total,
            "dropped_functions": self.dropped_functions + len(dropped),
            "dropped_self": self.dropped_self + sum(f.self_cost for f in dropped),
            "files": files,
            "functions": {
                f.name: [index[f.file], f.line, f.self_cost, f.inclusive_cost] for f in sorted(kept, key=_by_name)
            },
            "edges": [
                [caller, callee, e.calls, e.inclusive_cost]
                for (caller, callee), e in sorted(self.edges.items())
                if caller in names and callee in names
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Profile:
        """The profile `to_json` wrote; ValueError naming the offending member for anything else (the JSON comes
        from workers, so it is checked, not trusted)."""
        if not isinstance(doc, Mapping):
            raise ValueError("profile JSON: not an object")
        if doc.get("version") != JSON_VERSION:
            raise ValueError(f"profile JSON: version {doc.get('version')!r} is not {JSON_VERSION}")
        event = _json_str(doc.get("event"), "event")
        total = _json_count(doc.get("total"), "total")
        dropped_functions = _json_count(doc.get("dropped_functions"), "dropped_functions")
        dropped_self = _json_count(doc.get("dropped_self"), "dropped_self")
        files = doc.get("files")
        if not isinstance(files, list):
            raise ValueError("profile JSON: files is not a list")
        files = [_json_str(f, f"files[{i}]") for i, f in enumerate(files)]
        raw_functions = doc.get("functions")
        if not isinstance(raw_functions, Mapping):
            raise ValueError("profile JSON: functions is not an object")
        functions: dict[str, FunctionCost] = {}
        for name, row in raw_functions.items():
            where = f"functions[{name!r}]"
            if not isinstance(row, list) or len(row) != 4:
                raise ValueError(f"profile JSON: {where} is not [file, line, self, inclusive]")
            file_index, line, self_cost, inclusive = (_json_count(v, f"{where}[{i}]") for i, v in enumerate(row))
            if file_index >= len(files):
                raise ValueError(f"profile JSON: {where}[0] names no file")
            functions[name] = FunctionCost(name, files[file_index], line, self_cost, inclusive)
        raw_edges = doc.get("edges")
        if not isinstance(raw_edges, list):
            raise ValueError("profile JSON: edges is not a list")
        edges: dict[tuple[str, str], EdgeCost] = {}
        for i, row in enumerate(raw_edges):
            where = f"edges[{i}]"
            if not isinstance(row, list) or len(row) != 4:
                raise ValueError(f"profile JSON: {where} is not [caller, callee, calls, inclusive]")
            caller, callee = _json_str(row[0], f"{where}[0]"), _json_str(row[1], f"{where}[1]")
            if caller not in functions or callee not in functions:
                raise ValueError(f"profile JSON: {where} joins a function that is not listed")
            if (caller, callee) in edges:
                raise ValueError(f"profile JSON: {where} repeats an edge")
            edges[caller, callee] = EdgeCost(_json_count(row[2], f"{where}[2]"), _json_count(row[3], f"{where}[3]"))
        listed = sum(f.self_cost for f in functions.values())
        if listed + dropped_self != total:
            raise ValueError(
                f"profile JSON: total {total} is not the self costs {listed} plus dropped_self {dropped_self}"
            )
        return cls(event, total, functions, edges, dropped_functions, dropped_self)


def parse(path: Path, event: str = "Ir") -> Profile:
    """The costs of `event` in one callgrind output file, every part (dump) of it summed.

    Inclusive cost follows ``callgrind_annotate --inclusive=yes``: a function that other functions call costs the
    sum of the inclusive costs of those calls; one that nobody else calls costs its self cost plus the inclusive
    costs of its calls to others. Unlike callgrind_annotate, calls of a function to itself count in neither sum:
    their inclusive cost is already inside the outer activation's, and adding it again is how callgrind_annotate
    reports more cost for the second recursion level (``f'2`` under callgrind's default ``--separate-recs=2``)
    than the outer ``f`` that contains it. Plain ``f`` is never nested in itself under that default, so its
    inclusive cost is callgrind_annotate's exactly. Mutual recursion inside one name (``f -> g -> f`` with
    ``--separate-recs=1``) still counts the inner calls twice, as callgrind_annotate does.

    Every part's cost lines must add up to its ``totals:`` and ``summary:`` lines where the file has them, else
    ValueError naming the file: the format lets a summary exceed the cost lines, but callgrind writes them equal,
    so a difference means a truncated file or a misread one.
    """
    with open(path, encoding="utf-8", errors="replace") as lines:
        return _Reader(str(path), event).read(lines)


def parse_bytes(raw: bytes, event: str = "Ir", source: str = "callgrind output") -> Profile:
    """`parse` of a callgrind output already read (e.g. with recipes.sandbox.read_untrusted)."""
    return _Reader(source, event).read(raw.decode("utf-8", errors="replace").splitlines())


def merge(profiles: Iterable[Profile]) -> Profile:
    """The sum of profiles of one event, function by function and edge by edge: the dumps or processes of one
    run (the postmaster and every backend write their own file under ``--trace-children=yes`` with ``%p`` in the
    file name)."""
    profiles = list(profiles)
    if not profiles:
        raise ValueError("merge: no profiles")
    events = sorted({p.event for p in profiles})
    if len(events) > 1:
        raise ValueError(f"merge: profiles of different events {events}")
    functions: dict[str, FunctionCost] = {}
    edges: dict[tuple[str, str], EdgeCost] = {}
    for p in profiles:
        for name, f in p.functions.items():
            old = functions.get(name)
            if old is None:
                functions[name] = f
            else:
                functions[name] = FunctionCost(
                    name,
                    old.file or f.file,
                    old.line or f.line,
                    old.self_cost + f.self_cost,
                    old.inclusive_cost + f.inclusive_cost,
                )
        for key, e in p.edges.items():
            prev = edges.get(key)
            edges[key] = e if prev is None else EdgeCost(prev.calls + e.calls, prev.inclusive_cost + e.inclusive_cost)
    return Profile(
        events[0],
        sum(p.total for p in profiles),
        functions,
        edges,
        sum(p.dropped_functions for p in profiles),
        sum(p.dropped_self for p in profiles),
    )


class _Reader:
    """The state of reading one file: name tables, current positions, current function and call, sums."""

    def __init__(self, source: str, event: str) -> None:
        self.source = source
        self.event = event
        self.lineno = 0
        self.names: dict[str, dict[str, str]] = {"fl": {}, "fn": {}, "ob": {}}  # kept across parts, as the spec says
        self.column: int | None = None  # the event's index among the costs
        self.npos = 1  # subpositions per cost line ("positions: line" by default)
        self.line_at: int | None = 0  # which subposition is the line number
        self.last = [0]
        self.ob = ""  # the function's object (ob=)
        self.fl = ""  # the function's file (fl=)
        self.src = ""  # the file of the code at hand (fl=, or fi=/fe= for inlined code)
        self.fn: _Id | None = None
        self.cob: str | None = None  # the callee's object and file when not the caller's (cob=, cfi=)
        self.cfile: str | None = None
        self.cfn: str | None = None
        self.call: tuple[_Id, int] | None = None  # callee and count of a calls= line waiting for its cost line
        self.self_cost: dict[_Id, int] = {}
        self.line_of: dict[_Id, int] = {}
        self.edges: dict[tuple[_Id, _Id], list[int]] = {}  # callees as named by the call, resolved at the end
        self.in_body = False
        self.part = 1
        self.part_sum = 0
        self.checks: list[tuple[str, list[str]]] = []  # totals:/summary: lines of the current part
        self.total = 0

    def error(self, message: str) -> ValueError:
        return ValueError(f"{self.source}:{self.lineno}: {message}")

    def read(self, lines: Iterable[str]) -> Profile:
        for self.lineno, raw in enumerate(lines, 1):
            line = raw.rstrip("\r\n")
            if not line or line[0] == "#" or line.isspace():
                continue
            first = line[0]
            if first.isdigit() or first in "+-*":
                self.cost_line(line)
                continue
            m = _KEYED.match(line)
            if m is None:
                raise self.error(f"not a callgrind line: {line[:80]!r}")
            key, sep, value = m.groups()
            if sep == ":":
                self.header(key, value)
            else:
                self.in_body = True
                self.body(key, value.strip())
        self.lineno += 1
        self.close_part()
        if self.column is None:
            raise self.error("no events: line (empty or not a callgrind file)")
        return self.profile()

    def header(self, key: str, value: str) -> None:
        if key == "totals":
            self.checks.append((key, value.split()))
            return
        if self.in_body:
            self.close_part()
        if key == "summary":
            self.checks.append((key, value.split()))
        elif key == "events":
            events = value.split()
            if self.event not in events:
                raise self.error(f"event {self.event!r} is not among the events {events}")
            self.column = events.index(self.event)
        elif key == "positions":
            kinds = value.split() or ["line"]
            if any(k not in _SUBPOSITIONS for k in kinds):
                raise self.error(f"unknown positions {kinds}")
            self.npos = len(kinds)
            self.line_at = kinds.index("line") if "line" in kinds else None
            self.last = [0] * self.npos
        elif key == "version":
            major = value.strip().split(".")[0]
            if not major.isdigit() or int(major) > 1:
                raise self.error(f"callgrind format version {value.strip()!r} is not 1")
        # pid, thread, part, cmd, desc, creator and event (long names) change no cost

    def body(self, key: str, value: str) -> None:
        if self.call is not None:
            raise self.error("calls= line without its cost line")
        table = _TABLE.get(key)
        if table is not None:
            name = self.name(table, value)
            if key == "fn":
                self.fn = (self.ob, self.fl, name)
                self.src = self.fl
                self.self_cost.setdefault(self.fn, 0)
            elif key == "fl":
                self.fl = self.src = name
            elif key == "ob":
                self.ob = name
            elif key == "cob":
                self.cob = name
            elif key in ("fi", "fe"):
                self.src = name  # inlined code: its cost is still the current function's
            elif key == "cfn":
                self.cfn = name
            elif key in ("cfi", "cfl"):
                self.cfile = name
        elif key == "calls":
            parts = value.split()
            if self.fn is None or self.cfn is None:
                raise self.error("calls= line outside a function or without cfn=")
            if not parts:
                raise self.error("calls= line without a count")
            # callgrind writes cob=/cfi= only where the callee's object or file differs from the code at hand
            ob = self.ob if self.cob is None else self.cob
            self.call = ((ob, self.src if self.cfile is None else self.cfile, self.cfn), self.number(parts[0]))
            self.cob = self.cfile = None
        # jump=/jcnd= (jump counts) and unknown keys carry no cost

    def name(self, table: str, value: str) -> str:
        m = _COMPRESSED.match(value)
        if m is None:
            return value
        ident, name = m.groups()
        names = self.names[table]
        if name:
            names[ident] = name.strip()
            return names[ident]
        if ident not in names:
            raise self.error(f"({ident}) refers to no {table}= name defined before")
        return names[ident]

    def number(self, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            if text[:2] in ("0x", "0X"):
                try:
                    return int(text, 16)
                except ValueError:
                    pass
        raise self.error(f"not a number: {text!r}")

    def cost_line(self, line: str) -> None:
        self.in_body = True
        if self.column is None:
            raise self.error("cost line before the events: line")
        fn = self.fn
        if fn is None:
            raise self.error("cost line before any fn= line")
        tokens = line.split()
        npos = self.npos
        if len(tokens) < npos:
            raise self.error(f"cost line with fewer than {npos} positions")
        last = self.last
        for i in range(npos):
            token = tokens[i]
            sign = token[0]
            if sign == "*":
                continue
            if sign == "+":
                last[i] += self.number(token[1:])
            elif sign == "-":
                last[i] -= self.number(token[1:])
            else:
                last[i] = self.number(token)
        at = npos + self.column
        cost = self.number(tokens[at]) if len(tokens) > at else 0
        if self.call is not None:
            callee, count = self.call
            self.call = None
            edge = self.edges.get((fn, callee))
            if edge is None:
                self.edges[fn, callee] = [count, cost]
            else:
                edge[0] += count
                edge[1] += cost
        else:
            self.self_cost[fn] += cost
            self.part_sum += cost
        if self.line_at is not None and fn not in self.line_of and self.src == fn[1] and last[self.line_at] > 0:
            self.line_of[fn] = last[self.line_at]

    def close_part(self) -> None:
        if self.call is not None:
            raise self.error("calls= line without its cost line")
        for key, values in self.checks:
            if self.column is None:
                raise self.error(f"{key}: line without an events: line")
            expected = self.number(values[self.column]) if len(values) > self.column else 0
            if expected != self.part_sum:
                raise ValueError(
                    f"{self.source}: part {self.part}: {key}: says {expected} {self.event} but its cost lines add up "
                    f"to {self.part_sum} (a truncated or misread profile)"
                )
        self.total += self.part_sum
        self.part += 1
        self.part_sum = 0
        self.checks = []
        self.in_body = False
        self.last = [0] * self.npos

    def profile(self) -> Profile:
        resolve = _Resolver(self.self_cost)
        sums: dict[tuple[_Id, _Id], list[int]] = {}
        for (caller, named), (calls, cost) in self.edges.items():
            edge = sums.setdefault((caller, resolve(named)), [0, 0])
            edge[0] += calls
            edge[1] += cost
        keys = resolve.keys()
        called: dict[_Id, int] = {}
        calling: dict[_Id, int] = {}
        for (caller, callee), (_, cost) in sums.items():
            if caller != callee:
                called[callee] = called.get(callee, 0) + cost
                calling[caller] = calling.get(caller, 0) + cost
        functions: dict[str, FunctionCost] = {}
        for ident, key in sorted(keys.items(), key=lambda item: item[1]):
            self_cost = self.self_cost.get(ident, 0)
            inclusive = called[ident] if ident in called else self_cost + calling.get(ident, 0)
            functions[key] = FunctionCost(key, ident[1], self.line_of.get(ident, 0), self_cost, inclusive)
        edges = {(keys[a], keys[b]): EdgeCost(calls, cost) for (a, b), (calls, cost) in sums.items()}
        return Profile(self.event, self.total, functions, dict(sorted(edges.items())))


class _Resolver:
    """Which function a call names, and each function's key: its name, or ``name [file]`` where several
    functions of one profile share a name (glibc's two ``(below main)``s, static functions of different files)."""

    def __init__(self, defined: Iterable[_Id]) -> None:
        self.by_name: dict[str, list[_Id]] = {}
        for ident in sorted(defined):
            self.by_name.setdefault(ident[2], []).append(ident)

    def __call__(self, named: _Id) -> _Id:
        """The function defined by fn= that a call names by object, file and name; a name defined once is that
        function whatever object and file the call gives, an unknown one becomes a function without cost lines."""
        candidates = self.by_name.setdefault(named[2], [])
        if named in candidates:
            return named
        if not candidates:
            candidates.append(named)
            return named
        if len(candidates) > 1:
            for matches in ([c for c in candidates if c[1] == named[1]], [c for c in candidates if c[0] == named[0]]):
                if len(matches) == 1:
                    return matches[0]
        return candidates[0]

    def keys(self) -> dict[_Id, str]:
        keys: dict[_Id, str] = {}
        for name, idents in self.by_name.items():
            if len(idents) == 1:
                keys[idents[0]] = name
                continue
            for label in (  # the shortest that tells them apart
                lambda i: _base(i[1]),
                lambda i: _base(i[0]),
                lambda i: f"{_base(i[1])}, {_base(i[0])}",
                lambda i: i[1],
                lambda i: f"{i[1]}, {i[0]}",
            ):
                labels = {i: label(i) for i in idents}
                if len(set(labels.values())) == len(idents):
                    break
            keys.update((i, f"{name} [{labels[i]}]") for i in idents)
        return keys


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _by_name(f: FunctionCost) -> str:
    return f.name


def _json_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"profile JSON: {where} is not a string")
    return value


def _json_count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
            return int(value)
        raise ValueError(f"profile JSON: {where} is not a non-negative integer")
    return value
