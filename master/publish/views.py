"""View models: everything a template shows is computed here; templates only loop and format."""

from __future__ import annotations

import math
import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from master import refnames
from master.machines import MachineView
from master.machines import view as machine_view
from master.publish.model import SiteSeries
from master.publish.names import safe_name
from master.publish.ratios import Ratio
from master.store.alerts import Alert, Delivery, HistoryEntry
from master.store.bisections import Bisection
from master.store.series import REFERENCE_SUFFIX, MeasureKey, absolute_metric

SPARK_POINTS = 120
SPARK_WINDOW = 200  # the sparkline shows tested commits among the branch's newest SPARK_WINDOW positions
SPARK_W, SPARK_H = 120, 24


@dataclass(frozen=True)
class Link:
    """A labelled link between pages (the archaeology and release pages' navigation)."""

    label: str
    href: str  # relative to the site root


@dataclass(frozen=True)
class MachineRow:
    """archaeology.html and releases.html: one machine, the releases measured on it and what its page holds."""

    machine_id: str
    href: str  # its page, relative to the site root
    tags: int
    majors: tuple[str, ...]  # oldest first
    count: int  # what its page shows: workloads (archaeology) or table rows (releases)
    jobs: tuple[int, ...]


@dataclass(frozen=True)
class RatioView:
    """A ratio as shown: number, CI text and colour band (the number is always printed)."""

    ratio: float
    low: float
    high: float
    colour: str
    base: str  # what it is relative to: a tag name or a short sha
    job: int | None = None  # paired: both measured interleaved in this job (master/jobs); None: separate runs

    @classmethod
    def of(cls, r: Ratio, base: str) -> RatioView:
        return cls(r.ratio, r.low, r.high, r.colour, base)

    @property
    def has_ci(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


@dataclass(frozen=True)
class Summary:
    """One overview row, also cached for incremental publishes (JSON round trip)."""

    sid: str
    branch: str
    machine_id: str
    recipe: str
    recipe_version: int
    config_hash: str
    workload: str
    metric: str
    unit: str
    direction: str
    first_position: int
    last_position: int
    latest_sha: str
    latest_value: float
    spark: str  # SVG path data: numbers only
    vs_tag: RatioView | None
    sla_miss: bool

    @property
    def label(self) -> str:
        return f"{self.workload} · {self.metric}"

    @property
    def measure(self) -> MeasureKey:
        return MeasureKey(
            self.machine_id, self.recipe, self.recipe_version, self.config_hash, self.workload, self.metric
        )

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.vs_tag is not None:
            d["vs_tag"] = {
                k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self.vs_tag).items()
            }
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Summary:
        d = dict(d)
        vt = d.pop("vs_tag")
        if vt is not None:
            vt = RatioView(**{k: (math.nan if v is None else v) for k, v in vt.items()})
        return cls(vs_tag=vt, **d)


def spark_path(values: Sequence[float]) -> str:
    """SVG path of the medians, scaled into the sparkline box."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    n = max(len(values) - 1, 1)
    parts = []
    for i, y in enumerate(values):
        x = i * SPARK_W / n
        yy = SPARK_H - 2 - (y - lo) / span * (SPARK_H - 4)
        parts.append(f"{'M' if i == 0 else 'L'}{x:.1f},{yy:.1f}")
    return "".join(parts)


def tail_rows(series: SiteSeries, head: int) -> range:
    """The sparkline's rows: at most SPARK_POINTS among the branch's newest SPARK_WINDOW positions (the same in
    full and incremental publishes, since an incremental one always loads them)."""
    start = max(head - SPARK_WINDOW + 1, 0)
    first = series.start + int(np.searchsorted(series.positions, start))
    return range(max(first, series.end - SPARK_POINTS), series.end)


def siblings_of(summaries: list[Summary]) -> dict[str, list[Summary]]:
    """Series of the same workload and measure anywhere: every machine, recipe version/config and branch, and a
    paired workload's absolute, reference and rQPS series together (`tps`, `tps.reference`, `tps.rqps`). A series
    page lists and marks those of its own metric and branch (`same_place`) and offers the rest of its unit as
    overlays on its chart."""
    groups: dict[tuple[str, str], list[Summary]] = {}
    for s in summaries:
        groups.setdefault((s.workload, measure_family(s.metric)), []).append(s)
    for g in groups.values():
        g.sort(key=lambda s: (s.branch, s.metric, s.machine_id, s.recipe, s.recipe_version, s.config_hash, s.sid))
    return {s.sid: groups[(s.workload, measure_family(s.metric))] for s in summaries}


def measure_family(metric: str) -> str:
    """What a paired workload's absolute, reference and rQPS metrics have in common: `tps` for all three."""
    return absolute_metric(metric).removesuffix(REFERENCE_SUFFIX)


