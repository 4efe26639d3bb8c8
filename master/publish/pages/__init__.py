"""Every file of the site, by page: one module per page, one line per writer in PAGES.

A page is a template in site/ (data files have none), a view-model function in its module here (what the
template shows, computed; templates only loop and format) and a writer, registered with one line in PAGES. The
publisher (master/publish/publisher.py) reads PAGES: a full publish calls every writer for everything, an
incremental one calls each scope's writers for what one run changed. Nothing else names a page.

Each writer is `write(w, ctx, ...)`, w the SiteWriter of the new version and ctx the publish's Context; its scope
says when it is called and with what else:

| scope  | called for                                             | further arguments                      |
|--------|--------------------------------------------------------|----------------------------------------|
| SITE   | once per publish                                       | summaries: every series' Summary       |
| SERIES | every series whose page key (Page.key) differs from    | summ: the series' Summary, siblings:   |
|        | the last publish's (markers, siblings, change points)  | views.siblings_of(summaries)[summ.sid] |
| CHUNKS | each series whose points changed, its chunks lo..hi    | s: SiteSeries, lo_chunk, hi_chunk      |
| COMMIT | each commit whose data changed                         | sha, rows: JSON text (commits.rows),   |
|        |                                                        | runs: context.run_views(...)[sha]      |
| BRANCH | each branch with new positions (all of them in a full  | branch, order: [(position, sha)] from  |
|        | publish)                                               | a chunk boundary on                    |

SITE and BRANCH writers run in the publishing process and may read the results DB (ctx.conn) and the ratio
cache (ctx.cache). SERIES, CHUNKS and COMMIT writers may run in the forked second process of a full publish:
they use only what the Context loaded. `when=TAGS` (SITE pages only): an incremental publish calls the writer
only when a tag changed or the run is at a tagged commit; otherwise the live version's files stay (hard-linked).
`when=JOBS`: written by a full publish and by publish_jobs when a job finishes (with the when=TAGS pages).
SITE writers may render by key too: the overview's machine pages and the alert pages keep a digest of each page's
view model in ctx.new_page_keys (the publish state keeps them) and skip a page whose digest is ctx.page_keys' (the
last publish's; None: render every one). Pages per machine (overview/<machine>.html, archaeology/<machine>*.html)
are written by their SITE writer; a
run's incremental publish sets ctx.machines to the run's machine (None when a tag changed: every machine), and
the archaeology writer re-renders that machine's pages only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from master.publish.pages import (
    alerts,
    archaeology,
    assets,
    branches,
    commit,
    compare,
    coverage,
    feed,
    health,
    jobs,
    overview,
    patches,
    releases,
    search,
    series,
    series_data,
)


class Scope(enum.Enum):
    SITE = "site"
    SERIES = "series"
    CHUNKS = "chunks"
    COMMIT = "commit"
    BRANCH = "branch"


class When(enum.Enum):
    EVERY = "every publish"
    TAGS = "a tag or the samples at a tagged commit changed"
    JOBS = "a job finished (publish_jobs; also a full publish)"


@dataclass(frozen=True)
class Page:
    name: str
    scope: Scope
    write: Callable[..., None]
    when: When = When.EVERY
    # SERIES pages: a digest of everything the page's files are made from (its view model), same arguments as
    # `write`. An incremental publish writes the page only when it differs from the last publish's (docs/scale.md).
    key: Callable[..., str] | None = None
    # the HTML file written as a page that says what went wrong when the writer raises (master/publish/isolate.py):
    # a name, or for a SERIES page a function of `write`'s arguments after the writer; None: data files only
    file: str | Callable[..., str] | None = None

    def file_of(self, *args: object) -> str | None:
        """This call's file (`args`: write's arguments after the writer and the context)."""
        return self.file(*args) if callable(self.file) else self.file


SITE, SERIES, CHUNKS, COMMIT, BRANCH = Scope
EVERY, TAGS, JOBS = When

PAGES: tuple[Page, ...] = (
    Page("series chunks", CHUNKS, series_data.write),
    Page("series", SERIES, series.write, key=series.key, file=series.file),
    Page("commit data", COMMIT, commit.write),
    Page("branch commit facts", BRANCH, branches.write),
    Page("overview", SITE, overview.write, file="index.html"),
    Page("compare", SITE, compare.write, file="compare.html"),
    Page("search", SITE, search.write, file="search.html"),
    Page("releases", SITE, releases.write, when=TAGS, file="releases.html"),
    Page("release archaeology", SITE, archaeology.write, when=TAGS, file="archaeology.html"),
    Page("jobs", SITE, jobs.write, when=JOBS, file="jobs.html"),
    Page("patches", SITE, patches.write, when=JOBS, file="patches.html"),
    Page("alerts", SITE, alerts.write, file="alerts.html"),
    Page("alerts feed", SITE, feed.write),
    Page("health", SITE, health.write, file="health.html"),
    Page("coverage", SITE, coverage.write, file="coverage.html"),
    Page("static assets", SITE, assets.write_static),
    Page("manifest", SITE, assets.write_manifest),
)


def of(scope: Scope, tags_changed: bool = True, full: bool = False) -> list[Page]:
    """The pages of a scope, in PAGES order: all of them for a full publish; for a run's incremental one without
    the when=JOBS ones (a run changes no job) and, with tags_changed=False, without the when=TAGS ones."""
    if full:
        return [p for p in PAGES if p.scope is scope]
    return [p for p in PAGES if p.scope is scope and p.when is not JOBS and (tags_changed or p.when is EVERY)]


def of_bisections() -> list[Page]:
    """What an ended bisection changes: the pages that show its state, culprit and the culprit's profile."""
    return [p for p in PAGES if p.scope is SITE and p.write in (alerts.write, feed.write)]


def of_health() -> list[Page]:
    """What a refused or newly connected worker changes (master/workerlink.py): the farm health page."""
    return [p for p in PAGES if p.scope is SITE and p.write is health.write]


def of_jobs() -> list[Page]:
    """What a finished job changes: its own pages and the release pages that read jobs' paired numbers."""
    return [p for p in PAGES if p.scope is SITE and p.when in (TAGS, JOBS)]
