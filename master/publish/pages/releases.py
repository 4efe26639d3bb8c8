"""releases.html and releases/<tag>.html: Callaghan-style tables, the absolute value per release × workload and
the rQPS vs a chosen base release (one page per base). They depend only on the tags and the samples at tagged
commits, so an incremental publish re-renders them only when those changed (pages.TAGS)."""

from __future__ import annotations

import statistics

from markupsafe import Markup

from master import store
from master.detect.model import Direction
from master.detect.rqps import colour
from master.jobs.core import RELEASES, release_numbers
from master.publish import source
from master.publish.context import Context
from master.publish.names import safe_name
from master.publish.ratios import Want
from master.publish.render import render
from master.publish.source import SeriesRef
from master.publish.views import RatioView, ReleaseCell, ReleaseRow, ReleaseTable, Summary, tag_order
from master.publish.writer import SiteWriter


def view(ctx: Context) -> list[ReleaseTable]:
    """One table per base release, oldest release first; every (release, base) ratio resolved in one pass over
    the ratio cache. Where a done release job measured a release and the base interleaved, its paired ratio
    (with the job's number) replaces the ratio of separate farm runs; releases only a job measured get a column."""
    tag_samples = store.series.samples_by_key(ctx.conn, set(ctx.tags.values()))
    jobs = release_numbers(store.jobs.newest_first(ctx.conn, RELEASES))
    all_tags = {**jobs.tags, **ctx.tags}
    authored = {sha: c.authored_at for sha, c in source.commits(ctx.conn, set(all_tags.values())).items()}
    tags = tag_order(all_tags, authored)
    files = {t: f"releases/{safe_name(t)}.html" for t in tags}
    keys = sorted(
        set(tag_samples) | set(jobs.ratios),
        key=lambda k: (k.workload, k.metric, k.machine_id, k.recipe, k.recipe_version, k.config_hash),
    )
    sids = {key: "release:" + SeriesRef(key, "").sid for key in keys}
    wants = []  # every (release, base release) pair at once: one pass over the ratio cache
    for key in keys:
        per = tag_samples.get(key, {})
        for base in tags:
            if base not in ctx.tags:
                continue
            b = per.get(ctx.tags[base])
            for t in tags if b is not None else ():
                x = per.get(ctx.tags[t]) if t in ctx.tags else None
                if x is not None:
                    wants.append(
                        Want(
                            sids[key],
                            x.sha,
                            b.sha,
                            ",".join(map(str, x.run_ids)),
                            ",".join(map(str, b.run_ids)),
                            x.samples,
                            b.samples,
                            x.direction,
                        )
                    )
    got = ctx.cache.resolve(wants)
    tables = []
    for base in tags:
        rows = []
        for key in keys:
            per = tag_samples.get(key, {})
            b = per.get(ctx.tags[base]) if base in ctx.tags else None
            paired = jobs.ratios.get(key, {})
            unit, direction = jobs.units.get(key, ("", ""))
            cells = []
            for t in tags:
                x = per.get(ctx.tags[t]) if t in ctx.tags else None
                p = paired.get((t, base))
                rel = None
                if p is not None:
                    band = colour(p.ratio, Direction(direction or "higher"), ctx.bands).value
                    rel = RatioView(p.ratio, p.low, p.high, band, base, p.job)
                elif x is not None and b is not None:
                    rel = RatioView.of(got[(sids[key], x.sha, b.sha)], base)
                if x is not None:
                    unit, direction = x.unit, x.direction
                    cells.append(ReleaseCell(t, statistics.median(x.samples), rel, x.sla_miss))
                elif t in jobs.medians.get(key, {}):
                    job = next(iter({p.job for (tt, _), p in paired.items() if tt == t}), None)
                    cells.append(ReleaseCell(t, jobs.medians[key][t], rel, False, job))
                else:
                    cells.append(ReleaseCell(t, None, rel, False))
            rows.append(ReleaseRow(key, unit, direction, tuple(cells)))
        tables.append(ReleaseTable(base, files[base], tuple(tags), tuple(rows), tuple((t, files[t]) for t in tags)))
    return tables


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    tables = view(ctx)  # a release job's tags count even when the farm has measured no tagged commit itself
    if not tables:
        w.write(
            "releases.html", render("releases.html", root="", title="Releases", table=None, bands=ctx.bands, values="")
        )
        w.keep_only("releases", set())
        return
    values = None
    for table in tables:
        if values is None:  # the absolute values do not depend on the base: rendered once, escaped there
            values = Markup(render("release_values.html", table=table))
        w.write(
            table.base_file,
            render(
                "releases.html",
                root="../",
                title=f"Releases vs {table.base}",
                table=table,
                bands=ctx.bands,
                values=values,
            ),
        )
        if table is tables[0]:
            w.write(
                "releases.html",
                render("releases.html", root="", title="Releases", table=table, bands=ctx.bands, values=values),
            )
    w.keep_only("releases", {t.base_file for t in tables})
