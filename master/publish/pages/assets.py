"""static/ (the scripts and styles, copied from site/static) and manifest.json (what a perffarm site is
recognised by: publish time, series count, chunk size)."""

from __future__ import annotations

import datetime as dt

from master.publish.context import Context
from master.publish.render import SITE_DIR, json_document
from master.publish.source import CHUNK
from master.publish.views import Summary
from master.publish.writer import SiteWriter


def write_static(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.copy_tree(SITE_DIR / "static", "static")


def write_manifest(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write(
        "manifest.json",
        json_document(
            "site",
            {
                "published_at": dt.datetime.fromtimestamp(ctx.now, dt.UTC).isoformat(),
                "series": len(summaries),
                "chunk_size": CHUNK,
            },
        ),
    )
