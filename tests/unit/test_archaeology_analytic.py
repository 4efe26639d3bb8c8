"""The archaeology page's analytic queries (issue 27, item 6: seed 001's OLAP half beside the OLTP charts): a release
job of pg-quick that counted tpch-* on three releases, uploaded through the farm's job ingest into a real SQLite
store beside the farm's throughput runs at the tags, and published. Per query, instructions relative to the first
release with one bar per release (the throughput bars' drawing code), the geometric mean per release, and the plan
change a release made, named beside the chart; the operation suite by group. The browser side (the charts drawn,
the picker) is in tests/integration/test_site_browser.py."""

from __future__ import annotations

import math
import re

import pytest

from master import store
from master.publish import publish_all
from tests.site_support import (
    ANALYTIC,
    ARCHAEOLOGY_TAGS,
    add_analytic_release_job,
    analytic_sides,
    build_archaeology,
    result_doc,
)
from tests.unit.test_archaeology import figure, machine_page

TAGS = list(ARCHAEOLOGY_TAGS)
HOSTILE_18 = "REL_18_6&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"  # the third tag as the page prints it


@pytest.fixture(scope="module")
def paired(tmp_path_factory) -> tuple[str, int]:
    settings = build_archaeology(tmp_path_factory.mktemp("arch-olap") / "data")
    job = add_analytic_release_job(settings, TAGS)
    publish_all(settings, now=1_800_000_000.0)
    return machine_page(settings), job


def section(page: str, heading: str) -> str:
    start = page.index(heading)
    end = page.find("<h2", start + 1)
    return page[start : end if end >= 0 else len(page)]


def labels(chart: str) -> list[str]:
    return re.findall(r">(\d\.\d\d)</text>", chart)


def test_the_analytic_queries_have_a_section_beside_the_oltp_charts_that_frames_them_honestly(paired):
    page, _ = paired
    assert page.index("Each release relative to the first") < page.index("Analytic queries (OLAP half of seed 001)")
    olap = section(page, "Analytic queries (OLAP half of seed 001)")
    note = re.sub(r"<[^>]+>", "", olap[: olap.index("</p>")])
    for said in ("not TPC-H", "scale factor 0.001", "not seconds", "no parallel workers", "docs/releases.md"):
        assert said in note, said
    # the OLTP charts are still there, and no count is drawn as throughput
    assert "pgbench-ro-prepared-c1 · tps relative to REL_13_16" in page and "tpch-q04 · tps" not in page


def test_each_query_is_a_bar_per_release_relative_to_the_first_from_the_paired_job(paired):
    page, job = paired
    chart = figure(page, "tpch-q04 · instructions relative to REL_13_16 (lower is better)")
    assert labels(chart) == ["1.00", "1.00", "0.77"]
    assert re.findall(r'<g class="release" data-release="(r\d)"', chart) == ["r0", "r1", "r2"]
    assert "paired: the releases measured interleaved in one job" in chart and f"jobs/{job}.html" in chart
    assert re.search(
        rf"REL_15_18: 1\.003× REL_13_16 \[[\d.]+, [\d.]+\] \(10,461,290 instructions, release job {job}\)", chart
    )
    assert labels(figure(page, "tpch-q01 · instructions relative")) == ["1.00", "1.01", "0.92"]


def test_the_geometric_mean_over_the_queries_is_drawn_per_release(paired):
    page, _ = paired
    chart = figure(page, "geometric mean of 3 queries · instructions relative to REL_13_16")
    g15, g18 = (
        math.exp(sum(math.log(ANALYTIC[q][0][i] / ANALYTIC[q][0][0]) for q in ("tpch-q01", "tpch-q04", "tpch-q17")) / 3)
        for i in (1, 2)
    )
    assert labels(chart) == ["1.00", f"{g15:.2f}", f"{g18:.2f}"] == ["1.00", "1.00", "0.85"]
    assert f"REL_15_18: {g15:.3f}× REL_13_16 (geometric mean of 3 ratios)" in chart and f"{g18:.3f}×" in chart


def test_a_release_that_planned_a_query_differently_is_named_on_its_chart_and_in_the_section(paired):
    page, _ = paired
    change = f"tpch-q04: Hash Semi Join → Hash Right Semi Join from REL_15_18 to {HOSTILE_18}"
    chart = figure(page, "tpch-q04 · instructions relative")
    assert f'<span class="plan-change">plan: {change}</span>' in chart
    assert len(re.findall(r'<rect class="plan-changed"', chart)) == 1  # 18.6's bar only
    assert "plan changed: tpch-q04: Hash Semi Join → Hash Right Semi Join" in chart  # in that bar's tooltip
    assert "plan: " not in figure(page, "tpch-q01 · instructions relative")  # the same plan on every release
    olap = section(page, "Analytic queries (OLAP half of seed 001)")
    listed = re.findall(r"<li>(.*?)</li>", olap[olap.index('<ul class="plan-changes">') :])
    assert change in listed and len(listed) == 2  # Q4's and Q17's


def test_plan_text_is_worker_output_and_renders_as_text(paired):
    page, _ = paired
    assert "<img src=x onerror=alert(3)>" not in page
    assert "tpch-q17: Hash Join → &lt;img src=x onerror=alert(3)&gt; Nested Loop from REL_15_18" in page


def test_the_operation_suite_is_listed_by_group_with_its_geometric_mean(paired):
    page, _ = paired
    ops = section(page, "Instruction counts by subsystem")
    assert '<h3 id="group-executor">executor</h3>' in ops and "tpch-" not in ops
    assert labels(figure(ops, "geometric mean of 1 workload ")) == ["1.00", "1.02", "0.90"]
    row = ops[ops.index("<code>op-join-hash</code>") :].split("</tr>")[0]
    assert re.findall(r'<td class="num">(.*?)</td>', row) == ["1.000", "1.020", "<b>0.900</b>"]


def test_farm_runs_at_the_tags_carry_their_plans_to_the_page_without_a_job(tmp_path):
    """Without a release job, the counts are the farm's runs at each tag (unpaired) and the plans the ones those
    runs stored (the plans table), so a plan change between releases is named all the same."""
    settings = build_archaeology(tmp_path / "data")
    conn = store.connect(settings.results_db)
    try:
        tags = store.commits.tags(conn)
        for i, (tag, (workloads, plans)) in enumerate(analytic_sides(TAGS).items()):
            doc = result_doc(tags[tag], {})
            doc.update(workloads=workloads, plans=plans)
            doc["recipe"] = {"name": "pg-quick", "version": 1, "config_hash": "abc"}
            with store.transaction(conn):
                store.insert_run(conn, doc, store.RunContext("pg-quick@local", "local", "poll", 200 + i))
    finally:
        conn.close()
    publish_all(settings, now=1_800_000_000.0)
    chart = figure(machine_page(settings), "tpch-q04 · instructions relative")
    assert "unpaired: each release measured alone" in chart and labels(chart) == ["1.00", "1.00", "0.77"]
    assert f"plan: tpch-q04: Hash Semi Join → Hash Right Semi Join from REL_15_18 to {HOSTILE_18}" in chart
