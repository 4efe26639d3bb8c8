"""archaeology.html: the seeds' release charts drawn from samples stored at release tags (real SQLite, real
publish); the browser side (checkboxes, no script errors) is in tests/integration/test_site_browser.py."""

from __future__ import annotations

import re

import pytest

from master.publish import publish_all
from master.publish.pages.archaeology import _x_positions
from tests.site_support import ARCHAEOLOGY_TAGS, build_archaeology


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    settings = build_archaeology(tmp_path_factory.mktemp("arch") / "data")
    publish_all(settings, now=1_800_000_000.0)
    return (settings.site_dir / "archaeology.html").read_text()


def figure(page: str, title: str) -> str:
    start = page.index(title)
    return page[start : page.index("</figure>", start)]


def test_one_line_per_release_through_the_medians_on_a_log_axis(page):
    chart = figure(page, "select-only · tps vs clients")
    lines = re.findall(r'<g class="release" data-release="(r\d)"[^>]*><path d="([^"]+)"', chart)
    assert [r for r, _ in lines] == ["r0", "r1", "r2"]
    xs = [float(x) for x in re.findall(r"[ML]([\d.]+),", lines[0][1])]
    assert len(xs) == 3 and xs == sorted(xs)
    # log axis: 1 -> 16 -> 1000 are log10 steps of 1.20 and 1.80, so the gaps are in that proportion
    assert (xs[2] - xs[1]) / (xs[1] - xs[0]) == pytest.approx(1.7959 / 1.2041, rel=1e-3)
    # the tooltip carries the median of the stored samples
    assert "REL_13_16: 5,000 tps at 1000 clients" in chart


def test_idle_connections_are_a_sweep_of_their_own_with_zero_left_of_the_rest(page):
    chart = figure(page, "idle-connections · tps vs idle connections (1 active client(s))")
    assert "REL_15_18: 10,000 tps at 1000 idle connections" in chart
    xs = _x_positions([0, 1000])
    assert xs[0] < xs[1000]
    three = _x_positions([0, 10, 1000])
    assert three[10] - three[0] == pytest.approx(three[1000] - three[10])  # 0 sits one mean log step left


def test_other_workloads_are_bars_normalised_to_the_first_release(page):
    chart = figure(page, "pgbench-ro-prepared-c1 · tps relative to REL_13_16")
    assert [x for x in re.findall(r">(\d\.\d\d)</text>", chart)] == ["1.00", "1.10", "1.20"]
    assert "select-only-c1 · tps relative" not in page  # sweep members are not bars


def test_tag_names_are_text_and_checkboxes_name_releases_by_position(page):
    hostile = ARCHAEOLOGY_TAGS[2]
    assert hostile not in page and "<img src=x" not in page
    assert "REL_18_6&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert re.findall(r'<input type="checkbox" data-release="(r\d)" checked>', page) == ["r0", "r1", "r2"]


def test_a_farm_without_tags_says_so(tmp_path):
    from master import store
    from tests.site_support import settings_for

    settings = settings_for(tmp_path / "data", tmp_path / "no-repo")
    store.connect(settings.results_db).close()
    publish_all(settings, now=1_800_000_000.0)
    assert "No release tags measured yet." in (settings.site_dir / "archaeology.html").read_text()
