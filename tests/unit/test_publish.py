"""The static history site, rendered from a results DB filled by the real ingest path (tests/site_support.py)."""

from __future__ import annotations

import dataclasses
import filecmp
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jinja2
import numpy as np
import pytest

from master import store
from master.alerts import sync as alerts
from master.publish import model, publish_all, publish_bisections, publish_incremental, scan
from master.publish.names import commit_name, safe_name
from master.publish.render import environment, float_column, int_column, join_columns, js_call, literal_column, render
from master.publish.views import RatioView
from master.publish.writer import PublishError, SiteWriter, wait_for_cleanup
from tests.site_support import (
    MESSAGE_AT,
    MESSAGE_BODY,
    XSS_AUTHOR,
    XSS_IMG,
    XSS_SCRIPT,
    build_farm,
    copy_farm,
    settings_for,
)
from tests.unit.test_result_schema import MACHINE_ID as M

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0
ATOM = "{http://www.w3.org/2005/Atom}"


@pytest.fixture(scope="module")
def farm_template(tmp_path_factory):
    return build_farm(tmp_path_factory.mktemp("site-farm"))


@pytest.fixture
def farm(farm_template, tmp_path):
    return copy_farm(farm_template, tmp_path / "farm")


def files(root: Path) -> dict[str, Path]:
    root = Path(os.path.realpath(root))
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def text_of(out: Path, rel: str) -> str:
    return (out / rel).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------ safety


def test_untrusted_text_is_escaped_in_every_page_and_data_file(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    all_files = files(out)
    pages = {k: p.read_text() for k, p in all_files.items() if k.endswith((".html", ".atom"))}
    scripts = {k: p.read_text() for k, p in all_files.items() if k.startswith("data/") and k.endswith(".js")}
    assert pages and scripts
    for name, text in pages.items():
        assert "<img" not in text, f"{name} has a raw <img> tag from a commit subject"
        assert "<script>alert" not in text and "</script><script>" not in text, name
    for name, text in scripts.items():
        # data reaches the browser only as <script src> files: no '<' at all, so nothing can end a script block
        assert "<" not in text and ">" not in text, name
    # the hostile subjects and author really are in the site, escaped
    alert_page = next(t for k, t in pages.items() if k.startswith("alerts/alert-"))
    assert "make it slower &lt;img src=x onerror=alert(1)&gt;" in alert_page
    joined = "".join(scripts.values())
    assert json.dumps(XSS_SCRIPT).replace("<", "\\u003c").replace(">", "\\u003e") in joined
    assert json.dumps(XSS_IMG).replace("<", "\\u003c").replace(">", "\\u003e") in joined
    assert XSS_AUTHOR.split("<")[0].strip() in joined  # author names are published without the address part


def commit_data(out: Path, sha: str) -> dict:
    text = text_of(out, f"data/commits/{sha}.js")
    assert text.startswith(f'perffarm.commit("{sha}",') and text.endswith(");\n")
    return json.loads(text[len(f'perffarm.commit("{sha}",') : -3])


def test_a_commits_data_has_its_message_body_escaped_and_its_place_on_the_branch(farm, tmp_path):
    """The commit page's full message and its next commit: the body the ingest read from the mirror (control and
    bidi characters shown as escapes, paragraphs and tabs kept) and the commit's position on each branch."""
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    d = commit_data(out, farm.shas[MESSAGE_AT])
    assert d["message"] == MESSAGE_BODY.replace("\u202e", "\\u202e").replace("\x1b", "\\x1b")
    assert "\n\n" in d["message"] and "\t" in d["message"]
    assert d["positions"] == [["master", safe_name("master"), MESSAGE_AT]]
    assert d["parents"] == [farm.shas[MESSAGE_AT - 1]]
    # the next commit is read from the branch's commit facts at position + 1, which the page loads
    facts = text_of(out, f"data/branches/{safe_name('master')}/0.js")
    assert farm.shas[MESSAGE_AT + 1] in facts
    assert commit_data(out, farm.shas[2])["message"] == ""  # a one-line message has no body
    assert commit_data(out, farm.shas[4])["tags"] == ["REL_1_0"]


def test_js_call_cannot_break_out_of_a_script_element():
    text = js_call("commit", "abc", {"subject": XSS_SCRIPT + "\u2028&"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text[len("perffarm.commit(") : -3].split(",", 1)[1])["subject"] == XSS_SCRIPT + "\u2028&"
    with pytest.raises(ValueError, match="not an identifier"):
        js_call("x);alert(1", 1)


def test_templates_autoescape_and_undefined_names_are_errors():
    env = environment()
    assert env.autoescape is True and env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        render("commit.html", root="", title="t")  # `bands` missing
    assert "&lt;b&gt;" in render(
        "health.html",
        root="",
        title="<b>",
        branches=[],
        workers=[],
        refused=[],
        refused_results=[],
        noisy=[],
        now=0,
        channels=[],
    )


@pytest.mark.parametrize(
    "names",
    [
        ["../evil", "..", ".", "", "a/b", "a_b", "a_b-" + "0" * 8, "REL_17_5", "/etc/passwd", "x\\y", "é", "a" * 200],
    ],
)
def test_ref_file_names_are_safe_and_distinct(names):
    got = [safe_name(n) for n in names]
    assert len(set(got)) == len(got), got
    for n, g in zip(names, got):
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,80}", g), (n, g)
        assert g not in (".", "..") and "/" not in g
    assert safe_name("REL_17_5") == "REL_17_5"  # readable when already safe
    with pytest.raises(ValueError, match="not a commit sha"):
        commit_name("../../etc/passwd")


@pytest.mark.parametrize(
    "rel", ["../x.js", "/etc/x.js", "a/../../x.js", "a//b.js", "a/./b.js", "a\\..\\x.js", "", "a/"]
)
def test_the_writer_refuses_paths_that_leave_the_new_version(tmp_path, rel):
    w = SiteWriter(tmp_path / "site", incremental=False)
    try:
        with pytest.raises(PublishError, match="refusing to write outside the site"):
            w.write(rel, "x")
        w.write("data/ok.js", "x")
        assert (w.root / "data" / "ok.js").read_text() == "x"
        assert [p.name for p in tmp_path.iterdir()] == [".site.versions"]  # nothing landed beside the site
    finally:
        w.abort()


def test_hostile_tag_names_from_the_database_stay_inside_the_site(farm, tmp_path):
    conn = store.connect(farm.settings.results_db)
    with store.transaction(conn):
        store.set_tags(conn, {"../../escaped": farm.shas[2], "a/b": farm.shas[6], "a_b": farm.shas[8]})
    conn.close()
    out = tmp_path / "www" / "site"
    publish_all(farm.settings, out, now=NOW)
    assert sorted(p.name for p in (tmp_path / "www").iterdir()) == [".site.lock", ".site.versions", "site"]
    releases = [k for k in files(out) if k.startswith("releases/")]
    by_tag = [k for k in releases if "/" not in k[len("releases/") :]]  # releases/<tag>.html: the machines' tables
    assert len(by_tag) == 5 and "releases/a_b.html" in by_tag
    tables = sorted(k for k in releases if k not in by_tag)  # one machine's tables, a page per base release
    assert len(tables) == 5 and all(re.fullmatch(rf"releases/{M}/(index|vs-[A-Za-z0-9._-]+)\.html", k) for k in tables)
    assert "../../escaped" in text_of(out, "releases.html")  # shown as text, only the file name is sanitised
    assert "../../escaped" in text_of(out, f"releases/{M}/index.html")


# ------------------------------------------------------------------------------------------------ publishing


@pytest.mark.parametrize("where", ["new head commit", "second run of an old commit"])
def test_incremental_publish_after_a_new_run_equals_a_full_publish(farm, tmp_path, where):
    inc, full = tmp_path / "inc", tmp_path / "full"
    first = publish_all(farm.settings, inc, now=NOW)
    assert first.incremental is False
    if where == "new head commit":
        sha = farm.repo.bench_commit(f"one more {XSS_SCRIPT}", 4242)
        farm.shas.append(sha)
        i = len(farm.shas) - 1
    else:  # e.g. a forced re-run or a bisection probe: its samples merge with the first run's
        i = 8
        sha = farm.shas[i]
    run_id = farm.ingest(i, 850.0 if where == "new head commit" else 1000.0, seed=999)  # the master's pipeline
    report = publish_incremental(farm.settings, run_id, inc, now=NOW)
    assert report.incremental is True and report.commit_pages < first.commit_pages, report
    publish_all(farm.settings, full, now=NOW)
    a, b = files(inc), files(full)
    assert sorted(a) == sorted(b)
    different = [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)]
    assert different == []
    assert f"data/commits/{sha}.js" in a
    if where != "new head commit":
        assert len(json.loads(text_of(full, f"data/commits/{sha}.js")[len("perffarm.commit(") + 43 : -3])["runs"]) == 2


