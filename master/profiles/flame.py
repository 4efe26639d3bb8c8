"""Flame graphs from callgrind's call graph: folded stacks, and a differential SVG that needs no JavaScript.

Callgrind records edges (caller, callee, inclusive cost of the calls), not stacks, so stacks are rebuilt from
the roots down (functions nobody else calls, or a given root such as ``PostgresMain``). A frame of function f
worth v gets a child frame for each call f -> g worth v * inclusive(f -> g) / inclusive(f). Down a chain of
functions that each have a single caller, v is f's inclusive cost and every frame is exact. A function with
several callers shares its callees among its stacks in proportion to each stack's share of its cost, which is
an approximation: callgrind does not record which caller's calls cost what further down. Cycles are cut (a
function already on the stack is not expanded again; its cost stays in its caller's frame), the children of a
frame are scaled down if they add up to more than it, stacks stop at `max_depth` frames and frames narrower
than `min_fraction` of the whole graph are left out (their cost shows as the gap above their caller).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from xml.sax.saxutils import escape

from master.textsafe import visible
from recipes.callgrind import EdgeCost, Profile

MAX_DEPTH = 40
MIN_FRACTION = 1e-4  # of the graph's total, for folded stacks
MIN_PIXELS = 0.5  # narrower frames are not drawn in the SVG
SATURATION = 0.10  # a frame whose cost per query changed by this fraction or more gets the full red or blue

_FRAME_H = 16
_PAD = 10
_TOP = 72  # title, legend and totals lines above the graph
_CHAR_W = 6.6  # monospace at 11px
_GREY = (208, 208, 208)
_RED = (224, 48, 48)
_BLUE = (48, 96, 224)
_NOT_XML = re.compile("[\ufffe\uffff]")  # left by textsafe.visible, not allowed in XML


@dataclass(frozen=True)
class _Frame:
    """One function on one rebuilt stack: its cost there on side B (``value``) and on side A (``base``)."""

    stack: tuple[str, ...]
    value: float
    base: float
    children: tuple[_Frame, ...]

    def walk(self) -> Iterator[_Frame]:
        yield self
        for child in self.children:
            yield from child.walk()


def folded(
    profile: Profile, root: str | None = None, max_depth: int = MAX_DEPTH, min_fraction: float = MIN_FRACTION
) -> dict[tuple[str, ...], float]:
    """Each rebuilt stack's own cost (its frame less its children): the input of any flame graph tool."""
    out: dict[tuple[str, ...], float] = {}
    for top in _frames(profile, None, root, max_depth, min_fraction):
        for frame in top.walk():
            own = frame.value - sum(c.value for c in frame.children)
            if own > 0:
                out[frame.stack] = own
    return out


def folded_text(
    profile: Profile, root: str | None = None, max_depth: int = MAX_DEPTH, min_fraction: float = MIN_FRACTION
) -> str:
    """Folded stacks as text, ``main;work;leaf 1234`` per line (flamegraph.pl's input), sorted, costs rounded."""
    lines = []
    for stack, own in sorted(folded(profile, root, max_depth, min_fraction).items()):
        if round(own) > 0:
            names = (visible(name).replace(";", "\\x3b") for name in stack)  # the count is after the last space
            lines.append(f"{';'.join(names)} {round(own)}")
    return "".join(line + "\n" for line in lines)


