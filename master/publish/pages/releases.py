"""releases.html, releases/<tag>.html and releases/<machine>/…: Callaghan-style tables, the absolute value per
release × workload and the rQPS vs a chosen base release, one machine per page.

releases.html lists the machines with the releases measured on each; releases/<tag>.html (the old URL of the
table vs that tag) lists the machines' tables with that tag as the base. A machine's tables are grouped as its
archaeology pages are (views.release_sets): releases/<machine>/index.html has one column per major (the newest
release measured of it) for the newest MAJORS majors, vs the oldest of them; a major measured at two or more
tags has releases/<machine>/major-<major>/index.html with every one of them; past MAJORS majors
releases/<machine>/every-major/index.html has them all. Each table has a page per base release among its
columns (vs-<tag>.html beside its index.html, which is the table vs its first column; every-major only vs its
oldest). So a page holds one machine's rows and at most MAJORS columns (or one major's releases, or on the
every-major page one per major), however many machines and tags the farm has.

They depend only on the tags, the samples at tagged commits and the release jobs, so an incremental publish
re-renders them only when those changed (pages.TAGS), and then only the run's machine's tables (ctx.machines)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from markupsafe import Markup

from master import store
from master.detect.model import Direction
from master.detect.rqps import colour
from master.jobs.core import RELEASES, ReleaseNumbers, release_numbers
from master.publish import isolate, source
from master.publish.context import Context
from master.publish.names import safe_name
from master.publish.ratios import Ratio, Want
from master.publish.render import render
from master.publish.source import SeriesRef
from master.publish.views import (
    MAJORS,
    Link,
    MachineRow,
    RatioView,
    ReleaseCell,
    ReleaseRow,
    ReleaseSet,
    ReleaseTable,
    Summary,
    by_major,
    release_sets,
    tag_order,
)
from master.publish.writer import SiteWriter
from master.store.series import MeasureKey, Sample


def _key_order(k: MeasureKey) -> tuple:
    return (k.workload, k.metric, k.machine_id, k.recipe, k.recipe_version, k.config_hash)


@dataclass(frozen=True)
class Machine:
    """One machine's release tables: its measure keys (rows) and the tags measured on it, per major."""

    machine_id: str
    dir: str  # releases/<machine>
    keys: tuple[MeasureKey, ...]
    majors: dict[str, list[str]]
    jobs: tuple[int, ...]

    @property
    def sets(self) -> list[ReleaseSet]:
        return release_sets(self.majors)

    def link(self, s: ReleaseSet) -> Link:
        """Table `s` vs its first release, labelled as the archaeology pages label theirs."""
        label = (
            "one release per major"
            if not s.name
            else f"{s.major}: {len(s.tags)} releases"
            if s.major is not None
            else f"all {len(self.majors)} majors"
        )
        return Link(label, self.page(s, s.tags[0]))

    @staticmethod
    def bases(s: ReleaseSet) -> tuple[str, ...]:
        """The base releases table `s` has a page for: every column, but on every-major (past MAJORS majors, one
        column per major) only the oldest: a page per base there would be majors x majors cells per machine."""
        return s.tags[:1] if s.name and s.major is None else s.tags

    def set_dir(self, s: ReleaseSet) -> str:
        return f"{self.dir}/{s.name}" if s.name else self.dir

    def page(self, s: ReleaseSet, base: str) -> str:
        """The file of table `s` vs `base`: index.html for its first column, vs-<tag>.html for the others."""
        return f"{self.set_dir(s)}/" + ("index.html" if base == s.tags[0] else f"vs-{safe_name(base)}.html")


@dataclass(frozen=True)
class Releases:
    """What every release page is made from."""

    tags: list[str]  # every release measured (farm runs at the tag or a release job), oldest first
    files: dict[str, str]  # tag -> releases/<tag>.html
    machines: list[Machine]
    samples: dict[MeasureKey, dict[str, Sample]]  # samples at the tagged commits, per key and commit
    jobs: ReleaseNumbers