def test_the_next_incremental_publish_shows_a_run_whose_own_publish_failed(farm, tmp_path):
    # found by the chaos run: a publish that failed (the results database locked for 40 s) left its commit
    # without a data file for good, because the next incremental publish rendered only its own run
    inc, full = tmp_path / "inc", tmp_path / "full"
    publish_all(farm.settings, inc, now=NOW)
    missed_sha = farm.repo.bench_commit("stored while the site could not be published", 4500)
    farm.shas.append(missed_sha)
    missed = farm.ingest(len(farm.shas) - 1, 900.0, seed=601)  # its publish "failed": never called
    farm.shas.append(farm.repo.bench_commit("the next one", 4501))
    run_id = farm.ingest(len(farm.shas) - 1, 910.0, seed=602)
    report = publish_incremental(farm.settings, run_id, inc, now=NOW)
    assert report.incremental is True, report
    assert f"data/commits/{missed_sha}.js" in files(inc)
    publish_all(farm.settings, full, now=NOW)
    a, b = files(inc), files(full)
    assert sorted(a) == sorted(b)
    assert [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)] == []
    # the failed publish's retry (or a late call for the missed run) finds it shown: nothing to write
    again = publish_incremental(farm.settings, missed, inc, now=NOW)
    assert again.files_written == 0 and again.incremental is True


def test_too_many_runs_missing_from_the_site_make_one_full_publish(farm, tmp_path, monkeypatch):
    from master.publish import publisher

    inc = tmp_path / "inc"
    publish_all(farm.settings, inc, now=NOW)
    monkeypatch.setattr(publisher, "CATCH_UP_RUNS", 1)
    farm.shas.append(farm.repo.bench_commit("missed", 4600))
    farm.ingest(len(farm.shas) - 1, 900.0, seed=701)
    farm.shas.append(farm.repo.bench_commit("next", 4601))
    run_id = farm.ingest(len(farm.shas) - 1, 900.0, seed=702)
    said = []
    report = publish_incremental(farm.settings, run_id, inc, now=NOW, progress=said.append)
    assert report.incremental is False
    assert said and "2 runs are not shown yet" in said[0]


