"""View models: everything a template shows is computed here; templates only loop and format."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from master.publish.model import Point, SeriesData
from master.publish.names import safe_name
from master.publish.ratios import Ratio
from master.publish.source import CHUNK, MeasureKey, SeriesKey

SPARK_POINTS = 120
SPARK_W, SPARK_H = 120, 24


@dataclass(frozen=True)
class RatioView:
    """A ratio as shown: number, CI text and colour band (the number is always printed)."""

    ratio: float
    low: float
    high: float
    colour: str
    base: str  # what it is relative to: a tag name or a short sha

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
        return MeasureKey(self.machine_id, self.recipe, self.recipe_version, self.config_hash, self.workload,
                          self.metric)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.vs_tag is not None:
            d["vs_tag"] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                           for k, v in asdict(self.vs_tag).items()}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Summary:
        d = dict(d)
        vt = d.pop("vs_tag")
        if vt is not None:
            vt = RatioView(**{k: (math.nan if v is None else v) for k, v in vt.items()})
        return cls(vs_tag=vt, **d)


def spark_path(points: Sequence[Point]) -> str:
    """SVG path of the medians, scaled into the sparkline box."""
    if not points:
        return ""
    ys = [p.median for p in points]
    lo, hi = min(ys), max(ys)
    span = (hi - lo) or 1.0
    n = max(len(ys) - 1, 1)
    parts = []
    for i, y in enumerate(ys):
        x = i * SPARK_W / n
        yy = SPARK_H - 2 - (y - lo) / span * (SPARK_H - 4)
        parts.append(f"{'M' if i == 0 else 'L'}{x:.1f},{yy:.1f}")
    return "".join(parts)


def tail(series: SeriesData, head: int) -> list[Point]:
    """The sparkline's points: at most SPARK_POINTS from the branch's last two chunks (same in full and
    incremental publishes, since an incremental one always loads that tail)."""
    start = max(head // CHUNK - 1, 0) * CHUNK
    return [p for p in series.points if p.position >= start][-SPARK_POINTS:]


def previous_tag(series: SeriesData, tag_at: Mapping[str, list[str]], before: int) -> tuple[str, Point] | None:
    """The newest tagged point of the series strictly before position `before`."""
    for p in reversed(series.points):
        if p.position < before and p.sha in tag_at:
            return sorted(tag_at[p.sha])[-1], p
    return None


@dataclass(frozen=True)
class Marker:
    """A vertical mark on a chart: change point, release tag, or machine/recipe change."""

    position: int
    kind: str  # regression | improvement | tag | config
    label: str


@dataclass(frozen=True)
class ChangeView:
    id: int
    sha: str
    prev_sha: str | None
    position: int
    kind: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    pvalue: float
    state: str


@dataclass(frozen=True)
class CommitRow:
    """One series at one commit on the commit page."""

    sid: str
    branch: str
    machine_id: str
    recipe: str
    recipe_version: int
    workload: str
    metric: str
    unit: str
    value: float
    lo: float
    hi: float
    n: int
    vs_parent: RatioView | None
    noisy: bool
    sla_miss: bool


@dataclass(frozen=True)
class RunView:
    id: int
    ref: str
    builder: str
    worker: str
    machine_id: str
    recipe: str
    recipe_version: int
    status: str
    source: str
    build_url: str | None
    log_excerpt: str
    noisy: bool
    ingested_at: float


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


@dataclass(frozen=True)
class AlertView:
    """An alert row from whatever alerts table exists, with the fields the site knows how to show."""

    id: str
    file: str
    title: str
    state: str
    kind: str
    sha: str | None
    culprit: str | None
    bisection: str | None
    sid: str | None
    created: float | None
    updated: float | None
    fields: tuple[tuple[str, str], ...] = field(default=())

    @property
    def is_open(self) -> bool:
        return self.state.lower() not in ("closed", "resolved", "fixed", "invalid", "wontfix", "ignored",
                                           "retracted", "accepted", "done")


_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")


def alert_view(row: Mapping[str, Any], sid_of_cp: Mapping[int, str]) -> AlertView:
    """Map an alerts row to a view without assuming more than a few likely column names."""

    def pick(*names: str) -> Any:
        for n in names:
            if n in row and row[n] is not None:
                return row[n]
        return None

    ident = str(pick("id", "alert_id", "uid") or "")
    state = str(pick("triage_state", "state", "status") or "new")
    sha = pick("sha", "first_sha", "commit")
    culprit = pick("culprit", "culprit_sha", "bisect_culprit", "bisection_culprit")
    bisection = pick("bisection_log", "bisect_log", "bisection", "bisection_state", "bisect_state")
    cp = pick("change_point_id")
    sid = sid_of_cp.get(int(cp)) if isinstance(cp, int) else None
    kind = str(pick("kind") or "")
    title = str(pick("title", "summary") or f"{kind or 'change'} at {str(sha or '')[:12]}")
    fields = tuple((str(k), "" if v is None else str(v)) for k, v in sorted(row.items()))
    return AlertView(ident, safe_name(f"alert-{ident}"), title, state, kind,
                     str(sha) if sha and _SHA.match(str(sha)) else None,
                     str(culprit) if culprit and _SHA.match(str(culprit)) else (str(culprit) if culprit else None),
                     None if bisection is None else str(bisection), sid, _num(pick("created_at", "first_seen")),
                     _num(pick("updated_at", "triaged_at", "created_at", "first_seen")), fields)


def _num(v: Any) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def series_label(key: SeriesKey) -> str:
    m = key.measure
    return f"{m.workload} · {m.metric} · {key.branch} · {m.machine_id} · {m.recipe} v{m.recipe_version}"


def tag_order(tags: Mapping[str, str], authored: Mapping[str, int]) -> list[str]:
    """Release tags oldest first: by commit date, then by the numbers in the name."""

    def key(name: str) -> tuple:
        nums = tuple(int(x) for x in re.findall(r"\d+", name))
        return (authored.get(tags[name], 0), nums, name)

    return sorted(tags, key=key)
