"""The patches page (issue #31 item 3): cfbot jobs queued from a local repository in cfbot's layout (real git, the
farm's own queue), their results stored through the job ingest (real SQLite), the site published: one row per patch
branch, newest head first, each with the verdict of its newest finished job from its paired ratios and CIs, the top
functions of its differential profile, the job's page and the thread's link; hostile branch names and commit
messages are text, never markup or a link."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.patches_support import HOSTILE, THREAD, build_site


@pytest.fixture
def published(tmp_path: Path) -> tuple[str, dict[str, int]]:
    settings, ids = build_site(tmp_path)
    return (settings.site_dir / "patches.html").read_text(), ids


def rows_of(page: str) -> dict[str, str]:
    """Branch (as text) -> the row's HTML."""
    out = {}
    for row in re.findall(r'<tr class="patch.*?</tr>', page, re.S):
        branch = re.search(r'<td class="branch">(.*?)(?:<br>|</td>)', row, re.S)
        assert branch is not None
        out[html.unescape(branch.group(1))] = row
    return out


def test_one_row_per_patch_branch_newest_head_first_with_its_verdict(published) -> None:
    page, ids = published
    rows = rows_of(page)
    assert list(rows) == ["cf/1006", "cf/1005", "cf/1003", "cf/1002", "cf/1001", HOSTILE]  # queued in name order
    assert "<strong>regression</strong>" in rows["cf/1001"]
    assert re.search(r"pgbench-ro tps 0\.80\d\d \[0\.\d+, 0\.\d+\] regression", rows["cf/1001"])
    assert "<strong>improvement</strong>" in rows["cf/1002"] and "pgbench-ro tps 1.25" in rows["cf/1002"]
    assert "<strong>no change</strong>" in rows["cf/1003"]
    assert "failed" in rows["cf/1005"] and "not measured yet" in rows["cf/1005"]
    assert "&lt;b&gt;oops&lt;/b&gt;" in rows["cf/1005"]
    # the measured head keeps its verdict while the pushed one waits, and both jobs are linked
    assert "<strong>improvement</strong>" in rows["cf/1006"] and ">queued<" in rows["cf/1006"].replace("\n", "")
    assert f'href="jobs/{ids["cf/1006"]}.html"' in rows["cf/1006"]
    assert f'href="jobs/{ids["cf/1006 v2"]}.html"' in rows["cf/1006"]
    assert f'href="jobs/{ids["cf/1001"]}.html"' in rows["cf/1001"]


def test_the_top_functions_and_the_thread_link_are_shown(published) -> None:
    page, _ids = published
    rows = rows_of(page)
    assert "ExecHashJoin +150/query" in rows["cf/1001"] and "new_helper +30/query" in rows["cf/1001"]
    assert f'<a class="thread" href="{THREAD}"' in rows["cf/1001"]
    assert '<a class="thread" href="https://commitfest.postgresql.org/patch/1002/"' in rows["cf/1002"]
    assert '<a class="thread"' not in rows["cf/1003"] and "javascript:" not in page  # not an https link: dropped


def test_hostile_branch_names_and_messages_are_text(published) -> None:
    page, _ids = published
    row = rows_of(page)[HOSTILE]
    assert "<img" not in page and "<script" not in page
    assert "&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt;" in row
    assert '<a class="thread"' not in row  # its Discussion link would break out of the attribute: dropped
    assert '<a href="patches.html">Patches</a>' in page  # in the site's navigation


def test_the_ratios_shown_are_those_that_made_the_verdict_first() -> None:
    from master.publish.pages import patches
    from master.store.jobs import Job, JobSide

    def side(label: str, factors: dict[str, float]) -> dict:
        rounds = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0]
        return {
            "label": label,
            "workloads": [
                {
                    "name": name,
                    "metrics": [
                        {"name": "tps", "unit": "tx/s", "direction": "higher", "samples": [x * f for x in rounds]}
                    ],
                }
                for name, f in factors.items()
            ],
        }

    # three large improvements and one small regression: the patch is a regression, and that ratio is listed
    b = {"w1": 1.5, "w2": 1.4, "w3": 1.3, "w4": 0.95}
    sides = (JobSide("A", "master", "a" * 40), JobSide("B", "master", "a" * 40, patched=True))
    result = {"sides": [side("A", dict.fromkeys(b, 1.0)), side("B", b)]}
    job = Job(1, "try", "done", "b", "master", sides, (), "", "cfbot cf/1 x", 1, None, "m", result, None, 0, 0, 1)
    v = patches.verdict(job)
    assert v.word == "regression"
    assert [x.split()[0] for x in v.ratios] == ["w4", "w1", "w2"]