def differential_svg(
    a: Profile,
    b: Profile,
    queries_a: int,
    queries_b: int,
    title: str,
    width: int = 1200,
    root: str | None = None,
    max_depth: int = MAX_DEPTH,
) -> str:
    """A self-contained SVG flame graph of B against A, per query: frame widths are B's cost; red frames cost
    more per query than on A, blue ones less, deeper colour for a larger relative change, grey when unchanged.
    Each frame's tooltip gives its name, A and B per query and the change. Function names come from compiled code
    and are escaped. Calls that only A makes have no width on B and do not show. Same input, same bytes.
    """
    for label, queries in (("queries_a", queries_a), ("queries_b", queries_b)):
        if isinstance(queries, bool) or not isinstance(queries, int) or queries <= 0:
            raise ValueError(f"{label} must be a positive number of queries, not {queries!r}")
    if a.event != b.event:
        raise ValueError(f"profiles of different events: {a.event!r} and {b.event!r}")
    if width < 100:
        raise ValueError(f"width must be at least 100 pixels, not {width!r}")
    inner = width - 2 * _PAD
    tops = _frames(b, a, root, max_depth, MIN_PIXELS / inner)
    whole = sum(t.value for t in tops)
    levels = max((len(f.stack) for t in tops for f in t.walk()), default=0)
    height = _TOP + max(levels, 1) * _FRAME_H + 2 * _PAD
    unit = "instructions" if b.event == "Ir" else b.event
    total_a, total_b = a.total / queries_a, b.total / queries_b
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width / 2:.1f}" y="22" text-anchor="middle" font-size="15">{_xml(title)}</text>',
        f'<text x="{_PAD}" y="42">red: more {_xml(unit)} per query in B than in A; blue: fewer; grey: unchanged; '
        "deeper colour, larger relative change; frame widths are side B</text>",
        f'<text x="{_PAD}" y="60">A {total_a:,.1f} ({queries_a} queries), B {total_b:,.1f} ({queries_b} queries) '
        f"{_xml(unit)} per query, delta {_change(total_a, total_b)}</text>",
    ]
    if whole <= 0:
        out.append(f'<text x="{_PAD}" y="{_TOP + 12}">profile B has no cost to draw</text>')
    scale = inner / whole if whole > 0 else 0.0
    x = float(_PAD)
    for top in tops:
        _draw(out, top, x, scale, levels, queries_a, queries_b, unit)
        x += top.value * scale
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _frames(b: Profile, a: Profile | None, root: str | None, max_depth: int, min_fraction: float) -> tuple[_Frame, ...]:
    """The rebuilt stacks of profile B with A's cost on the same stacks, from the roots (module docstring)."""
    if max_depth < 1:
        raise ValueError(f"max_depth must be at least 1, not {max_depth!r}")
    if not 0 < min_fraction <= 1:
        raise ValueError(f"min_fraction must be within (0, 1], not {min_fraction!r}")  # 0 could expand forever
    calls: dict[str, list[tuple[str, EdgeCost]]] = {}
    called: set[str] = set()
    for (caller, callee), edge in sorted(b.edges.items()):
        if caller != callee:
            calls.setdefault(caller, []).append((callee, edge))
            called.add(callee)
    if root is not None:
        if root not in b.functions:
            raise ValueError(f"root function {root!r} is not in the profile")
        roots = [root]
    else:
        roots = sorted(n for n, f in b.functions.items() if n not in called and f.inclusive_cost > 0)
    min_cost = min_fraction * sum(b.functions[r].inclusive_cost for r in roots)

    def base_of(name: str) -> float:
        f = a.functions.get(name) if a is not None else None
        return float(f.inclusive_cost) if f is not None else 0.0

    def expand(stack: tuple[str, ...], value: float, base: float) -> _Frame:
        name = stack[-1]
        if len(stack) >= max_depth:
            return _Frame(stack, value, base, ())
        inclusive_b, inclusive_a = b.functions[name].inclusive_cost, base_of(name)
        share_b = value / inclusive_b if inclusive_b else 0.0
        share_a = base / inclusive_a if inclusive_a else 0.0
        kids = []
        for callee, edge in calls.get(name, ()):
            if callee in stack:
                continue  # a cycle: its cost stays in this frame
            edge_a = a.edges.get((name, callee)) if a is not None else None
            kids.append((callee, edge.inclusive_cost * share_b, edge_a.inclusive_cost * share_a if edge_a else 0.0))
        # children never outweigh their frame (recursion counted twice, inconsistent merges)
        sum_b, sum_a = sum(k[1] for k in kids), sum(k[2] for k in kids)
        fit_b = value / sum_b if sum_b > value else 1.0
        fit_a = base / sum_a if sum_a > base else 1.0
        children = tuple(
            expand((*stack, callee), vb * fit_b, va * fit_a) for callee, vb, va in kids if vb * fit_b >= min_cost
        )
        return _Frame(stack, value, base, children)

    return tuple(
        expand((r,), float(b.functions[r].inclusive_cost), base_of(r))
        for r in roots
        if b.functions[r].inclusive_cost >= min_cost
    )


def _draw(
    out: list[str], frame: _Frame, x: float, scale: float, levels: int, queries_a: int, queries_b: int, unit: str
) -> None:
    """Append the frame and, left-aligned above it, its children."""
    w = frame.value * scale
    y = _TOP + (levels - len(frame.stack)) * _FRAME_H
    per_a, per_b = frame.base / queries_a, frame.value / queries_b
    name = frame.stack[-1]
    tip = (
        f"{_xml(name)}\nA: {per_a:,.1f} {_xml(unit)}/query\nB: {per_b:,.1f} {_xml(unit)}/query\n"
        f"delta: {_change(per_a, per_b, '/query')}"
    )
    r, g, bl = _colour(per_a, per_b)
    out.append(
        f'<g><title>{tip}</title><rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{_FRAME_H - 1}" '
        f'fill="#{r:02x}{g:02x}{bl:02x}" rx="2"/>'
    )
    room = int((w - 6) / _CHAR_W)
    if room >= 3:
        label = visible(name)
        if len(label) > room:
            label = label[: room - 2] + ".."
        out[-1] += f'<text x="{x + 3:.2f}" y="{y + _FRAME_H - 4}">{_xml(label)}</text>'
    out[-1] += "</g>"
    for child in frame.children:
        _draw(out, child, x, scale, levels, queries_a, queries_b, unit)
        x += child.value * scale


def _colour(per_a: float, per_b: float) -> tuple[int, int, int]:
    """Grey for no change, towards red for growth and blue for shrinkage, by the relative change."""
    if per_a > 0:
        relative = (per_b - per_a) / per_a
    else:
        relative = math.inf if per_b > 0 else 0.0
    t = min(1.0, abs(relative) / SATURATION)
    target = _RED if relative > 0 else _BLUE
    r, g, b = (round(grey + (c - grey) * t) for grey, c in zip(_GREY, target))
    return r, g, b


def _change(per_a: float, per_b: float, unit: str = "") -> str:
    delta = per_b - per_a
    if per_a == 0:
        return f"{delta:+,.1f}{unit} (new)" if per_b else f"+0.0{unit}"
    return f"{delta:+,.1f}{unit} ({delta / per_a * 100:+.2f}%)"


def _xml(text: str) -> str:
    """Untrusted text for an XML text node: controls and bidi characters as visible escapes, then &, <, > escaped."""
    return escape(_NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", visible(text)))
