"""search.html: find a series, a workload, a machine, a branch, a tag or a commit from any page (the box in the
navigation). A static page: static/search.js matches the query against data/refs.js (every series with its
workload family, the tags, the recently tested commits), which the compare page writes, and commit subjects and
authors against the branches' commit facts (data/branches/<branch>/<chunk>.js, which the charts' hovers read),
newest chunks first; the page names each branch's file and head position, so nothing else is published for it."""

from __future__ import annotations

from master.publish.context import Context
from master.publish.names import safe_name
from master.publish.render import render
from master.publish.source import CHUNK
from master.publish.views import Summary
from master.publish.writer import SiteWriter
from master.textsafe import visible


def view(ctx: Context) -> dict[str, object]:
    """The branches whose commit facts the page searches: [name, file name, head position], and the chunk size."""
    return {
        "branches": [[visible(b), safe_name(b), head] for b, head in sorted(ctx.heads.items())],
        "chunk_size": CHUNK,
    }


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write("search.html", render("search.html", root="", title="Search", facts=view(ctx)))
