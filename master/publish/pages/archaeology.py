"""archaeology.html and archaeology/<machine>*.html: the seeds' release charts from the samples stored at release
tags, drawn as SVG (offline), one machine per page.

archaeology.html lists the machines with the releases measured on each. A machine's page draws one release per
major, the newest release measured of it (what a user of that major runs), for the newest MAJORS majors, oldest
first; a major measured at two or more tags has a page of its own with every one of them (a back branch's minor
releases: where a back-patched fix shows); past MAJORS majors one more page draws them all. So a page holds one
machine's workloads and at most MAJORS bars per chart, however many tags the farm measured (docs/scale.md).

* **Throughput vs clients** (seeds 000, 003, 004): for every sweep (workloads named `<base>-c<N>`, or
  `<base>-c<N>-i<M>` for idle connections), one line per release through the median at each count, the count on a
  log axis (0 idle connections sits one step left of the smallest other count).
* **Release archaeology** (seed 001): for every other throughput workload, one bar per release, normalised to the
  oldest release measured, as Vondra draws it.
* **Analytic queries** (seed 001's OLAP half): the `analytic` group's instruction counts (tpch-*, lower is better),
  a chart per query drawn by the same code, the geometric mean per release, and each plan change between releases
  drawn, named beside its chart (the shapes a release job's sides or the farm's runs at the tags kept).
* **Instruction counts by subsystem**: every other group of instruction workloads (the operation suite), as the
  geometric mean per release and a table of each workload's ratios.

Where a done release job (`perffarm releases`, docs/jobs.md) measured a release, its number comes from the newest
such job: the releases measured interleaved in one build, and a bar is the job's paired ratio with its 95% CI as a
whisker. Elsewhere a number is the median of what the farm stored at the tagged commit (the release measured alone,
at its own time). Every chart says which kind its numbers are and links the jobs.

A user picks the releases shown with checkboxes (a small script hides the others; without script every release is
shown). Tag names are escaped by the templates like any text.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from master import store
from master.jobs.core import RELEASES, ReleaseNumbers, release_numbers
from master.machines import MachineView
from master.machines import view as machine_view
from master.publish import isolate, source, workloads
from master.publish.context import Context
from master.publish.names import safe_name
from master.publish.render import render
from master.publish.views import MAJORS, Link, MachineRow, Summary, by_major, release_sets, tag_order
from master.publish.views import major_of as major_of  # the grouping is views.py's, shared with the release tables
from master.publish.writer import SiteWriter
from master.store.series import MeasureKey
from recipes.pg.plans import summary

SWEEP = re.compile(r"^(?P<base>.+?)-c(?P<clients>\d+)(?:-i(?P<idle>\d+))?$")
PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#1f78b4")
W, H, ML, MR, MT, MB = 640, 300, 70, 20, 16, 40  # chart box and margins (px)
ANALYTIC = "analytic"  # recipes/pg/groups.json: the TPC-H-derived queries, seed 001's OLAP half
COUNTED = "instructions"  # the count the sections of instruction workloads draw (lower is better)


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
    kind: str  # paired (one release job), unpaired (farm runs at the tags) or mixed
    jobs: tuple[int, ...]  # the release jobs the numbers come from
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
    tip: str  # the value with its CI where paired, and where the numbers come from
    whisker: tuple[float, float] | None  # px of the 95% CI's ends (a paired ratio), None without one
    label_y: float  # px of the printed value: above the bar and its whisker
    plan: str = ""  # the plan change this release made (against the release drawn before it), "" for none


@dataclass(frozen=True)
class BarChart:
    title: str
    facts: str
    kind: str
    jobs: tuple[int, ...]
    base: str
    bars: tuple[Bar, ...]
    y_ticks: tuple[Tick, ...]
    one: float  # px of the 1.0 line
    plan_changes: tuple[str, ...] = ()  # named beside the chart: `tpch-q04: Hash Semi Join → … from 15 to 18`


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


@dataclass(frozen=True)
class Point:
    """One release's number for one measure key: the median of its samples, and the release job that measured it
    interleaved with the other releases of that job (None: the farm's own runs at the tag, the release alone)."""

    median: float
    job: int | None = None
    plan: str = ""  # an analytic query's plan shape at this release (recipes/pg/plans.py), "" where none was kept


Points = Mapping[MeasureKey, Mapping[str, Point]]  # key -> tag -> point


def _source(points: Sequence[Point]) -> tuple[str, tuple[int, ...]]:
    """What a chart's numbers are, in words, and the release jobs they come from."""
    jobs = tuple(sorted({p.job for p in points if p.job is not None}))
    if not jobs:
        return "unpaired: each release measured alone, at its own time", ()
    if all(p.job is not None for p in points) and len(jobs) == 1:
        return "paired: the releases measured interleaved in one job", jobs
    return "mixed: some releases from release jobs (paired within a job), others measured alone", jobs


def _where(p: Point) -> str:
    return f"release job {p.job}" if p.job is not None else "farm runs at the tag"


def _sweep_groups(points: Points) -> dict[tuple, set[MeasureKey]]:
    """Throughput workloads of one sweep (`<base>-c<N>` or `<base>-c<N>-i<M>`) per group, whatever the counts."""
    groups: dict[tuple, set[MeasureKey]] = {}
    for key in points:
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


def swept(points: Points) -> set[MeasureKey]:
    """The workloads drawn as sweeps: members of a sweep measured at two or more counts."""
    return {k for keys in _sweep_groups(points).values() if len({_count(k) for k in keys}) >= 2 for k in keys}


def sweep_charts(points: Points, releases: Sequence[Release]) -> list[SweepChart]:
    groups: dict[tuple, dict[tuple[str, int], Point]] = {}
    for group, keys in _sweep_groups(points).items():
        for key in sorted(keys, key=lambda k: (k.workload, k.config_hash)):  # deterministic when hashes differ
            for r in releases:
                p = points[key].get(r.tag)
                if p is not None:
                    groups.setdefault(group, {})[(r.tag, _count(key))] = p
    charts = []
    for (machine, recipe, version, base, axis, fixed), cells in sorted(groups.items()):
        counts = sorted({c for _, c in cells})
        if len(counts) < 2:
            continue
        xs = _x_positions(counts)
        top = max(p.median for p in cells.values()) * 1.05
        y_ticks = [t for t in _nice_ticks(0.0, top) if t <= top]

        def y(v: float, top: float = top) -> float:
            return MT + (1 - v / top) * (H - MT - MB)

        curves = []
        for r in releases:
            pts = [
                (
                    xs[c],
                    y(cells[(r.tag, c)].median),
                    f"{r.tag}: {_fmt(cells[(r.tag, c)].median)} tps at {c} {axis} ({_where(cells[(r.tag, c)])})",
                )
                for c in counts
                if (r.tag, c) in cells
            ]
            if pts:
                path = "".join(f"{'M' if i == 0 else 'L'}{x:.1f},{yy:.1f}" for i, (x, yy, _) in enumerate(pts))
                curves.append(Curve(r, path, tuple(pts)))
        kind, jobs = _source(list(cells.values()))
        charts.append(
            SweepChart(
                f"{base} · tps vs {axis}" + (f" ({fixed})" if fixed else ""),
                f"{machine} · {recipe} v{version}",
                kind,
                jobs,
                axis,
                tuple(Tick(xs[c], str(c)) for c in counts),
                tuple(Tick(y(t), _fmt(t)) for t in y_ticks),
                tuple(curves),
            )
        )
    return charts


Norm = dict[str, tuple[float, float | None, float | None]]  # tag -> (ratio to the base, 95% CI low, high)


def _normalised(
    key: MeasureKey, cells: Mapping[str, Point], present: Sequence[Release], paired: Mapping[MeasureKey, Mapping]
) -> Norm:
    """Each release relative to the first of `present`: the release job's paired ratio (median of the per-round
    ratios) with its 95% CI where one job measured both, else the ratio of the two medians, without one."""
    base, b = present[0].tag, cells[present[0].tag]
    norm: Norm = {}
    for r in present:
        p = cells[r.tag]
        pr = paired.get(key, {}).get((r.tag, base))
        if r.tag == base:
            norm[r.tag] = (1.0, None, None)
        elif pr is not None and p.job is not None and p.job == b.job == pr.job:
            norm[r.tag] = (pr.ratio, pr.low, pr.high)
        else:
            norm[r.tag] = (p.median / b.median, None, None)
    return norm


def _draw(
    title: str,
    facts: str,
    present: Sequence[Release],
    norm: Norm,
    whence: Mapping[str, str],
    sources: Sequence[Point],
    plans: Mapping[str, str] | None = None,
    plan_changes: tuple[str, ...] = (),
) -> BarChart:
    """The bar chart of one figure per release relative to the first (`norm`), each bar's tooltip saying where
    its number comes from (`whence`: tag -> words) and, where `plans` names one, the plan change it made."""
    plans = plans or {}
    base = present[0].tag
    top = max(1.1, max(max(v for v in t if v is not None) for t in norm.values()) * 1.1)
    slot = (W - ML - MR) / len(present)

    def y(v: float, top: float = top) -> float:
        return MT + (1 - v / top) * (H - MT - MB)

    bars = []
    for i, r in enumerate(present):
        v, lo, hi = norm[r.tag]
        ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
        plan = plans.get(r.tag, "")
        bars.append(
            Bar(
                r,
                ML + i * slot + slot * 0.15,
                y(v),
                slot * 0.7,
                y(0) - y(v),
                f"{v:.2f}",
                f"{r.tag}: {v:.3f}× {base}{ci} ({whence[r.tag]})" + (f"; plan changed: {plan}" if plan else ""),
                (y(lo), y(hi)) if lo is not None and hi is not None else None,
                min(y(v), y(hi) if hi is not None else y(v)) - 4,
                plan,
            )
        )
    kind, jobs = _source(sources)
    return BarChart(
        title,
        facts,
        kind,
        jobs,
        base,
        tuple(bars),
        tuple(Tick(y(t), f"{t:.2g}") for t in _nice_ticks(0.0, top) if t <= top),
        y(1.0),
        plan_changes,
    )


def bar_charts(points: Points, releases: Sequence[Release], paired: Mapping[MeasureKey, Mapping]) -> list[BarChart]:
    """One chart per throughput workload outside the sweeps, each release relative to the oldest one shown. Where
    a release job measured both, the bar is the job's paired ratio (median of the per-round ratios) with its 95%
    CI as a whisker; otherwise the ratio of the two medians, without one (`paired`: ReleaseNumbers.ratios)."""
    in_sweeps = swept(points)
    charts = []
    for key in sorted(points, key=lambda k: (k.machine_id, k.recipe, k.recipe_version, k.workload, k.config_hash)):
        if key in in_sweeps or key.metric != "tps":
            continue
        cells = points[key]
        present = [r for r in releases if r.tag in cells]
        if len(present) < 2 or cells[present[0].tag].median <= 0:
            continue
        charts.append(
            _draw(
                f"{key.workload} · tps relative to {present[0].tag}",
                f"{key.machine_id} · {key.recipe} v{key.recipe_version}",
                present,
                _normalised(key, cells, present, paired),
                {r.tag: _where(cells[r.tag]) for r in present},
                [cells[r.tag] for r in present],
            )
        )
    return charts


@dataclass(frozen=True)
class CountRow:
    """One instruction workload in a section's table: its ratio to the first release, per release drawn."""

    workload: str
    base: str  # the release its ratios are to: the section's first, unless this workload was not measured on it
    cells: tuple[str, ...]  # "1.023", or "" where the release did not measure it
    moved: tuple[bool, ...]  # 5% or more either way (the counts are exact: a code path or a plan changed)
    plan_changes: tuple[str, ...]


@dataclass(frozen=True)
class CountSection:
    """The instruction workloads of one group (subsystem) across the releases: the analytic queries as a chart
    each, every group as the geometric mean of its workloads and a table of their ratios."""

    group: str
    about: str
    charts: tuple[BarChart, ...]  # one per workload: the analytic queries only
    means: tuple[BarChart, ...]  # one per recipe version: the geometric mean over the workloads on every release
    releases: tuple[Release, ...]  # the table's columns
    rows: tuple[CountRow, ...]
    plan_changes: tuple[str, ...]
    planned: bool  # whether any release drawn kept a plan of any of its workloads (else no change can be named)


def plan_changes(workload: str, cells: Mapping[str, Point], present: Sequence[Release]) -> dict[str, str]:
    """tag -> the plan change at that release, against the newest release before it that kept a plan (one drawn
    on the same chart): `tpch-q04: Hash Semi Join → Hash Right Semi Join from REL_15_18 to REL_18_6`."""
    out: dict[str, str] = {}
    before: tuple[str, str] | None = None
    for r in present:
        shape = cells[r.tag].plan
        if not shape:
            continue
        if before is not None and before[1] != shape:
            out[r.tag] = f"{workload}: {summary(before[1], shape)} from {before[0]} to {r.tag}"
        before = (r.tag, shape)
    return out


def count_sections(
    costs: Points, releases: Sequence[Release], paired: Mapping[MeasureKey, Mapping]
) -> list[CountSection]:
    """The instruction workloads (metric `instructions`, lower is better) per group, the analytic queries first,
    then the groups in the site's order. Each release is relative to the oldest release drawn, as the throughput
    bars are; the geometric mean is over the workloads every release of the section measured."""
    groups: dict[str, list[MeasureKey]] = {}
    for key in costs:
        if key.metric == COUNTED:
            group = workloads.info(key.recipe, key.recipe_version, key.config_hash, key.workload).group
            groups.setdefault(group, []).append(key)
    about = workloads.group_order()
    order = list(about)
    sections = []
    for group in sorted(groups, key=lambda g: (g != ANALYTIC, order.index(g) if g in order else len(order), g)):
        keys = sorted(groups[group], key=lambda k: (k.recipe, k.recipe_version, k.workload, k.config_hash))
        shown = tuple(r for r in releases if any(r.tag in costs[k] for k in keys))
        if len(shown) < 2:
            continue
        charts: list[BarChart] = []
        rows: list[CountRow] = []
        changes: list[str] = []
        common: dict[tuple[str, int], list[tuple[MeasureKey, Norm]]] = {}
        for key in keys:
            cells = costs[key]
            present = [r for r in shown if r.tag in cells]
            if len(present) < 2 or cells[present[0].tag].median <= 0:
                continue
            norm = _normalised(key, cells, present, paired)
            marks = plan_changes(key.workload, cells, present)
            changes += marks.values()
            if group == ANALYTIC:
                charts.append(
                    _draw(
                        f"{key.workload} · {COUNTED} relative to {present[0].tag} (lower is better)",
                        f"{key.machine_id} · {key.recipe} v{key.recipe_version}",
                        present,
                        norm,
                        {r.tag: f"{_fmt(cells[r.tag].median)} {COUNTED}, {_where(cells[r.tag])}" for r in present},
                        [cells[r.tag] for r in present],
                        marks,
                        tuple(marks.values()),
                    )
                )
            got = [norm[r.tag][0] if r.tag in norm else None for r in shown]
            rows.append(
                CountRow(
                    key.workload,
                    present[0].tag,
                    tuple(f"{v:.3f}" if v is not None else "" for v in got),
                    tuple(v is not None and abs(v - 1) >= 0.05 for v in got),
                    tuple(marks.values()),
                )
            )
            if len(present) == len(shown):
                common.setdefault((key.recipe, key.recipe_version), []).append((key, norm))
        means = []
        for (recipe, version), members in sorted(common.items()):
            n = len(members)
            noun = ("query" if n == 1 else "queries") if group == ANALYTIC else ("workload" if n == 1 else "workloads")
            mean: Norm = {
                r.tag: (math.exp(sum(math.log(norm[r.tag][0]) for _, norm in members) / n), None, None) for r in shown
            }
            means.append(
                _draw(
                    f"geometric mean of {n} {noun} · {COUNTED} relative to {shown[0].tag} (lower is better)",
                    f"{members[0][0].machine_id} · {recipe} v{version}",
                    shown,
                    mean,
                    {r.tag: f"geometric mean of {n} ratios" for r in shown},
                    [costs[k][r.tag] for k, _ in members for r in shown],
                )
            )
        if rows:
            sections.append(
                CountSection(
                    group,
                    about.get(group, ""),
                    tuple(charts),
                    tuple(means),
                    shown,
                    tuple(rows),
                    tuple(changes),
                    any(p.plan for k in keys for p in costs[k].values()),
                )
            )
    return sections


def points_of(
    ctx: Context,
    jobs: ReleaseNumbers,
    direction: str = "higher",
    stored: Mapping[MeasureKey, Mapping[str, store.series.Sample]] | None = None,
) -> dict[MeasureKey, dict[str, Point]]:
    """Every release's number of one direction per measure key (`higher`: throughput; `lower`: the counts): the
    farm's runs at each tag, replaced by a done release job's where one measured the release (the newest job
    first), each with the plan it ran an analytic query with where the run or job kept one. `stored`: the samples
    at the tags, when the caller read them already."""
    points: dict[MeasureKey, dict[str, Point]] = {}
    shas = set(ctx.tags.values())
    shapes = store.series.plans_at(ctx.conn, shas) if direction == "lower" else {}
    for key, per in (stored if stored is not None else store.series.samples_by_key(ctx.conn, shas)).items():
        for tag, sha in ctx.tags.items():
            s = per.get(sha)
            if s is not None and s.samples and s.direction == direction:
                points.setdefault(key, {})[tag] = Point(
                    statistics.median(s.samples), plan=shapes.get(key, {}).get(sha, "")
                )
    for key, medians in jobs.medians.items():
        if jobs.units.get(key, ("", ""))[1] != direction:
            continue
        for tag, median in medians.items():
            points.setdefault(key, {})[tag] = Point(
                median, jobs.measured_by[key][tag], jobs.plans.get(key, {}).get(tag, "")
            )
    return points


def releases_of(tags: Sequence[str]) -> list[Release]:
    """A page's releases, in the order drawn; keys and colours by position on the page."""
    return [Release(t, f"r{i}", PALETTE[i % len(PALETTE)]) for i, t in enumerate(tags)]


@dataclass(frozen=True)
class MachinePages:
    """What one machine's archaeology pages are drawn from: its release points and its measured tags."""

    machine_id: str
    file: str
    points: dict[MeasureKey, dict[str, Point]]
    majors: dict[str, list[str]]  # major -> its measured tags, oldest first; majors oldest first
    costs: dict[MeasureKey, dict[str, Point]] = field(default_factory=dict)  # the counts (lower is better)

    @property
    def shown(self) -> list[str]:
        """The machine page's releases: the newest tag measured of each major (what users of that major run),
        for the newest MAJORS majors, oldest major first (bars are relative to it)."""
        return list(release_sets(self.majors)[0].tags)


def machines_of(points: Points, ordered: Sequence[str], costs: Points | None = None) -> list[MachinePages]:
    per: dict[str, dict[MeasureKey, dict[str, Point]]] = {}
    counted: dict[str, dict[MeasureKey, dict[str, Point]]] = {}
    for key, cells in points.items():
        per.setdefault(key.machine_id, {})[key] = dict(cells)
    for key, cells in (costs or {}).items():
        if key.metric == COUNTED:
            counted.setdefault(key.machine_id, {})[key] = dict(cells)
    out = []
    for machine in sorted(per.keys() | counted.keys()):
        pts, cts = per.get(machine, {}), counted.get(machine, {})
        measured = {t for cells in (*pts.values(), *cts.values()) for t in cells}
        out.append(MachinePages(machine, safe_name(machine), pts, by_major(ordered, measured), cts))
    return out


def major_href(m: MachinePages, major: str) -> str:
    return f"archaeology/{m.file}/major-{safe_name(major)}.html"


def _charts(m: MachinePages, tags: Sequence[str], jobs: ReleaseNumbers) -> dict[str, object]:
    releases = releases_of(tags)
    return {
        "releases": releases,
        "sweeps": sweep_charts(m.points, releases),
        "bars": bar_charts(m.points, releases, jobs.ratios),
        "counts": count_sections(m.costs, releases, jobs.ratios),
        "box": {"w": W, "h": H, "ml": ML, "mr": MR, "mt": MT, "mb": MB},
    }


def machine_pages(
    m: MachinePages, jobs: ReleaseNumbers, about: MachineView | None = None
) -> list[tuple[str, dict[str, object]]]:
    """(file, view) of every archaeology page of one machine, one per views.release_sets: its page (one release
    per major, the newest MAJORS majors), a page per major measured at two or more tags (every tag of it: the
    back branch's minor releases), and with more than MAJORS majors one page drawing them all. `about`: how the
    pages name the machine (workers.about; default its id)."""
    about = about or machine_view(m.machine_id, None, {}, ())
    label = about.label()
    sets = release_sets(m.majors)
    every = next((s for s in sets if s.name == "every-major"), None)
    nav = [Link(f"{s.major}: {len(s.tags)} releases", major_href(m, s.major)) for s in sets if s.major is not None]
    base = {"machine": m.machine_id, "about": about, "majors": nav, "root": "../"}
    pages = []
    for s in sets:
        if not s.name:  # the machine's page
            file, title, heading = f"archaeology/{m.file}.html", "", "Release archaeology on"
            more = Link(f"all {len(m.majors)} majors", f"archaeology/{m.file}/{every.name}.html") if every else None
            extra: dict[str, object] = {"every": more}
        else:
            file = f"archaeology/{m.file}/{s.name}.html"
            title = f" · {s.major}" if s.major is not None else " · every major"
            heading = f"Releases of {s.major} on" if s.major is not None else "Every major release on"
            extra = {"root": "../../", "every": None}
        view = {**base, **extra, **_charts(m, s.tags, jobs)}
        view.update(title=f"Release archaeology · {label}{title}", heading=heading, what=s.what)
        pages.append((file, view))
    return pages


def index_view(machines: Sequence[MachinePages]) -> dict[str, object]:
    rows = []
    for m in machines:
        jobs = sorted(
            {p.job for cells in (*m.points.values(), *m.costs.values()) for p in cells.values() if p.job is not None}
        )
        rows.append(
            MachineRow(
                m.machine_id,
                f"archaeology/{m.file}.html",
                sum(len(t) for t in m.majors.values()),
                tuple(m.majors),
                len({k.workload for k in (*m.points, *m.costs)}),
                tuple(jobs),
            )
        )
    return {"machines": rows, "majors_shown": MAJORS}


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    """archaeology.html (the machines) and each machine's pages. An incremental publish that stored a run at a
    tagged commit re-renders that machine's pages only (ctx.machines); a tag change or a job renders them all."""
    jobs = release_numbers(store.jobs.newest_first(ctx.conn, RELEASES))
    tags = {**jobs.tags, **ctx.tags}
    authored = {sha: c.authored_at for sha, c in source.commits(ctx.conn, set(tags.values())).items()}
    stored = store.series.samples_by_key(ctx.conn, set(ctx.tags.values()))
    machines = machines_of(
        points_of(ctx, jobs, "higher", stored), tag_order(tags, authored), points_of(ctx, jobs, "lower", stored)
    )
    w.write(
        "archaeology.html",
        render(
            "archaeology.html",
            root="",
            title="Release archaeology",
            machines_about=ctx.machine_views,
            **index_view(machines),
        ),
    )
    written = set()
    for m in machines:
        if ctx.machines is not None and m.machine_id not in ctx.machines:
            continue
        first = f"archaeology/{m.file}.html"
        written.add(first)
        with isolate.page(w, "release archaeology", first, f"Release archaeology · {m.machine_id}"):  # per machine
            for rel, v in machine_pages(m, jobs, ctx.machine_views[m.machine_id]):
                w.write(rel, render("archaeology_machine.html", **v))
                written.add(rel)
        if ctx.machines is None:
            w.keep_only(f"archaeology/{m.file}", written)
    if ctx.machines is None:
        w.keep_only("archaeology", written)
