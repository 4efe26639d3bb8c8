"""Full and incremental publishing: load, compute view models, render, swap in atomically."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from markupsafe import Markup

from master import store
from master.publish import commits, feed, forkjoin, source
from master.publish.cache import load_state, open_cache, save_state
from master.publish.context import Context, bands
from master.publish.encode import FloatText, enc, fixed, json_object, nums
from master.publish.model import SeriesData, median
from master.publish.names import commit_name, safe_name
from master.publish.ratios import Want
from master.publish.render import (
    FORMAT_VERSION,
    SITE_DIR,
    author_name,
    float_column,
    js_call,
    js_literal,
    json_document,
    render,
    sig6_decimals,
    wrap_js,
)
from master.publish.source import CHUNK, SeriesKey
from master.publish.views import (
    SPARK_WINDOW,
    Marker,
    RatioView,
    ReleaseCell,
    ReleaseRow,
    ReleaseTable,
    RunView,
    Summary,
    safe_url,
    tag_order,
)
from master.publish.writer import PublishError, SiteWriter, only_cleanup_threads, publish_lock, wait_for_cleanup


@dataclass(frozen=True)
class PublishReport:
    """What a publish did, for logs and benchmarks."""

    out_dir: Path
    version: str
    incremental: bool
    files_written: int
    series: int
    commit_pages: int
    ratios_computed: int
    ratios_reused: int
    seconds: float
    files_linked: int = 0  # of files_written, unchanged ones hard-linked from the live version (full publish)


def site_dir(settings: Any) -> Path:
    """Where the site goes: `[site] out_dir`, else <data_dir>/site."""
    return Path(settings.site_dir)


# ------------------------------------------------------------------------------------------------ renderers


def _chunk_bounds(s: SeriesData, k: int) -> tuple[int, int]:
    """Rows [a, b) of series s whose positions are in chunk k."""
    p = s.positions
    return (s.start + int(np.searchsorted(p, k * CHUNK)), s.start + int(np.searchsorted(p, (k + 1) * CHUNK)))


_SAMPLES = "\u0000samples\u0000"


def write_series_data(w: SiteWriter, ctx: Context, s: SeriesData, lo_chunk: int, hi_chunk: int) -> None:
    """Per chunk of branch positions: chart columns (.js), everything for tools (.json) and the raw samples
    for the page (.samples.js). Samples are spliced in as stored (JSON text), never decoded and re-encoded;
    render.wrap_js escapes anything that could end a script element."""
    base = f"data/series/{s.sid}"
    t = ctx.table
    bounds = [_chunk_bounds(s, k) if t is not None else (0, 0) for k in range(lo_chunk, hi_chunk + 1)]
    # the float arrays of the .json files as text, for all these chunks at once (None: encoded per chunk below)
    floats = _float_lists(ctx, bounds[0][0], bounds[-1][1]) if t is not None and bounds else None
    for k, (a, b) in zip(range(lo_chunk, hi_chunk + 1), bounds):
        pos = t.pos[a:b].tolist() if b > a else []
        n = t.n[a:b].tolist() if b > a else []
        flags = ((t.noisy[a:b].astype(np.int64)) | (t.sla[a:b].astype(np.int64) * 2)).tolist() if b > a else []
        scale, ints = fixed(ctx.med_r[a:b], ctx.lo_r[a:b], ctx.hi_r[a:b])
        w.write(f"{base}/{k}.js", js_call("points", s.sid, k, {"pos": pos, "scale": scale, "med": ints[0],
                                                                "lo": ints[1], "hi": ints[2], "n": n, "flag": flags}))
        samples = "[" + ",".join(t.text[a:b] if b > a else []) + "]"
        sha, runs = t.sha[a:b] if b > a else [], t.runs[a:b] if b > a else []
        noisy, sla = t.noisy[a:b].tolist() if b > a else [], t.sla[a:b].tolist() if b > a else []
        if floats is not None:  # json_document's bytes, assembled from encoded members
            med, ratio, low, high = (f.array(a, b) for f in floats)
            text = json_object({
                "chunk": enc(k), "chunk_size": enc(CHUNK), "direction": enc(s.direction),
                "format": enc("perffarm-series-chunk"), "median": med, "noisy": enc(noisy), "position": enc(pos),
                "runs": enc(runs), "samples": samples, "series": enc(s.sid), "sha": enc(sha),
                "sla_miss": enc(sla), "unit": enc(s.unit), "version": enc(FORMAT_VERSION),
                "vs_previous": json_object({"ci_high": high, "ci_low": low, "ratio": ratio})}) + "\n"
        else:
            text = json_document("series-chunk", {
                "series": s.sid, "chunk": k, "chunk_size": CHUNK, "unit": s.unit, "direction": s.direction,
                "position": pos, "sha": sha, "median": ctx.med_r[a:b].tolist() if b > a else [],
                "samples": _SAMPLES, "runs": runs, "noisy": noisy, "sla_miss": sla,
                "vs_previous": {"ratio": nums(ctx.prev_ratio[a:b], 6) if b > a else [],
                                "ci_low": nums(ctx.prev_low[a:b], 6) if b > a else [],
                                "ci_high": nums(ctx.prev_high[a:b], 6) if b > a else []},
            }, clean=False).replace(json.dumps(_SAMPLES), samples, 1)
        w.write(f"{base}/{k}.json", text)
        # raw samples on demand (the chart's "Samples" button): positions and the stored sample arrays only
        w.write(f"{base}/{k}.samples.js", wrap_js("samples", s.sid, k, f'{{"position":{json.dumps(pos)},'
                                                                         f'"samples":{samples}}}'))


def _float_lists(ctx: Context, a: int, b: int) -> list[FloatText] | None:
    """Median, rQPS vs the previous point, its CI low and high of rows [a, b) as the JSON encoder writes them
    (render.float_column: ~2x faster than a Python float and its repr per value); None when a value's text is
    not proven there (the caller then encodes as before)."""
    med = ctx.med_r[a:b]
    cols = [float_column(med, sig6_decimals(med))]  # the places round6 rounded them to
    cols += [float_column(np.round(c[a:b], 6), 6, nan=True) for c in (ctx.prev_ratio, ctx.prev_low, ctx.prev_high)]
    if any(c is None for c in cols):
        return None
    return [FloatText.of(col, a) for col in cols]


def write_series_page(w: SiteWriter, ctx: Context, summ: Summary, siblings: list[Summary]) -> None:
    changes = sorted(ctx.changes.get(summ.sid, []), key=lambda c: (c.position, c.id))
    tag_marks = []
    for name, sha in ctx.tags.items():
        pos = ctx.tag_positions.get(summ.branch, {}).get(sha)
        if pos is not None and summ.first_position <= pos <= summ.last_position:
            tag_marks.append(Marker(pos, "tag", name))
    config_marks = [Marker(o.first_position, "config",
                           f"{o.machine_id} {o.recipe} v{o.recipe_version} {o.config_hash[:8]} starts")
                    for o in siblings if o.sid != summ.sid and o.first_position > summ.first_position]
    change_marks = [Marker(c.position, c.kind, f"{c.kind} ×{c.ratio:.3f}") for c in changes if c.state == "active"]
    markers = sorted(tag_marks + config_marks + change_marks, key=lambda m: (m.position, m.kind, m.label))
    chunks = list(range(summ.first_position // CHUNK, summ.last_position // CHUNK + 1))
    meta = {"sid": summ.sid, "chunks": chunks, "chunk_size": CHUNK, "branch_dir": safe_name(summ.branch),
            "unit": summ.unit, "direction": summ.direction,
            "markers": [{"pos": m.position, "kind": m.kind, "label": m.label} for m in markers]}
    w.write(f"series/{summ.sid}.html", render(
        "series.html", root="../", title=f"{summ.label} · {summ.branch}", s=summ, changes=changes,
        markers=markers, meta=meta, chunks=chunks, siblings=[o for o in siblings if o.sid != summ.sid]))
    w.write(f"data/series/{summ.sid}/index.json", json_document("series", {
        "series": summ.to_json(), "chunks": chunks, "chunk_size": CHUNK,
        "change_points": [c.__dict__ for c in changes], "markers": meta["markers"]}))


def write_branch_chunks(w: SiteWriter, ctx: Context, branch: str, order: list[tuple[int, str]]) -> None:
    """Commit facts for hovering a chart, one script per chunk of branch positions (`order` chunk-aligned)."""
    by_chunk: dict[int, list[Any]] = {}
    for pos, sha in order:
        k = pos // CHUNK
        rows = by_chunk.setdefault(k, [None] * CHUNK)
        c = ctx.commits.get(sha)
        rows[pos - k * CHUNK] = [sha, c.subject if c else "", author_name(c.author) if c else "",
                                 c.authored_at if c else 0]
    for k, rows in by_chunk.items():
        while rows and rows[-1] is None:
            rows.pop()
        w.write(f"data/branches/{safe_name(branch)}/{k}.js", js_call("commits", safe_name(branch), k, rows))


def write_commit(w: SiteWriter, ctx: Context, sha: str, rows: str, runs: list[RunView]) -> None:
    """data/commits/<sha>.js: what commit.html?c=<sha> shows and what the compare page divides. `rows` is the
    rows' JSON text (commits.rows); the object is js_call's sorted-key encoding, assembled around it."""
    name = commit_name(sha)
    c = ctx.commits.get(sha)
    runs_json = js_literal([[r.id, r.status, r.ref, r.builder, r.worker, r.source, r.ingested_at, r.build_url,
                             r.log_excerpt if r.status != "ok" else ""] for r in runs])
    w.write(f"data/commits/{name}.js", (
        f'perffarm.commit({js_literal(name)},{{"author":{js_literal(author_name(c.author) if c else "")},'
        f'"authored_at":{js_literal(c.authored_at if c else 0)},"rows":{rows},"runs":{runs_json},'
        f'"subject":{js_literal(c.subject if c else "")},"tags":{js_literal(sorted(ctx.tag_at.get(sha, [])))}}});\n'))


def run_views(ctx: Context, shas: Iterable[str] | None) -> dict[str, list[RunView]]:
    out: dict[str, list[RunView]] = {}
    for r in source.runs(ctx.conn, shas=shas).values():
        out.setdefault(r.sha, []).append(RunView(
            r.id, r.ref, r.builder, r.worker, r.machine_id, r.recipe, r.recipe_version, r.status, r.source,
            safe_url(r.build_url), r.log_excerpt[-2000:], r.noisy, r.ingested_at))
    for v in out.values():
        v.sort(key=lambda r: r.id)
    return out


def write_overview(w: SiteWriter, summaries: list[Summary], ctx: Context) -> None:
    open_by_sid: dict[str, int] = {}
    for a in ctx.alerts:
        if a.is_open:
            for sid in a.sids:
                open_by_sid[sid] = open_by_sid.get(sid, 0) + 1
    rows = sorted(summaries, key=lambda s: (s.branch != "master", s.branch, s.workload, s.metric, s.machine_id,
                                            s.recipe, -s.recipe_version, s.sid))
    w.write("index.html", render(
        "index.html", root="", title="perffarm", rows=rows, open_by_sid=open_by_sid, bands=ctx.bands,
        branches=sorted({s.branch for s in rows}), machines=sorted({s.machine_id for s in rows}),
        workloads=sorted({s.workload for s in rows}), open_alerts=[a for a in ctx.alerts if a.is_open][:20]))


def write_compare(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    series = {s.sid: {"label": s.label, "branch": s.branch, "machine": s.machine_id,
                      "recipe": f"{s.recipe} v{s.recipe_version}", "unit": s.unit, "direction": s.direction}
              for s in summaries}
    tested = sorted({s.latest_sha for s in summaries})
    w.write("data/refs.js", js_call("refs", {"tags": ctx.tags, "series": series,
                                             "bands": {"red": ctx.bands.red, "green": ctx.bands.green},
                                             "recent": tested}))
    w.write("compare.html", render("compare.html", root="", title="Compare commits",
                                   tags=tag_order(ctx.tags, {}), bands=ctx.bands))
    w.write("commit.html", render("commit.html", root="", title="Commit", bands=ctx.bands))


def write_releases(w: SiteWriter, ctx: Context) -> None:
    """Callaghan-style tables: absolute value per release × workload, rQPS vs a chosen base release."""
    if not ctx.tags:
        w.write("releases.html", render("releases.html", root="", title="Releases", table=None, bands=ctx.bands,
                                        values=""))
        w.keep_only("releases", set())
        return
    tag_samples = source.samples(ctx.conn, set(ctx.tags.values()))
    authored = {sha: c.authored_at for sha, c in source.commits(ctx.conn, set(ctx.tags.values())).items()}
    tags = tag_order(ctx.tags, authored)
    files = {t: f"releases/{safe_name(t)}.html" for t in tags}
    keys = sorted(tag_samples, key=lambda k: (k.workload, k.metric, k.machine_id, k.recipe, k.recipe_version,
                                              k.config_hash))
    sids = {key: "release:" + SeriesKey(key, "").sid for key in keys}
    wants = []  # every (release, base release) pair at once: one pass over the ratio cache
    for key in keys:
        per = tag_samples[key]
        for base in tags:
            b = per.get(ctx.tags[base])
            for t in tags if b is not None else ():
                x = per.get(ctx.tags[t])
                if x is not None:
                    wants.append(Want(sids[key], x.sha, b.sha, ",".join(map(str, x.run_ids)),
                                      ",".join(map(str, b.run_ids)), x.samples, b.samples, x.direction))
    got = ctx.cache.resolve(wants)
    values = None
    for base in tags:
        rows = []
        for key in keys:
            per = tag_samples[key]
            b = per.get(ctx.tags[base])
            cells = []
            unit = direction = ""
            for t in tags:
                x = per.get(ctx.tags[t])
                if x is None:
                    cells.append(ReleaseCell(t, None, None, False))
                    continue
                unit, direction = x.unit, x.direction
                rel = None if b is None else RatioView.of(got[(sids[key], x.sha, b.sha)], base)
                cells.append(ReleaseCell(t, median(x.samples), rel, x.sla_miss))
            rows.append(ReleaseRow(key, unit, direction, tuple(cells)))
        table = ReleaseTable(base, files[base], tuple(tags), tuple(rows), tuple((t, files[t]) for t in tags))
        if values is None:  # the absolute values do not depend on the base: rendered once, escaped there
            values = Markup(render("release_values.html", table=table))
        w.write(files[base], render("releases.html", root="../", title=f"Releases vs {base}", table=table,
                                    bands=ctx.bands, values=values))
        if base == tags[0]:
            w.write("releases.html", render("releases.html", root="", title="Releases", table=table,
                                            bands=ctx.bands, values=values))
    w.keep_only("releases", set(files.values()))


def _channels(ctx: Context) -> list[Any]:
    from master.alerts import channel_health

    if not source.has_table(ctx.conn, "alert_outbox"):
        return []
    return channel_health(ctx.conn, ctx.settings.alerts, now=ctx.now)


def write_alerts(w: SiteWriter, ctx: Context, now: float) -> None:
    alerts = ctx.alerts
    failing = [c for c in _channels(ctx) if c.status != "ok"]
    w.write("alerts.html", render("alerts.html", root="", title="Alerts", alerts=alerts, failing=failing))
    for a in alerts:
        w.write(f"alerts/{a.file}.html", render("alert.html", root="../", title=f"Alert {a.id}", a=a))
    w.write("alerts.atom", feed.atom(alerts, now))


def write_health(w: SiteWriter, ctx: Context, now: float) -> None:
    last = source.last_result_per_branch(ctx.conn)
    missing = source.untested_counts(ctx.conn)
    branches = [{"branch": b, "age": now - t if t else None, "head": head, "tested": tested,
                 "missing": missing.get(b, 0), "last": t}
                for b, (t, head, tested) in sorted(last.items())]
    workers = [dict(r) for r in source.run_health(ctx.conn)]
    for wk in workers:
        wk["age"] = now - wk["last"] if wk["last"] else None
    noisy = []
    for mid in source.machines(ctx.conn):
        row = source.last_noisy_run(ctx.conn, mid)
        if row:
            try:
                reasons = json.loads(row[0]).get("noisy_reasons", [])
            except (ValueError, AttributeError):
                reasons = []
            noisy.append({"machine": mid, "reasons": [str(r) for r in reasons] if isinstance(reasons, list) else [],
                          "last": row[1]})
    w.write("health.html", render("health.html", root="", title="Farm health", branches=branches,
                                  workers=workers, noisy=noisy, now=now, channels=_channels(ctx)))


def write_common(w: SiteWriter, ctx: Context, summaries: list[Summary], now: float, releases: bool = True) -> None:
    """Pages that summarise everything; cheap enough to re-render on every publish. The release tables depend
    only on the tags and the samples at tagged commits: an incremental publish passes releases=False when
    neither changed (no tag changed, the run is not at a tagged commit), and the previous version's files stay
    (hard-linked)."""
    write_overview(w, summaries, ctx)
    write_compare(w, ctx, summaries)
    if releases:
        write_releases(w, ctx)
    write_alerts(w, ctx, now)
    write_health(w, ctx, now)
    w.copy_tree(SITE_DIR / "static", "static")
    w.write("manifest.json", json_document("site", {
        "published_at": dt.datetime.fromtimestamp(now, dt.UTC).isoformat(), "series": len(summaries),
        "chunk_size": CHUNK}))


def siblings_of(summaries: list[Summary]) -> dict[str, list[Summary]]:
    """Series of the same workload, metric and branch on other machines or recipe versions/configs."""
    groups: dict[tuple[str, str, str], list[Summary]] = {}
    for s in summaries:
        groups.setdefault((s.workload, s.metric, s.branch), []).append(s)
    for g in groups.values():
        g.sort(key=lambda s: (s.machine_id, s.recipe, s.recipe_version, s.config_hash, s.sid))
    return {s.sid: groups[(s.workload, s.metric, s.branch)] for s in summaries}


# ------------------------------------------------------------------------------------------------ entry points


def _open(settings: Any) -> sqlite3.Connection:
    conn = store.connect(settings.results_db)
    conn.row_factory = sqlite3.Row
    return conn


def _heads_with_sha(conn: sqlite3.Connection, heads: Mapping[str, int]) -> dict[str, tuple[int, str]]:
    return {b: (pos, source.sha_at(conn, b, pos) or "") for b, pos in heads.items()}


Progress = Callable[[str], None]


def publish_all(settings: Any, out_dir: Path | None = None, *, now: float | None = None,
                progress: Progress | None = None, jobs: int | None = None) -> PublishReport:
    """Render the whole site from the results database into a new version and swap it in. jobs=2 forks: half the
    parsing, half the rQPS and about half the writing happen in a second process (default: default_jobs())."""
    out = Path(os.path.abspath(out_dir if out_dir else site_dir(settings)))
    if jobs != 1 and only_cleanup_threads():
        wait_for_cleanup()  # a previous publish's deletion threads: no reason to give up the second process
    jobs = default_jobs() if jobs is None else jobs
    if jobs > 1 and threading.active_count() > 1:
        raise PublishError("jobs > 1 forks; this process has other threads: publish with jobs=1")
    with publish_lock(out), _no_cyclic_gc():
        return _publish_all(settings, out, time.time() if now is None else now, progress, jobs)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection during a full publish: its millions of objects (tuples, lists, strings) hold
    no cycles, yet each full collection traversed all of them (~5% of the CPU in perf), and in a forked child it
    writes to every object's header, copying the memory pages they sit on. Refcounting still frees everything;
    collection resumes afterwards. Process-wide, so only for the (rare) full publish."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def default_jobs() -> int:
    """2 processes for a full publish when this process has one thread and the machine two cores; 1 in the
    master (threads: forking there is not safe)."""
    return 2 if threading.active_count() == 1 and (os.cpu_count() or 1) > 1 else 1


def _publish_all(settings: Any, out: Path, now: float, progress: Progress | None, jobs: int = 1) -> PublishReport:
    t0 = time.perf_counter()
    say = progress or (lambda _m: None)
    conn = _open(settings)
    cache = open_cache(settings)
    w = SiteWriter(out, incremental=False)
    try:
        ctx = Context(conn, cache, bands(settings), settings)
        ctx.now = now
        orders = {b: source.branch_order(conn, b) for b in ctx.heads}
        where: dict[str, list[tuple[str, int]]] = {}
        for b, order in orders.items():
            for pos, sha in order:
                where.setdefault(sha, []).append((b, pos))
        ctx.tag_positions = {b: {sha: pos for pos, sha in order if sha in ctx.tag_at} for b, order in orders.items()}
        say(f"loading the samples of {len(where)} commits on {len(orders)} branch(es), rQPS of every point")
        ctx.load(where, None, None, jobs)
        summaries = list(ctx.summaries(ctx.series.values()).values())
        sib = siblings_of(summaries)
        by_sid = {s.sid: s for s in ctx.series.values()}
        runs = run_views(ctx, None)
        by_commit = commits.order(ctx)
        group = by_commit.index() if by_commit is not None else {}
        shas = sorted(set(group) | set(runs))

        def write_series(summ: Summary) -> None:
            write_series_data(w, ctx, by_sid[summ.sid], summ.first_position // CHUNK, summ.last_position // CHUNK)
            write_series_page(w, ctx, summ, sib[summ.sid])

        def write_commits(part: list[str]) -> None:
            got = commits.rows(ctx, by_commit, [group[x] for x in part if x in group]) if by_commit else {}
            files = _Files()
            for sha in part:
                write_commit(files, ctx, sha, got.get(sha, "[]"), runs.get(sha, []))
            with w.exclusive():  # one directory for both processes: they take turns per batch, encoding meanwhile
                for rel, text in files.items:
                    w.write(rel, text)

        def write_summaries() -> None:  # they read the database: in this process only
            write_common(w, ctx, summaries, now)
            for b, order in orders.items():
                write_branch_chunks(w, ctx, b, order)

        tasks: list[Callable[[], None]] = [lambda x=x: write_series(x) for x in summaries]
        tasks += [lambda p=shas[i : i + COMMIT_BATCH]: write_commits(p) for i in range(0, len(shas), COMMIT_BATCH)]
        say(f"writing {len(summaries)} series and {len(shas)} commits' data"
            + (" in two processes" if jobs > 1 else ""))
        try:
            theirs = forkjoin.share(tasks, jobs, here_first=write_summaries,
                                    child_result=lambda: (len(w.written), w.linked)) or (0, 0)
        except forkjoin.ChildFailed as e:
            raise PublishError(f"writing the site in the second process failed: {e}") from None
        say("swapping the new version in")
        final = w.commit()
        cache.flush()
        save_state(cache, summaries, True, out, _heads_with_sha(conn, ctx.heads), ctx.tags)
    except BaseException:
        w.abort()
        raise
    finally:
        cache.close()
        conn.close()
    return PublishReport(out, final.name, False, len(w.written) + theirs[0], len(summaries), len(shas),
                         cache.computed, cache.reused, time.perf_counter() - t0, w.linked + theirs[1])


class _Files:
    """Files rendered in memory, written later (SiteWriter.write's signature)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def write(self, rel: str, text: str) -> None:
        self.items.append((rel, text))


COMMIT_BATCH = 250  # commits per task: small enough to balance two processes, large enough to amortise a batch


def tag_changes(old: Mapping[str, str], new: Mapping[str, str]) -> set[str]:
    """Commits whose tags differ between two publishes (a tag added, moved or removed)."""
    return {sha for name in set(old) | set(new) if old.get(name) != new.get(name)
            for sha in (old.get(name), new.get(name)) if sha}


def _tag_windows(conn: sqlite3.Connection, ctx: Context, retagged: set[str],
                 windows: dict[str, tuple[int, int]]) -> set[str]:
    """Branches where a tag changed; each gets at least the sparkline's window loaded (its series' summaries are
    recomputed: the rQPS of the latest point vs the previous release may change)."""
    branches = {b for sha in retagged for b in source.positions_of(conn, sha)}
    for b in branches:
        lo = max(ctx.heads[b] - SPARK_WINDOW + 1, 0)
        windows[b] = (min(lo, windows.get(b, (lo, 0))[0]), ctx.heads[b])
    return branches


def _load_for_tags(conn: sqlite3.Connection, retagged: set[str], branches: set[str],
                   cached: Mapping[str, Summary], where: dict[str, list[tuple[str, int]]]) -> None:
    """What a tag change needs besides the windows: each (re)tagged commit and, per series measured there, its
    previous point (the commit's data shows rQPS vs previous), and the latest point of every series on those
    branches (for its summary; a series that stopped before the window has it further back)."""
    def add(sha: str | None, b: str, pos: int) -> None:
        if sha is not None and (b, pos) not in where.get(sha, []):
            where.setdefault(sha, []).append((b, pos))

    for sha in sorted(retagged):
        keys = source.keys_at(conn, [sha])
        for b, pos in source.positions_of(conn, sha).items():
            add(sha, b, pos)
            for key in keys:
                prev = source.prev_point_position(conn, key, b, pos)
                if prev is not None:
                    add(source.sha_at(conn, b, prev), b, prev)
    for summ in cached.values():
        if summ.branch in branches:
            add(summ.latest_sha, summ.branch, summ.last_position)


class _FullPublishNeeded(Exception):
    """The incremental path cannot prove it would match a full publish; the message says why."""


def publish_incremental(settings: Any, run_id: int, out_dir: Path | None = None, *, now: float | None = None,
                        progress: Progress | None = None) -> PublishReport:
    """Re-render only what one new run changed; a full publish when there is no site (or cache) to build on.

    The output is byte-for-byte what a full publish would write (tests/unit/test_publish_incremental.py).
    """
    out = Path(os.path.abspath(out_dir if out_dir else site_dir(settings)))
    now = time.time() if now is None else now
    with publish_lock(out):
        if not out.is_symlink():
            return _publish_all(settings, out, now, progress)
        try:
            return _publish_incremental(settings, run_id, out, now)
        except _FullPublishNeeded as e:
            (progress or (lambda _m: None))(f"full publish: {e}")
            return _publish_all(settings, out, now, progress)


def _publish_incremental(settings: Any, run_id: int, out: Path, now: float) -> PublishReport:
    t0 = time.perf_counter()
    conn = _open(settings)
    cache = open_cache(settings)
    w: SiteWriter | None = None
    try:
        cached, state = load_state(cache, out)
        if state is None:
            raise _FullPublishNeeded("no publish state for this output directory")
        run = source.run_of(conn, run_id)
        if run is None:
            raise ValueError(f"no run with id {run_id} in {settings.results_db}")
        ctx = Context(conn, cache, bands(settings), settings)
        ctx.now = now
        retagged = tag_changes(state["tags"], ctx.tags)
        old_heads = {b: tuple(h) for b, h in state["heads"].items()}
        for b, (pos, sha) in old_heads.items():
            if b in ctx.heads and source.sha_at(conn, b, pos) != sha:
                raise _FullPublishNeeded(f"branch {b} was rewritten")
        w = SiteWriter(out, incremental=True)
        at = source.positions_of(conn, run.sha)
        keys = source.keys_at(conn, [run.sha]) if run.status == "ok" else set()
        # which commits' data change: the run's commit and, per series, the next tested commit after it
        # what to load per branch: the chunk of the run's commit (rewritten whole), each series' point before
        # that chunk (the rQPS of the chunk's first point), the sparkline's window
        windows: dict[str, tuple[int, int]] = {}
        for b, pos in at.items():
            start = pos // CHUNK * CHUNK
            lows = [start, max(ctx.heads[b] - SPARK_WINDOW + 1, 0)]
            lows += [p for p in (source.prev_point_position(conn, key, b, start) for key in keys) if p is not None]
            windows[b] = (min(lows), ctx.heads[b])
        tag_branches = _tag_windows(conn, ctx, retagged, windows)
        orders = {b: source.branch_order(conn, b, lo, hi) for b, (lo, hi) in windows.items()}
        where: dict[str, list[tuple[str, int]]] = {}
        for b, order in orders.items():
            for pos, sha in order:
                where.setdefault(sha, []).append((b, pos))
        _load_for_tags(conn, retagged, tag_branches, cached, where)
        # commit facts (for chart hovers) of the positions each branch gained since the last publish
        grown = {}
        for b, head in ctx.heads.items():
            old = old_heads.get(b, (-1, ""))[0]
            if head > old:
                grown[b] = source.branch_order(conn, b, (old + 1) // CHUNK * CHUNK, head)
        ctx.commits.update(source.commits(conn, {sha for order in grown.values() for _, sha in order}))
        ctx.tag_positions = {}
        for sha in ctx.tags.values():
            for b, pos in source.positions_of(conn, sha).items():
                ctx.tag_positions.setdefault(b, {})[sha] = pos
                if b in windows and (b, pos) not in where.get(sha, []):
                    where.setdefault(sha, []).append((b, pos))
        # a tag change touches every series of its branches (rQPS vs the previous release): load them all
        loaded_keys = None if retagged else keys
        ctx.load(where, list(where), loaded_keys)
        affected = {k: s for k, s in ctx.series.items() if k.branch in at and s.index_of(run.sha) is not None}
        changed = {run.sha}
        for s in affected.values():
            idx = s.index_of(run.sha)
            if idx + 1 < s.end:
                changed.add(s.table.sha[idx + 1])
        # the other series measured at the changed commits: their rows are on those commits' pages too
        more = source.keys_at(conn, sorted(changed)) - keys
        if more:
            for b, lo_hi in windows.items():
                starts = [pos for sha in changed for bb, pos in where.get(sha, []) if bb == b]
                for key in more:
                    prev = source.prev_point_position(conn, key, b, min(starts)) if starts else None
                    if prev is not None and prev < lo_hi[0]:
                        raise _FullPublishNeeded("a changed commit's other series reach back past the window")
            if loaded_keys is not None:
                ctx.load(where, list(where), keys | more)
                affected = {k: s for k, s in ctx.series.items() if k in affected}
        fresh = ctx.summaries([*affected.values(), *(s for k, s in ctx.series.items()
                                                    if k.branch in tag_branches and k not in affected)])
        for sid, old in cached.items():
            if sid in fresh and old.first_position < fresh[sid].first_position:
                fresh[sid] = Summary.from_json({**fresh[sid].to_json(), "first_position": old.first_position})
        summaries_map = {**cached, **fresh}
        summaries = list(summaries_map.values())
        sib = siblings_of(summaries)
        for key, s in affected.items():
            summ = summaries_map[s.sid]
            pos = at[key.branch]
            lo_chunk = pos // CHUNK if s.sid in cached else summ.first_position // CHUNK
            write_series_data(w, ctx, s, lo_chunk, summ.last_position // CHUNK)
        for summ in summaries:  # every series page: markers, siblings and change points may have moved
            write_series_page(w, ctx, summ, sib[summ.sid])
        for b, order in grown.items():
            write_branch_chunks(w, ctx, b, order)
        by_commit = commits.order(ctx, changed | retagged)
        rows = commits.rows(ctx, by_commit, range(len(by_commit.shas))) if by_commit is not None else {}
        runs = run_views(ctx, sorted(changed | retagged))
        # a (re)tagged commit's data lists its tags; it has a data file only if it has rows or runs (as in a full
        # publish)
        changed |= {sha for sha in retagged if sha in rows or sha in runs}
        for sha in sorted(changed):
            write_commit(w, ctx, sha, rows.get(sha, "[]"), runs.get(sha, []))
        write_common(w, ctx, summaries, now, releases=bool(retagged) or run.sha in ctx.tag_at)
        final = w.commit()
        cache.flush()
        save_state(cache, fresh.values(), False, out, _heads_with_sha(conn, ctx.heads), ctx.tags)
    except BaseException:
        if w is not None:
            w.abort()
        raise
    finally:
        cache.close()
        conn.close()
    return PublishReport(out, final.name, True, len(w.written), len(fresh), len(changed), cache.computed,
                         cache.reused, time.perf_counter() - t0)
