"""coverage.html: how much of the backend the instruction workloads exercise, per machine and recipe.

The figure is the one the newest run reported (result member `coverage`, recipes/pg/coverage.py): of the backend
binary's functions, those holding at least 0.01% of some instruction workload's instructions, overall and per
source area, and which of the named functions (recipes/pg/coverage-functions.json) are among them. Beside the
whole profile's figure, the page shows the oltp group's alone: the three instr-* workloads the farm counted before
the operation suite (docs/coverage.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from master import store
from master.publish.context import Context
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter
from recipes.pg import coverage

BEFORE = "oltp"  # the instruction workloads of the quick profile before the operation suite


@dataclass(frozen=True)
class Share:
    hit: int
    total: int

    @property
    def percent(self) -> float:
        return 100.0 * self.hit / self.total if self.total else 0.0


@dataclass(frozen=True)
class AreaRow:
    area: str
    after: Share
    before: Share | None


@dataclass(frozen=True)
class Named:
    category: str
    name: str
    after: bool
    before: bool | None


@dataclass(frozen=True)
class Figure:
    """One (machine, recipe)'s newest coverage figure, as the page shows it."""

    machine_id: str
    recipe: str
    recipe_version: int
    ref: str
    sha: str
    finished_at: str | None
    rule: float
    after: Share
    before: Share | None
    named_after: Share
    named_before: Share | None
    areas: tuple[AreaRow, ...]
    named: tuple[Named, ...]


def _share(pair: Any) -> Share:
    return Share(int(pair[0]), int(pair[1]))


def figure(c: store.runs.StoredCoverage, categories: dict[str, list[str]]) -> Figure | None:
    groups = c.doc.get("groups", {})
    after = groups.get(coverage.ALL)
    if after is None:
        return None
    before = groups.get(BEFORE)
    listed = int(c.doc.get("listed", 0))
    areas = []
    for area, pair in sorted(after["areas"].items(), key=lambda kv: (-kv[1][1], kv[0])):
        old = before["areas"].get(area) if before else None
        areas.append(AreaRow(area, _share(pair), _share(old) if old else None))
    hit_after, hit_before = set(after["listed"]), set(before["listed"]) if before else None
    named = tuple(
        Named(cat, name, name in hit_after, None if hit_before is None else name in hit_before)
        for cat, names in categories.items()
        for name in names
    )
    return Figure(
        c.machine_id,
        c.recipe,
        c.recipe_version,
        c.ref,
        c.sha,
        c.finished_at,
        float(c.doc.get("rule", coverage.RULE)),
        _share(after["functions"]),
        _share(before["functions"]) if before else None,
        Share(len(hit_after), listed),
        Share(len(hit_before), listed) if hit_before is not None else None,
        tuple(areas),
        named,
    )


def view(ctx: Context) -> dict[str, Any]:
    categories = coverage.listed_by_category()
    figures = [f for c in store.runs.newest_coverage(ctx.conn) if (f := figure(c, categories)) is not None]
    return {"figures": figures, "before": BEFORE}


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write(
        "coverage.html",
        render("coverage.html", root="", title="Coverage", machines_about=ctx.machine_views, **view(ctx)),
    )
