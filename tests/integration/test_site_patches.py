"""The patches page in real headless Chromium (Debian's chromium through Playwright, as
tests/integration/test_site_browser.py): the cfbot jobs of tests/patches_support.py (a hostile branch name and commit
message among them) published, opened from disk and over HTTP: one row per patch, nothing from the patches runs as
script (a dialog or a console error would), the thread and job links lead where they say."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from master.publish.serve import serve
from tests.integration.test_site_browser import Page, browser  # noqa: F401 - the module's fixture
from tests.patches_support import HOSTILE, THREAD, build_site

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def patches_site(tmp_path_factory):
    settings, ids = build_site(tmp_path_factory.mktemp("site-patches"))
    out = Path(os.path.realpath(settings.site_dir))
    url, _, server = serve(out, "127.0.0.1", 0)
    yield out, url, ids
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_the_patches_page_shows_each_patch_and_runs_nothing_from_them(patches_site, browser, artifacts_dir, scheme):  # noqa: F811
    out, url, ids = patches_site
    p = Page(browser, out.as_uri() + "/" if scheme == "file" else url)
    page = p.open("index.html")
    page.locator("nav a", has_text="Patches").click()
    page.wait_for_load_state("load")
    assert page.locator("main h1").inner_text() == "Patches"
    rows = page.locator("#patches tbody tr")
    assert rows.count() == 6
    branches = [t.split("\n")[0] for t in page.locator("#patches td.branch").all_inner_texts()]
    assert branches == ["cf/1006", "cf/1005", "cf/1003", "cf/1002", "cf/1001", HOSTILE]
    verdicts = [t.split("\n")[0].split(" (")[0] for t in page.locator("#patches td.verdict").all_inner_texts()]
    assert verdicts == ["improvement", "not measured yet", "no change", "improvement", "regression", "no change"]
    assert page.locator("a.thread").evaluate_all("as => as.map(a => a.href)") == [
        "https://commitfest.postgresql.org/patch/1002/",
        THREAD,
    ]
    p.shot(artifacts_dir, f"{scheme}-patches")
    page.locator(f'a.job[href="jobs/{ids["cf/1001"]}.html"]').click()
    page.wait_for_load_state("load")
    assert page.locator("main h1").inner_text().startswith(f"Try job {ids['cf/1001']}")
    assert page.locator(".flame svg").count() == 1  # the flame graph lives on the job's page
    assert p.errors == [] and p.dialogs == []
