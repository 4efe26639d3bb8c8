"""The published site in a real browser: Debian's headless Chromium driven by Playwright (never a downloaded one).

The site is rendered from a results DB filled by the real ingest path (tests/site_support.py), then opened from
disk (file://) and through master.publish.serve. Screenshots go to test-artifacts/<test>/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from master.publish import publish_all
from master.publish.serve import serve
from tests.site_support import (
    ARCHAEOLOGY_TAGS,
    MESSAGE_AT,
    XSS_IMG,
    XSS_SCRIPT,
    add_analytic_release_job,
    build_archaeology,
    build_farm,
)
from tests.unit.test_result_schema import MACHINE_ID as M

pytestmark = pytest.mark.integration

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
playwright = pytest.importorskip(
    "playwright.sync_api", reason="playwright is in the test extra (pip install -e '.[test]')"
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site-browser")
    farm = build_farm(tmp)
    out = tmp / "www"
    publish_all(farm.settings, out, now=NOW)
    url, _, server = serve(out, "127.0.0.1", 0)
    yield farm, Path(os.path.realpath(out)), url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed: `make test` installs it (scripts/apt-packages-site.txt)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Page:
    """A page that records console errors, page errors, failed requests and dialogs (an XSS would fire one)."""

    def __init__(self, browser, base: str) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.set_default_timeout(10_000)
        self.base = base
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on(
            "console", lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, rel: str):
        self.page.goto(self.base + rel, wait_until="load")
        return self.page

    def shot(self, artifacts: Path, name: str) -> None:
        self.page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def bases(site):
    _, out, url = site
    return [("file", out.as_uri() + "/"), ("http", url)]


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_every_page_loads_without_errors(site, browser, artifacts_dir, scheme):
    base = dict(bases(site))[scheme]
    _, out, _ = site
    p = Page(browser, base)
    pages = [
        "index.html",
        "releases.html",
        "archaeology.html",
        "compare.html",
        "search.html",
        "search.html?q=pgbench",
        "alerts.html",
        "health.html",
        *sorted(str(x.relative_to(out)) for x in out.glob("overview/*.html")),
        *sorted(str(x.relative_to(out)) for x in out.glob("archaeology/**/*.html")),
        *sorted(str(x.relative_to(out)) for x in out.glob("alerts/*.html")),
        *sorted(str(x.relative_to(out)) for x in out.glob("series/*.html"))[:1],
        *sorted(str(x.relative_to(out)) for x in out.glob("releases/**/*.html")),
    ]
    for rel in pages:
        page = p.open(rel)
        assert page.locator("main h1").count() == 1, rel
        p.shot(artifacts_dir, f"{scheme}-{rel.replace('/', '_')}")
    assert p.errors == [] and p.dialogs == []


def test_chart_renders_and_hover_shows_the_commit(site, browser, artifacts_dir):
    farm, out, url = site
    sid = json.loads((out / "data/refs.js").read_text()[len("perffarm.refs(") : -3])
    series = next(s for s, v in sid["series"].items() if v["label"].startswith("pgbench"))
    p = Page(browser, url)
    page = p.open(f"series/{series}.html")
    page.wait_for_selector("#chart[data-ready='1']")
    visible = int(page.get_attribute("#chart", "data-visible"))
    assert visible >= 20
    # the chart's values (fixed-point in the page data) are the medians of the tool JSON
    chunk = json.loads((out / f"data/series/{series}/0.json").read_text())
    assert page.evaluate("() => perffarm.chart.medians.slice(0, 5)") == pytest.approx(chunk["median"][:5], rel=1e-12)
    # the canvas really has the median line drawn: some non-white pixels in the plot area
    inked = page.evaluate("""() => { const c = document.getElementById('chart'), g = c.getContext('2d');
        const d = g.getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] && (d[i] < 200 || d[i + 2] < 200)) n++; return n; }""")
    assert inked > 500
    # hover the point of the commit with the hostile subject (commit 3 of the branch)
    pos = 3
    x = page.evaluate(f"() => perffarm.chart.clientXOf({pos})")
    i = page.evaluate(f"() => perffarm.chart.positions.indexOf({pos})")
    y = page.evaluate(f"() => perffarm.chart.clientYOf({i})")
    page.mouse.move(x, y)
    page.wait_for_selector(".tip-subject")
    tip = page.inner_text("#tip")
    assert farm.shas[3][:12] in tip and XSS_IMG in tip  # shown as text, not as an element
    assert "ops/s" in tip and "median of" in tip
    assert page.locator("#tip img").count() == 0
    p.shot(artifacts_dir, "series-hover")
    # zoom in with the wheel: fewer points visible
    page.mouse.wheel(0, -600)
    page.wait_for_timeout(100)
    assert int(page.get_attribute("#chart", "data-visible")) < visible
    # the table of points below, and raw samples on demand
    page.locator("#points tbody tr button").first.click()
    page.wait_for_selector("td.samples")
    assert re.search(r"\d", page.inner_text("td.samples"))
    assert p.errors == [] and p.dialogs == []


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_the_charts_zoom_is_in_the_url_and_the_keyboard_drives_it(site, browser, artifacts_dir, scheme):
    _, out, _ = site
    refs = json.loads((out / "data/refs.js").read_text()[len("perffarm.refs(") : -3])
    sid = next(s for s, v in refs["series"].items() if v["label"].startswith("pgbench"))
    p = Page(browser, dict(bases(site))[scheme])
    rel = f"series/{sid}.html"
    page = p.open(rel)
    page.wait_for_selector("#chart[data-ready='1']")
    full = page.evaluate("() => perffarm.chart.view()")
    page.focus("#chart")
    page.keyboard.press("+")
    page.wait_for_selector("#chart[data-url]")
    zoomed = page.evaluate("() => perffarm.chart.view()")
    assert zoomed[1] - zoomed[0] < full[1] - full[0]
    query = parse_qs(urlsplit(page.url).query)
    assert [float(query["from"][0]), float(query["to"][0])] == pytest.approx(zoomed, abs=0.006)
    again = Page(browser, "")
    view = again.open(page.url)  # the link opens the same zoom
    view.wait_for_selector("#chart[data-ready='1']")
    assert view.evaluate("() => perffarm.chart.view()") == pytest.approx(zoomed, abs=0.006)
    view.focus("#chart")
    view.keyboard.press("0")  # everything again: the address loses from/to
    view.wait_for_function("() => !location.search")
    assert view.evaluate("() => perffarm.chart.view()") == pytest.approx(full)
    assert p.errors == [] and again.errors == []


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_the_chart_names_the_tags_in_its_range_on_its_axis(site, browser, artifacts_dir, scheme):
    farm, out, _ = site
    refs = json.loads((out / "data/refs.js").read_text()[len("perffarm.refs(") : -3])
    sid = next(s for s, v in refs["series"].items() if v["label"].startswith("pgbench"))
    p = Page(browser, dict(bases(site))[scheme])
    page = p.open(f"series/{sid}.html")
    page.wait_for_selector("#chart[data-ready='1']")
    head = len(farm.shas) - 1
    assert page.evaluate("() => perffarm.chart.tagLabels()") == ["REL_1_0", "REL_2_0"]  # positions 4 and the head

    def tag_ink(pos: int) -> int:  # grey text pixels in the band under the axis ticks, around the tag's position
        return page.evaluate(
            """(pos) => { const c = document.getElementById('chart'), g = c.getContext('2d'), r = devicePixelRatio;
            const x = perffarm.chart.clientXOf(pos) - c.getBoundingClientRect().left;
            const d = g.getImageData(Math.max(0, (x - 30) * r), c.height - 16 * r, 60 * r, 14 * r).data; let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 100 && Math.abs(d[i] - d[i + 2]) < 20) n++;
            return n; }""",
            pos,
        )

    assert tag_ink(4) > 20 and tag_ink(head) > 20 and tag_ink(14) == 0
    p.shot(artifacts_dir, f"chart-tags-{scheme}")
    page.evaluate(f"() => perffarm.chart.setView(8, {head} + 0.5)")  # REL_1_0 is out of the drawn range now
    assert page.evaluate("() => perffarm.chart.tagLabels()") == ["REL_2_0"]
    assert tag_ink(head) > 20
    page.evaluate("() => perffarm.chart.setView(0, 12)")
    assert page.evaluate("() => perffarm.chart.tagLabels()") == ["REL_1_0"]
    assert p.errors == [] and p.dialogs == []


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_the_chart_shows_commit_dates_on_its_axis_on_request(site, browser, artifacts_dir, scheme):
    _, out, _ = site
    refs = json.loads((out / "data/refs.js").read_text()[len("perffarm.refs(") : -3])
    sid = next(s for s, v in refs["series"].items() if v["label"].startswith("pgbench"))
    p = Page(browser, dict(bases(site))[scheme])
    page = p.open(f"series/{sid}.html")
    page.wait_for_selector("#chart[data-ready='1']")
    assert all(re.fullmatch(r"\d+", x) for x in page.evaluate("() => perffarm.chart.xLabels()"))
    page.click("[data-axis]")
    page.wait_for_function("() => perffarm.chart.xLabels().length > 2 && perffarm.chart.xLabels()[0].includes('-')")
    dates = page.evaluate("() => perffarm.chart.xLabels()")
    assert all(re.fullmatch(r"20\d\d-\d\d-\d\d", x) for x in dates), dates
    page.wait_for_selector("#chart[data-url]")
    assert parse_qs(urlsplit(page.url).query) == {"axis": ["date"]}
    p.shot(artifacts_dir, f"chart-dates-{scheme}")
    again = Page(browser, "")
    view = again.open(page.url)  # the link keeps the axis
    view.wait_for_function("() => perffarm.chart.xLabels().length > 2 && perffarm.chart.xLabels()[0].includes('-')")
    assert view.inner_text("[data-axis]") == "Positions on the axis"
    assert p.errors == [] and again.errors == []


def test_compare_page_computes_the_ratio_from_the_published_data(site, browser, artifacts_dir):
    farm, out, url = site
    head = farm.shas[-1]

    def medians(sha):
        text = (out / f"data/commits/{sha}.js").read_text()
        d = json.loads(text[text.index(",") + 1 : -3])
        return {r[0]: r[1] for r in d["rows"]}

    base, new = medians(farm.shas[4]), medians(head)  # REL_1_0 is commit 4
    p = Page(browser, url)
    page = p.open("compare.html")
    page.fill("#base", "REL_1_0")
    page.fill("#new", head[:10])
    page.click("#compare button[type=submit]")
    page.wait_for_selector("body[data-ready='1']")
    rows = page.locator("#result tbody tr")
    assert rows.count() == 2
    shown = {}
    for k in range(rows.count()):
        cells = rows.nth(k).locator("td")
        sid = cells.nth(0).locator("a").get_attribute("href").split("/")[-1][: -len(".html")]
        shown[sid] = (cells.nth(5).inner_text(), cells.nth(5).get_attribute("class"))
    for sid, (text, cls) in shown.items():
        expect = new[sid] / base[sid]
        assert 0.8 < expect < 0.9  # the regression: red, with the number printed
        assert text == f"{expect:.3f} ▼" and "cell-red" in cls
    p.shot(artifacts_dir, "compare")
    assert p.errors == [] and p.dialogs == []


def test_an_alert_links_to_the_comparison_of_its_range(site, browser, artifacts_dir):
    _, out, url = site
    p = Page(browser, url)
    alert = sorted(str(x.relative_to(out)) for x in out.glob("alerts/alert-*.html"))[0]
    page = p.open(alert)
    page.click("a.compare-link")
    page.wait_for_selector("body[data-ready='1']")
    verdicts = page.evaluate(
        "() => [...document.querySelectorAll('#result tbody tr[data-sid]')].map(r => r.dataset.verdict)"
    )
    assert verdicts == ["regression", "regression"]  # the 15% step of both workloads
    assert page.inner_text("#summary").startswith("2 regressions, 0 improvements, 0 unchanged")
    p.shot(artifacts_dir, "alert-compare")
    assert p.errors == [] and p.dialogs == []


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_hostile_commit_subjects_render_as_text(site, browser, artifacts_dir, scheme):
    farm, _, _ = site
    p = Page(browser, dict(bases(site))[scheme])
    for i, hostile in ((3, XSS_IMG), (5, XSS_SCRIPT)):
        page = p.open(f"commit.html?c={farm.shas[i]}")
        page.wait_for_selector("body[data-ready='1']")
        assert page.inner_text("#subject") == hostile
        assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
        assert page.locator("#rows tbody tr").count() == 2
        p.shot(artifacts_dir, f"commit-{i}-{scheme}")
    page = p.open(f"commit.html?c={farm.culprit}")
    page.wait_for_selector("body[data-ready='1']")
    assert "make it slower " + XSS_IMG == page.inner_text("#subject")
    assert re.fullmatch(r"0\.8[4-6]\d ▼", page.locator("#rows .rq.red").first.inner_text())  # ~15% slower
    runs = page.locator("#runs tbody tr")
    assert runs.count() >= 3  # bisection probes of the culprit, each a stored run with its build link
    assert page.locator("#runs a[href^='http://127.0.0.1:8010/']").count() == runs.count()
    page = p.open("alerts.html")
    assert "make it slower " + XSS_IMG in page.inner_text("#alerts")
    page.wait_for_timeout(200)  # an onerror handler would have fired by now
    assert p.dialogs == [] and p.errors == []


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_the_commit_page_shows_its_message_its_neighbours_and_its_tag(site, browser, artifacts_dir, scheme):
    farm, _, _ = site
    p = Page(browser, dict(bases(site))[scheme])
    page = p.open(f"commit.html?c={farm.shas[MESSAGE_AT]}")
    page.wait_for_selector("#commit-nav[data-ready='1']")
    # the body as text, paragraph by paragraph; its line breaks and tab kept; the control characters as escapes
    paras = page.locator("#message p")
    assert paras.count() == 3
    first = paras.nth(0).inner_text()
    assert first == f"The first paragraph names {XSS_IMG}\nand goes on\ton its second line."
    assert paras.nth(1).inner_text() == "A second one: \\u202eesrever & </script>\\x1b[31m red?"
    assert paras.nth(2).inner_text().startswith("Discussion: https://postgr.es/m/")
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    # first-parent neighbours: the parent linked; the next commit on master read from the branch's commit facts
    # only when asked for (the page loads no more than before)
    assert page.get_attribute("#facts a.parent", "href") == f"commit.html?c={farm.shas[MESSAGE_AT - 1]}"
    loaded = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    assert not [x for x in loaded if "/branches/" in x]
    nxt = page.locator("#commit-nav button.next")
    assert nxt.inner_text() == "next commit on master →"
    nxt.hover()  # the pointer on it names the commit
    page.wait_for_function("() => document.querySelector('#commit-nav button.next').title !== ''")
    assert nxt.get_attribute("title") == f"{farm.shas[MESSAGE_AT + 1][:12]} change 7"
    p.shot(artifacts_dir, f"commit-message-{scheme}")
    nxt.click()  # and a press goes there
    page.wait_for_url(re.compile(rf".*commit\.html\?c={farm.shas[MESSAGE_AT + 1]}$"))
    page.wait_for_selector("body[data-ready='1']")
    assert page.inner_text("#subject") == "change 7"
    assert page.locator("#message").is_hidden()  # a one-line message has no body
    page.focus("#commit-nav button.next")  # from the keyboard too
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*commit\.html\?c={farm.shas[MESSAGE_AT + 2]}$"))
    # the tagged commit names its tag; the head is the newest on its branch
    page = p.open(f"commit.html?c={farm.shas[4]}")
    page.wait_for_selector("#commit-nav[data-ready='1']")
    assert page.inner_text("#facts .tagname") == "REL_1_0"
    page = p.open(f"commit.html?c={farm.shas[-1]}")
    page.wait_for_selector("#commit-nav[data-ready='1']")
    page.click("#commit-nav button.next")
    page.wait_for_selector("#commit-nav .none")
    assert page.inner_text("#commit-nav .none") == "newest commit on master"
    assert page.locator("#commit-nav .next").count() == 0
    page.wait_for_timeout(200)  # an onerror handler would have fired by now
    assert p.errors == [] and p.dialogs == []


def test_archaeology_charts_draw_every_release_and_the_picker_hides_one(browser, artifacts_dir, tmp_path):
    settings = build_archaeology(tmp_path / "data")
    publish_all(settings, tmp_path / "www", now=NOW)
    p = Page(browser, (tmp_path / "www").resolve().as_uri() + "/")
    page = p.open("archaeology.html")  # the machines; each links to its page
    page.locator("#machines a", has_text=M).click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/archaeology/{M}.html") and page.locator("main h1").inner_text().endswith(f"on {M}")
    sweep = page.locator("figure.sweep").filter(has_text="select-only")
    assert sweep.locator("g.release").count() == 3
    box = sweep.locator("svg").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150
    assert all(sweep.locator("g.release path").nth(i).is_visible() for i in range(3))
    p.shot(artifacts_dir, "archaeology-all")
    # the hostile tag name is a label's text, never markup
    assert ARCHAEOLOGY_TAGS[2] in page.inner_text("#pick") and page.locator("#pick img").count() == 0
    page.locator('input[data-release="r1"]').uncheck()
    hidden = page.locator('g.release[data-release="r1"]')
    assert hidden.count() >= 3 and all(not hidden.nth(i).is_visible() for i in range(hidden.count()))
    assert page.locator('g.release[data-release="r0"]').first.is_visible()
    bars = page.locator("figure.bars").filter(has_text="pgbench-ro-prepared-c1")
    assert bars.locator("rect:visible").count() == 2  # REL_15_18's bar hidden with its lines
    p.shot(artifacts_dir, "archaeology-picked")
    assert p.errors == [] and p.dialogs == []


def test_archaeology_draws_the_analytic_queries_beside_the_oltp_charts(browser, artifacts_dir, tmp_path):
    """Seed 001's OLAP half (a release job's tpch-* counts on three releases): the section's charts draw one bar per
    release, the plan change's bar is marked and named as text (the worker's plan text never runs), and the
    release picker hides a release's bars there as in the OLTP charts."""
    settings = build_archaeology(tmp_path / "data")
    add_analytic_release_job(settings, list(ARCHAEOLOGY_TAGS))
    publish_all(settings, tmp_path / "www", now=NOW)
    p = Page(browser, (tmp_path / "www").resolve().as_uri() + "/")
    page = p.open(f"archaeology/{M}.html")
    assert page.locator("h2#analytic").inner_text() == "Analytic queries (OLAP half of seed 001)"
    q4 = page.locator("figure.bars").filter(has_text="tpch-q04 · instructions relative")
    box = q4.locator("svg").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150
    assert q4.locator("rect:visible").count() == 3
    marked = q4.locator("rect.plan-changed")
    assert marked.count() == 1 and marked.is_visible()
    assert "Hash Semi Join → Hash Right Semi Join" in q4.locator(".plan-change").inner_text()
    assert page.locator("figure.bars").filter(has_text="geometric mean of 3 queries").locator("rect").count() == 3
    assert "<img src=x onerror=alert(3)> Nested Loop" in page.locator("ul.plan-changes").first.inner_text()
    assert page.locator("main img").count() == 0
    page.locator("h2#analytic").scroll_into_view_if_needed()
    p.shot(artifacts_dir, "archaeology-analytic")
    page.locator('input[data-release="r2"]').uncheck()
    assert q4.locator("rect:visible").count() == 2 and not marked.is_visible()
    assert p.errors == [] and p.dialogs == []


