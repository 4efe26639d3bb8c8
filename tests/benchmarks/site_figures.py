"""The history site's four performance figures (issue #7), measured.

    .venv/bin/python -m tests.benchmarks.site_figures [--work DIR] [--series 100] [--commits 10000] [--runs 3]

1. full publish of SERIES x COMMITS (one branch, 5 samples per point, a release tag every 1,000 commits):
   COLD_RUNS "cold" ones (no site, no publish cache, the results DB evicted from the OS page cache), then
   RUNS "warm" ones (median of each; wall time and the CPU time of both processes);
2. incremental publish after one new run (one new commit measured on every series), RUNS times (median);
   2b. the same with a new release tag on the previous head (release tables, tag marks, every summary change);
3. the largest page transferred over master.publish.serve: the page plus everything it loads, measured in
   Chromium; that server does not gzip, so the bytes are uncompressed (gzip -6 sizes printed for reference);
4. the series page with COMMITS points in headless Chromium: milliseconds from navigation start until the chart
   is drawn, the table of points filled and the page answers a hover (RUNS loads, median);
5. the compare page of the first release tag and the newest commit: milliseconds from navigation start until
   every series' ratio, CI and verdict are shown (RUNS loads, median).

The results DB is built once through master.store (tests/benchmarks/publish_data.py) and kept in --work.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

from master.publish import publish_all, publish_incremental  # noqa: E402
from master.publish.publisher import PublishReport  # noqa: E402
from master.publish.serve import serve  # noqa: E402
from master.publish.writer import wait_for_cleanup  # noqa: E402
from master.settings import Settings, load_settings  # noqa: E402
from tests.benchmarks import publish_data  # noqa: E402

BENCH_TAG = "BENCH_TAG_"  # tags added by step 2b, removed at its end
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


def say(msg: str) -> None:
    print(msg, flush=True)


def forget(out: Path, work: Path) -> None:
    """No site and no publish cache: what a cold full publish starts from."""
    wait_for_cleanup()
    for p in (out, work / ".site.versions", work / "publish-cache.sqlite"):
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.exists():
            shutil.rmtree(p)


def evict(db: Path) -> None:
    """Drop the results DB's pages from the OS page cache (this file only, so other work on the machine is not
    disturbed): the publish then reads it from disk."""
    for p in (db, db.with_name(db.name + "-wal")):
        if p.exists():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the forked second publisher)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(publish: Callable[[], PublishReport]) -> tuple[float, float]:
    """(wall seconds as the publish reports them, CPU seconds of both processes)."""
    c = cpu_seconds()
    report = publish()
    return report.seconds, cpu_seconds() - c


def incremental_runs(settings: Settings, out: Path, first: int, runs: int, series: int, tag: bool = False) -> None:
    """`runs` ingests of new commits first, first+1, ... (each measured on every series; with tag=True the
    previous head also gets a new release tag), each followed by an incremental publish; prints the median."""
    times = []
    for i in range(first, first + runs):
        run_id = publish_data.next_run(
            settings.results_db, i, series, tag_previous=f"{BENCH_TAG}{i - 1}" if tag else None
        )
        r = publish_incremental(settings, run_id, out)
        wait_for_cleanup()
        assert r.incremental, r
        times.append(r.seconds)
        say(f"   run {run_id}: {r.seconds:.3f} s, {r.files_written} files")
    say(f"   median {statistics.median(times):.3f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/perffarm-site-figures"))
    ap.add_argument("--series", type=int, default=100)
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cold-runs", type=int, default=None, help="cold full publishes (default: --runs)")
    ap.add_argument("--skip-browser", action="store_true")
    args = ap.parse_args(argv)
    args.cold_runs = args.runs if args.cold_runs is None else args.cold_runs
    work = args.work / f"{args.series}x{args.commits}"
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(work)})
    if not settings.results_db.exists():
        say(f"building a results DB: {args.series} series x {args.commits} commits (once; kept in {work})")
        t = time.perf_counter()
        publish_data.build(settings.results_db, args.commits, args.series, tags_every=1000)
        say(f"  built in {time.perf_counter() - t:.1f} s")
    out = work / "site"

    say(f"\n1. full publish, {args.series} series x {args.commits} commits (wall s / CPU s of both processes)")
    cold = []
    for _ in range(args.cold_runs):
        forget(out, work)
        evict(settings.results_db)
        cold.append(timed(lambda: publish_all(settings, out)))
        say(f"   cold: {cold[-1][0]:.2f} s / {cold[-1][1]:.2f} s CPU")
    if cold:
        say(
            f"   cold (no site, no publish cache, results DB evicted from the OS page cache): median "
            f"{statistics.median(c[0] for c in cold):.2f} s, CPU {statistics.median(c[1] for c in cold):.2f} s"
        )
    full = []
    for _ in range(args.runs):
        full.append(timed(lambda: publish_all(settings, out)))
        t = time.perf_counter()
        wait_for_cleanup()  # the retired version is deleted in the background; do not let runs overlap it
        say(
            f"   warm: {full[-1][0]:.2f} s / {full[-1][1]:.2f} s CPU (then {time.perf_counter() - t:.1f} s deleting "
            "the retired version)"
        )
    say(
        f"   warm (publish cache and page cache as the previous publish left them): "
        f"{', '.join(f'{x[0]:.2f}' for x in full)} s -> median {statistics.median(x[0] for x in full):.2f} s, "
        f"CPU {statistics.median(x[1] for x in full):.2f} s"
    )

    say("\n2. incremental publish after one new run (a new commit, every series measured)")
    from master import store

    conn = store.connect(settings.results_db)
    head = store.branch_head(conn, "master")[0] + 1  # earlier runs of this script appended commits
    conn.close()
    incremental_runs(settings, out, head, args.runs, args.series)

    say("\n2b. incremental publish after a new release tag (on the previous head) and one new run")
    try:
        incremental_runs(settings, out, head + args.runs, args.runs, args.series, tag=True)
    finally:  # keep the benchmark DB's tags as built: the next full publish renders the same release tables
        conn = store.connect(settings.results_db)
        with store.transaction(conn):
            conn.execute("DELETE FROM tags WHERE name LIKE ?", (BENCH_TAG + "%",))
        conn.close()

    if args.skip_browser:
        return 0
    from playwright.sync_api import sync_playwright

    url, _, server = serve(out, "127.0.0.1", 0)
    site = Path(os.path.realpath(out))
    sid = sorted(p.stem for p in (site / "series").glob("*.html"))[0]
    latest = sorted((site / "data" / "commits").glob("*.js"))[0].stem
    pages = [
        "index.html",
        f"series/{sid}.html",
        f"commit.html?c={latest}",
        "compare.html",
        f"compare.html?base=REL_1_0&new={latest}",  # every series' data at two commits, compared
        "alerts.html",
        "releases.html",
        *(f"releases/{d.name}/index.html" for d in sorted((site / "releases").glob("*/"))[:1]),  # a machine's table
        "health.html",
    ]
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=ARGS)
            say("\n3. transferred bytes per page (page + everything it loads; the server does not gzip)")
            sizes = {}
            for rel in pages:
                page = browser.new_page()
                got: list[tuple[str, int, int]] = []

                def on_response(resp, got=got):
                    try:
                        body = resp.body()
                    except Exception:  # noqa: BLE001 - a redirect or aborted request has no body
                        return
                    got.append((resp.url, len(body), len(gzip.compress(body, 6))))

                page.on("response", on_response)
                page.goto(url + rel, wait_until="networkidle")
                page.close()
                raw, gz = sum(x[1] for x in got), sum(x[2] for x in got)
                sizes[rel] = (raw, gz, len(got))
                say(f"   {rel:<40} {raw / 1e6:7.3f} MB in {len(got)} files (gzip -6: {gz / 1e6:.3f} MB)")
            big = max(sizes, key=lambda k: sizes[k][0])
            say(f"   largest: {big}: {sizes[big][0] / 1e6:.3f} MB uncompressed")

            say(f"\n4. series page interactive time, {args.commits} points, headless Chromium")
            times = []
            for i in range(max(args.runs, 5)):
                ctx = browser.new_context()  # a cold browser cache each time
                page = ctx.new_page()
                page.goto(url + f"series/{sid}.html")
                page.wait_for_selector("#chart[data-interactive-ms]")
                ready = float(page.get_attribute("#chart", "data-interactive-ms"))
                n = page.evaluate("() => perffarm.chart.positions.length")
                x = page.evaluate(
                    "() => perffarm.chart.clientXOf(perffarm.chart.positions[perffarm.chart.positions.length >> 1])"
                )
                y = page.evaluate("() => perffarm.chart.clientYOf(perffarm.chart.positions.length >> 1)")
                t0 = page.evaluate("() => performance.now()")
                page.mouse.move(x, y)
                page.wait_for_selector("#tip:not([hidden])")
                hover = page.evaluate("() => performance.now()") - t0
                times.append(ready)
                say(f"   load {i + 1}: interactive at {ready:.0f} ms ({n} points), hover answered in {hover:.0f} ms")
                ctx.close()
            say(f"   median {statistics.median(times):.0f} ms")

            say(f"\n5. compare page: REL_1_0 vs {latest[:12]}, every series' ratio, CI and verdict, headless Chromium")
            times = []
            for i in range(max(args.runs, 5)):
                ctx = browser.new_context()
                page = ctx.new_page()
                page.goto(url + f"compare.html?base=REL_1_0&new={latest}")
                page.wait_for_selector("body[data-ready-ms]")
                ready = float(page.get_attribute("body", "data-ready-ms"))
                rows = page.locator("#result tbody tr[data-sid]").count()
                times.append(ready)
                say(f"   load {i + 1}: verdicts shown at {ready:.0f} ms ({rows} series)")
                ctx.close()
            say(f"   median {statistics.median(times):.0f} ms")
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
