"""The search page finds commits by the words of their subject or author, in real headless Chromium (Debian's
chromium through Playwright, as tests/integration/test_site_browser.py).

Two histories: the farm of tests/site_support.py (real git repository and ingest, hostile subjects and author), and
a long one stored through master.store (7,500 commits on master, one of them measured), so that the newest commits
are searched first and older ones on request.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from master import store
from master.publish import publish_all
from master.publish.serve import serve
from master.store import CommitInfo, RunContext
from tests.integration.test_site_browser import Page, browser, site  # noqa: F401 - the module's fixtures
from tests.site_support import XSS_IMG, result_doc, settings_for

pytestmark = pytest.mark.integration

NOW = 1_800_000_000.0
LONG = 7_500  # commits: chunks 0..7 of branch positions (1,000 each); the page first reads the newest six
OLD_NEEDLE, NEW_NEEDLE = 5, 7_400


@pytest.fixture(scope="module")
def long_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site-search")
    settings = settings_for(tmp / "data", tmp / "no-repo")
    shas = [f"{0x5EA6C4 + i:040x}" for i in range(LONG)]
    subject = {OLD_NEEDLE: "fix the old needle in the planner", NEW_NEEDLE: "fix a new needle in the executor"}
    commits = [
        CommitInfo(sha, subject.get(i, f"commit {i}"), "A <a@x>", 1_700_000_000 + i * 60, 1_700_000_000 + i * 60,
                   (shas[i - 1],) if i else ())
        for i, sha in enumerate(shas)
    ]  # fmt: skip
    conn = store.connect(settings.results_db)
    with store.transaction(conn):
        store.upsert_commits(conn, commits)
        store.append_branch(conn, "master", commits, 0)
        store.insert_run(conn, result_doc(shas[-1], {"pgbench": [1000.0, 1001.0, 999.0]}),
                         RunContext("fixture@local", "local", "poll", 1))  # fmt: skip
    conn.close()
    out = tmp / "www"
    publish_all(settings, out, now=NOW)
    url, _, server = serve(out, "127.0.0.1", 0)
    yield shas, Path(os.path.realpath(out)), url
    server.shutdown()
    server.server_close()


def subjects(page) -> list[str]:
    page.wait_for_selector("body[data-subjects='1']")
    return page.locator("#subjects li").all_inner_texts()


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_commits_are_found_by_subject_and_author_as_text(site, browser, artifacts_dir, scheme):  # noqa: F811
    farm, out, url = site
    p = Page(browser, out.as_uri() + "/" if scheme == "file" else url)
    page = p.open("search.html?q=slower")
    (hit,) = subjects(page)
    assert hit.startswith(f"{farm.culprit[:12]} make it slower {XSS_IMG} · Test Er · ")
    assert hit.endswith(" · master")
    assert page.get_attribute("#subjects a", "href") == f"commit.html?c={farm.culprit}"
    assert page.locator("main img").count() == 0  # the hostile subject is text
    page = p.open("search.html?q=Change+1")  # every word, anywhere, any case; newest (by branch position) first
    found = [h.split(" ")[2] for h in subjects(page)]
    assert found == ["21", "19", "18", "17", "16", "15", "14", "12", "11", "10", "1"]  # 13 is "make it slower"
    page = p.open("search.html?q=mallory")  # an author (the name only: no address is published)
    (hit,) = subjects(page)
    assert hit.startswith(f"{farm.shas[7][:12]} change 7 · Mallory")
    assert page.locator("main img").count() == 0
    assert page.is_hidden("#older")  # the whole branch fits in the newest chunks
    assert "every commit of every branch" in page.inner_text("#subject-status")
    page = p.open("search.html?q=no+such+words")
    assert subjects(page) == []
    p.shot(artifacts_dir, f"search-subjects-{scheme}")
    assert p.errors == [] and p.dialogs == []


def test_the_newest_commits_are_searched_first_and_older_ones_on_request(long_site, browser, artifacts_dir):  # noqa: F811
    shas, _, url = long_site
    p = Page(browser, url)
    page = p.open("search.html?q=needle")
    assert subjects(page) == [f"{shas[NEW_NEEDLE][:12]} fix a new needle in the executor · A · 2023-11-20 · master"]
    assert page.get_attribute("#subjects", "data-searched") == "5500"  # chunks 7..2: positions 2,000..7,499
    loaded = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    assert len([x for x in loaded if "/data/branches/" in x]) == 6
    assert "older commits are not searched yet" in page.inner_text("#subject-status")
    page.evaluate("() => { document.body.dataset.subjects = ''; }")
    page.click("#older")
    found = subjects(page)
    assert [h[:12] for h in found] == [shas[NEW_NEEDLE][:12], shas[OLD_NEEDLE][:12]]  # newest first
    assert page.get_attribute("#subjects", "data-searched") == str(LONG)
    assert page.is_hidden("#older")
    assert page.inner_text("#subject-status").startswith("2 of the newest 7,500 commits match")
    p.shot(artifacts_dir, "search-older")
    assert p.errors == [] and p.dialogs == []
