"""The compare page in Debian's headless Chromium: its statistics are the farm's (checked against
master.detect.rqps and master.detect.fdr), and sorting, filtering, grouping and the URL round trip work, opened from
disk (file://) and over HTTP. Screenshots go to test-artifacts/<test>/."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from master.detect.fdr import benjamini_hochberg
from master.detect.rqps import _median_support, median_ratio_many
from master.publish import publish_all
from master.publish.serve import serve
from tests.compare_support import BASE_TAG, EXPECTED, HOSTILE, NEW_TAG, build_compare
from tests.integration.test_site_browser import Page, browser  # noqa: F401 - the module's Chromium fixture

pytestmark = pytest.mark.integration
NOW = 1_800_000_000.0
RATIOS = "() => [...document.querySelectorAll('#result tbody tr[data-sid] td.ratio')].map(td => td.textContent)"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site-compare")
    settings, shas = build_compare(tmp / "data")
    out = tmp / "www"
    publish_all(settings, out, now=NOW)
    url, _, server = serve(out, "127.0.0.1", 0)
    yield shas, Path(os.path.realpath(out)), url
    server.shutdown()
    server.server_close()


def base_url(site, scheme: str) -> str:
    _, out, url = site
    return out.as_uri() + "/" if scheme == "file" else url


def shown(page) -> list[tuple[str, str]]:
    """(label, verdict) of every series row, in the order shown."""
    return page.evaluate(
        """() => [...document.querySelectorAll('#result tbody tr[data-sid]')].map(
            tr => [tr.querySelector('td a').textContent, tr.dataset.verdict])"""
    )


def workload(label: str) -> str:
    return label.rsplit(" · ", 1)[0]


def exact_pvalue(base: list[float], new: list[float]) -> float:
    """The bootstrap p-value of "no change" the page computes, from the exact distribution rqps uses."""
    b, x = np.sort(base), np.sort(new)
    bi, bj, bp = _median_support(len(b))
    xi, xj, xp = _median_support(len(x))
    r = ((x[xi] + x[xj]) / 2)[:, None] / ((b[bi] + b[bj]) / 2)[None, :]
    w = xp[:, None] * bp[None, :]
    below, above = w[r <= 1].sum() / w.sum(), w[r >= 1].sum() / w.sum()
    return min(1.0, 2 * min(below, above))


def test_the_pages_statistics_are_the_farms(site, browser, artifacts_dir):  # noqa: F811
    p = Page(browser, base_url(site, "http"))
    page = p.open("compare.html")
    rng = np.random.default_rng(7)
    cases = []
    for nb, nx in [(2, 2), (3, 5), (5, 5), (6, 4), (7, 7), (10, 9), (12, 12), (34, 33)]:
        for shift in (1.0, 1.004, 0.9):
            b = (1000 * (1 + rng.normal(0, 0.01, nb))).tolist()
            x = (1000 * shift * (1 + rng.normal(0, 0.01, nx))).tolist()
            cases.append((b, x))
    cases.append(([5.0, 5.0, 5.0], [5.0, 5.0, 6.0]))  # ties, and ratios of exactly 1
    cases.append(([1.0, 2.0], [0.0, 0.0]))  # a new median of 0: a ratio of 0
    got = page.evaluate("cases => cases.map(c => perffarm.stats.ratioEstimate(c[0], c[1], 0.95))", cases)
    want = median_ratio_many(cases)
    for (b, x), g, (ratio, low, high) in zip(cases, got, want):
        assert g["ratio"] == pytest.approx(ratio, rel=1e-12)
        if np.isnan(low):
            assert g["low"] is None and g["p"] is None
            continue
        assert (g["low"], g["high"]) == pytest.approx((low, high), rel=1e-12), (b, x)
        assert g["p"] == pytest.approx(exact_pvalue(b, x), abs=1e-9), (b, x)
    assert page.evaluate("() => perffarm.stats.ratioEstimate([0, 0], [1, 2], 0.95)") is None  # no ratio
    ps = rng.uniform(0, 0.06, 40).tolist() + [0.0, 0.0, 1.0]
    for q in (0.05, 0.2):
        marks = page.evaluate(f"ps => perffarm.stats.discoveries(ps, {q})", ps)
        assert marks == benjamini_hochberg(ps, q).tolist()
    assert p.errors == [] and p.dialogs == []


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_sort_filter_group_and_the_url_round_trip(site, browser, artifacts_dir, scheme):  # noqa: F811
    p = Page(browser, base_url(site, scheme))
    page = p.open(f"compare.html?base={BASE_TAG}&new={NEW_TAG}")  # a shared link: compared on load
    page.wait_for_selector("body[data-ready='1']")
    rows = shown(page)
    assert {workload(label): v for label, v in rows} == EXPECTED
    # default order: regressions first, then improvements, then the rest; the biggest change first within each
    assert [workload(label) for label, _ in rows[:3]] == ["latency-c1", "pgbench-ro-c1", "pgbench-rw-c1"]
    assert (
        page.inner_text("#summary")
        == "2 regressions, 1 improvement, 4 unchanged, 1 without a verdict (8 series measured at both)"
    )
    cells = page.locator("#result tbody tr[data-verdict='regression']").nth(1).locator("td")  # pgbench-ro-c1
    assert re.fullmatch(r"0\.9\d\d ▼", cells.nth(5).inner_text()) and "cell-red" in cells.nth(5).get_attribute("class")
    assert re.fullmatch(r"\[0\.[89]\d\d, 0\.9\d\d\]", cells.nth(6).inner_text())
    assert HOSTILE in [workload(label) for label, _ in rows]  # text, not markup
    p.shot(artifacts_dir, f"compare-{scheme}")

    page.click("#result thead button[data-sort='ratio']")
    ratios = page.evaluate(
        "() => [...document.querySelectorAll('#result tbody tr[data-sid] td.ratio')].map(td => td.textContent)"
    )
    values = [float(t.split()[0]) for t in ratios]
    assert values == sorted(values)
    page.focus("#result thead button[data-sort='ratio']")
    page.keyboard.press("Enter")  # the headers are buttons: sorting works from the keyboard
    ratios = page.evaluate(
        "() => [...document.querySelectorAll('#result tbody tr[data-sid] td.ratio')].map(td => td.textContent)"
    )
    assert [float(t.split()[0]) for t in ratios] == sorted(values, reverse=True)
    assert page.get_attribute("#result thead th:has(button[data-sort='ratio'])", "aria-sort") == "descending"

    page.select_option("#show", "regressions")
    assert sorted(workload(label) for label, _ in shown(page)) == ["latency-c1", "pgbench-ro-c1"]
    page.select_option("#show", "changed")
    assert len(shown(page)) == 3
    page.select_option("#group", "family")
    groups = page.evaluate("() => [...document.querySelectorAll('#result tbody tr.group')].map(tr => tr.dataset.group)")
    assert groups == ["latency", "pgbench-ro", "pgbench-rw"]
    assert "1 regression" in page.inner_text("#result tbody tr.group[data-group='pgbench-ro']")
    p.shot(artifacts_dir, f"compare-grouped-{scheme}")

    state = parse_qs(urlsplit(page.url).query)
    assert state == {
        "base": [BASE_TAG],
        "new": [NEW_TAG],
        "show": ["changed"],
        "sort": ["ratio"],
        "dir": ["desc"],
        "group": ["family"],
    }
    again = Page(browser, "")
    view = again.open(page.url)  # the link restores the whole view
    view.wait_for_selector("body[data-ready='1']")
    assert shown(view) == shown(page)
    assert view.input_value("#show") == "changed" and view.input_value("#group") == "family"
    assert view.input_value("#base") == BASE_TAG and view.input_value("#new") == NEW_TAG
    assert p.errors == [] and p.dialogs == [] and again.errors == [] and again.dialogs == []


def test_a_new_comparison_from_the_form_is_written_to_the_url(site, browser, artifacts_dir):  # noqa: F811
    shas, _, _ = site
    p = Page(browser, base_url(site, "http"))
    page = p.open("compare.html")
    page.fill("#base", shas[1][:10])  # an unambiguous prefix of a recently tested commit is not enough here:
    page.fill("#new", NEW_TAG)
    page.click("#compare button[type=submit]")
    assert "Unknown " + shas[1][:10] in page.inner_text("#status")
    page.fill("#base", shas[1])  # a full sha is
    page.click("#compare button[type=submit]")
    page.wait_for_selector("body[data-ready='1']")
    assert parse_qs(urlsplit(page.url).query) == {"base": [shas[1]], "new": [NEW_TAG]}
    assert {workload(label): v for label, v in shown(page)} == EXPECTED
    page.fill("#base", "0" * 40)
    page.click("#compare button[type=submit]")
    page.wait_for_function("() => document.getElementById('status').textContent.startsWith('No published')")
    assert page.locator("#result").is_hidden()
    assert p.dialogs == []


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_a_commit_page_links_to_its_comparison_with_its_parent(site, browser, artifacts_dir, scheme):  # noqa: F811
    shas, _, _ = site
    p = Page(browser, base_url(site, scheme))
    page = p.open(f"commit.html?c={shas[2]}")
    page.wait_for_selector("body[data-ready='1']")
    page.click("a.compare-parent")
    page.wait_for_selector("body[data-ready='1']")
    assert parse_qs(urlsplit(page.url).query) == {"base": [shas[1]], "new": [shas[2]]}
    assert {workload(label): v for label, v in shown(page)} == EXPECTED
    page = p.open(f"commit.html?c={shas[0]}")  # the first commit has no parent: no link
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("a.compare-parent").count() == 0
    assert p.errors == [] and p.dialogs == []


def series_id(out: Path, workload_name: str) -> str:
    text = (out / "data/refs.js").read_text()
    refs = json.loads(text[len("perffarm.refs(") : -3])
    return next(sid for sid, s in refs["series"].items() if s["label"].startswith(workload_name + " · "))


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_chart_ticks_are_round_and_a_click_compares_a_point_with_the_previous(site, browser, artifacts_dir, scheme):  # noqa: F811
    shas, out, _ = site
    p = Page(browser, base_url(site, scheme))
    page = p.open(f"series/{series_id(out, 'pgbench-ro-c1')}.html")
    page.wait_for_selector("#chart[data-ready='1']")
    ticks = page.evaluate("() => perffarm.chart.yTicks()")
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(ticks) >= 3 and len(steps) == 1, ticks
    (step,) = steps
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 9) in (1, 2, 5) and all(round(t / step, 9).is_integer() for t in ticks), ticks
    x = page.evaluate("() => perffarm.chart.clientXOf(2)")
    y = page.evaluate("() => perffarm.chart.clientYOf(perffarm.chart.positions.indexOf(2))")
    page.mouse.move(x, y)
    page.wait_for_selector("#tip:not([hidden])")
    page.mouse.click(x, y)
    page.wait_for_url(re.compile(r".*/compare\.html\?.*"))
    page.wait_for_selector("body[data-ready='1']")
    assert parse_qs(urlsplit(page.url).query) == {"base": [shas[1]], "new": [shas[2]]}
    assert {workload(label): v for label, v in shown(page)} == EXPECTED
    assert p.errors == [] and p.dialogs == []


def test_dark_mode_follows_the_systems_setting(site, browser, artifacts_dir):  # noqa: F811
    colours = {}
    for scheme in ("light", "dark"):
        page = browser.new_page(color_scheme=scheme, viewport={"width": 1280, "height": 700})
        page.goto(base_url(site, "http") + f"compare.html?base={BASE_TAG}&new={NEW_TAG}&group=family")
        page.wait_for_selector("body[data-ready='1']")
        colours[scheme] = page.evaluate(
            "() => [getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]"
        )
        page.screenshot(path=str(artifacts_dir / f"compare-{scheme}.png"), full_page=True)
        page.close()
    assert colours["light"] == ["rgb(255, 255, 255)", "rgb(29, 29, 31)"]
    assert colours["dark"] == ["rgb(22, 24, 27)", "rgb(230, 230, 230)"]


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_the_search_box_finds_series_tags_and_commits(site, browser, artifacts_dir, scheme):  # noqa: F811
    shas, out, _ = site
    p = Page(browser, base_url(site, scheme))
    page = p.open("compare.html")
    page.fill("header.top input[name=q]", "pgbench ro")  # every word must match
    page.press("header.top input[name=q]", "Enter")
    page.wait_for_url(re.compile(r".*/search\.html\?q=pgbench\+ro$"))
    page.wait_for_selector("body[data-ready='1']")
    labels = page.evaluate("() => [...document.querySelectorAll('#series tbody a')].map(a => a.textContent)")
    assert labels == ["pgbench-ro-c1 · tps", "pgbench-ro-c8 · tps"]
    assert page.input_value("header.top input[name=q]") == "pgbench ro"
    page.click("#series tbody a >> nth=0")
    page.wait_for_selector("#chart[data-ready='1']")
    assert urlsplit(page.url).path.endswith(f"series/{series_id(out, 'pgbench-ro-c1')}.html")

    page = p.open("search.html?q=REL_1")  # a tag, linked to its commit
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#commits a").all_inner_texts() == [BASE_TAG]
    assert page.get_attribute("#commits a", "href") == f"commit.html?c={shas[0]}"
    page = p.open(f"search.html?q={shas[1]}")  # a full sha
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#commits a").all_inner_texts() == [shas[1]]
    page = p.open("search.html?q=onerror")  # a hostile workload name is found and shown as text
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#series tbody a").all_inner_texts() == [HOSTILE + " · tps"]
    assert page.locator("main img").count() == 0
    p.shot(artifacts_dir, f"search-{scheme}")
    assert p.errors == [] and p.dialogs == []


def test_a_commit_page_links_its_parent(site, browser, artifacts_dir):  # noqa: F811
    shas, _, _ = site
    p = Page(browser, base_url(site, "http"))
    page = p.open(f"commit.html?c={shas[2]}")
    page.wait_for_selector("body[data-ready='1']")
    page.click("a.parent")
    page.wait_for_url(re.compile(f".*c={shas[1]}$"))
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#facts .sha").first.inner_text() == shas[1]
    assert p.errors == [] and p.dialogs == []
