"""Full and incremental publishing: load, compute view models, render, swap in atomically."""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from master import store
from master.detect.rqps import Bands
from master.publish import feed, source
from master.publish.model import Point, SeriesData, assemble
from master.publish.names import commit_name, safe_name
from master.publish.ratios import RatioCache, Want
from master.publish.render import SITE_DIR, author_name, js_call, json_document, render
from master.publish.source import CHUNK, MeasureKey, SeriesKey
from master.publish.views import (
    AlertView, ChangeView, CommitRow, Marker, RatioView, ReleaseCell, ReleaseRow, ReleaseTable, RunView, Summary,
    alert_view, previous_tag, safe_url, series_label, spark_path, tag_order, tail,
)
from master.publish.writer import SiteWriter


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


def site_dir(settings: Any) -> Path:
    """Where the site goes: `[site] out_dir` when the settings have it, else <data_dir>/site."""
    return Path(getattr(settings, "site_out_dir", None) or Path(settings.data_dir) / "site")


def cache_path(settings: Any) -> Path:
    return Path(settings.data_dir) / "publish-cache.sqlite"


def _bands(settings: Any) -> Bands:
    return Bands(getattr(settings, "rqps_red", 0.97), getattr(settings, "rqps_green", 1.03))


# ------------------------------------------------------------------------------------------------ context


class Context:
    """What one publish loaded: series (whole or a window), commits, tags, change points, alerts."""

    def __init__(self, conn: sqlite3.Connection, cache: RatioCache, bands: Bands) -> None:
        self.conn = conn
        self.cache = cache
        self.bands = bands
        self.tags = source.tags(conn)
        self.tag_at: dict[str, list[str]] = {}
        for name, sha in self.tags.items():
            self.tag_at.setdefault(sha, []).append(name)
        self.heads = source.branch_heads(conn)
        self.series: dict[SeriesKey, SeriesData] = {}
        self.commits: dict[str, source.Commit] = {}
        cps = source.change_points(conn)
        self.changes: dict[str, list[ChangeView]] = {}
        self.sid_of_cp: dict[int, str] = {}
        for c in cps:
            self.sid_of_cp[c.id] = c.sid
            self.changes.setdefault(c.sid, []).append(
                ChangeView(c.id, c.sha, c.prev_sha, c.position, c.kind, c.ratio, c.ci_low, c.ci_high, c.pvalue,
                           c.state))
        self.alerts = [alert_view(r, self.sid_of_cp) for r in source.alerts(conn)]
        # per series: ratio of each point vs the previous point, aligned with points (None for the first)
        self.vs_prev: dict[str, list[RatioView | None]] = {}
        self.tag_positions: dict[str, dict[str, int]] = {}
        self._got: dict = {}

    def load(self, where: Mapping[str, list[tuple[str, int]]], shas: Iterable[str] | None,
             keys: set[MeasureKey] | None) -> None:
        samples = source.samples(self.conn, shas, keys)
        self.series.update(assemble(samples, where))
        need = set(where) if shas is not None else None
        self.commits.update(source.commits(self.conn, need))

    def compute_ratios(self, sids: set[str] | None = None, tag_heads: dict[str, int] | None = None) -> None:
        """Every point's rQPS vs the previous tested point, and each latest point vs the previous tag."""
        wants: list[Want] = []
        for s in self.series.values():
            if sids is not None and s.sid not in sids:
                continue
            pts = s.points
            for i in range(1, len(pts)):
                a, b = pts[i - 1], pts[i]
                wants.append(Want(s.sid, b.sha, a.sha, b.runs_key, a.runs_key, b.samples, a.samples, s.direction))
            if pts:
                prev = previous_tag(s, self.tag_at, pts[-1].position)
                if prev is not None:
                    _, tp = prev
                    b = pts[-1]
                    wants.append(Want(s.sid, b.sha, tp.sha, b.runs_key, tp.runs_key, b.samples, tp.samples,
                                      s.direction))
        got = self.cache.resolve(wants)
        for s in self.series.values():
            if sids is not None and s.sid not in sids:
                continue
            pts = s.points
            out: list[RatioView | None] = [None]
            for i in range(1, len(pts)):
                r = got[(s.sid, pts[i].sha, pts[i - 1].sha)]
                out.append(RatioView.of(r, pts[i - 1].sha[:12]))
            self.vs_prev[s.sid] = out[: len(pts)]
        self._got = got

    def summary(self, s: SeriesData) -> Summary | None:
        if not s.points:
            return None
        last = s.points[-1]
        head = self.heads.get(s.key.branch, last.position)
        vs_tag = None
        prev = previous_tag(s, self.tag_at, last.position)
        if prev is not None:
            name, tp = prev
            vs_tag = RatioView.of(self._got[(s.sid, last.sha, tp.sha)], name)
        m = s.key.measure
        return Summary(s.sid, s.key.branch, m.machine_id, m.recipe, m.recipe_version, m.config_hash, m.workload,
                       m.metric, s.unit, s.direction, s.points[0].position, last.position, last.sha, last.median,
                       spark_path(tail(s, head)), vs_tag, last.sla_miss)