def load(ctx: Context) -> Releases:
    tag_samples = store.series.samples_by_key(ctx.conn, set(ctx.tags.values()))
    jobs = release_numbers(store.jobs.newest_first(ctx.conn, RELEASES))
    all_tags = {**jobs.tags, **ctx.tags}
    authored = {sha: c.authored_at for sha, c in source.commits(ctx.conn, set(all_tags.values())).items()}
    tags = tag_order(all_tags, authored)
    per_machine: dict[str, list[MeasureKey]] = {}
    for key in sorted(set(tag_samples) | set(jobs.ratios) | set(jobs.problems), key=_key_order):
        per_machine.setdefault(key.machine_id, []).append(key)
    machines = []
    for machine, keys in sorted(per_machine.items()):
        measured = {
            t
            for key in keys
            for t in tags
            if (t in ctx.tags and ctx.tags[t] in tag_samples.get(key, {})) or t in jobs.medians.get(key, {})
        }
        if not measured:
            continue
        job_ids = {p.job for key in keys for p in jobs.ratios.get(key, {}).values()}
        job_ids |= {j for key in keys for j in jobs.measured_by.get(key, {}).values()}
        machines.append(
            Machine(
                machine, f"releases/{safe_name(machine)}", tuple(keys), by_major(tags, measured), tuple(sorted(job_ids))
            )
        )
    return Releases(tags, {t: f"releases/{safe_name(t)}.html" for t in tags}, machines, tag_samples, jobs)


def _wants(ctx: Context, rel: Releases, m: Machine) -> dict[tuple[str, str, str], Ratio]:
    """The unpaired rQPS of every (release, base) pair on the machine's tables, in one pass over the ratio cache."""
    wants = []
    pairs = {(t, base) for s in m.sets for base in m.bases(s) for t in s.tags}
    for key in m.keys:
        per = rel.samples.get(key, {})
        sid = "release:" + SeriesRef(key, "").sid
        for t, base in sorted(pairs):
            b = per.get(ctx.tags[base]) if base in ctx.tags else None
            x = per.get(ctx.tags[t]) if t in ctx.tags else None
            if x is not None and b is not None:
                wants.append(
                    Want(
                        sid,
                        x.sha,
                        b.sha,
                        ",".join(map(str, x.run_ids)),
                        ",".join(map(str, b.run_ids)),
                        x.samples,
                        b.samples,
                        x.direction,
                    )
                )
    return ctx.cache.resolve(wants)


def table(
    ctx: Context, rel: Releases, m: Machine, s: ReleaseSet, base: str, got: Mapping[tuple[str, str, str], Ratio]
) -> ReleaseTable:
    """Machine m's table of the releases of `s` vs `base`. Where a done release job measured a release and the
    base interleaved, its paired ratio (with the job's number) replaces the ratio of separate farm runs; releases
    only a job measured have the job's median as their value."""
    jobs = rel.jobs
    rows = []
    for key in m.keys:
        per = rel.samples.get(key, {})
        sid = "release:" + SeriesRef(key, "").sid
        b = per.get(ctx.tags[base]) if base in ctx.tags else None
        paired = jobs.ratios.get(key, {})
        unit, direction = jobs.units.get(key, ("", ""))
        cells = []
        for t in s.tags:
            x = per.get(ctx.tags[t]) if t in ctx.tags else None
            p = paired.get((t, base))
            r = None
            if p is not None:
                band = colour(p.ratio, Direction(direction or "higher"), ctx.bands).value
                r = RatioView(p.ratio, p.low, p.high, band, base, p.job)
            elif x is not None and b is not None:
                r = RatioView.of(got[(sid, x.sha, b.sha)], base)
            problem = None if r is not None else _problem(jobs, key, t, base)
            if x is not None:
                unit, direction = x.unit, x.direction
                cells.append(ReleaseCell(t, statistics.median(x.samples), r, x.sla_miss, problem=problem))
            elif t in jobs.medians.get(key, {}):
                job = next(iter({p.job for (tt, _), p in paired.items() if tt == t}), None)
                cells.append(ReleaseCell(t, jobs.medians[key][t], r, False, job, problem))
            else:
                cells.append(ReleaseCell(t, None, r, False, problem=problem))
        rows.append(ReleaseRow(key, unit, direction, tuple(cells)))
    return ReleaseTable(base, m.page(s, base), s.tags, tuple(rows), tuple((t, m.page(s, t)) for t in m.bases(s)))


