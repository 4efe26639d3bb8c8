"""One page's failure never stops the others (issue #26 item 4; master/publish/isolate.py): a page whose view model
or rendering raises is written as a page that says what went wrong, every other page is published byte for byte
as without the failure, `perffarm publish` says which pages failed and exits 1, and the next publish builds them
again.

The farm's pages no longer fail on the data that made them fail (tests/unit/test_old_rows.py), and an unknown bug
cannot be made on demand: these tests make one page's view-model function raise (monkeypatch), the one fake part.
The history, the database, the renderer and the writer are real."""

from __future__ import annotations

import filecmp
import os
from pathlib import Path

import pytest

from master.cli import main
from master.publish import publish_all, publish_incremental, publish_jobs
from master.publish.pages import jobs as jobs_page
from master.publish.pages import releases as releases_page
from master.publish.pages import series as series_page
from tests.site_support import add_release_job, build_farm, copy_farm

NOW = 1_800_000_000.0
BOOM = "the view model broke <script>alert(1)</script>"


@pytest.fixture(scope="module")
def farm_template(tmp_path_factory):
    farm = build_farm(tmp_path_factory.mktemp("isolation-farm"))
    for level in (850.0, 900.0):  # two release jobs: one page can fail while the other is published
        add_release_job(farm.settings, {"REL_1_0": {"pgbench": 1000.0}, "REL_2_0": {"pgbench": level}})
    return farm


@pytest.fixture
def farm(farm_template, tmp_path):
    return copy_farm(farm_template, tmp_path / "farm")


def files(root: Path) -> dict[str, Path]:
    root = Path(os.path.realpath(root))
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def _job_fails(monkeypatch, job_id: int = 2) -> None:
    rows = jobs_page.rows

    def broken(job):
        if job.id == job_id:
            raise RuntimeError(BOOM)
        return rows(job)

    monkeypatch.setattr(jobs_page, "rows", broken)


def _series_fails(monkeypatch, sid: str) -> None:
    view = series_page.view

    def broken(ctx, summ, siblings):
        if summ.sid == sid:
            raise ZeroDivisionError(BOOM)
        return view(ctx, summ, siblings)

    monkeypatch.setattr(series_page, "view", broken)


def _releases_fail(monkeypatch) -> None:
    def broken(ctx):
        raise KeyError(BOOM)

    monkeypatch.setattr(releases_page, "load", broken)


def _failed_page(text: str) -> None:
    assert "This page could not be built" in text and "the next publish builds this page again" in text, text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>alert(1)" not in text, text


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("where", ["one job's page", "one series' page", "the release tables' writer"])
def test_a_page_that_raises_says_so_and_every_other_page_is_published(farm, tmp_path, monkeypatch, where, jobs):
    healthy = tmp_path / "healthy"
    publish_all(farm.settings, healthy, now=NOW, jobs=1)
    sid = sorted(p.stem for p in (healthy / "series").glob("*.html"))[0]
    failed_file, own = {
        "one job's page": ("jobs/2.html", {"jobs/2.html"}),
        "one series' page": (f"series/{sid}.html", {f"series/{sid}.html", f"data/series/{sid}/index.json"}),
        "the release tables' writer": ("releases.html", {k for k in files(healthy) if k.startswith("releases")}),
    }[where]
    {"one job's page": _job_fails, "the release tables' writer": _releases_fail}.get(
        where, lambda mp: _series_fails(mp, sid)
    )(monkeypatch)
    out = tmp_path / "site"
    report = publish_all(farm.settings, out, now=NOW, jobs=jobs)  # the series pages: here or in a forked process
    assert [(f.file, BOOM in f.error) for f in report.failures] == [(failed_file, True)], report.failures
    _failed_page((out / failed_file).read_text())
    a, b = files(out), files(healthy)
    assert set(b) - set(a) <= own and set(a) - set(b) == set()
    assert [k for k in a if k not in own and not filecmp.cmp(a[k], b[k], shallow=False)] == []
    if where == "one job's page":
        assert "0.8500" in (out / "jobs" / "1.html").read_text()  # the other job's page has its ratios


def test_perffarm_publish_says_which_pages_failed_and_exits_1_with_the_site_swapped_in(
    farm, tmp_path, monkeypatch, capsys
):
    for k in [k for k in os.environ if k.startswith("PERFFARM_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(farm.settings.data_dir))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", farm.settings.repository_url)
    out = tmp_path / "site"
    assert main(["publish", "--out", str(out), "--quiet"]) == 0
    before = os.path.realpath(out)
    _job_fails(monkeypatch)
    assert main(["publish", "--out", str(out), "--quiet"]) == 1
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    lines = printed.err.splitlines()
    assert lines[0].startswith("perffarm publish: could not build jobs/2.html (jobs): RuntimeError: " + BOOM), lines
    assert lines[1] == (
        "perffarm publish: 1 page(s) could not be built and say so on the site; every other page was published "
        "(the next publish builds them again)"
    )
    assert len(lines) == 2 and "published " in printed.out
    assert os.path.realpath(out) != before  # the new version is live
    _failed_page((out / "jobs" / "2.html").read_text())


def test_the_next_publish_builds_a_failed_page_again(farm, tmp_path, monkeypatch):
    out = tmp_path / "site"
    with monkeypatch.context() as mp:
        _job_fails(mp)
        assert publish_all(farm.settings, out, now=NOW).failures
    from master.publish.cache import failed_pages, load_state, open_cache

    cache = open_cache(farm.settings)
    try:
        assert [f.file for f in failed_pages(load_state(cache, out)[1] or {})] == ["jobs/2.html"]
    finally:
        cache.close()
    # the master's next publish after a run: a full one (an incremental one would not rewrite the job's page)
    farm.shas.append(farm.repo.bench_commit("after the failed page", 4800))
    said: list[str] = []
    run_id = farm.ingest(len(farm.shas) - 1, 850.0, seed=801)  # the pipeline publishes into the farm's own site
    report = publish_incremental(farm.settings, run_id, out, now=NOW, progress=said.append)
    assert report.incremental is False and not report.failures, report
    assert said[0].startswith(
        "full publish: the last publish could not build 1 page(s), e.g. jobs/2.html (jobs): RuntimeError: " + BOOM
    ), said
    assert "This page could not be built" not in (out / "jobs" / "2.html").read_text()
    farm.shas.append(farm.repo.bench_commit("and the next", 4801))
    run_id = farm.ingest(len(farm.shas) - 1, 850.0, seed=802)
    assert publish_incremental(farm.settings, run_id, out, now=NOW).incremental is True  # back to incremental


def test_a_failed_page_of_a_jobs_publish_is_built_again_by_the_next(farm, tmp_path, monkeypatch):
    """publish_jobs (a job finished) renders the job pages on top of the live site: a page failing there is kept in
    the publish state too, and the next such publish is a full one."""
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    with monkeypatch.context() as mp:
        _job_fails(mp)
        report = publish_jobs(farm.settings, out, now=NOW)
    assert report.incremental is True and [f.file for f in report.failures] == ["jobs/2.html"]
    _failed_page((out / "jobs" / "2.html").read_text())
    again = publish_jobs(farm.settings, out, now=NOW)
    assert again.incremental is False and not again.failures
    assert "This page could not be built" not in (out / "jobs" / "2.html").read_text()
    assert publish_jobs(farm.settings, out, now=NOW).incremental is True
