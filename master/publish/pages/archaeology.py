"""archaeology.html: the seeds' release charts from the samples stored at release tags, drawn as SVG (offline).

* **Throughput vs clients** (seeds 000, 003, 004): for every sweep (workloads named `<base>-c<N>`, or
  `<base>-c<N>-i<M>` for idle connections), one line per release through the median at each count, the count on a
  log axis (0 idle connections sits one step left of the smallest other count).
* **Release archaeology** (seed 001): for every other throughput workload, one bar per release, its median
  normalised to the oldest release measured, as Vondra draws it.

Every number is the median of what the farm stored at the tagged commit (unpaired farm runs: a release measured
alone, at its own time; the page says so). A user picks the releases shown with checkboxes (a small script hides
the others; without script every release is shown). Tag names are escaped by the templates like any text.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from master import store
from master.publish import source
from master.publish.context import Context
from master.publish.render import render
from master.publish.views import Summary, tag_order
from master.publish.writer import SiteWriter
from master.store.series import MeasureKey

SWEEP = re.compile(r"^(?P<base>.+?)-c(?P<clients>\d+)(?:-i(?P<idle>\d+))?$")
PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#1f78b4")
W, H, ML, MR, MT, MB = 640, 300, 70, 20, 16, 40  # chart box and margins (px)


@dataclass(frozen=True)
class Release:
    tag: str
    key: str  # a stable id for the page's checkboxes (the tag's position), never the tag text itself
    colour: str


@dataclass(frozen=True)
class Tick:
    at: float  # px along the axis
    label: str


@dataclass(frozen=True)
class Curve:
    release: Release
    path: str  # SVG path data: numbers only
    points: tuple[tuple[float, float, str], ...]  # (x px, y px, tooltip)


@dataclass(frozen=True)
class SweepChart:
    title: str
    facts: str
    axis: str
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    curves: tuple[Curve, ...]


@dataclass(frozen=True)
class Bar:
    release: Release
    x: float
    y: float
    width: float
    height: float
    label: str  # the normalised value, printed


@dataclass(frozen=True)
class BarChart:
    title: str
    facts: str
    base: str
    bars: tuple[Bar, ...]
    y_ticks: tuple[Tick, ...]
    one: float  # px of the 1.0 line


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 2) if first + i * step <= hi + step / 2]


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _x_positions(counts: Sequence[int]) -> dict[int, float]:
    """Pixel x of each count on a log axis; 0 sits one step (the mean log gap) left of the smallest positive."""
    positive = sorted(c for c in counts if c > 0)
    logs = {c: math.log10(c) for c in positive}
    if not positive:
        return {0: ML + (W - ML - MR) / 2}
    gap = (logs[positive[-1]] - logs[positive[0]]) / max(1, len(positive) - 1) or 1.0
    if 0 in counts:
        logs[0] = logs[positive[0]] - gap
    lo, hi = min(logs.values()), max(logs.values())
    span = (hi - lo) or 1.0
    return {c: ML + (v - lo) / span * (W - ML - MR) for c, v in logs.items()}


def _sweep_groups(samples: Mapping[MeasureKey, Mapping[str, store.series.Sample]]) -> dict[tuple, set[MeasureKey]]:
    """Throughput workloads of one sweep (`<base>-c<N>` or `<base>-c<N>-i<M>`) per group, whatever the counts."""
    groups: dict[tuple, set[MeasureKey]] = {}
    for key in samples:
        m = SWEEP.match(key.workload)
        if m is None or key.metric != "tps":
            continue
        idle = m.group("idle")
        axis = "idle connections" if idle is not None else "clients"
        fixed = f"{m.group('clients')} active client(s)" if idle is not None else ""
        groups.setdefault((key.machine_id, key.recipe, key.recipe_version, m.group("base"), axis, fixed), set()).add(
            key
        )
    return groups


def _count(key: MeasureKey) -> int:
    m = SWEEP.match(key.workload)
    assert m is not None
    return int(m.group("idle") if m.group("idle") is not None else m.group("clients"))


def swept(samples: Mapping[MeasureKey, Mapping[str, store.series.Sample]]) -> set[MeasureKey]:
    """The workloads drawn as sweeps: members of a sweep measured at two or more counts."""
    return {k for keys in _sweep_groups(samples).values() if len({_count(k) for k in keys}) >= 2 for k in keys}


def sweep_charts(
    samples: Mapping[MeasureKey, Mapping[str, store.series.Sample]],
    tags: Mapping[str, str],
    releases: Sequence[Release],
) -> list[SweepChart]:
    groups: dict[tuple, dict[tuple[str, int], list[float]]] = {}
    for group, keys in _sweep_groups(samples).items():
        for key in sorted(keys, key=lambda k: (k.workload, k.config_hash)):  # deterministic when hashes differ
            for r in releases:
                s = samples[key].get(tags[r.tag])
                if s is not None and s.samples:
                    groups.setdefault(group, {})[(r.tag, _count(key))] = list(s.samples)
    charts = []
    for (machine, recipe, version, base, axis, fixed), cells in sorted(groups.items()):
        counts = sorted({c for _, c in cells})
        if len(counts) < 2:
            continue
        xs = _x_positions(counts)
        medians = {k: statistics.median(v) for k, v in cells.items()}
        top = max(medians.values()) * 1.05
        y_ticks = [t for t in _nice_ticks(0.0, top) if t <= top]

        def y(v: float, top: float = top) -> float:
            return MT + (1 - v / top) * (H - MT - MB)

        curves = []
        for r in releases:
            pts = [
                (xs[c], y(medians[(r.tag, c)]), f"{r.tag}: {_fmt(medians[(r.tag, c)])} tps at {c} {axis}")
                for c in counts
                if (r.tag, c) in medians
            ]
            if pts:
                path = "".join(f"{'M' if i == 0 else 'L'}{x:.1f},{yy:.1f}" for i, (x, yy, _) in enumerate(pts))
                curves.append(Curve(r, path, tuple(pts)))
        charts.append(
            SweepChart(
                f"{base} · tps vs {axis}" + (f" ({fixed})" if fixed else ""),
                f"{machine} · {recipe} v{version}",
                axis,
                tuple(Tick(xs[c], str(c)) for c in counts),
                tuple(Tick(y(t), _fmt(t)) for t in y_ticks),
                tuple(curves),
            )
        )
    return charts


def bar_charts(
    samples: Mapping[MeasureKey, Mapping[str, store.series.Sample]],
    tags: Mapping[str, str],
    releases: Sequence[Release],
) -> list[BarChart]:
    groups: dict[tuple, dict[str, list[float]]] = {}
    in_sweeps = swept(samples)
    for key, per in samples.items():
        if key in in_sweeps or key.metric != "tps":
            continue
        group = (key.machine_id, key.recipe, key.recipe_version, key.workload)
        for r in releases:
            s = per.get(tags[r.tag])
            if s is not None and s.samples and s.direction == "higher":
                groups.setdefault(group, {})[r.tag] = list(s.samples)
    charts = []
    for (machine, recipe, version, workload), cells in sorted(groups.items()):
        present = [r for r in releases if r.tag in cells]
        if len(present) < 2:
            continue
        base = statistics.median(cells[present[0].tag])
        if base <= 0:
            continue
        norm = {r.tag: statistics.median(cells[r.tag]) / base for r in present}
        top = max(1.1, max(norm.values()) * 1.1)
        slot = (W - ML - MR) / len(present)

        def y(v: float, top: float = top) -> float:
            return MT + (1 - v / top) * (H - MT - MB)

        bars = tuple(
            Bar(r, ML + i * slot + slot * 0.15, y(norm[r.tag]), slot * 0.7, y(0) - y(norm[r.tag]), f"{norm[r.tag]:.2f}")
            for i, r in enumerate(present)
        )
        charts.append(
            BarChart(
                f"{workload} · tps relative to {present[0].tag}",
                f"{machine} · {recipe} v{version}",
                present[0].tag,
                bars,
                tuple(Tick(y(t), f"{t:.2g}") for t in _nice_ticks(0.0, top) if t <= top),
                y(1.0),
            )
        )
    return charts


def view(ctx: Context) -> dict[str, object]:
    shas = set(ctx.tags.values())
    authored = {sha: c.authored_at for sha, c in source.commits(ctx.conn, shas).items()}
    ordered = tag_order(ctx.tags, authored)
    releases = [Release(t, f"r{i}", PALETTE[i % len(PALETTE)]) for i, t in enumerate(ordered)]
    samples = store.series.samples_by_key(ctx.conn, shas)
    sweeps = sweep_charts(samples, ctx.tags, releases)
    bars = bar_charts(samples, ctx.tags, releases)
    return {
        "releases": releases,
        "sweeps": sweeps,
        "bars": bars,
        "box": {"w": W, "h": H, "ml": ML, "mr": MR, "mt": MT, "mb": MB},
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    v = view(ctx) if ctx.tags else {"releases": [], "sweeps": [], "bars": [], "box": {}}
    w.write("archaeology.html", render("archaeology.html", root="", title="Release archaeology", **v))
