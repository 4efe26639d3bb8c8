"""search.html: find a series, a workload, a machine, a branch, a tag or a commit from any page (the box in the
navigation). A static page: static/search.js matches the query against data/refs.js (every series with its
workload family, the tags, the recently tested commits), which the compare page writes; nothing new to publish."""

from __future__ import annotations

from master.publish.context import Context
from master.publish.render import render
from master.publish.views import Summary
from master.publish.writer import SiteWriter


def write(w: SiteWriter, ctx: Context, summaries: list[Summary]) -> None:
    w.write("search.html", render("search.html", root="", title="Search"))
