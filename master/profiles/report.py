"""Explain an A/B: read the sides' kept callgrind files, diff them per function, write the table and flame graph.

Used by `perffarm compare` (terminal table and an HTML + SVG file per instruction workload) and by the farm
(profiles stored with a run or a job). The profiles are of exactly what the instruction counts counted: the same
fixed, seeded queries, collected inside `exec_simple_query` (recipes/pg/instructions.py), so the totals per
query reconcile with the measured instructions per query, and nothing about wall-clock time is in them.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from pathlib import Path

from master.profiles.diff import ProfileDiff, diff, format_table, summary
from master.profiles.flame import differential_svg
from recipes import callgrind
from recipes.callgrind import Profile

ROOT = "exec_simple_query"  # what the instruction counts collect: the flame graph starts there


@dataclass(frozen=True)
class SideProfile:
    profile: Profile
    queries: int
    parse_seconds: float


def load(path: Path) -> SideProfile | None:
    """A kept callgrind file and its query count (None when the run kept none)."""
    queries = path.with_suffix(".queries")
    if not path.exists() or not queries.exists():
        return None
    t0 = time.perf_counter()
    prof = callgrind.parse(path)
    return SideProfile(prof, int(queries.read_text().strip()), time.perf_counter() - t0)


@dataclass(frozen=True)
class Explained:
    workload: str
    a_label: str
    b_label: str
    diff: ProfileDiff
    svg: str

    def summary(self) -> str:
        return summary(self.diff)


def explain(workload: str, a_label: str, a: SideProfile, b_label: str, b: SideProfile, top: int = 20) -> Explained:
    d = diff(a.profile, b.profile, a.queries, b.queries, top=top)
    root = ROOT if ROOT in a.profile.functions and ROOT in b.profile.functions else None
    title = f"{workload}: {b_label} vs {a_label}, instructions per query (red grew, blue shrank)"
    svg = differential_svg(a.profile, b.profile, a.queries, b.queries, title, root=root)
    return Explained(workload, a_label, b_label, d, svg)


def text(e: Explained) -> str:
    return f"Where the instructions went, {e.workload} ({e.b_label} vs {e.a_label}): {e.summary()}\n" + format_table(
        e.diff
    )


def write_html(e: Explained, out_dir: Path) -> Path:
    """`<workload>-<B>-vs-<A>.html` (the table and the flame graph, offline) and the same `.svg` beside it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{e.workload}-{e.b_label}-vs-{e.a_label}"
    (out_dir / f"{stem}.svg").write_text(e.svg)
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(stem)}</title><style>body{{font-family:sans-serif;margin:1em}}"
        "pre{font-size:12px}</style></head><body>"
        f"<h1>{html.escape(e.workload)}: {html.escape(e.b_label)} vs {html.escape(e.a_label)}</h1>"
        f"<p>{html.escape(e.summary())}</p><pre>{html.escape(format_table(e.diff))}</pre>"
        f"{e.svg}</body></html>\n"
    )
    path = out_dir / f"{stem}.html"
    path.write_text(page)
    return path


@dataclass(frozen=True)
class StoredExplanation:
    """A culprit's (or a try patch's) explanation as the site and messages show it."""

    summary: str
    table: str
    svg: str
    diff: ProfileDiff


def from_stored(
    workload: str, a_label: str, a: tuple[int, dict], b_label: str, b: tuple[int, dict], top: int = 15
) -> StoredExplanation | None:
    """The explanation from two stored profiles ((queries, recipes.callgrind JSON) each); None if unreadable."""
    try:
        pa, pb = Profile.from_json(a[1]), Profile.from_json(b[1])
    except ValueError:
        return None
    e = explain(workload, a_label, SideProfile(pa, a[0], 0.0), b_label, SideProfile(pb, b[0], 0.0), top=top)
    return StoredExplanation(e.summary(), format_table(e.diff), e.svg, e.diff)


def for_bisection(conn, b) -> StoredExplanation | None:  # noqa: ANN001 (a store connection and Bisection)
    """The culprit's per-function diff against its parent, from the profiles their probe runs kept (instruction
    workloads only: a throughput bisection has none, docs/explain.md says why)."""
    from master import store

    if b.state != "culprit" or not b.culprit or not b.parent:
        return None
    culprit = store.runs.profile_of(conn, b.culprit, b.workload, b.machine_id, b.recipe)
    parent = store.runs.profile_of(conn, b.parent, b.workload, b.machine_id, b.recipe)
    if culprit is None or parent is None:
        return None
    return from_stored(
        b.workload,
        f"parent {b.parent[:12]}",
        (parent.queries, parent.profile),
        f"culprit {b.culprit[:12]}",
        (culprit.queries, culprit.profile),
    )