def same_place(summ: Summary, siblings: Sequence[Summary]) -> list[Summary]:
    """Of siblings_of's group, the series of summ's own metric and branch (other machines and recipe versions),
    in the order the page always listed them."""
    out = [o for o in siblings if o.metric == summ.metric and o.branch == summ.branch]
    return sorted(out, key=lambda s: (s.machine_id, s.recipe, s.recipe_version, s.config_hash, s.sid))


def previous_tag(series: SiteSeries, tag_at: Mapping[str, list[str]], before: int) -> tuple[str, int] | None:
    """The newest tagged row of the series strictly before position `before`: (tag name, row)."""
    t = series.table
    for i in range(series.end - 1, series.start - 1, -1):
        if t.pos[i] < before and t.sha[i] in tag_at:
            return sorted(tag_at[t.sha[i]])[-1], i
    return None


@dataclass(frozen=True)
class Marker:
    """A vertical mark on a chart: change point, release tag, or machine/recipe change."""

    position: int
    kind: str  # regression | improvement | tag | config
    label: str


def safe_url(url: str | None) -> str | None:
    """Only http(s) links from the database reach an href (no javascript: URLs)."""
    if url and re.match(r"^https?://", url, re.IGNORECASE):
        return url
    return None


@dataclass(frozen=True)
class ReleaseCell:
    tag: str
    value: float | None
    rel: RatioView | None
    sla_miss: bool
    value_job: int | None = None  # the value is a job's median (no farm run at the tag), from this job
    problem: str | None = None  # no ratio: the release job's samples form none (ReleaseNumbers.problems), why


@dataclass(frozen=True)
class ReleaseRow:
    measure: MeasureKey
    unit: str
    direction: str
    cells: tuple[ReleaseCell, ...]


@dataclass(frozen=True)
class ReleaseTable:
    base: str
    base_file: str
    tags: tuple[str, ...]
    rows: tuple[ReleaseRow, ...]
    bases: tuple[tuple[str, str], ...]  # (tag, file name) for the base chooser


OPEN_STATES = ("new", "bisecting", "culprit-found", "acknowledged", "investigating")  # not yet resolved


@dataclass(frozen=True)
class AlertLineView:
    sid: str
    label: str
    machine: MachineView
    where: str  # the recipe and its version
    severity: str
    ratio: RatioView
    sha: str
    prev_sha: str | None
    retracted: bool


@dataclass(frozen=True)
class BisectionView:
    id: int
    workload: str
    state: str
    culprit: str | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    probes: int
    rounds: int
    reason: str
    log: tuple[str, ...]
    explained: Any = None  # master.profiles.report.StoredExplanation: where the instructions went (culprit vs parent)
    counters: Any = None  # master.explain.report.CounterReport: the exact counters that changed (culprit vs parent)
    waits: Any = None  # master.explain.report.WaitReport: the sampled waits that moved (culprit vs parent)


@dataclass(frozen=True)
class HistoryView:
    at: float
    old_state: str | None
    new_state: str
    by: str
    note: str | None


@dataclass(frozen=True)
class DeliveryView:
    channel: str
    event: str
    message_version: int
    state: str
    attempts: int
    last_error: str | None
    sent_at: float | None


# alerts.html lists every alert; one that moved every workload of a fleet has thousands of lines, which only its own
# page needs (at 6,000 commits × 20 machines × 100 series, 33 alerts made alerts.html 0.56 MB, the site's largest)
LISTED_ALERT_LINES = 5