@pytest.mark.parametrize(
    "change", ["release tag on the measured head", "tag on an old commit", "tag moved and one removed"]
)
def test_incremental_publish_after_a_tag_change_equals_a_full_publish(farm, tmp_path, change):
    # a tag reaches the master with the next ingest (the mirror sync stores it); that publish stays incremental
    inc, full = tmp_path / "inc", tmp_path / "full"
    if change == "release tag on the measured head":
        farm.shas.append(farm.repo.bench_commit("measured, then tagged", 4300))
        farm.ingest(len(farm.shas) - 1, 850.0, seed=500)
    publish_all(farm.settings, inc, now=NOW)
    tagged = {
        "release tag on the measured head": farm.shas[-1],
        "tag on an old commit": farm.shas[10],
        "tag moved and one removed": farm.shas[6],
    }[change]
    if change == "tag moved and one removed":
        farm.repo.git("tag", "-f", "-a", "REL_1_0", "-m", "moved", tagged)
        farm.repo.git("tag", "-d", "REL_2_0")
        conn = store.connect(farm.settings.results_db)
        with store.transaction(conn):  # ingest never deletes a tag; an operator may
            conn.execute("DELETE FROM tags WHERE name = 'REL_2_0'")
        conn.close()
    else:
        farm.repo.tag("REL_3_0", rev=tagged)
    farm.shas.append(farm.repo.bench_commit("after the tag", 4400))
    run_id = farm.ingest(len(farm.shas) - 1, 850.0, seed=501)
    report = publish_incremental(farm.settings, run_id, inc, now=NOW)
    assert report.incremental is True, report
    publish_all(farm.settings, full, now=NOW)
    a, b = files(inc), files(full)
    assert sorted(a) == sorted(b)
    assert [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)] == []
    data = text_of(full, f"data/commits/{tagged}.js")
    if change == "tag moved and one removed":
        assert '"tags":["REL_1_0"]' in data and "REL_2_0" not in text_of(full, "releases.html")
        assert "releases/REL_2_0.html" not in a and '"tags":[]' in text_of(full, f"data/commits/{farm.shas[4]}.js")
    else:
        assert '"tags":["REL_3_0"]' in data and "releases/REL_3_0.html" in a
    if change == "release tag on the measured head":  # every series' latest point is now compared with REL_3_0
        overview = "".join(text_of(full, k) for k in b if k.startswith("overview/"))  # one page per machine
        assert overview.count('<span class="muted">vs REL_3_0</span>') == 2


