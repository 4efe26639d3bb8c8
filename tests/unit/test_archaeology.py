"""archaeology.html: the seeds' release charts drawn from samples stored at release tags (real SQLite, real
publish); the browser side (checkboxes, no script errors) is in tests/integration/test_site_browser.py."""

from __future__ import annotations

import re

import pytest

from master.publish import publish_all
from master.publish.pages.archaeology import _x_positions
from tests.site_support import ARCHAEOLOGY_TAGS, add_release_job, build_archaeology
from tests.unit.test_result_schema import MACHINE_ID as M


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    settings = build_archaeology(tmp_path_factory.mktemp("arch") / "data")
    publish_all(settings, now=1_800_000_000.0)
    return machine_page(settings)


def machine_page(settings) -> str:
    """The fixture machine's archaeology page (archaeology.html lists the machines and links to theirs)."""
    index = (settings.site_dir / "archaeology.html").read_text()
    assert re.search(f'<a href="archaeology/{M}.html"><span class="machine"[^>]*>{M}</span></a>', index)
    return (settings.site_dir / "archaeology" / f"{M}.html").read_text()


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


def test_farm_runs_alone_are_called_unpaired_and_have_no_whiskers(page):
    for title in ("select-only · tps vs clients", "pgbench-ro-prepared-c1 · tps relative to REL_13_16"):
        chart = figure(page, title)
        assert "unpaired: each release measured alone" in chart and "jobs/" not in chart
        assert "(farm runs at the tag)" in chart
    assert 'class="whisker"' not in page


@pytest.fixture(scope="module")
def paired_page(tmp_path_factory) -> tuple[str, int]:
    """The same farm runs, and a release job that measured 13.16 and 15.18 interleaved: its numbers replace the
    farm's for those two releases (select-only-c1000 8,000 and 16,000 instead of 5,000 and 15,000; the ro bar
    1.05 paired instead of 1.10); 18.6 keeps its farm runs."""
    settings = build_archaeology(tmp_path_factory.mktemp("arch-job") / "data")
    job = add_release_job(
        settings,
        {
            "REL_13_16": {"select-only-c1000": 8_000.0, "pgbench-ro-prepared-c1": 50_000.0},
            "REL_15_18": {"select-only-c1000": 16_000.0, "pgbench-ro-prepared-c1": 52_500.0},
        },
    )
    publish_all(settings, now=1_800_000_000.0)
    return machine_page(settings), job


def test_a_release_jobs_numbers_replace_the_farm_runs_and_the_chart_says_so(paired_page):
    page, job = paired_page
    chart = figure(page, "select-only · tps vs clients")
    assert f"REL_13_16: 8,000 tps at 1000 clients (release job {job})" in chart
    assert f"REL_15_18: 16,000 tps at 1000 clients (release job {job})" in chart
    assert "REL_13_16: 5,000 tps" not in chart
    assert "tps at 1000 clients (farm runs at the tag)" in chart  # 18.6: only the farm measured it
    assert "REL_13_16: 10,000 tps at 1 clients (farm runs at the tag)" in chart  # c1: the job did not run it
    assert "mixed: some releases from release jobs" in chart and f'href="../jobs/{job}.html">job {job}</a>' in chart


def test_a_paired_bar_is_the_jobs_ratio_with_its_ci_as_a_whisker(paired_page):
    page, job = paired_page
    chart = figure(page, "pgbench-ro-prepared-c1 · tps relative to REL_13_16")
    # 15.18 / 13.16 paired: 1.05 with a CI from the job's rounds; 18.6 / 13.16: farm median over job median, 1.20
    assert re.findall(r">(\d\.\d\d)</text>", chart) == ["1.00", "1.05", "1.20"]
    assert len(re.findall(r'<line class="whisker"', chart)) == 1
    assert re.search(rf"REL_15_18: 1\.050× REL_13_16 \[1\.0\d\d, 1\.0\d\d\] \(release job {job}\)", chart)
    assert "1.200× REL_13_16 (farm runs at the tag)" in chart


def test_a_release_measured_only_by_a_job_gets_a_curve_and_a_bar(tmp_path):
    """A release with no farm runs at its tag, only a job's numbers, still gets its points."""
    from master import store

    settings = build_archaeology(tmp_path / "data")
    conn = store.connect(settings.results_db)
    try:
        conn.execute("DELETE FROM runs WHERE sha = ?", (f"{2:040x}",))  # 15.18's farm runs gone
        conn.commit()
    finally:
        conn.close()
    job = add_release_job(
        settings, {"REL_13_16": {"select-only-c1": 9_000.0}, "REL_15_18": {"select-only-c1": 9_900.0}}
    )
    publish_all(settings, now=1_800_000_000.0)
    chart = figure(machine_page(settings), "select-only · tps vs clients")
    assert f"REL_15_18: 9,900 tps at 1 clients (release job {job})" in chart