@dataclass(frozen=True)
class AlertPage:
    """An alert (docs/alerts.md) as the site shows it: triage state, lines, range or culprit, bisection log."""

    id: str
    file: str  # alert-<id>: alerts.link_template points at alerts/<file>.html
    branch: str
    kind: str
    severity: str
    state: str
    active: bool
    sha: str
    prev_sha: str | None
    range_size: int | None
    bisection_state: str | None
    culprit: str | None
    culprit_subject: str
    culprit_author: str
    subject: str  # of `sha` when the range is one commit, else ""
    created: float
    updated: float
    state_by: str | None
    state_note: str | None
    lines: tuple[AlertLineView, ...]
    history: tuple[HistoryView, ...]
    deliveries: tuple[DeliveryView, ...]
    bisections: tuple[BisectionView, ...]
    links: tuple[str, ...] = ()  # where it is tracked (a thread, a bug): http(s) URLs, checked when stored

    @property
    def is_open(self) -> bool:
        return self.active and self.state in OPEN_STATES

    @property
    def sids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(line.sid for line in self.lines))

    @property
    def listed_lines(self) -> tuple[AlertLineView, ...]:
        """The lines alerts.html shows: the largest changes first, at most LISTED_ALERT_LINES (the page has all)."""
        ranked = sorted(self.lines, key=lambda ln: -abs(math.log(ln.ratio.ratio)) if ln.ratio.ratio > 0 else 0.0)
        return tuple(ranked[:LISTED_ALERT_LINES])

    @property
    def unlisted_lines(self) -> int:
        return max(0, len(self.lines) - LISTED_ALERT_LINES)

    @property
    def title(self) -> str:
        n = len(self.lines)
        where = (
            f"culprit {self.culprit[:12]}"
            if self.culprit
            else (
                f"{self.sha[:12]}"
                if self.range_size in (None, 1)
                else f"({(self.prev_sha or '')[:12]}, {self.sha[:12]}] ({self.range_size} commits)"
            )
        )
        return f"{self.severity} {self.kind} on {self.branch}: {n} workload{'s' if n != 1 else ''} at {where}"


def _log_lines(text: str | None) -> tuple[str, ...]:
    import json

    try:
        lines = json.loads(text or "[]")
    except ValueError:
        return ()
    return tuple(str(x) for x in lines) if isinstance(lines, list) else ()


def alert_views(
    rows: Sequence[Alert],
    lines: Sequence[Any],
    history: Mapping[str, Sequence[HistoryEntry]],
    deliveries: Mapping[str, Sequence[Delivery]],
    bisections: Mapping[int, Bisection],
    commit_facts: Mapping[str, tuple[str, str]],
    colour_of: Any,
    explained: Mapping[int, Any] | None = None,
    counters: Mapping[int, Any] | None = None,
    links: Mapping[str, Sequence[str]] | None = None,
    waits: Mapping[int, Any] | None = None,
    machine_views: Mapping[str, MachineView] | None = None,
) -> list[AlertPage]:
    """Join alerts with their lines, triage history, deliveries and bisections (all loaded by source.py)."""
    by_alert: dict[str, list[Any]] = {}
    for ln in lines:
        by_alert.setdefault(ln.alert_id, []).append(ln)
    out = []
    for r in rows:
        aid = str(r.id)
        lv, bv = [], []
        for ln in by_alert.get(aid, []):
            lo = math.nan if ln.ci_low is None else ln.ci_low
            hi = math.nan if ln.ci_high is None else ln.ci_high
            lv.append(
                AlertLineView(
                    ln.sid,
                    f"{ln.workload} · {ln.metric}",
                    (machine_views or {}).get(ln.machine_id) or machine_view(ln.machine_id, None, {}, ()),
                    f"{ln.recipe} v{ln.recipe_version}",
                    ln.severity,
                    RatioView(ln.ratio, lo, hi, colour_of(ln.ratio, ln.direction), "before"),
                    ln.sha,
                    ln.prev_sha,
                    ln.state != "active",
                )
            )
            b = bisections.get(ln.change_point_id)
            if b is not None and all(v.id != int(b.id) for v in bv):  # lines that share one bisection show it once
                bv.append(
                    BisectionView(
                        int(b.id),
                        b.workload,
                        b.state,
                        b.culprit,
                        b.ratio,
                        b.ci_low,
                        b.ci_high,
                        int(b.probes),
                        int(b.rounds),
                        b.reason or "",
                        _log_lines(b.log),
                        (explained or {}).get(int(b.id)),
                        (counters or {}).get(int(b.id)),
                        (waits or {}).get(int(b.id)),
                    )
                )
        culprit = r.culprit_sha
        cs, ca = commit_facts.get(culprit, ("", "")) if culprit else ("", "")
        size = None if r.prev_position is None else int(r.position) - int(r.prev_position)
        subject = commit_facts.get(r.sha, ("", ""))[0] if size == 1 else ""
        out.append(
            AlertPage(
                aid,
                safe_name(f"alert-{aid}"),
                r.branch,
                r.kind,
                r.severity,
                r.state,
                bool(r.active),
                r.sha,
                r.prev_sha,
                size,
                r.bisection_state,
                culprit,
                cs,
                ca,
                subject,
                float(r.created_at),
                float(r.updated_at),
                r.state_by,
                r.state_note,
                tuple(lv),
                tuple(HistoryView(h.at, h.old_state, h.new_state, h.by, h.note) for h in history.get(aid, [])),
                tuple(
                    DeliveryView(
                        d.channel, d.event, int(d.message_version), d.state, int(d.attempts), d.last_error, d.sent_at
                    )
                    for d in deliveries.get(aid, [])
                ),
                tuple(sorted(bv, key=lambda b: b.id)),
                tuple(u for u in (links or {}).get(aid, ()) if _web_url(u)),
            )
        )
    return out