def test_a_failure_mid_render_leaves_the_live_site_intact(farm, tmp_path, monkeypatch):
    """A failure of the machine, not of a page (master/publish/isolate.py ENVIRONMENT), stops the publish. A full
    disk cannot be made here: writing a commit's data raises ENOSPC instead (in the forked process too)."""
    import errno

    from master.publish.writer import SiteWriter

    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    live = os.path.realpath(out)
    before = {k: p.read_bytes() for k, p in files(out).items()}
    write = SiteWriter.write

    def full_disk(self, rel, text):
        if rel.startswith("data/commits/"):
            raise OSError(errno.ENOSPC, "No space left on device", rel)
        write(self, rel, text)

    monkeypatch.setattr(SiteWriter, "write", full_disk)
    for jobs in (1, 2):  # the per-commit data is written here or in a forked process
        with pytest.raises((OSError, PublishError), match="No space left on device"):
            publish_all(farm.settings, out, now=NOW + 1, jobs=jobs)
    assert os.path.realpath(out) == live
    assert {k: p.read_bytes() for k, p in files(out).items()} == before
    assert not [p for p in (tmp_path / ".site.versions").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("which", ["incremental", "site pages"])
def test_a_failure_mid_incremental_publish_leaves_the_live_site_intact(farm, tmp_path, monkeypatch, which):
    """The incremental paths (a new run, a site-wide page such as an alert's) abort their version as a full publish
    does: the live site is as it was and no temp version is left."""
    import errno

    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    live = os.path.realpath(out)
    before = {k: p.read_bytes() for k, p in files(out).items()}
    run_id = farm.ingest(2, 1000.0, seed=77) if which == "incremental" else None  # publishes into the default site

    def full_disk(self, rel, text):
        raise OSError(errno.ENOSPC, "No space left on device", rel)

    monkeypatch.setattr(SiteWriter, "write", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        if run_id is not None:
            publish_incremental(farm.settings, run_id, out, now=NOW + 1)
        else:
            publish_bisections(farm.settings, out, now=NOW + 1)
    assert os.path.realpath(out) == live
    assert {k: p.read_bytes() for k, p in files(out).items()} == before
    assert not [p for p in (tmp_path / ".site.versions").iterdir() if p.name.endswith(".tmp")]


def test_a_commit_whose_data_cannot_be_written_is_reported_and_every_other_file_is_published(farm, tmp_path):
    """A stored run whose commit is not a sha (the database is untrusted): its commit data file cannot be named.
    That file is left out and reported; the publish finishes (in one process or two) with every other file as
    a publish without that run writes it."""
    healthy = tmp_path / "healthy"
    publish_all(farm.settings, healthy, now=NOW)
    conn = store.connect(farm.settings.results_db)
    with store.transaction(conn):
        doc = json.loads(conn.execute("SELECT result FROM runs WHERE status = 'ok' LIMIT 1").fetchone()[0])
        doc["commit"]["sha"] = "../../not-a-sha"
        store.insert_run(conn, doc, store.RunContext(builder="fixture@local", worker="local", source="poll"))
    conn.close()
    for jobs in (1, 2):
        out = tmp_path / f"site-{jobs}"
        report = publish_all(farm.settings, out, now=NOW, jobs=jobs)
        assert [(f.page, f.file) for f in report.failures] == [("commit data", None)], report.failures
        assert "not a commit sha" in report.failures[0].error
        a, b = files(out), files(healthy)
        assert sorted(a) == sorted(b)
        changed = [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)]
        assert changed == ["health.html"], changed  # it counts the stored runs, that one too


def test_the_swap_is_one_rename_of_a_symlink_and_the_previous_version_stays_readable(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    old = Path(os.path.realpath(out))
    publish_all(farm.settings, out, now=NOW + 60)
    new = Path(os.path.realpath(out))
    assert out.is_symlink() and old != new and old.is_dir()  # a reader mid-page keeps the old files
    assert (old / "index.html").read_text().endswith("</html>\n")
    publish_all(farm.settings, out, now=NOW + 120)
    assert not old.exists()  # only the previous version is kept
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "thesis.txt").write_text("mine")
    with pytest.raises(PublishError, match="is not a perffarm site"):
        publish_all(farm.settings, tmp_path / "plain", now=NOW)
    assert (tmp_path / "plain" / "thesis.txt").read_text() == "mine"


def test_a_full_publish_links_unchanged_files_from_the_live_version_and_never_modifies_it(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    old = Path(os.path.realpath(out))
    before = {k: p.read_bytes() for k, p in files(out).items()}
    farm.shas.append(farm.repo.bench_commit("one more", 4500))
    farm.ingest(len(farm.shas) - 1, 850.0, seed=600)
    report = publish_all(farm.settings, out, now=NOW + 60, jobs=2)
    new = Path(os.path.realpath(out))
    assert {k: p.read_bytes() for k, p in files(old).items()} == before  # the previous version is untouched
    same = [k for k, p in files(new).items() if k in before and p.read_bytes() == before[k]]
    changed = [k for k, p in files(new).items() if k not in same]
    assert same and changed and "manifest.json" in changed and any(k.startswith("overview/") for k in changed)
    assert all((new / k).stat().st_ino == (old / k).stat().st_ino for k in same if not k.startswith("static/"))
    assert all(not (old / k).exists() or (new / k).stat().st_ino != (old / k).stat().st_ino for k in changed)
    assert report.files_linked == len([k for k in same if not k.startswith("static/")]) > 0


def test_the_versions_directory_asks_ext4_to_spread_new_versions(tmp_path):
    import array
    import fcntl

    from master.publish import writer

    SiteWriter(tmp_path / "site", incremental=False).abort()
    fd = os.open(tmp_path / ".site.versions", os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array("i", [0])
        try:
            fcntl.ioctl(fd, writer._FS_IOC_GETFLAGS, flags, True)
        except OSError:
            pytest.skip("this file system has no inode flags (the hint is for ext4)")
    finally:
        os.close(fd)
    if subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True).stdout.strip() not in (
        "ext2/ext3",
        "ext4",
    ):
        pytest.skip("not ext4: the top-directory hint means nothing here")
    assert flags[0] & writer._FS_TOPDIR_FL


CHANGE_POINT_FIELDS = sorted(
    ["id", "sha", "prev_sha", "position", "kind", "ratio", "ci_low", "ci_high", "pvalue", "state"]
)


def test_series_json_files_are_valid_and_match_the_stored_samples(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    conn = store.connect(farm.settings.results_db)
    stored = {}
    for sha, w, samples in conn.execute(
        "SELECT r.sha, m.workload, m.samples FROM runs r JOIN measurements m ON m.run_id = r.id "
        "WHERE r.status = 'ok' AND r.source = 'poll'"
    ):
        stored[(sha, w)] = json.loads(samples)
    indexes = [k for k in files(out) if re.fullmatch(r"data/series/[0-9a-f]{12}/index\.json", k)]
    assert len(indexes) == 2
    checked = 0
    for k in indexes:
        idx = json.loads(text_of(out, k))
        assert idx["format"] == "perffarm-series" and idx["version"] == 1
        workload = idx["series"]["workload"]
        # the change points as the series page's script reads them: these names, one point per series here
        assert [(sorted(c), c["kind"]) for c in idx["change_points"]] == [(CHANGE_POINT_FIELDS, "regression")]
        for c in idx["chunks"]:
            chunk = json.loads(text_of(out, str(Path(k).parent / f"{c}.json")))
            assert chunk["format"] == "perffarm-series-chunk"
            n = len(chunk["position"])
            assert all(len(chunk[f]) == n for f in ("sha", "median", "samples", "runs", "noisy", "sla_miss"))
            assert all(min(xs) <= m <= max(xs) for m, xs in zip(chunk["median"], chunk["samples"]))
            assert chunk["vs_previous"]["ratio"][0] is None and len(chunk["vs_previous"]["ratio"]) == n
            for sha, xs in zip(chunk["sha"], chunk["samples"]):
                if farm.culprit != sha:  # the culprit has only bisection probes
                    assert xs[: len(stored[(sha, workload)])] == stored[(sha, workload)]
                    checked += 1
    assert checked >= 2 * 20


def test_atom_feed_has_stable_entry_ids(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    feed1 = ET.fromstring(text_of(out, "alerts.atom"))
    ids1 = [e.findtext(f"{ATOM}id") for e in feed1.iter(f"{ATOM}entry")]
    assert len(ids1) == 1 and ids1[0].startswith("urn:perffarm:alert:alert-a-")
    conn = store.connect(farm.settings.results_db)
    alerts.set_state(conn, ids1[0].split("alert-", 1)[1], "investigating", by="tester")
    conn.close()
    publish_all(farm.settings, out, now=NOW + 3600)
    feed2 = ET.fromstring(text_of(out, "alerts.atom"))
    entries = list(feed2.iter(f"{ATOM}entry"))
    assert [e.findtext(f"{ATOM}id") for e in entries] == ids1
    assert entries[0].findtext(f"{ATOM}title").startswith("[investigating]")


def test_alerts_show_triage_state_culprit_bisection_log_and_failing_channels(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    page = text_of(out, "alerts.html")
    assert re.search(r'<span class="state state-culprit-found">culprit-found</span>', page)
    assert 'id="channels-failing"' in page and "<b>ops-hook</b>" in page and "failing" in page
    assert "ops-hook" in text_of(out, "health.html")
    conn = store.connect(farm.settings.results_db)
    aid = conn.execute("SELECT id FROM alerts").fetchone()[0]
    alerts.set_state(conn, aid, "acknowledged", by="tester", note=f"looking {XSS_IMG}")
    conn.close()
    publish_all(farm.settings, out, now=NOW)
    page = text_of(out, "alerts.html")
    assert '<span class="state state-acknowledged">acknowledged</span>' in page
    # the link alert messages carry (alerts.link_template) is the page the site writes
    link = farm.settings.alerts.link_template.format(site_url="", alert_id=aid)
    detail = text_of(out, link)
    assert f'culprit <a class="sha" href="commit.html?c={farm.culprit}">{farm.culprit[:12]}</a>' in page
    assert farm.culprit[:12] in detail and "bisection-log" in detail
    assert re.search(r"culprit [0-9a-f]{12} &#39;make it slower &lt;img", detail)
    assert "looking &lt;img src=x onerror=alert(1)&gt;" in detail  # triage note, escaped
    assert "tester" in detail and "acknowledged" in detail


def test_an_ended_bisection_republishes_its_alert_pages(farm, tmp_path):
    """A bisection ends in the bisection service, after its last probe's ingest has published: publish_bisections
    re-renders the alert pages on top of the live site, so they stop saying 'running' before the next commit."""
    out = tmp_path / "site"
    conn = store.connect(farm.settings.results_db)
    try:
        (bid, culprit, ended) = conn.execute(
            "SELECT id, culprit, state FROM bisections WHERE culprit IS NOT NULL ORDER BY id"
        ).fetchone()
        with store.transaction(conn):  # the site as published while the bisection still ran
            conn.execute("UPDATE bisections SET state = 'running', culprit = NULL WHERE id = ?", (bid,))
        publish_all(farm.settings, out, now=NOW)
        aid = conn.execute("SELECT id FROM alerts").fetchone()[0]
        detail = farm.settings.alerts.link_template.format(site_url="", alert_id=aid)
        shown = re.compile(rf"<p>Bisection {bid} \([^)]*\): <b>(\w[\w-]*)</b>")
        assert shown.findall(text_of(out, detail)) == ["running"]
        with store.transaction(conn):
            conn.execute("UPDATE bisections SET state = ?, culprit = ? WHERE id = ?", (ended, culprit, bid))
    finally:
        conn.close()
    series_before = {k: p.stat().st_ino for k, p in files(out).items() if k.startswith("series/")}
    report = publish_bisections(farm.settings, out, now=NOW + 1)
    page = text_of(out, detail)
    assert shown.findall(page) == [ended] and f'culprit <a class="sha" href="../commit.html?c={culprit}">' in page
    assert report.files_written >= 2  # alerts.html, the alert's page, the feed
    after = {k: p.stat().st_ino for k, p in files(out).items() if k.startswith("series/")}
    assert after == series_before  # nothing else is rendered again: the series pages are the live version's


@pytest.mark.parametrize(
    "ratio, direction, colour, arrow",
    [
        (0.9699, "higher", "red", " ▼"),
        (0.97, "higher", "red", " ▼"),
        (0.9701, "higher", "grey", ""),
        (1.0299, "higher", "grey", ""),
        (1.03, "higher", "green", " ▲"),
        (1.2, "higher", "green", " ▲"),
        (1.04, "lower", "red", " ▼"),
        (0.96, "lower", "green", " ▲"),
    ],
)
def test_rqps_colour_bands_and_the_number_is_always_printed(ratio, direction, colour, arrow):
    from master.detect.rqps import Bands
    from master.publish.ratios import RatioCache

    got = RatioCache(None, Bands(0.97, 1.03))._ratio(ratio, 0.9, 1.1, direction)
    assert got.colour == colour
    html = (
        environment()
        .from_string('{% from "macros.html" import ratio %}{{ ratio(r) }}')
        .render(r=RatioView.of(got, "REL_1_0"))
    )
    assert f'class="rq {colour}"' in html and f"{ratio:.3f}{arrow}</span>" in html


def release_table(out: Path, index: str, machine: str = M) -> str:
    """The release table a list of machines (releases.html, releases/<tag>.html) links for `machine` first."""
    page = text_of(out, index)
    href = re.search(
        r'<td><a href="([^"]+)"><span class="machine"[^>]*>' + re.escape(machine) + "</span></a></td>", page
    )
    if index != "releases.html":  # releases/<tag>.html: the machine's first table relative to that tag
        href = re.search(r'<td><a href="([^"]+)">[^<]*</a>', page[href.end() :]) if href else None
    assert href, page
    return (out / Path(index).parent / href.group(1)).read_text(encoding="utf-8")


def test_release_comparison_table(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    page = release_table(out, "releases.html")  # base: the oldest release, REL_1_0; REL_2_0 is ~15% slower
    cells = re.findall(r'<td class="num cell-(red|grey|green) unpaired"[^>]*>([0-9.]+)( ▼| ▲)?', page)
    assert ("grey", "1.000", "") in cells
    assert any(c == "red" and 0.84 < float(v) < 0.86 and a == " ▼" for c, v, a in cells), cells
    assert "paired in job" not in page  # no job measured these releases: every number says it is unpaired
    vs2 = release_table(out, "releases/REL_2_0.html")  # the old URL of the table vs REL_2_0 lists the machines'
    assert re.search(f'<h1>Releases on <span class="machine"[^>]*>{M}</span> vs REL_2_0</h1>', vs2)
    assert re.search(r'cell-green unpaired"[^>]*>1\.1[67]\d ▲', vs2)


def test_a_release_jobs_paired_ratio_replaces_the_unpaired_one_and_says_so(farm, tmp_path):
    """Issue #15: the release tables use the paired numbers of a release job where one exists, and each number
    says which kind it is. The job measured REL_2_0 at 0.95 of REL_1_0 (the separate runs say 0.85)."""
    from master import publish
    from tests.site_support import WORKLOADS, add_release_job

    levels = {tag: {w: level for w in WORKLOADS} for tag, level in (("REL_1_0", 1000.0), ("REL_2_0", 950.0))}
    job_id = add_release_job(farm.settings, levels, now=NOW, metric=("throughput", "ops/s"))
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    page = release_table(out, "releases.html")
    paired = re.findall(r'<td class="num cell-(?:red|grey|green) paired"[^>]*>([0-9.]+)', page)
    assert paired and all(v in ("1.000", "0.950") for v in paired) and "0.950" in paired, paired
    assert f'href="../../jobs/{job_id}.html">paired</a>' in page
    assert "0.9500" in text_of(out, f"jobs/{job_id}.html")
    # a job finishing re-renders its pages and the release tables on top of the live site
    report = publish.publish_jobs(farm.settings, out, now=NOW + 1)
    assert report.files_written >= 3 and "0.950" in release_table(out, "releases.html")


def test_works_from_disk_relative_links_no_network(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    all_files = files(out)
    for name, path in all_files.items():
        if not name.endswith((".html", ".css", ".js")) or name.startswith("data/"):
            continue
        text = path.read_text()
        for attr, url in re.findall(r'\b(href|src)="([^"]*)"', text):
            assert not re.match(r"^(https?:)?//|^/", url), f"{name}: {attr}={url} is not relative"
            target = url.split("?", 1)[0].split("#", 1)[0]
            if target and url != "data:,":  # the empty inline favicon: no request at all
                assert (path.parent / target).resolve().exists(), f"{name}: {url} does not exist"
        assert "http://" not in text.replace("http://www.w3.org", "") or name.endswith(".atom"), name
    assert not re.search(r"https?://", "".join(p.read_text() for k, p in all_files.items() if k.startswith("static/")))


def test_publish_cli(farm, tmp_path):
    out = tmp_path / "cli-site"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env.update(PERFFARM_MASTER_DATA_DIR=str(farm.settings.data_dir))
    proc = subprocess.run(
        [sys.executable, "-m", "master.cli", "publish", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "publish: loading the samples" in proc.stdout
    assert f"open {out / 'index.html'} (works from disk)" in proc.stdout
    assert (out / "index.html").exists()
    env.update(PERFFARM_MASTER_DATA_DIR=str(tmp_path / "empty"))
    proc = subprocess.run(
        [sys.executable, "-m", "master.cli", "publish"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "no results database" in proc.stderr


def test_a_failing_publish_never_loses_the_ingest(farm, tmp_path):
    # the site directory is taken by something that is not a site: the pipeline reports it, the run is stored
    farm.settings.site_dir.unlink()
    farm.settings.site_dir.mkdir()
    (farm.settings.site_dir / "notes.txt").write_text("not a site")
    sha = farm.repo.bench_commit("after the site broke", 4000)
    farm.shas.append(sha)
    from master import ingest, pipeline

    path = farm.settings.incoming_dir / "late.json"
    from tests.site_support import result_doc

    path.write_text(json.dumps(result_doc(sha, {"pgbench": [850.0, 851.0]})))
    out = ingest.ingest_file(
        farm.settings,
        path,
        store.RunContext(builder="fixture@local", worker="local", source="poll", build_id=10_000, got_revision=sha),
        "fixture",
    )
    after = pipeline.after_ingest(farm.settings, out.run_id)
    assert after.failed == ["publish"]
    assert any("site publish failed" in m and "perffarm publish" in m for m in after.messages)
    conn = store.connect(farm.settings.results_db)
    assert conn.execute("SELECT sha FROM runs WHERE id = ?", (out.run_id,)).fetchone()[0] == sha


def test_an_empty_farm_publishes_a_site_that_says_so(tmp_path):
    # what `perffarm run` publishes at first start, before any result
    settings = settings_for(tmp_path / "data", tmp_path / "no-repo")
    store.connect(settings.results_db).close()
    report = publish_all(settings, now=NOW)
    assert report.series == 0 and settings.site_dir.is_symlink()
    assert "No results yet" in text_of(settings.site_dir, "index.html")
    assert "No alerts." in text_of(settings.site_dir, "alerts.html")
    assert ET.fromstring(text_of(settings.site_dir, "alerts.atom")).findtext(f"{ATOM}id") == "urn:perffarm:alerts"


def test_a_full_publish_from_the_samples_cache_equals_one_without_it(farm, tmp_path):
    publish_all(farm.settings, tmp_path / "first", now=NOW)  # fills <data_dir>/publish-cache.sqlite
    sha = farm.repo.bench_commit("measured after the cache was filled", 4100)
    farm.shas.append(sha)
    farm.ingest(len(farm.shas) - 1, 850.0, seed=77)
    farm.ingest(9, 1000.0, seed=78)  # a second run of an old commit: merged with its first
    warm = publish_all(farm.settings, tmp_path / "warm", now=NOW)
    (farm.settings.data_dir / "publish-cache.sqlite").unlink()
    cold = publish_all(farm.settings, tmp_path / "cold", now=NOW)
    a, b = files(tmp_path / "warm"), files(tmp_path / "cold")
    assert sorted(a) == sorted(b) and warm.files_written == cold.files_written
    assert [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)] == []
    assert f"data/commits/{sha}.js" in a


def test_one_or_two_processes_write_the_same_site(farm, tmp_path, monkeypatch):
    # split even this small history: the samples are parsed and the rQPS computed half in a forked child
    monkeypatch.setattr(scan, "SPLIT_MIN_CHARS", 0)
    monkeypatch.setattr(model, "SPLIT_MIN_ROWS", 2)
    forks = []
    fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or fork())
    one = publish_all(farm.settings, tmp_path / "one", now=NOW, jobs=1)
    assert forks == []
    two = publish_all(farm.settings, tmp_path / "two", now=NOW, jobs=2)
    assert len(forks) == 4  # the one machine's parsing, rQPS and chunks; then the pages and commit data
    a, b = files(tmp_path / "one"), files(tmp_path / "two")
    assert sorted(a) == sorted(b) and one.files_written == two.files_written
    assert [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)] == []


def test_commit_rows_merged_from_the_encoders_rows_equal_the_byte_columns(farm, tmp_path, monkeypatch):
    # a full publish merges each machine's commit rows; where a median's text is not proven the rows come from
    # the JSON encoder one by one (commits.row_parts) and must join into the same bytes as the byte columns
    from master.publish import commits

    columns = publish_all(farm.settings, tmp_path / "columns", now=NOW, jobs=1)
    monkeypatch.setattr(commits, "_rows_text", lambda *_a: None)
    encoder = publish_all(farm.settings, tmp_path / "encoder", now=NOW, jobs=1)
    a, b = files(tmp_path / "columns"), files(tmp_path / "encoder")
    assert sorted(a) == sorted(b) and columns.files_written == encoder.files_written
    assert [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)] == []
    assert any('"rows":[["' in Path(a[k]).read_text() for k in a if k.startswith("data/commits/"))


def test_float_columns_write_what_the_json_encoder_writes():
    rng = np.random.default_rng(3)
    for values, decimals in [
        (np.round(rng.normal(1.0, 0.05, 3000), 6), 6),
        (np.round(rng.uniform(0.01, 1e6, 3000) * rng.choice([-1, 1], 3000), 2), 2),
        (np.array([1.0, 2.5, 1e-4, 123456.0, 4503599627370495.0, 0.3]), np.array([0, 1, 4, 0, 0, 1])),
        (np.round(rng.uniform(0.5, 2.0, 3000), 6), np.full(3000, 6)),
    ]:
        values = np.where(rng.random(len(values)) < 0.05, np.nan, values)
        blob, off = join_columns([float_column(values, decimals, nan=True), literal_column(",", len(values))])
        assert blob.decode().split(",")[:-1] == [json.dumps(None if np.isnan(x) else x) for x in values.tolist()]
    # zero, exponent notation, infinities, NaN where not allowed, values not rounded as claimed: not proven
    for values in ([0.0, 1.0], [5e-5], [np.inf], [np.nan], [1.2345678], [0.1 + 0.2], [2.0**53]):
        assert float_column(np.array(values), 3) is None
    ints = np.array([0, 7, -12, 10**15])
    blob, off = join_columns([int_column(ints, ints == 7), literal_column(";", 4)])
    assert blob == b"0;null;-12;1000000000000000;"


def test_the_column_texts_equal_the_encoders_output(farm, tmp_path, monkeypatch):
    import master.publish.commits as commits_module
    import master.publish.pages.series_data as series_data_module

    proven = []
    for module in (commits_module, series_data_module):
        monkeypatch.setattr(
            module, "float_column", lambda *a, f=module.float_column, **k: proven.append(f(*a, **k)) or proven[-1]
        )
    fast = publish_all(farm.settings, tmp_path / "fast", now=NOW, jobs=1)  # one process: `proven` sees all
    assert proven and all(c is not None for c in proven)  # this history takes the column path everywhere
    for module in (commits_module, series_data_module):  # every float column unproven: all through the encoders
        monkeypatch.setattr(module, "float_column", lambda *a, **k: None)
    slow = publish_all(farm.settings, tmp_path / "slow", now=NOW, jobs=1)
    a, b = files(tmp_path / "fast"), files(tmp_path / "slow")
    assert sorted(a) == sorted(b) and fast.files_written == slow.files_written
    assert [k for k in a if not filecmp.cmp(a[k], b[k], shallow=False)] == []


def test_a_temp_version_of_a_killed_publish_is_pruned_at_the_next_publish(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    versions = tmp_path / ".site.versions"
    # a publish killed with kill -9 halfway (the chaos suite's master kill in ingest-job did it): a real process
    # that has ended, its pid in the temp version's name as SiteWriter names it
    gone = subprocess.Popen(["true"])
    gone.wait()
    killed = versions / f"v{time.time_ns():020d}-{gone.pid}.tmp"
    (killed / "data").mkdir(parents=True)
    (killed / "data" / "half.js").write_text("perffarm.commit(")
    spill = versions / f"{killed.name.removesuffix('.tmp')}-spill.tmp"
    spill.mkdir()
    alive = versions / f"v{time.time_ns():020d}-{os.getpid()}.tmp"  # a publish still running (this process)
    alive.mkdir()
    publish_all(farm.settings, out, now=NOW + 1)
    wait_for_cleanup()
    assert not killed.exists() and not spill.exists()
    assert alive.exists()  # never another running publish's


def test_a_culprits_alert_page_says_which_exact_counters_changed(farm, tmp_path):
    """Issue #29: the culprit's and its parent's runs counted system calls; the alert page names the ones the
    culprit added, with their size, escaped (a system call's name comes from a worker's result)."""
    conn = store.connect(farm.settings.results_db)
    culprit, parent = conn.execute("SELECT culprit, parent FROM bisections WHERE culprit IS NOT NULL").fetchone()
    with store.transaction(conn):
        for sha, extra in ((parent, 0.0), (culprit, 1.0)):
            run_id = conn.execute("SELECT MAX(id) FROM runs WHERE sha = ? AND status = 'ok'", (sha,)).fetchone()[0]
            for metric, value in (("syscalls", 4.1 + 2 * extra), ("syscalls.openat", 0.015 + extra)):
                conn.execute(
                    "INSERT INTO measurements (run_id, workload, metric, unit, direction, samples, flags) "
                    "VALUES (?, 'instr-point-select', ?, 'syscalls/query', 'lower', ?, '[]')",
                    (run_id, metric, json.dumps([value, value])),
                )
            if extra:
                conn.execute(
                    "INSERT INTO measurements (run_id, workload, metric, unit, direction, samples, flags) "
                    "VALUES (?, 'instr-point-select', 'syscalls.<b>x', 'syscalls/query', 'lower', '[1, 1]', '[]')",
                    (run_id,),
                )
    aid = conn.execute("SELECT id FROM alerts").fetchone()[0]
    conn.close()
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    detail = text_of(out, farm.settings.alerts.link_template.format(site_url="", alert_id=aid))
    assert "What the exact counters say" in detail
    assert "+1.00 openat per query (+24.4% of system calls)" in detail, detail
    assert "&lt;b&gt;x per query" in detail and "<b>x" not in detail


# ------------------------------------------------------------------------------------------------ named machines

HOSTILE_NAME = "dandelion<script>alert(2)</script>"  # workers.about refuses it; the pages escape it all the same


def named(settings, name: str = HOSTILE_NAME, owner: str = "Alice <alice@example.org>", description: str = ""):
    """The farm's settings with its worker ("local", whose machine is M) named in workers.about; set directly, past
    the settings' own check of the name, so the pages' escaping is what is tested."""
    about = (("local", name, owner, description or "Xeon <b>E-2288G</b>, 64 GiB"),)
    return dataclasses.replace(settings, alerts=dataclasses.replace(settings.alerts, machine_about=about))


def machine_pages(out: Path) -> dict[str, str]:
    """Every page a person reads that names the farm's machine: rel -> text."""
    m = safe_name(M)
    alert_page = next(k for k in files(out) if k.startswith("alerts/alert-"))
    series_page = next(k for k in files(out) if k.startswith("series/"))
    rels = ["index.html", f"overview/{m}.html", alert_page, series_page, "health.html", "releases.html"]
    rels += [f"releases/{m}/index.html", "releases/REL_1_0.html", "archaeology.html", f"archaeology/{m}.html"]
    return {rel: text_of(out, rel) for rel in rels}


def test_every_page_names_the_machine_by_its_name_with_its_id_beside_it_escaped(farm, tmp_path):
    """Issue #31: what a person reads names the machine by its operator's name (workers.about), the id beside it,
    owner and description as its title and in the machine lists' columns; ids stay in links and file names."""
    plain, out = tmp_path / "plain", tmp_path / "named"
    publish_all(farm.settings, plain, now=NOW)
    publish_all(named(farm.settings), out, now=NOW)
    escaped = "dandelion&lt;script&gt;alert(2)&lt;/script&gt;"
    for rel, text in machine_pages(out).items():
        assert escaped in text, f"{rel} does not name the machine"
        assert "<script>alert(2)" not in text and "<b>E-2288G" not in text, rel
        assert f'<span class="muted machine-id">{M}</span>' in text, f"{rel} lost the id beside the name"
    for rel in ("index.html", "releases.html", "archaeology.html"):  # the machine lists: owner and description
        text = text_of(out, rel)
        assert "<td>Alice &lt;alice@example.org&gt;</td>" in text, rel
        assert "<td>Xeon &lt;b&gt;E-2288G&lt;/b&gt;, 64 GiB</td>" in text, rel
    assert f'href="overview/{safe_name(M)}.html"' in text_of(out, "index.html")
    assert sorted(files(out)) == sorted(files(plain))  # same ids, file names and URLs
    # the scripts' data: compare, commit and search pages show the name and find a series by it or by its id
    refs = json.loads(text_of(out, "data/refs.js")[len("perffarm.refs(") : -3])
    assert {s["machine"] for s in refs["series"].values()} == {f"{HOSTILE_NAME} ({M})"}
    assert "<" not in text_of(out, "data/refs.js")


def test_an_unnamed_machine_still_reads_as_its_id(farm, tmp_path):
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    for rel, text in machine_pages(out).items():
        assert re.search(r'<span class="machine"[^>]*>' + re.escape(M) + "</span>", text), rel
        assert "machine-id" not in text, rel
    refs = json.loads(text_of(out, "data/refs.js")[len("perffarm.refs(") : -3])
    assert {s["machine"] for s in refs["series"].values()} == {M}


def test_naming_a_machine_renders_its_pages_again_on_the_next_publish(farm, tmp_path):
    """An incremental publish links a machine's page and the alert pages from the live version when their view is
    unchanged (docs/scale.md): the machine's name is part of that view."""
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    run_id = farm.ingest(8, 1000.0, seed=998)
    publish_incremental(named(farm.settings, name="tern"), run_id, out, now=NOW)
    pages = machine_pages(out)
    for rel in ("index.html", f"overview/{safe_name(M)}.html", next(k for k in pages if k.startswith("alerts/"))):
        assert '<span class="machine" title="Alice' in pages[rel] and ">tern</span>" in pages[rel], rel


def test_a_workers_new_fingerprint_is_a_new_generation_of_its_named_machine(tmp_path):
    """Issue #31: a fingerprint change (new hardware, OS or compiler) makes a new machine id for the same worker;
    both machines read as the operator's name, so the pages and the charts' "... starts" markers name each by its
    generation. An unnamed worker's machines read as their ids, which differ already."""
    from master.publish import source

    conn = store.connect(tmp_path / "r.sqlite")
    try:
        with store.transaction(conn):
            store.machines.bind(conn, "m-old", {"cpu_model": "Xeon"}, "bench1", 100.0)
            store.machines.bind(conn, "m-new", {"cpu_model": "EPYC"}, "bench1", 200.0)
            store.machines.bind(conn, "m-kite", {}, "bench2", 150.0)
            store.machines.bind(conn, "m-anon-1", {}, "bench3", 100.0)
            store.machines.bind(conn, "m-anon-2", {}, "bench3", 300.0)
        about = [("bench1", "tern", "Alice", ""), ("bench2", "kite", "Bob", "")]
        views = source.machine_views(conn, about)
    finally:
        conn.close()
    assert {m: (v.name, v.generation) for m, v in views.items()} == {
        "m-old": ("tern (generation 1)", 1),
        "m-new": ("tern (generation 2)", 2),
        "m-kite": ("kite", 0),
        "m-anon-1": ("m-anon-1", 0),
        "m-anon-2": ("m-anon-2", 0),
    }
    assert views["m-new"].description == "EPYC" and views["m-new"].label() == "tern (generation 2) (m-new)"


def test_a_machine_pages_digest_changes_with_its_name():
    """A publish that builds on the live version links a machine's page whose digest is unchanged: a run on another
    machine must not leave this one's page under its old name."""
    from master.machines import MachineView
    from master.publish.pages import overview

    v = {"rows": [], "open_by_sid": {}, "groups": [], "bands": None, "branches": [], "workloads": []}
    plain, tern = MachineView(M, M, "", "", "local"), MachineView(M, "tern", "", "", "local")
    assert overview.key(M, v, plain) != overview.key(M, v, tern)
    assert overview.key(M, v, tern) != overview.key(M, v, MachineView(M, "tern", "Bob", "", "local"))