def _problem(jobs: ReleaseNumbers, key: MeasureKey, tag: str, base: str) -> str | None:
    """Why the release job that measured `tag` and `base` gives them no ratio (None: it does, or none did)."""
    got = jobs.problems.get(key, {}).get((tag, base))
    return None if got is None else f"job {got[1]}: {got[0]}"


def index_view(rel: Releases, tag: str | None = None) -> dict[str, object]:
    """releases.html (tag None): every machine, linking to its table; releases/<tag>.html: the machines' tables
    that have `tag` among their columns, each vs `tag`."""
    machines, links = [], {}
    for m in rel.machines:
        sets = m.sets
        if tag is not None:
            found = [Link(m.link(s).label, m.page(s, tag)) for s in sets if tag in m.bases(s)]
            if not found:
                continue
            links[m.machine_id] = found
        machines.append(
            MachineRow(
                m.machine_id,
                m.page(sets[0], sets[0].tags[0]),
                sum(len(t) for t in m.majors.values()),
                tuple(m.majors),
                len(m.keys),
                m.jobs,
            )
        )
    return {
        "machines": machines,
        "links": links,
        "tag": tag,
        "bases": [(t, rel.files[t]) for t in rel.tags],
        "majors_shown": MAJORS,
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    """releases.html, releases/<tag>.html and each machine's tables. An incremental publish that stored a run at a
    tagged commit re-renders that machine's tables only (ctx.machines); the lists are written where they changed."""
    rel = load(ctx)  # a release job's tags count even when the farm has measured no tagged commit itself
    w.write_changed(
        "releases.html",
        render("releases.html", root="", title="Releases", machines_about=ctx.machine_views, **index_view(rel)),
    )
    for t in rel.tags:
        w.write_changed(
            rel.files[t],
            render(
                "releases.html",
                root="../",
                title=f"Releases vs {t}",
                machines_about=ctx.machine_views,
                **index_view(rel, t),
            ),
        )
    w.keep_only("releases", set(rel.files.values()))
    for m in rel.machines:
        if ctx.machines is not None and m.machine_id not in ctx.machines:
            continue
        first = m.page(m.sets[0], m.sets[0].tags[0])
        written = {first}
        with isolate.page(w, "releases", first, f"Releases on {m.machine_id}"):  # one machine's tables
            got = _wants(ctx, rel, m)
            for s in m.sets:
                values = None  # the absolute values do not depend on the base: rendered once per table, escaped there
                root = "../../../" if s.name else "../../"  # releases/<machine>/[<set>/]
                others = [m.link(x) for x in m.sets if x.name != s.name]
                for base in m.bases(s):
                    title = f"Releases on {ctx.machine_views[m.machine_id].label()} vs {base}"
                    written.add(m.page(s, base))
                    with isolate.page(w, "releases", m.page(s, base), title):  # one table
                        t = table(ctx, rel, m, s, base, got)
                        if values is None:
                            values = Markup(render("release_values.html", table=t))
                        w.write(
                            t.base_file,
                            render(
                                "release_table.html",
                                root=root,
                                title=title,
                                machine_id=m.machine_id,
                                machines_about=ctx.machine_views,
                                what=s.what,
                                others=others,
                                table=t,
                                bands=ctx.bands,
                                values=values,
                            ),
                        )
        w.keep_only_tree(m.dir, written)
    if ctx.machines is None:
        w.keep_only_dirs("releases", {m.dir for m in rel.machines})