def _web_url(url: str) -> bool:
    """Only http(s) links reach a page (the CLI refuses others; a database edited by hand may hold anything)."""
    return url.lower().startswith(("http://", "https://")) and not any(c.isspace() for c in url)


def tag_order(tags: Mapping[str, str], authored: Mapping[str, int]) -> list[str]:
    """Release tags oldest first (`refnames.release_order`; `authored`: commit sha -> time, for tags that are not
    PostgreSQL release tags)."""
    return refnames.release_order(tags, {name: authored.get(sha, 0) for name, sha in tags.items()})


MAJORS = 20  # majors on a machine's release page (Vondra's 001 drew 20 releases, 8.0 to 18dev); the rest on request
_MAJOR = re.compile(r"^REL_?(\d+)(?:_(\d+))?")


def major_of(tag: str) -> str:
    """The PostgreSQL major release a tag belongs to: REL_16_4 and REL_16_BETA1 -> 16, REL9_6_3 -> 9.6 (before
    10 a major had two numbers). A name that is not a release tag is a major of its own."""
    m = _MAJOR.match(tag)
    if m is None:
        return tag
    first = int(m.group(1))
    return str(first) if first >= 10 or m.group(2) is None else f"{first}.{m.group(2)}"


def by_major(ordered: Sequence[str], measured: Container[str]) -> dict[str, list[str]]:
    """The measured tags of `ordered` (tag_order) per major, majors oldest first, each major's tags oldest first."""
    majors: dict[str, list[str]] = {}
    for t in ordered:
        if t in measured:
            majors.setdefault(major_of(t), []).append(t)
    return majors


@dataclass(frozen=True)
class ReleaseSet:
    """The releases one machine's release page (archaeology, release tables) shows together: `name` "" for the
    machine's page (one release per major, the newest measured of it, for the newest MAJORS majors, oldest major
    first), "every-major" (past MAJORS majors: one per major, all of them) or "major-<major>" (a major measured at
    two or more tags: every one of them, its minor releases). So a page has at most MAJORS releases, or one
    major's, or one per major ever measured (on request), however many tags the farm measured."""

    name: str
    tags: tuple[str, ...]
    what: str  # what the page shows, in words
    major: str | None = None


def release_sets(majors: Mapping[str, Sequence[str]]) -> list[ReleaseSet]:
    """A machine's release pages from its tags per major (by_major): its page, every-major past MAJORS majors,
    and a page per major measured at two or more tags."""
    newest = tuple(tags[-1] for tags in majors.values())
    shown = newest[-MAJORS:]
    every = len(majors) > MAJORS
    out = [
        ReleaseSet(
            "",
            shown,
            "one release per major, the newest release measured of it, for "
            + (f"the newest {len(shown)} of the {len(majors)} majors" if every else f"all {len(shown)} majors"),
        )
    ]
    if every:
        out.append(ReleaseSet("every-major", newest, f"one release per major, all {len(majors)} majors measured"))
    for major, tags in majors.items():
        if len(tags) > 1:
            out.append(
                ReleaseSet(
                    f"major-{safe_name(major)}",
                    tuple(tags),
                    f"every release of {major} measured ({len(tags)})",
                    major,
                )
            )
    return out
