"""alerts.html lists each alert's largest changes, not every line: its size must not grow with an alert's width."""

from __future__ import annotations

import re

from master.machines import MachineView
from master.publish.render import render
from master.publish.views import LISTED_ALERT_LINES, AlertLineView, AlertPage, RatioView


def alert(aid: str, ratios: list[float]) -> AlertPage:
    lines = tuple(
        AlertLineView(
            f"s{i}",
            f"pgbench-w{i:03d} · tps",
            MachineView("m00", "m00", "", "", None),
            "pg v1",
            "critical",
            RatioView(r, r - 0.01, r + 0.01, "red", "x"),
            "b" * 40,
            "a" * 40,
            False,
        )
        for i, r in enumerate(ratios)
    )
    return AlertPage(
        id=aid, file=f"alert-{aid}", branch="master", kind="regression", severity="critical", state="new",
        active=True, sha="b" * 40, prev_sha="a" * 40, range_size=1, bisection_state=None, culprit=None,
        culprit_subject="", culprit_author="", subject="s", created=0.0, updated=0.0, state_by=None, state_note=None,
        lines=lines, history=(), deliveries=(), bisections=(),
    )  # fmt: skip


def page(*alerts: AlertPage) -> str:
    return render("alerts.html", root="", title="Alerts", alerts=list(alerts), failing=[])


def test_a_wide_alert_lists_its_largest_changes_and_links_the_rest():
    ratios = [0.99] * 400
    ratios[123], ratios[321] = 0.5, 1.8  # the two largest changes, either way
    html = page(alert("wide", ratios), alert("narrow", [0.9, 0.95]))
    wide = re.search(r'data-alert="wide">(.*?)</tr>', html, re.S).group(1)
    labels = re.findall(r"pgbench-w(\d{3})", wide)
    assert len(labels) == LISTED_ALERT_LINES
    assert labels[:2] == ["123", "321"]  # |log 0.5| > |log 1.8|
    assert f"and {400 - LISTED_ALERT_LINES} more on its page" in wide and 'href="alerts/alert-wide.html"' in wide
    narrow = re.search(r'data-alert="narrow">(.*?)</tr>', html, re.S).group(1)
    assert re.findall(r"pgbench-w(\d{3})", narrow) == ["000", "001"] and "more on its page" not in narrow


def test_the_list_does_not_grow_with_an_alerts_width():
    small, large = len(page(alert("a", [0.9] * 40))), len(page(alert("a", [0.9] * 4000)))
    assert large - small < 20  # only the count's digits differ