def test_release_tables_are_reached_from_the_list_and_switch_base(browser, artifacts_dir, tmp_path):
    settings = build_archaeology(tmp_path / "data")
    publish_all(settings, tmp_path / "www", now=NOW)
    p = Page(browser, (tmp_path / "www").resolve().as_uri() + "/")
    page = p.open("releases.html")  # the machines; each links to its tables
    page.locator("#machines a", has_text=M).click()
    page.wait_for_load_state("load")
    first, second = ARCHAEOLOGY_TAGS[0], ARCHAEOLOGY_TAGS[1]
    assert page.url.endswith(f"/releases/{M}/index.html")
    assert page.locator("main h1").inner_text() == f"Releases on {M} vs {first}"
    assert page.locator("table.rqps tbody tr").count() >= 3
    assert page.locator("main p.muted").first.locator("a").count() == 1  # every machine: no major has two tags
    assert ARCHAEOLOGY_TAGS[2] in page.inner_text("table.rqps thead") and page.locator("main img").count() == 0
    p.shot(artifacts_dir, "releases-m1")
    page.locator("main p a", has_text=second).first.click()  # another base release
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/releases/{M}/vs-{second}.html")
    assert page.locator("main h1").inner_text() == f"Releases on {M} vs {second}"
    page = p.open(f"releases/{second}.html")  # the old URL of the table vs a release: the machines' tables vs it
    page.locator("#machines a", has_text="one release per major").click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/releases/{M}/vs-{second}.html")
    assert p.errors == [] and p.dialogs == []