# ------------------------------------------------------------------------------------------------ renderers


def _chunks_of(s: SeriesData, lo_chunk: int, hi_chunk: int) -> dict[int, list[tuple[int, Point]]]:
    out: dict[int, list[tuple[int, Point]]] = {k: [] for k in range(lo_chunk, hi_chunk + 1)}
    for i, p in enumerate(s.points):
        k = p.position // CHUNK
        if lo_chunk <= k <= hi_chunk:
            out[k].append((i, p))
    return out


def write_series_data(w: SiteWriter, ctx: Context, s: SeriesData, lo_chunk: int, hi_chunk: int) -> None:
    """Chart chunks (.js), raw-sample chunks (.samples.js) and tool chunks (.json) of one series."""
    base = f"data/series/{s.sid}"
    vs = ctx.vs_prev.get(s.sid, [])
    for k, items in _chunks_of(s, lo_chunk, hi_chunk).items():
        pts = [p for _, p in items]
        flags = [(1 if p.noisy else 0) | (2 if p.sla_miss else 0) for p in pts]
        w.write(f"{base}/{k}.js", js_call("points", s.sid, k, {
            "pos": [p.position for p in pts], "med": [p.median for p in pts], "lo": [p.lo for p in pts],
            "hi": [p.hi for p in pts], "n": [len(p.samples) for p in pts], "flag": flags}))
        w.write(f"{base}/{k}.samples.js", js_call("samples", s.sid, k, {
            "pos": [p.position for p in pts], "samples": [list(p.samples) for p in pts]}))
        rows = []
        for i, p in items:
            r = vs[i] if i < len(vs) else None
            rows.append({"position": p.position, "sha": p.sha, "samples": list(p.samples), "median": p.median,
                         "runs": list(p.run_ids), "noisy": p.noisy, "sla_miss": p.sla_miss,
                         "vs_previous": None if r is None else {"ratio": r.ratio, "ci_low": r.low,
                                                                 "ci_high": r.high, "base": r.base}})
        w.write(f"{base}/{k}.json", json_document("series-chunk", {"series": s.sid, "chunk": k,
                                                                     "chunk_size": CHUNK, "points": rows}))


