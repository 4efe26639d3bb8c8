"""data/branches/<branch>/<chunk>.js: commit facts (sha, subject, author, date) per branch position, which a
chart loads when a point is hovered."""

from __future__ import annotations

from typing import Any

from master.publish.context import Context
from master.publish.names import safe_name
from master.publish.render import author_name, js_call
from master.publish.source import CHUNK
from master.publish.writer import SiteWriter


def view(ctx: Context, order: list[tuple[int, str]]) -> dict[int, list[Any]]:
    """chunk -> [sha, subject, author, authored_at] per position of the chunk (None where `order` has none),
    trailing gaps dropped."""
    by_chunk: dict[int, list[Any]] = {}
    for pos, sha in order:
        k = pos // CHUNK
        rows = by_chunk.setdefault(k, [None] * CHUNK)
        c = ctx.commits.get(sha)
        rows[pos - k * CHUNK] = [
            sha,
            c.subject if c else "",
            author_name(c.author) if c else "",
            c.authored_at if c else 0,
        ]
    for rows in by_chunk.values():
        while rows and rows[-1] is None:
            rows.pop()
    return by_chunk


def write(w: SiteWriter, ctx: Context, branch: str, order: list[tuple[int, str]]) -> None:
    """Commit facts for hovering a chart, one script per chunk of branch positions (`order` chunk-aligned)."""
    for k, rows in view(ctx, order).items():
        w.write(f"data/branches/{safe_name(branch)}/{k}.js", js_call("commits", safe_name(branch), k, rows))