def test_a_farm_whose_releases_only_a_job_measured_shows_them_on_both_release_pages(tmp_path):
    """The farm never ingested a tagged commit (its store has no tags), but a release job measured two releases:
    the release tables and the archaeology page both show the job's paired numbers (found by running the job on
    real PostgreSQL tags: releases.html said "No release tags measured yet")."""
    from master import store
    from tests.site_support import settings_for

    settings = settings_for(tmp_path / "data", tmp_path / "no-repo")
    store.connect(settings.results_db).close()
    job = add_release_job(
        settings,
        {"REL_13_16": {"pgbench-ro-prepared-c1": 50_000.0}, "REL_18_6": {"pgbench-ro-prepared-c1": 55_000.0}},
        shas={"REL_13_16": "a" * 40, "REL_18_6": "b" * 40},
    )
    publish_all(settings, now=1_800_000_000.0)
    listed = (settings.site_dir / "releases.html").read_text()
    assert "No release tags measured yet." not in listed and re.search(
        f'<a href="releases/{M}/index.html"><span class="machine"[^>]*>{M}</span></a>', listed
    )
    releases = (settings.site_dir / "releases" / M / "index.html").read_text()
    assert f'href="../../jobs/{job}.html">paired</a>' in releases and "1.100" in releases
    chart = figure(machine_page(settings), "pgbench-ro-prepared-c1 · tps relative")
    assert "paired: the releases measured interleaved in one job" in chart and 'class="whisker"' in chart


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


def test_a_tag_belongs_to_its_major_release():
    from master.publish.pages.archaeology import major_of

    assert [major_of(t) for t in ("REL_16_4", "REL_16_BETA1", "REL_13_16", "REL9_6_3", "REL8_0_26", "REL7_4")] == [
        "16", "16", "13", "9.6", "8.0", "7.4"
    ]  # fmt: skip
    assert major_of("v1.2") == "v1.2" and major_of(ARCHAEOLOGY_TAGS[2]) == "18"


def synthetic(tags: list[str], machines: int = 1):
    """Points of one bar-chart workload at every tag on `machines` machines, and no release jobs."""
    from master.jobs.core import release_numbers
    from master.publish.pages.archaeology import Point
    from master.store.series import MeasureKey

    points = {
        MeasureKey(f"m{k}", "pg", 1, "cfg", "pgbench-ro-prepared-c1", "tps"): {
            t: Point(1000.0 + i) for i, t in enumerate(tags)
        }
        for k in range(machines)
    }
    return points, release_numbers([])


def test_a_machine_page_draws_the_newest_release_of_each_major_and_a_major_page_its_minors():
    from master.publish.pages.archaeology import machine_pages, machines_of

    tags = ["REL_13_14", "REL_15_18", "REL_13_16", "REL_18_6"]  # 13.16 came out after 15.18: majors stay in order
    points, jobs = synthetic(tags)
    [m] = machines_of(points, tags)
    pages = dict(machine_pages(m, jobs))
    assert sorted(pages) == ["archaeology/m0.html", "archaeology/m0/major-13.html"]
    main, minors = pages["archaeology/m0.html"], pages["archaeology/m0/major-13.html"]
    assert [r.tag for r in main["releases"]] == ["REL_13_16", "REL_15_18", "REL_18_6"]
    assert [b.release.tag for b in main["bars"][0].bars] == ["REL_13_16", "REL_15_18", "REL_18_6"]
    assert [r.tag for r in minors["releases"]] == ["REL_13_14", "REL_13_16"] and minors["root"] == "../../"
    assert [(link.label, link.href) for link in main["majors"]] == [("13: 2 releases", "archaeology/m0/major-13.html")]


def test_bars_per_chart_are_bounded_by_majors_shown_and_every_major_is_one_page_away():
    from master.publish.pages.archaeology import MAJORS, machine_pages, machines_of

    tags = [f"REL_{10 + k}_0" for k in range(MAJORS + 5)]
    points, jobs = synthetic(tags)
    [m] = machines_of(points, tags)
    pages = dict(machine_pages(m, jobs))
    main = pages["archaeology/m0.html"]
    assert len(main["bars"][0].bars) == MAJORS and main["releases"][0].tag == f"REL_{15}_0"
    assert main["every"].href == "archaeology/m0/every-major.html"
    assert len(pages["archaeology/m0/every-major.html"]["bars"][0].bars) == MAJORS + 5
