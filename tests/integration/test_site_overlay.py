"""A series chart overlays the same workload from other machines and branches, and a paired workload's reference,
in real headless Chromium (Debian's chromium through Playwright, as tests/integration/test_site_browser.py).

The history is stored through master.store (as tests/compare_support.py does: what is tested is the page, not
the ingest path) and published by master.publish.publish_all: paired runs (`tps`, `tps.reference`, `tps.rqps`) of
workload `ro` on master on two machines, and on a stable branch that forks from master at position 9.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from master import store
from master.publish import publish_all
from master.publish.serve import serve
from master.publish.source import sid_of
from master.store import CommitInfo, RunContext
from tests.integration.test_site_browser import Page, browser  # noqa: F401 - browser is a fixture
from tests.site_support import settings_for
from tests.unit.test_paired_store import paired_doc
from tests.unit.test_result_schema import MACHINE_ID as M

pytestmark = pytest.mark.integration

NOW = 1_800_000_000.0
REF = "a" * 40
FORK, MASTER, STABLE = 9, 20, 8  # the stable branch shares master's positions 0..FORK, then has STABLE of its own
OTHER = "m02"  # the second machine's id
LEVEL = {("mine", "master"): 1000.0, (OTHER, "master"): 1200.0, ("mine", "REL_1_STABLE"): 900.0}


def sha(branch: str, i: int) -> str:
    return f"{(0 if branch == 'master' else 0xB000) + i:040x}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site-overlay")
    settings = settings_for(tmp / "data", tmp / "no-repo")
    conn = store.connect(settings.results_db)
    master = [CommitInfo(sha("master", i), f"commit {i}", "A <a@x>", 1_700_000_000 + i, 1_700_000_000 + i,
                         (sha("master", i - 1),) if i else ()) for i in range(MASTER)]  # fmt: skip
    stable = [CommitInfo(sha("stable", i), f"stable {i}", "A <a@x>", 1_700_100_000 + i, 1_700_100_000 + i,
                         (sha("stable", i - 1) if i > FORK + 1 else sha("master", FORK),))
              for i in range(FORK + 1, FORK + 1 + STABLE)]  # fmt: skip
    with store.transaction(conn):
        store.upsert_commits(conn, master + stable)
        store.append_branch(conn, "master", master, 0)
        store.copy_branch_prefix(conn, "master", "REL_1_STABLE", FORK)
        store.append_branch(conn, "REL_1_STABLE", stable, FORK + 1)
    rng = random.Random(5)
    build = 0
    runs = [(m, c.sha, LEVEL[(m, "master")]) for m in ("mine", OTHER) for c in master]
    runs += [("mine", c.sha, LEVEL[("mine", "REL_1_STABLE")]) for c in stable]
    for machine, at, level in runs:
        build += 1
        rqps = [1.0 + rng.gauss(0, 0.004) for _ in range(5)]
        doc = paired_doc(at, REF, [level * r for r in rqps], rqps)
        if machine == OTHER:
            doc["machine"]["id"] = OTHER
        with store.transaction(conn):
            ctx = RunContext("fixture@" + machine, machine, "poll", build, reference=REF)
            run_id = store.insert_run(conn, doc, ctx)
            store.series.ensure_for_run(conn, run_id)
    stored = [store.series.get(conn, i) for (i,) in conn.execute("SELECT id FROM series").fetchall()]
    keys = {(s.key.machine_id, s.key.branch, s.key.metric): s.key for s in stored if s is not None}
    conn.close()
    out = tmp / "www"
    publish_all(settings, out, now=NOW)
    url, _, server = serve(out, "127.0.0.1", 0)
    yield {m: sid_of(k) for m, k in keys.items()}, Path(os.path.realpath(out)), url
    server.shutdown()
    server.server_close()


def ink(page, colour: str) -> int:
    """Canvas pixels of about this colour (#rrggbb): an overlay's line is drawn."""
    return page.evaluate(
        """(hex) => { const c = document.getElementById('chart'), d = c.getContext('2d').getImageData(0, 0, c.width,
        c.height).data; const r = parseInt(hex.slice(1, 3), 16), g = parseInt(hex.slice(3, 5), 16),
        b = parseInt(hex.slice(5, 7), 16); let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 60 && d[i + 3] > 200) n++;
        return n; }""",
        colour,
    )


def test_the_overlays_offered_are_the_same_workload_and_unit_elsewhere(site):
    sids, out, _ = site
    me = M
    page = (out / f"series/{sids[(me, 'master', 'tps')]}.html").read_text()
    meta = json.loads(re.search(r'<script type="application/json" id="meta">(.*?)</script>', page).group(1))
    offered = {o["label"]: o["sid"] for o in meta["overlays"]}
    assert offered == {
        "reference": sids[(me, "master", "tps.reference")],
        "REL_1_STABLE": sids[(me, "REL_1_STABLE", "tps")],
        OTHER: sids[(OTHER, "master", "tps")],
        "reference · REL_1_STABLE": sids[(me, "REL_1_STABLE", "tps.reference")],
        f"reference · {OTHER}": sids[(OTHER, "master", "tps.reference")],
        # the second machine's runs of master's commits before the fork are on the stable branch too
        f"REL_1_STABLE · {OTHER}": sids[(OTHER, "REL_1_STABLE", "tps")],
        f"reference · REL_1_STABLE · {OTHER}": sids[(OTHER, "REL_1_STABLE", "tps.reference")],
    }  # not the rQPS series: another unit
    assert all(o["chunks"] == [0, 0] for o in meta["overlays"])
    ratio = (out / f"series/{sids[(me, 'master', 'tps.rqps')]}.html").read_text()
    meta = json.loads(re.search(r'id="meta">(.*?)</script>', ratio).group(1))
    # the other rQPS series only
    assert [o["label"] for o in meta["overlays"]] == ["REL_1_STABLE", f"REL_1_STABLE · {OTHER}", OTHER]


@pytest.mark.parametrize("scheme", ["file", "http"])
def test_a_legend_box_toggles_an_overlay_and_the_address_keeps_it(site, browser, artifacts_dir, scheme):  # noqa: F811
    sids, out, url = site
    me = M
    mine, theirs = sids[(me, "master", "tps")], sids[(OTHER, "master", "tps")]
    ref = sids[(me, "master", "tps.reference")]
    p = Page(browser, out.as_uri() + "/" if scheme == "file" else url)
    page = p.open(f"series/{mine}.html")
    page.wait_for_selector("#chart[data-ready='1']")
    assert page.evaluate("() => perffarm.chart.overlays()") == []
    before = page.evaluate("() => perffarm.chart.yTicks()")
    assert max(before) < 1200  # the chart's own series only: ~1,000
    page.check(f"[data-overlay='{theirs}']")
    page.wait_for_selector(f"#overlays[data-shown='{theirs}']")
    shown = page.evaluate("() => perffarm.chart.overlays()")
    assert [o["sid"] for o in shown] == [theirs] and shown[0]["positions"] == list(range(MASTER))
    assert sum(shown[0]["medians"]) / MASTER == pytest.approx(1200, rel=0.01)
    assert max(page.evaluate("() => perffarm.chart.yTicks()")) >= 1200  # the y axis takes the overlay in
    colour = shown[0]["colour"]
    assert ink(page, colour) > 200
    swatch = page.locator(f"[data-overlay='{theirs}'] + .swatch").evaluate("e => getComputedStyle(e).backgroundColor")
    assert swatch == "rgb({}, {}, {})".format(*(int(colour[i : i + 2], 16) for i in (1, 3, 5)))
    page.check(f"[data-overlay='{ref}']")
    page.wait_for_selector(f"#overlays[data-shown='{theirs},{ref}']")
    page.wait_for_function(f"() => (document.getElementById('chart').dataset.url || '').includes('{ref}')")
    assert parse_qs(urlsplit(page.url).query) == {"overlay": [f"{theirs},{ref}"]}
    p.shot(artifacts_dir, f"overlay-{scheme}")
    # the address opens the same overlays, ticked
    again = Page(browser, "")
    view = again.open(page.url)
    view.wait_for_selector(f"#overlays[data-shown='{theirs},{ref}']")
    assert view.is_checked(f"[data-overlay='{theirs}']") and view.is_checked(f"[data-overlay='{ref}']")
    assert not view.is_checked(f"[data-overlay='{sids[(me, 'REL_1_STABLE', 'tps')]}']")
    assert ink(view, colour) > 200
    # unticking one hides it and takes it out of the address; unticking both leaves no overlay parameter
    view.uncheck(f"[data-overlay='{theirs}']")
    view.wait_for_selector(f"#overlays[data-shown='{ref}']")
    assert ink(view, colour) == 0
    view.wait_for_function(f"() => !location.search.includes('{theirs}')")
    view.uncheck(f"[data-overlay='{ref}']")
    view.wait_for_function("() => !location.search")
    assert view.evaluate("() => perffarm.chart.overlays()") == []
    # an id that is not one of the page's overlays is ignored
    bad = again.open(f"{page.url.split('?')[0]}?overlay=..%2F..%2Fx,{theirs}")
    bad.wait_for_selector(f"#overlays[data-shown='{theirs}']")
    assert p.errors == [] and again.errors == [] and p.dialogs == [] and again.dialogs == []


def test_a_branch_overlay_is_drawn_at_its_own_positions(site, browser, artifacts_dir):  # noqa: F811
    sids, out, url = site
    me = M
    stable = sids[(me, "REL_1_STABLE", "tps")]
    p = Page(browser, url)
    page = p.open(f"series/{sids[(me, 'master', 'tps')]}.html?overlay={stable}")
    page.wait_for_selector(f"#overlays[data-shown='{stable}']")
    (shown,) = page.evaluate("() => perffarm.chart.overlays()")
    # the shared history (master's runs, positions 0..FORK) and the branch's own commits after the fork
    assert shown["positions"] == list(range(FORK + 1 + STABLE))
    assert sum(shown["medians"][FORK + 1 :]) / STABLE == pytest.approx(900, rel=0.01)
    assert p.errors == [] and p.dialogs == []