def write_series_page(w: SiteWriter, ctx: Context, summ: Summary, siblings: list[Summary]) -> None:
    changes = sorted(ctx.changes.get(summ.sid, []), key=lambda c: c.position)
    tag_marks = []
    for name, sha in ctx.tags.items():
        pos = ctx.tag_positions.get(summ.branch, {}).get(sha)
        if pos is not None:
            tag_marks.append(Marker(pos, "tag", name))
    config_marks = [Marker(o.first_position, "config",
                           f"{o.machine_id} {o.recipe} v{o.recipe_version} {o.config_hash[:8]} starts")
                    for o in siblings if o.sid != summ.sid]
    change_marks = [Marker(c.position, c.kind, f"{c.kind} ×{c.ratio:.3f}") for c in changes if c.state == "active"]
    markers = sorted(tag_marks + config_marks + change_marks, key=lambda m: (m.position, m.kind, m.label))
    chunks = list(range(summ.first_position // CHUNK, summ.last_position // CHUNK + 1))
    branch_file = safe_name(summ.branch)
    meta = {"sid": summ.sid, "chunks": chunks, "chunk_size": CHUNK, "branch_dir": branch_file,
            "unit": summ.unit, "direction": summ.direction,
            "markers": [{"pos": m.position, "kind": m.kind, "label": m.label} for m in markers]}
    w.write(f"series/{summ.sid}.html", render(
        "series.html", root="../", title=f"{summ.label} · {summ.branch}", s=summ, changes=changes,
        markers=markers, meta=meta, chunks=chunks, siblings=[o for o in siblings if o.sid != summ.sid]))
    w.write(f"data/series/{summ.sid}/index.json", json_document("series", {
        "series": summ.to_json(), "chunks": chunks, "chunk_size": CHUNK,
        "change_points": [c.__dict__ for c in changes],
        "markers": meta["markers"]}))


def write_branch_chunks(w: SiteWriter, ctx: Context, branch: str, order: list[tuple[int, str]]) -> None:
    """Commit facts for hovering a chart, one script per chunk of branch positions."""
    by_chunk: dict[int, list[Any]] = {}
    for pos, sha in order:
        k = pos // CHUNK
        rows = by_chunk.setdefault(k, [None] * CHUNK)
        c = ctx.commits.get(sha)
        rows[pos - k * CHUNK] = [sha, c.subject if c else "", author_name(c.author) if c else "",
                                 c.authored_at if c else 0]
    for k, rows in by_chunk.items():
        w.write(f"data/branches/{safe_name(branch)}/{k}.js", js_call("commits", safe_name(branch), k, rows))


def commit_rows(ctx: Context, shas: set[str] | None) -> dict[str, list[CommitRow]]:
    out: dict[str, list[CommitRow]] = {}
    for s in ctx.series.values():
        vs = ctx.vs_prev.get(s.sid, [])
        m = s.key.measure
        for i, p in enumerate(s.points):
            if shas is not None and p.sha not in shas:
                continue
            out.setdefault(p.sha, []).append(CommitRow(
                s.sid, s.key.branch, m.machine_id, m.recipe, m.recipe_version, m.workload, m.metric, s.unit,
                p.median, p.lo, p.hi, len(p.samples), vs[i] if i < len(vs) else None, p.noisy, p.sla_miss))
    for rows in out.values():
        rows.sort(key=lambda r: (r.workload, r.metric, r.branch, r.machine_id, r.recipe, r.recipe_version))
    return out


def write_commit(w: SiteWriter, ctx: Context, sha: str, rows: list[CommitRow], runs: list[RunView]) -> None:
    name = commit_name(sha)
    c = ctx.commits.get(sha)
    w.write(f"commit/{name}.html", render(
        "commit.html", root="../", title=f"{sha[:12]} {c.subject if c else ''}", sha=sha,
        subject=c.subject if c else "", author=author_name(c.author) if c else "",
        authored_at=c.authored_at if c else 0, tags=sorted(ctx.tag_at.get(sha, [])), rows=rows, runs=runs))
    w.write(f"data/commits/{name}.js", js_call("commit", sha, {r.sid: [r.value, r.n] for r in rows}))


def run_views(ctx: Context, shas: Iterable[str]) -> dict[str, list[RunView]]:
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
        if a.is_open and a.sid:
            open_by_sid[a.sid] = open_by_sid.get(a.sid, 0) + 1
    rows = sorted(summaries, key=lambda s: (s.branch != "master", s.branch, s.workload, s.metric, s.machine_id,
                                            s.recipe, -s.recipe_version))
    w.write("index.html", render(
        "index.html", root="", title="perffarm", rows=rows, open_by_sid=open_by_sid,
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


def write_releases(w: SiteWriter, ctx: Context) -> None:
    """Callaghan-style tables: absolute value per release × workload, rQPS vs a chosen base release."""
    if not ctx.tags:
        w.write("releases.html", render("releases.html", root="", title="Releases", table=None))
        return
    tag_samples = source.samples(ctx.conn, set(ctx.tags.values()))
    authored = {sha: c.authored_at for sha, c in source.commits(ctx.conn, set(ctx.tags.values())).items()}
    tags = tag_order(ctx.tags, authored)
    files = {t: f"releases/{safe_name(t)}.html" for t in tags}
    keys = sorted(tag_samples, key=lambda k: (k.workload, k.metric, k.machine_id, k.recipe, k.recipe_version,
                                              k.config_hash))
    for base in tags:
        wants = []
        for key in keys:
            per = tag_samples[key]
            b = per.get(ctx.tags[base])
            if b is None:
                continue
            sid = "release:" + SeriesKey(key, "").sid
            for t in tags:
                x = per.get(ctx.tags[t])
                if x is not None:
                    wants.append(Want(sid, x.sha, b.sha, ",".join(map(str, x.run_ids)),
                                      ",".join(map(str, b.run_ids)), x.samples, b.samples, x.direction))
        got = ctx.cache.resolve(wants)
        rows = []
        for key in keys:
            per = tag_samples[key]
            b = per.get(ctx.tags[base])
            sid = "release:" + SeriesKey(key, "").sid
            cells = []
            unit = direction = ""
            for t in tags:
                x = per.get(ctx.tags[t])
                if x is None:
                    cells.append(ReleaseCell(t, None, None, False))
                    continue
                unit, direction = x.unit, x.direction
                rel = None if b is None else RatioView.of(got[(sid, x.sha, b.sha)], base)
                cells.append(ReleaseCell(t, _median(x.samples), rel, x.sla_miss))
            rows.append(ReleaseRow(key, unit, direction, tuple(cells)))
        table = ReleaseTable(base, files[base], tuple(tags), tuple(rows), tuple((t, files[t]) for t in tags))
        w.write(files[base], render("releases.html", root="../", title=f"Releases vs {base}", table=table))
        if base == tags[0]:
            w.write("releases.html", render("releases.html", root="", title="Releases", table=table))


def _median(xs: tuple[float, ...]) -> float:
    from master.publish.model import median

    return median(xs)


def write_alerts(w: SiteWriter, ctx: Context, now: float) -> None:
    alerts = ctx.alerts
    w.write("alerts.html", render("alerts.html", root="", title="Alerts", alerts=alerts,
                                  table_exists=bool(source.has_table(ctx.conn, "alerts"))))
    for a in alerts:
        w.write(f"alerts/{a.file}.html", render("alert.html", root="../", title=a.title, a=a))
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
    for mid, info in source.machines(ctx.conn).items():
        row = ctx.conn.execute("SELECT host_checks, ingested_at FROM runs WHERE machine_id = ? AND noisy = 1 "
                               "ORDER BY id DESC LIMIT 1", (mid,)).fetchone()
        if row:
            try:
                reasons = json.loads(row[0]).get("noisy_reasons", [])
            except (ValueError, AttributeError):
                reasons = []
            noisy.append({"machine": mid, "reasons": [str(r) for r in reasons] if isinstance(reasons, list) else [],
                          "last": row[1]})
    w.write("health.html", render("health.html", root="", title="Farm health", branches=branches,
                                  workers=workers, noisy=noisy, now=now))


def write_common(w: SiteWriter, ctx: Context, summaries: list[Summary], now: float) -> None:
    """Pages that summarise everything; cheap enough to re-render on every publish."""
    write_overview(w, summaries, ctx)
    write_compare(w, ctx, summaries)
    write_releases(w, ctx)
    write_alerts(w, ctx, now)
    write_health(w, ctx, now)
    w.copy_tree(SITE_DIR / "static", "static")
    w.write("manifest.json", json_document("site", {
        "published_at": dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(), "series": len(summaries),
        "chunk_size": CHUNK}))


def siblings_of(summaries: list[Summary]) -> dict[str, list[Summary]]:
    """Series of the same workload, metric and branch on other machines or recipe versions/configs."""
    groups: dict[tuple[str, str, str], list[Summary]] = {}
    for s in summaries:
        groups.setdefault((s.workload, s.metric, s.branch), []).append(s)
    return {s.sid: groups[(s.workload, s.metric, s.branch)] for s in summaries}


# ------------------------------------------------------------------------------------------------ summaries cache


def _summary_table(cache: RatioCache) -> sqlite3.Connection | None:
    if cache.conn is not None:
        cache.conn.execute("CREATE TABLE IF NOT EXISTS summary (sid TEXT PRIMARY KEY, json TEXT NOT NULL)")
    return cache.conn


def save_summaries(cache: RatioCache, summaries: Iterable[Summary], replace_all: bool) -> None:
    conn = _summary_table(cache)
    if conn is None:
        return
    with conn:
        if replace_all:
            conn.execute("DELETE FROM summary")
        conn.executemany("INSERT OR REPLACE INTO summary VALUES (?, ?)",
                         [(s.sid, json.dumps(s.to_json(), sort_keys=True)) for s in summaries])


def load_summaries(cache: RatioCache) -> dict[str, Summary]:
    conn = _summary_table(cache)
    if conn is None:
        return {}
    return {sid: Summary.from_json(json.loads(text)) for sid, text in conn.execute("SELECT sid, json FROM summary")}


# ------------------------------------------------------------------------------------------------ entry points


def _open(settings: Any) -> sqlite3.Connection:
    return store.connect(settings.results_db)


def publish_all(settings: Any, out_dir: Path | None = None, *, allow_pool: bool = False) -> PublishReport:
    """Render the whole site from the results database into a new version and swap it in."""
    t0 = time.perf_counter()
    now = time.time()
    out = Path(out_dir) if out_dir else site_dir(settings)
    conn = _open(settings)
    cache = RatioCache(cache_path(settings), _bands(settings), allow_pool=allow_pool)
    w = SiteWriter(out, incremental=False)
    try:
        ctx = Context(conn, cache, _bands(settings))
        orders = {b: source.branch_order(conn, b) for b in ctx.heads}
        where: dict[str, list[tuple[str, int]]] = {}
        for b, order in orders.items():
            for pos, sha in order:
                where.setdefault(sha, []).append((b, pos))
        ctx.tag_positions = {b: {sha: pos for pos, sha in order if sha in ctx.tag_at} for b, order in orders.items()}
        ctx.load(where, None, None)
        ctx.compute_ratios()
        summaries = [x for x in (ctx.summary(s) for s in ctx.series.values()) if x is not None]
        sib = siblings_of(summaries)
        by_sid = {s.sid: s for s in ctx.series.values()}
        for summ in summaries:
            s = by_sid[summ.sid]
            write_series_data(w, ctx, s, summ.first_position // CHUNK, summ.last_position // CHUNK)
            write_series_page(w, ctx, summ, sib[summ.sid])
        for b, order in orders.items():
            write_branch_chunks(w, ctx, b, order)
        rows = commit_rows(ctx, None)
        runs = run_views(ctx, list(rows))
        for sha, r in rows.items():
            write_commit(w, ctx, sha, r, runs.get(sha, []))
        write_common(w, ctx, summaries, now)
        final = w.commit()
        cache.flush()
        save_summaries(cache, summaries, replace_all=True)
    except BaseException:
        w.abort()
        raise
    finally:
        cache.close()
        conn.close()
    return PublishReport(out, final.name, False, len(w.written), len(summaries), len(rows), cache.computed,
                         cache.reused, time.perf_counter() - t0)


def publish_incremental(settings: Any, run_id: int, out_dir: Path | None = None) -> PublishReport:
    """Re-render only what one new run changed; falls back to a full publish when there is no site yet."""
    t0 = time.perf_counter()
    now = time.time()
    out = Path(out_dir) if out_dir else site_dir(settings)
    if not out.is_symlink():
        return publish_all(settings, out)
    conn = _open(settings)
    cache = RatioCache(cache_path(settings), _bands(settings))
    cached = load_summaries(cache)
    if not cached and conn.execute("SELECT 1 FROM runs WHERE status = 'ok' AND id != ? LIMIT 1",
                                   (run_id,)).fetchone():
        cache.close()
        conn.close()
        return publish_all(settings, out)  # no summaries cached (cache deleted): rebuild them
    w = SiteWriter(out, incremental=True)
    try:
        ctx = Context(conn, cache, _bands(settings))
        run = source.run_of(conn, run_id)
        if run is None:
            raise ValueError(f"no run with id {run_id}")
        at = source.positions_of(conn, run.sha)
        windows: dict[str, tuple[int, int]] = {}
        write_from: dict[str, int] = {}
        for b, pos in at.items():
            prev = conn.execute(
                "SELECT MAX(bc.position) FROM branch_commits bc WHERE bc.branch = ? AND bc.position < ? AND "
                "EXISTS (SELECT 1 FROM runs r WHERE r.sha = bc.sha AND r.status = 'ok')", (b, pos)).fetchone()[0]
            head = ctx.heads[b]
            lo_chunk = max(min(pos // CHUNK - 1, head // CHUNK - 1, (prev if prev is not None else pos) // CHUNK), 0)
            windows[b] = (lo_chunk * CHUNK, head)
            write_from[b] = pos // CHUNK
        orders = {b: source.branch_order(conn, b, lo, hi) for b, (lo, hi) in windows.items()}
        where: dict[str, list[tuple[str, int]]] = {}
        for b, order in orders.items():
            for pos, sha in order:
                where.setdefault(sha, []).append((b, pos))
        ctx.tag_positions = {}
        for name, sha in ctx.tags.items():
            for b, pos in source.positions_of(conn, sha).items():
                ctx.tag_positions.setdefault(b, {})[sha] = pos
                if b in windows and not any(x == (b, pos) for x in where.get(sha, [])):
                    where.setdefault(sha, []).append((b, pos))
        keys = source.keys_at(conn, [run.sha])
        ctx.load(where, list(where), keys)
        affected = {k: s for k, s in ctx.series.items() if k.branch in windows and any(
            p.sha == run.sha for p in s.points)}
        # commits whose page changes: the run's commit and the next tested commit in each affected series
        changed = {run.sha}
        for s in affected.values():
            idx = next(i for i, p in enumerate(s.points) if p.sha == run.sha)
            if idx + 1 < len(s.points):
                changed.add(s.points[idx + 1].sha)
        more = source.keys_at(conn, sorted(changed)) - keys
        if more:
            ctx.load(where, list(where), more)
        ctx.compute_ratios()
        fresh = {x.sid: x for x in (ctx.summary(s) for s in affected.values()) if x is not None}
        for sid, old in cached.items():
            if sid in fresh and old.first_position < fresh[sid].first_position:
                fresh[sid] = Summary.from_json({**fresh[sid].to_json(), "first_position": old.first_position})
        summaries_map = {**cached, **fresh}
        summaries = list(summaries_map.values())
        sib = siblings_of(summaries)
        for key, s in affected.items():
            summ = summaries_map[s.sid]
            lo_chunk = write_from[key.branch]
            if not w.exists(f"series/{s.sid}.html"):
                lo_chunk = summ.first_position // CHUNK
            write_series_data(w, ctx, s, lo_chunk, summ.last_position // CHUNK)
            write_series_page(w, ctx, summ, sib[s.sid])
        for b, order in orders.items():
            write_branch_chunks(w, ctx, b, order)
        rows = commit_rows(ctx, changed)
        runs = run_views(ctx, sorted(changed))
        for sha in sorted(changed):
            write_commit(w, ctx, sha, rows.get(sha, []), runs.get(sha, []))
        write_common(w, ctx, summaries, now)
        final = w.commit()
        cache.flush()
        save_summaries(cache, fresh.values(), replace_all=False)
    except BaseException:
        w.abort()
        raise
    finally:
        cache.close()
        conn.close()
    return PublishReport(out, final.name, True, len(w.written), len(fresh), len(changed), cache.computed,
                         cache.reused, time.perf_counter() - t0)
