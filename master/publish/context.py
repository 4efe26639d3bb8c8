"""What one publish loads from the results database: series (whole or a window) with every point's rQPS vs the
previous point, commits, tags, branch heads, change points and alerts, and the overview rows computed from them.
Page writers (master/publish/pages/) read a Context; they never query the results database for what it holds."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from master import store
from master.detect.rqps import Bands
from master.publish import model, source
from master.publish.model import SiteSeries
from master.publish.ratios import RatioCache
from master.publish.render import author_name, sig6_decimals
from master.publish.source import SeriesRef
from master.publish.views import (
    AlertPage,
    RatioView,
    Summary,
    alert_views,
    previous_tag,
    safe_url,
    spark_path,
    tail_rows,
)
from master.store.commits import Commit
from master.store.runs import RunWithLog
from master.store.series import MeasureKey
from master.textsafe import visible


def bands(settings: Any) -> Bands:
    """The rQPS colour bands: the alerts' bands (alerts.band_red/band_green), one definition for the farm."""
    return Bands(settings.alerts.band_red, settings.alerts.band_green)


class Context:
    """What one publish loaded: series (whole or a window), commits, tags, change points, alerts."""

    def __init__(self, conn: sqlite3.Connection, cache: RatioCache, bands: Bands, settings: Any) -> None:
        self.conn = conn
        self.settings = settings
        self.cache = cache
        self.bands = bands
        self.tags = store.commits.tags(conn)
        self.tag_at: dict[str, list[str]] = {}
        for name, sha in self.tags.items():
            self.tag_at.setdefault(sha, []).append(name)
        self.heads = store.commits.branch_heads(conn)
        self.series: dict[SeriesRef, SiteSeries] = {}
        self.commits: dict[str, Commit] = {}
        # what a commit's data file adds for the commit page: its message body (source.messages) and where it
        # sits on each branch (branch -> position: the page finds the next commit in the branch's commit facts);
        # filled by the publisher for the commits it writes data for
        self.messages: dict[str, str] = {}
        self.positions: dict[str, dict[str, int]] = {}
        self.changes = source.change_points(conn)  # per series (sid), as the series pages list them
        self.rebases, self.ratio_of = source.paired(conn)  # paired throughput: rebases, absolute -> ratio series
        # the analytic queries' plans: per series the plans it ran with, and every plan change (master/plans.py)
        self.plan_spans, self.plan_changes = source.plan_history(conn)
        self.plan_changes_at: dict[str, list[source.PlanChangeRow]] = {}
        self.plan_changes_of: dict[str, list[source.PlanChangeRow]] = {}
        for row in self.plan_changes:
            self.plan_changes_at.setdefault(row.change.sha, []).append(row)
            self.plan_changes_of.setdefault(row.sid, []).append(row)
        # every machine's name, owner and description (workers.about), once per publish: what the pages show
        self.machine_views = source.machine_views(conn, settings.alerts.machine_about)
        rows = source.alert_rows(conn)
        facts = {
            sha: (c.subject, author_name(c.author))
            for sha, c in source.commits(conn, {x for r in rows for x in (r.sha, r.culprit_sha) if x}).items()
        }
        bisections = source.bisections_by_change_point(conn)
        self.alerts: list[AlertPage] = alert_views(
            rows,
            source.alert_lines(conn),
            source.alert_history(conn),
            source.alert_deliveries(conn),
            bisections,
            facts,
            lambda r, d: cache._ratio(r, None, None, d).colour,
            source.bisection_explanations(conn, bisections.values()),
            source.bisection_counters(conn, bisections.values()),
            source.alert_links(conn),
            source.bisection_waits(conn, bisections.values()),
            self.machine_views,
        )
        # per series: ratio of each point vs the previous point, aligned with points (None for the first)
        self.table: model.Table | None = None
        self.tag_positions: dict[str, dict[str, int]] = {}
        self._got: dict = {}
        self.now = 0.0
        # the machines whose per-machine pages a SITE writer re-renders (an incremental publish: the run's); None: all
        self.machines: set[str] | None = None
        # SITE pages rendered by key (an alert's page): the digests of their view models in the last publish (None:
        # render every one), and this publish's, which the publish state keeps for the next (docs/scale.md)
        self.page_keys: Mapping[str, str] | None = None
        self.new_page_keys: dict[str, str] = {}

    def load(
        self,
        where: Mapping[str, list[tuple[str, int]]],
        shas: Iterable[str] | None,
        keys: set[MeasureKey] | None,
        jobs: int = 1,
        machines: Iterable[tuple[str, str, int]] | None = None,
        with_commits: bool = True,
    ) -> None:
        """Load the series (replacing what was loaded; only of `machines` if given, see model.load) and every
        point's rQPS vs the previous point (jobs=2: the parsing and the rQPS in two processes; it forks);
        with_commits: also the facts of the loaded commits (a full publish loads them once, not per machine)."""
        self.series = model.load(self.conn, where, shas, keys, jobs, machines)
        if with_commits:
            self.commits.update(source.commits(self.conn, set(where) if shas is not None else None))
        table = next(iter(self.series.values())).table if self.series else None
        self.table = table
        if table is None:
            return
        size = len(table.pos)
        first = np.zeros(size, dtype=bool)
        higher = np.zeros(size, dtype=bool)
        for s in self.series.values():
            first[s.start] = True
            higher[s.start : s.end] = s.direction == "higher"
        rows = np.nonzero(~first)[0]
        r = model.ratios(table, rows, rows - 1, higher[rows], self.bands, jobs)
        self.prev_ratio = np.full(size, np.nan)
        self.prev_low = np.full(size, np.nan)
        self.prev_high = np.full(size, np.nan)
        self.prev_band = np.zeros(size, dtype=np.int8)  # index into model.COLOURS
        self.prev_band[rows] = r.band
        self.prev_colour = np.array(model.COLOURS, dtype=object)[self.prev_band].tolist()
        self.has_prev = ~first
        self.prev_ratio[rows], self.prev_low[rows], self.prev_high[rows] = r.ratio, r.low, r.high
        self.med_r = round6(table.med)
        self.lo_r = round6(table.lo)
        self.hi_r = round6(table.hi)

    def unload(self) -> None:
        """Drop the loaded series and their points (a full publish, between machines and after the last)."""
        self.series = {}
        self.table = None
        for name in ("prev_ratio", "prev_low", "prev_high", "prev_band", "prev_colour", "has_prev"):
            self.__dict__.pop(name, None)
        for name in ("med_r", "lo_r", "hi_r"):
            self.__dict__.pop(name, None)

    def vs_prev(self, i: int) -> RatioView | None:
        if not self.has_prev[i]:
            return None
        return RatioView(
            float(self.prev_ratio[i]),
            float(self.prev_low[i]),
            float(self.prev_high[i]),
            self.prev_colour[i],
            self.table.sha[i - 1][:12],
        )

    def channels(self) -> list[Any]:
        """The alert channels' delivery health (master.alerts.health); [] before the outbox exists."""
        from master.alerts.health import channel_health

        if not source.has_table(self.conn, "alert_outbox"):
            return []
        return channel_health(self.conn, self.settings.alerts, now=self.now)

    def summaries(self, series: Iterable[SiteSeries]) -> dict[str, Summary]:
        """Overview rows: latest value, sparkline, rQPS of the latest point vs the previous release tag."""
        series = [s for s in series if len(s)]
        tagged = [(s, previous_tag(s, self.tag_at, int(s.table.pos[s.end - 1]))) for s in series]
        with_tag = [(s, t) for s, t in tagged if t is not None]
        got = (
            model.ratios(
                self.table,
                np.array([s.end - 1 for s, _ in with_tag], dtype=np.int64),
                np.array([t[1] for _, t in with_tag], dtype=np.int64),
                np.array([s.direction == "higher" for s, _ in with_tag], dtype=bool),
                self.bands,
            )
            if with_tag
            else None
        )
        vs_tag: dict[str, RatioView] = {}
        for j, (s, (name, _)) in enumerate(with_tag):
            vs_tag[s.sid] = RatioView(float(got.ratio[j]), float(got.low[j]), float(got.high[j]), got.colour[j], name)
        out = {}
        for s in series:
            t = s.table
            last = s.end - 1
            m = s.key.measure
            head = self.heads.get(s.key.branch, int(t.pos[last]))
            spark = spark_path([float(t.med[i]) for i in tail_rows(s, head)])
            out[s.sid] = Summary(
                s.sid,
                s.key.branch,
                m.machine_id,
                m.recipe,
                m.recipe_version,
                m.config_hash,
                m.workload,
                m.metric,
                s.unit,
                s.direction,
                int(t.pos[s.start]),
                int(t.pos[last]),
                t.sha[last],
                float(self.med_r[last]),
                spark,
                vs_tag.get(s.sid),
                bool(t.sla[last]),
            )
        return out


def run_views(ctx: Context, shas: Iterable[str] | None) -> dict[str, list[RunWithLog]]:
    """The runs of these commits (None: all), per commit, oldest first, as the commit data lists them: the ref and
    the log made visible (the log's last 2,000 characters), the build link only if it is http(s)."""
    out: dict[str, list[RunWithLog]] = {}
    for r in store.runs.runs(ctx.conn, shas=shas).values():
        shown = visible(r.log_excerpt, lines=True)[-2000:]
        out.setdefault(r.sha, []).append(
            dataclasses.replace(r, ref=visible(r.ref), build_url=safe_url(r.build_url), log_excerpt=shown)
        )
    for v in out.values():
        v.sort(key=lambda r: r.id)
    return out


def round6(a: np.ndarray) -> np.ndarray:
    """Each value to 6 significant digits (per value, so a full and an incremental publish agree)."""
    out = a.copy()
    finite = np.isfinite(a) & (a != 0)
    if not finite.any():
        return out
    decimals = sig6_decimals(a[finite])
    idx = np.nonzero(finite)[0]
    for d in np.unique(decimals):
        sel = idx[decimals == d]
        out[sel] = np.round(a[sel], int(d))
    return out
