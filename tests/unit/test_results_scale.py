"""Ten years of results, small (docs/scale.md): the work that reads the results store for one series, one run or
one `perffarm status` must not grow with the history or the number of machines. Work is counted, not timed: SQLite
virtual-machine steps (a progress handler) and rows handed to the publisher, on databases made by the benchmark's
generator (tests/benchmarks/results_scale.py) at two sizes; the benchmark shows what each is worth in seconds."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from master import store
from master.store.series import SeriesKey
from tests.benchmarks import results_scale

STEP = 10  # VM instructions per progress-handler call


def steps(conn: sqlite3.Connection, call: Callable[[], object]) -> int:
    """SQLite virtual-machine instructions `call` executes on `conn` (in units of STEP)."""
    n = 0

    def tick() -> int:
        nonlocal n
        n += 1
        return 0

    conn.set_progress_handler(tick, STEP)
    try:
        call()
    finally:
        conn.set_progress_handler(None, STEP)
    return n


def fleet_db(tmp_path: Path, machines: int, workloads: int, commits: int) -> sqlite3.Connection:
    path = tmp_path / f"{machines}x{workloads}x{commits}" / "results.sqlite"
    results_scale.generate(path, results_scale.Fleet(machines, workloads, commits), quiet=True)
    return store.connect(path)


def key(machine: int, workload: int) -> SeriesKey:
    return SeriesKey(
        results_scale.machine_of(machine),
        results_scale.RECIPE,
        results_scale.VERSION,
        results_scale.CONFIG,
        results_scale.workload_of(workload),
        "tps",
        results_scale.BRANCH,
    )


def test_loading_a_series_reads_its_own_machines_rows_not_the_whole_fleets(tmp_path):
    narrow, wide = fleet_db(tmp_path, 2, 4, 60), fleet_db(tmp_path, 16, 4, 60)
    got = {name: store.series.branch_samples(c, key(1, 2)) for name, c in (("narrow", narrow), ("wide", wide))}
    assert len(got["narrow"].commits) == len(got["wide"].commits) == 60
    assert all(len(s) == 5 for s in got["wide"].samples)
    work = {name: steps(c, lambda c=c: store.series.branch_samples(c, key(1, 2))) for name, c in (
        ("narrow", narrow), ("wide", wide))}  # fmt: skip
    # through measurements_series (every machine's rows of the workload) the wide fleet cost ~8x the narrow one
    assert work["wide"] < 1.3 * work["narrow"], work


def status_reads(conn: sqlite3.Connection) -> tuple[list[store.runs.LatestRun], dict[str, int]]:
    return store.latest_per_ref(conn), store.counts(conn)


def test_status_costs_the_same_after_ten_times_the_history(tmp_path):
    short, long = fleet_db(tmp_path, 3, 4, 40), fleet_db(tmp_path, 3, 4, 400)
    latest, counts = status_reads(long)
    assert [(r.ref, r.builder, r.sha) for r in latest] == [
        ("master", f"pgbench@m{m:02d}", results_scale.sha_of(399)) for m in range(3)
    ]
    for table in ("runs", "measurements"):
        assert counts[table] == long.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    assert counts["runs"] == 1200
    work = {name: steps(c, lambda c=c: status_reads(c)) for name, c in (("short", short), ("long", long))}
    # GROUP BY over runs and COUNT(*) over measurements: ~10x the work for 10x the history
    assert work["long"] < 1.5 * work["short"], work


def test_the_row_counters_follow_inserts_and_cascaded_deletes(tmp_path):
    conn = fleet_db(tmp_path, 2, 3, 5)
    path = Path(conn.execute("PRAGMA database_list").fetchone()[2])
    conn.close()
    run_id = results_scale.next_run(path, results_scale.Fleet(2, 3, 5), 5)
    conn = store.connect(path)
    with store.transaction(conn):
        conn.execute("DELETE FROM runs WHERE id = 1")  # its measurements go by ON DELETE CASCADE
    counts = store.counts(conn)
    assert run_id == 11 and counts["runs"] == 10 and counts["measurements"] == 30, counts
    for table in ("runs", "measurements"):
        assert counts[table] == conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def incremental_rows(tmp_path: Path, monkeypatch, fleet: results_scale.Fleet, at: int | None = None) -> tuple[int, int]:
    """(measurement rows the publisher read, files written) for an incremental publish after one new run on one
    machine (or, `at`, a run on machine 1 at that commit, which every machine measured), over a site fully
    published from a generated DB of `fleet`."""
    from master.publish import publish_all, publish_incremental, scan
    from master.publish.writer import wait_for_cleanup
    from master.settings import load_settings

    data = tmp_path / fleet.name
    results_scale.generate(data / "results.sqlite", fleet, quiet=True)
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
    publish_all(settings, jobs=1)
    if at is None:
        run_id = results_scale.next_run(settings.results_db, fleet, fleet.commits)
    else:
        run_id = results_scale.next_run(settings.results_db, fleet, at, machine=1)
    read, rows = scan.read, []

    def counted(*args, **kwargs):
        m = read(*args, **kwargs)
        rows.append(len(m.run))
        return m

    monkeypatch.setattr(scan, "read", counted)
    report = publish_incremental(settings, run_id)
    wait_for_cleanup()
    assert report.incremental, report
    return sum(rows), report.files_written


def test_an_incremental_publish_reads_the_runs_machine_not_the_fleet(tmp_path, monkeypatch):
    narrow = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(2, 3, 150))
    wide = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(8, 3, 150))
    # every machine's rows at the loaded commits were read and parsed, then dropped: 4x for 4x the machines
    assert 150 * 3 <= wide[0] < 1.3 * narrow[0], (narrow, wide)


def test_an_incremental_publish_renders_the_series_pages_of_the_runs_machine_only(tmp_path, monkeypatch):
    narrow = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(2, 3, 150))
    wide = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(8, 3, 150))
    # every series page (and its index.json) was rendered again: 2 files more per series of the other machines
    assert wide[1] == narrow[1], (narrow, wide)


def test_a_run_at_an_older_commit_reads_the_other_machines_rows_at_the_changed_commits_only(tmp_path, monkeypatch):
    narrow = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(2, 3, 300), at=99)
    wide = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(8, 3, 300), at=99)
    # the changed commits' other series were loaded over the window (from the run's chunk to the head) for their
    # rows there: every machine's history since that commit, 2,709 vs 8,109 rows
    assert wide[0] < 1.3 * narrow[0], (narrow, wide)


def test_an_incremental_publish_reads_a_bounded_window_of_the_history(tmp_path, monkeypatch):
    short = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(2, 3, 300))
    long = incremental_rows(tmp_path, monkeypatch, results_scale.Fleet(2, 3, 3000))
    # the chunk of the new commit and the sparkline window, not the series' 3,000 points (the files written grow
    # with the alerts: every alert's page is rendered again, docs/scale.md)
    assert long[0] <= short[0], (short, long)


def full_publish_samples(tmp_path: Path, monkeypatch, fleet: results_scale.Fleet) -> tuple[int, int, int]:
    """(the most samples one load of a full publish held, samples loaded in all, commit rows written) for a full
    publish of a generated DB of `fleet`."""
    from master.publish import publish_all, scan
    from master.publish.writer import wait_for_cleanup
    from master.settings import load_settings

    data = tmp_path / fleet.name
    results_scale.generate(data / "results.sqlite", fleet, quiet=True)
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
    read, held = scan.read, []

    def counted(*args, **kwargs):
        m = read(*args, **kwargs)
        held.append(len(m.flat))
        return m

    monkeypatch.setattr(scan, "read", counted)
    publish_all(settings, jobs=1)
    wait_for_cleanup()
    last = (settings.site_dir / "data" / "commits" / f"{results_scale.sha_of(fleet.commits - 1)}.js").read_text()
    return max(held), sum(held), len(json.loads(last[last.index(",") + 1 : -3])["rows"])


def test_a_full_publish_holds_one_machines_samples_not_the_fleets(tmp_path, monkeypatch):
    narrow = full_publish_samples(tmp_path, monkeypatch, results_scale.Fleet(2, 3, 40))
    wide = full_publish_samples(tmp_path, monkeypatch, results_scale.Fleet(8, 3, 40))
    # one scan held every machine's samples at once: 4x for 4x the machines (7 GB at 6,000 commits x 20 machines)
    assert wide[0] == narrow[0] == 3 * 40 * 5, (narrow, wide)
    assert wide[1] == 4 * narrow[1], (narrow, wide)  # every sample is still loaded, one machine at a time
    assert (narrow[2], wide[2]) == (2 * 3, 8 * 3)  # and the commit data hold every machine's rows


def test_the_paired_references_cost_the_same_after_ten_times_the_history(tmp_path):
    # every publish asks for them; with no ratio series at all, they scanned every run of the farm
    short, long = fleet_db(tmp_path, 3, 4, 40), fleet_db(tmp_path, 3, 4, 400)
    for c in (short, long):
        store.series.ensure_for_run(c, 1)
    work = {name: steps(c, lambda c=c: store.series.references(c)) for name, c in (("short", short), ("long", long))}
    assert store.series.references(long) == {}
    assert work["long"] <= work["short"] + 1, work


def status_lines(tmp_path: Path, monkeypatch, capsys, tags: int, *flags: str) -> list[str]:
    """`perffarm status` on 3 machines whose builders also measured `tags` release tags (one run per builder at
    each tag, ref = the tag, as a tag build stores it): the lines of its latest-result list."""
    from master import cli

    data = tmp_path / f"tags{tags}"
    path = data / "results.sqlite"
    results_scale.generate(path, results_scale.Fleet(3, 2, 40), quiet=True)
    conn = store.connect(path)
    named = {f"REL_{k + 1}_0": results_scale.sha_of(k) for k in range(tags)}
    with store.transaction(conn):
        store.set_tags(conn, named)
        for name, sha in named.items():
            conn.execute("UPDATE runs SET ref = ? WHERE sha = ?", (name, sha))
    conn.close()
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(data))
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", "9")  # nothing listens there: "master not running"
    capsys.readouterr()
    assert cli.main(["status", *flags]) == 1  # the master is not running: status exits 1 (a gate)
    out = capsys.readouterr().out
    return out[out.index("latest result per") :].splitlines()


def test_status_lists_branches_and_counts_the_release_tag_rows_it_hides(tmp_path, monkeypatch, capsys):
    few, many = (status_lines(tmp_path, monkeypatch, capsys, n) for n in (2, 8))
    # one line per (tag, builder) grew the list by 3 lines per tag; now the branch rows and one line of count
    assert len(few) == len(many) == 5, many
    assert many[0] == "latest result per branch:" and all(" master " in line for line in many[1:4])
    assert many[4] == "  (24 row(s) of release tags not shown: `perffarm status --tags` lists them)"
    everything = status_lines(tmp_path / "all", monkeypatch, capsys, 8, "--tags")
    assert everything[0] == "latest result per ref:" and len(everything) == 1 + 3 + 24
    assert sum(" REL_8_0 " in line for line in everything) == 3


def published_pages(tmp_path: Path, machines: int, tags: dict[str, int] | None = None) -> dict[str, str]:
    """Every HTML page of a site fully published from a generated DB of `machines` x 3 workloads x 30 commits
    with release tags (name -> commit; default three, at commits 9, 19, 29), by path."""
    import os

    from master.publish import publish_all
    from master.settings import load_settings

    fleet = results_scale.Fleet(machines, 3, 30)
    data = tmp_path / f"{fleet.name}-{len(tags or ())}"
    results_scale.generate(data / "results.sqlite", fleet, quiet=True)
    conn = store.connect(data / "results.sqlite")
    named = {f"REL_{k}_0": 10 * k - 1 for k in (1, 2, 3)} if tags is None else tags
    with store.transaction(conn):
        store.set_tags(conn, {name: results_scale.sha_of(k) for name, k in named.items()})
    conn.close()
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
    publish_all(settings, jobs=1)
    site = Path(os.path.realpath(settings.site_dir))
    return {str(p.relative_to(site)): p.read_text() for p in site.rglob("*.html")}


def test_the_largest_page_holds_one_machines_series_and_release_charts(tmp_path):
    got = {}
    for machines in (2, 8):
        pages = published_pages(tmp_path, machines)
        # the overview and archaeology pages (the release tables: the next test)
        ours = {k: t for k, t in pages.items() if k == "index.html" or k.startswith(("overview/", "archaeology"))}
        got[machines] = {
            "sparklines": max(t.count('class="spark"') for t in pages.values()),
            "release charts": max(t.count('<figure class="chart') for t in pages.values()),
            "bytes": max(len(t) for t in ours.values()),
        }
    # index.html had every series' sparkline and archaeology.html every machine's charts: 6 vs 24 of each
    assert got[2]["sparklines"] == got[8]["sparklines"] == 3, got
    assert got[2]["release charts"] == got[8]["release charts"] == 3, got
    assert got[8]["bytes"] < 1.2 * got[2]["bytes"], got
    assert f'<a href="overview/{results_scale.machine_of(7)}.html">' in pages["index.html"]
    assert f'<a href="archaeology/{results_scale.machine_of(7)}.html">' in pages["archaeology.html"]


def release_tables(pages: dict[str, str]) -> dict[str, int]:
    """The largest release page (releases.html, releases/**): its bytes, rows (absolute values table) and columns."""
    ours = {k: t for k, t in pages.items() if k.startswith("releases")}
    return {
        "bytes": max(len(t) for t in ours.values()),
        "rows": max(t.count('<span class="unit">') for t in ours.values()),
        "columns": max(t.count('<th class="num">') // 2 for t in ours.values()),  # two tables on a page
    }


def test_the_largest_release_page_holds_one_machines_rows_and_a_bounded_set_of_releases(tmp_path):
    few = published_pages(tmp_path, 2)
    fleet = {2: release_tables(few), 8: release_tables(published_pages(tmp_path, 8))}
    # releases.html and releases/<tag>.html had a row per series of the farm: 6 vs 24 rows
    assert fleet[2]["rows"] == fleet[8]["rows"] == 3, fleet
    assert fleet[8]["bytes"] < 1.2 * fleet[2]["bytes"], fleet
    # 3 releases, then 12: 4 of each of 3 majors (REL_12_0 ... REL_12_3 are 12): a page had a column per tag, 3 vs 12
    many = published_pages(
        tmp_path, 2, {f"REL_{k}_{m}": 10 * (k - 10) - 7 + 2 * m for k in (11, 12, 13) for m in range(4)}
    )
    got = {"few": release_tables(few), "many": release_tables(many)}
    assert got["few"]["columns"] == 3 and got["many"]["columns"] == 4, got  # a major's page: its 4 minors
    machine = results_scale.machine_of(1)
    main, minors = many[f"releases/{machine}/index.html"], many[f"releases/{machine}/major-12/index.html"]
    assert main.count('<th class="num">') // 2 == 3  # one per major
    assert '<a href="../../releases/' + machine + '/major-12/index.html">12: 4 releases</a>' in main
    assert "one release per major</a>" not in main and f'{machine}/index.html">one release per major</a>' in minors
    link = f'<a href="releases/{machine}/index.html"><span class="machine"[^>]*>{machine}</span></a>'
    assert re.search(link, many["releases.html"])
    by_tag = many["releases/REL_12_3.html"]  # the old URL of the table vs REL_12_3: the machines' tables vs it
    assert f'<a href="../releases/{machine}/vs-REL_12_3.html">one release per major</a>' in by_tag
    assert f'<a href="../releases/{machine}/major-12/vs-REL_12_3.html">12: 4 releases</a>' in by_tag


def test_past_the_majors_shown_every_major_has_one_table_not_one_per_base(tmp_path, monkeypatch):
    from master.publish import views

    monkeypatch.setattr(views, "MAJORS", 2)  # 3 majors measured: the machine's tables show the newest 2
    pages = published_pages(tmp_path, 1)
    machine = results_scale.machine_of(0)
    assert sorted(k for k in pages if k.startswith(f"releases/{machine}/")) == [
        f"releases/{machine}/every-major/index.html",  # vs REL_1_0 only: a page per base would be majors² cells
        f"releases/{machine}/index.html",
        f"releases/{machine}/vs-REL_3_0.html",
    ]
    assert pages[f"releases/{machine}/every-major/index.html"].count('<th class="num">') // 2 == 3


def test_a_run_at_a_release_tag_redraws_its_own_machines_release_pages_only(tmp_path):
    import os

    from master.publish import publish_all, publish_incremental
    from master.publish.writer import wait_for_cleanup
    from master.settings import load_settings

    fleet = results_scale.Fleet(3, 2, 20)
    data = tmp_path / fleet.name
    results_scale.generate(data / "results.sqlite", fleet, quiet=True)
    conn = store.connect(data / "results.sqlite")
    with store.transaction(conn):
        store.set_tags(conn, {"REL_1_0": results_scale.sha_of(9), "REL_2_0": results_scale.sha_of(19)})
    conn.close()
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
    publish_all(settings, jobs=1)
    before = Path(os.path.realpath(settings.site_dir))
    run_id = results_scale.next_run(settings.results_db, fleet, 19, machine=1)  # measured again at REL_2_0
    assert publish_incremental(settings, run_id).incremental
    wait_for_cleanup()
    after = Path(os.path.realpath(settings.site_dir))
    redrawn = sorted(
        str(p.relative_to(after))
        for p in [after / "archaeology.html", *(after / "archaeology").rglob("*")]
        if p.is_file() and p.stat().st_ino != (before / p.relative_to(after)).stat().st_ino
    )
    assert redrawn == ["archaeology.html", f"archaeology/{results_scale.machine_of(1)}.html"]
    # the release tables: that machine's (a page per base release); the lists of machines did not change
    tables = sorted(
        str(p.relative_to(after))
        for p in [after / "releases.html", *(after / "releases").rglob("*")]
        if p.is_file() and p.stat().st_ino != (before / p.relative_to(after)).stat().st_ino
    )
    machine = results_scale.machine_of(1)
    assert tables == [f"releases/{machine}/index.html", f"releases/{machine}/vs-REL_2_0.html"], tables


NOW = 1_800_000_000.0


def run_at_a_tag(tmp_path: Path, fleet: results_scale.Fleet, commit: int) -> tuple[set[str], dict[str, bytes], dict]:
    """A generated DB of `fleet` tagged every 50 commits, fully published, then one more commit measured (so the
    tags are old) and commit `commit` measured again on machine 1: (the files its incremental publish wrote, the
    site it made, a full publish of the same DB), files by path."""
    import os

    from master.publish import publish_all, publish_incremental
    from master.publish.writer import wait_for_cleanup
    from master.settings import load_settings

    data = tmp_path / fleet.name
    results_scale.generate(data / "results.sqlite", fleet, quiet=True)
    conn = store.connect(data / "results.sqlite")
    with store.transaction(conn):
        store.set_tags(
            conn, {f"REL_{k}_0": results_scale.sha_of(50 * k - 1) for k in range(1, fleet.commits // 50 + 1)}
        )
    conn.close()
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
    publish_all(settings, jobs=1, now=NOW)
    assert publish_incremental(settings, results_scale.next_run(settings.results_db, fleet, fleet.commits), now=NOW)
    wait_for_cleanup()
    before = Path(os.path.realpath(settings.site_dir))
    inodes = {p: p.stat().st_ino for p in before.rglob("*") if p.is_file()}
    run_id = results_scale.next_run(settings.results_db, fleet, commit, machine=1)
    report = publish_incremental(settings, run_id, now=NOW)
    wait_for_cleanup()
    assert report.incremental, report
    after = Path(os.path.realpath(settings.site_dir))
    site = {str(p.relative_to(after)): p.read_bytes() for p in after.rglob("*") if p.is_file()}
    written = {k for k in site if inodes.get(before / k) != (after / k).stat().st_ino}
    full = tmp_path / f"{fleet.name}-full"
    publish_all(settings, full, jobs=1, now=NOW)
    wait_for_cleanup()
    full = Path(os.path.realpath(full))
    return written, site, {str(p.relative_to(full)): p.read_bytes() for p in full.rglob("*") if p.is_file()}


def test_a_run_at_an_old_tagged_commit_rewrites_its_own_machines_files_only(tmp_path):
    got = {m: run_at_a_tag(tmp_path / str(m), results_scale.Fleet(m, 3, 150), 99) for m in (2, 8)}
    for _written, site, full in got.values():
        assert sorted(site) == sorted(full)
        assert [k for k in site if site[k] != full[k]] == []  # as a full publish would write it
    narrow, wide = got[2][0], got[8][0]
    # every machine's runs are at that commit: each one's series were loaded and their chunks and pages rewritten
    assert len(wide) == len(narrow), (sorted(narrow), sorted(wide))
    machine = results_scale.machine_of(1)
    assert {k.split("/")[1] for k in wide if k.startswith("releases/") and k.count("/") > 1} == {machine}


def test_an_incremental_publish_renders_the_pages_of_the_alerts_that_changed_only(tmp_path, monkeypatch):
    import os

    from master.alerts import sync as alerts
    from master.publish import publish_all, publish_incremental
    from master.publish.pages import alerts as alert_pages
    from master.publish.writer import wait_for_cleanup
    from master.settings import load_settings

    fleet = results_scale.Fleet(2, 3, 600)  # one step in 200 commits: a few alerts
    data = tmp_path / fleet.name
    results_scale.generate(data / "results.sqlite", fleet, quiet=True)
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
    publish_all(settings, jobs=1, now=NOW)
    rendered: list[str] = []
    render = alert_pages.render

    def counted(template: str, **kw):
        rendered.append(template)
        return render(template, **kw)

    monkeypatch.setattr(alert_pages, "render", counted)

    def publish(commit: int) -> list[str]:
        rendered.clear()
        run_id = results_scale.next_run(settings.results_db, fleet, commit)
        assert publish_incremental(settings, run_id, now=NOW).incremental
        wait_for_cleanup()
        return [t for t in rendered if t == "alert.html"]

    conn = store.connect(settings.results_db)
    ids = [r[0] for r in conn.execute("SELECT id FROM alerts ORDER BY id")]
    assert len(ids) >= 3, ids
    # no alert changed: every alert's page was rendered again after each run
    assert publish(fleet.commits) == []
    alerts.set_state(conn, ids[1], "acknowledged", by="someone", now=NOW)
    conn.close()
    assert publish(fleet.commits + 1) == ["alert.html"]
    site = Path(os.path.realpath(settings.site_dir))
    page = next((site / "alerts").glob(f"*{ids[1]}*.html")).read_text()
    assert "acknowledged" in page and "someone" in page
    full = tmp_path / "full"
    publish_all(settings, full, jobs=1, now=NOW)
    wait_for_cleanup()
    full = Path(os.path.realpath(full))
    a = {str(p.relative_to(site)): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    b = {str(p.relative_to(full)): p.read_bytes() for p in full.rglob("*") if p.is_file()}
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []  # the alert's page, its machine's overview: as a full publish


def test_an_incremental_publish_renders_the_overview_of_the_runs_machine_only(tmp_path, monkeypatch):
    from master.publish import publish_all, publish_incremental
    from master.publish.pages import overview
    from master.publish.writer import wait_for_cleanup
    from master.settings import load_settings

    rendered: list[str] = []
    render = overview.render

    def counted(template: str, **kw):
        rendered.append(kw.get("machine_id", template))
        return render(template, **kw)

    monkeypatch.setattr(overview, "render", counted)
    got = {}
    for machines in (2, 8):
        fleet = results_scale.Fleet(machines, 3, 40)
        data = tmp_path / fleet.name
        results_scale.generate(data / "results.sqlite", fleet, quiet=True)
        settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(data)})
        publish_all(settings, jobs=1, now=NOW)
        rendered.clear()
        run_id = results_scale.next_run(settings.results_db, fleet, fleet.commits, machine=1)
        assert publish_incremental(settings, run_id, now=NOW).incremental
        wait_for_cleanup()
        got[machines] = sorted(rendered)
    # every machine's page was rendered (then written where its bytes changed): 2 vs 8
    assert got[2] == got[8] == ["index.html", results_scale.machine_of(1)], got


def test_a_run_at_an_old_commit_rewrites_the_chunks_of_its_point_and_the_next_only(tmp_path, monkeypatch):
    from master.publish import publisher, source
    from master.publish.pages import assets, branches, series, series_data

    for module in (source, publisher, series, assets, series_data, branches):
        monkeypatch.setattr(module, "CHUNK", 50)  # 150 commits: chunks 0..3
    written, site, full = run_at_a_tag(tmp_path, results_scale.Fleet(2, 3, 150), 49)
    assert sorted(site) == sorted(full)
    assert [k for k in site if site[k] != full[k]] == []
    chunks = sorted(
        {k.rsplit("/", 1)[1].split(".")[0] for k in written if k.startswith("data/series/") and "index" not in k}
    )
    # commit 49 is in chunk 0, its next point (50) in chunk 1; every later one to the last point was rewritten: 0, 1, 2
    assert chunks == ["0", "1"], chunks
