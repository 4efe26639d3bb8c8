"""Full and incremental publishing: load a Context (context.py), call the page writers of the PAGES table
(master/publish/pages/) for what is to be written, swap the new version in atomically (writer.py).

A full publish calls every writer for everything: series and batches of commits shared with a forked second
process on two cores (forkjoin.py), the site-wide pages and branch facts here. An incremental publish (after each
ingest) works out what one run changed (its commit's chunk of each series it measured, the next tested commit of
each, new branch positions, tag changes) and calls each scope's writers for that only; it falls back to a full
publish when it cannot prove the result would be the same bytes. Neither names a page: a new page is a module
and a line in PAGES. Every writer call is isolated (isolate.py): a page that raises is written as what went wrong
and reported, the others are published, and the next publish is a full one."""

from __future__ import annotations

import dataclasses
import itertools
import os
import pickle
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from master import store
from master.publish import commits, forkjoin, isolate, pages, source
from master.publish.cache import failed_pages, load_state, open_cache, save_page_keys, save_state
from master.publish.context import Context, bands, run_views
from master.publish.model import SiteSeries
from master.publish.source import CHUNK, SeriesRef
from master.publish.views import SPARK_WINDOW, Summary, siblings_of
from master.publish.writer import PublishError, SiteWriter, only_cleanup_threads, publish_lock, wait_for_cleanup
from master.store.runs import RunWithLog
from master.store.series import MeasureKey


@dataclass(frozen=True)
class PublishReport:
    """What a publish did, for logs and benchmarks."""

    out_dir: Path
    version: str
    incremental: bool
    files_written: int
    series: int
    commit_pages: int
    ratios_computed: int
    ratios_reused: int
    seconds: float
    files_linked: int = 0  # of files_written, unchanged ones hard-linked from the live version (full publish)
    # pages written as what went wrong instead (isolate.py); every other page was published
    failures: tuple[isolate.PageFailure, ...] = ()

    def failed(self) -> str:
        """'' when every page was built, else one line for a log: how many failed, the first of them."""
        if not self.failures:
            return ""
        n, first = len(self.failures), self.failures[0].line()
        return f"; {n} page{'s' if n > 1 else ''} could not be built (the next publish tries again): {first}"


def site_dir(settings: Any) -> Path:
    """Where the site goes: `[site] out_dir`, else <data_dir>/site."""
    return Path(settings.site_dir)


def _open(settings: Any) -> sqlite3.Connection:
    conn = store.connect(settings.results_db)
    conn.row_factory = sqlite3.Row
    return conn


class _Publish:
    """One publish's database connection, ratio cache and site writer, in a `with`: an exception aborts the new
    version (it is never swapped in), and the end removes the scratch directories and closes the rest, whatever
    happened."""

    def __init__(self, settings: Any, out: Path) -> None:
        self.t0 = time.perf_counter()
        self.out = out
        self.conn = _open(settings)
        self.cache = open_cache(settings)
        self.w: SiteWriter | None = None
        self.scratch: list[Path] = []

    def writer(self, *, incremental: bool) -> SiteWriter:
        self.w = SiteWriter(self.out, incremental=incremental)
        return self.w

    def __enter__(self) -> _Publish:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if kind is not None and self.w is not None:
                self.w.abort()
        finally:
            for path in self.scratch:
                shutil.rmtree(path, ignore_errors=True)
            self.cache.close()
            self.conn.close()

    def incremental_report(self, final: Path, series: int, commit_pages: int) -> PublishReport:
        """What an incremental publish wrote (its files linked from the live version are not counted apart)."""
        assert self.w is not None  # the version `final` was written by it
        return PublishReport(
            self.out,
            final.name,
            True,
            len(self.w.written),
            series,
            commit_pages,
            self.cache.computed,
            self.cache.reused,
            time.perf_counter() - self.t0,
            failures=tuple(self.w.failures),
        )


def _heads_with_sha(conn: sqlite3.Connection, heads: Mapping[str, int]) -> dict[str, tuple[int, str]]:
    return {b: (pos, store.commits.sha_at(conn, b, pos) or "") for b, pos in heads.items()}


Progress = Callable[[str], None]


def publish_all(
    settings: Any,
    out_dir: Path | None = None,
    *,
    now: float | None = None,
    progress: Progress | None = None,
    jobs: int | None = None,
) -> PublishReport:
    """Render the whole site from the results database into a new version and swap it in. jobs=2 forks: half the
    parsing, half the rQPS and about half the writing happen in a second process (default: default_jobs())."""
    out = Path(os.path.abspath(out_dir if out_dir else site_dir(settings)))
    if jobs != 1 and only_cleanup_threads():
        wait_for_cleanup()  # a previous publish's deletion threads: no reason to give up the second process
    jobs = default_jobs() if jobs is None else jobs
    if jobs > 1 and threading.active_count() > 1:
        raise PublishError("jobs > 1 forks; this process has other threads: publish with jobs=1")
    with publish_lock(out):
        return _publish_all(settings, out, time.time() if now is None else now, progress, jobs)


def default_jobs() -> int:
    """2 processes for a full publish when this process has one thread and the machine two cores; 1 in the
    master (threads: forking there is not safe)."""
    return 2 if threading.active_count() == 1 and (os.cpu_count() or 1) > 1 else 1


def _publish_all(settings: Any, out: Path, now: float, progress: Progress | None, jobs: int = 1) -> PublishReport:
    """One machine at a time (a machine's series share no point with another's): its samples are loaded, its
    series' data chunks written and its rows of every commit's data kept on disk (a spill directory next to the
    new version), then dropped, so the memory held is one machine's history, not the fleet's (docs/scale.md).
    What the other pages need of every series is its Summary; the commit data merge the machines' rows."""
    say = progress or (lambda _m: None)
    with _Publish(settings, out) as p:
        conn, cache, w = p.conn, p.cache, p.writer(incremental=False)
        spill = w.versions / (w.root.name.removesuffix(".tmp") + "-spill.tmp")  # a crashed publish's: pruned as stale
        p.scratch.append(spill)
        upto = store.runs.last_run_id(conn)  # read first: a run stored while this publish loads is caught up later
        ctx = Context(conn, cache, bands(settings), settings)
        ctx.now = now
        orders = {b: store.commits.branch_order(conn, b) for b in ctx.heads}
        where: dict[str, list[tuple[str, int]]] = {}
        for b, order in orders.items():
            for pos, sha in order:
                where.setdefault(sha, []).append((b, pos))
        ctx.tag_positions = {b: {sha: pos for pos, sha in order if sha in ctx.tag_at} for b, order in orders.items()}
        ctx.commits = source.commits(conn, None)
        shas = sorted(store.runs.run_shas(conn))  # every commit with a run has a data file
        ctx.messages = source.messages(conn, None)
        ctx.positions = {sha: dict(where[sha]) for sha in shas if sha in where}
        batches = [shas[i : i + COMMIT_BATCH] for i in range(0, len(shas), COMMIT_BATCH)]
        fleet: dict[str, list[tuple[str, str, int]]] = {}
        for config in store.runs.measured_configs(conn):
            fleet.setdefault(config[0], []).append(config)
        spill.mkdir()
        summaries: list[Summary] = []
        order_keys: list[list[tuple]] = []  # per machine: the commit rows' order key of each of its series
        theirs = (0, 0)
        chunk_pages = pages.of(pages.CHUNKS)
        for g, machine in enumerate(sorted(fleet)):  # machine first: the summaries come in the published order
            say(f"loading the samples of machine {g + 1}/{len(fleet)} at {len(where)} commits, rQPS of every point")
            ctx.load(where, None, None, jobs, machines=fleet[machine], with_commits=False)
            mine = list(ctx.summaries(ctx.series.values()).values())
            summaries += mine
            by_sid = {s.sid: s for s in ctx.series.values()}
            by_commit = commits.order(ctx)
            order_keys.append([commits.order_key(by_sid[sid]) for sid in by_commit.sids] if by_commit else [])

            def write_chunks(summ: Summary, by_sid: dict[str, SiteSeries] = by_sid) -> None:
                for page in chunk_pages:
                    _write(w, page, ctx, by_sid[summ.sid], summ.first_position // CHUNK, summ.last_position // CHUNK)

            def spill_rows(i: int, g: int = g, o: commits.CommitOrder | None = by_commit) -> None:
                if o is not None:
                    group = o.index()
                    present = [k for k, sha in enumerate(batches[i]) if sha in group]
                    if present:
                        parts = commits.row_parts(ctx, o, [group[batches[i][k]] for k in present])
                        _spill_write(spill / f"rows-{g}-{i}", present, parts)

            tasks: list[Callable[[], None]] = [lambda x=x: write_chunks(x) for x in mine]
            tasks += [lambda i=i: spill_rows(i) for i in range(len(batches))]
            theirs = _add(theirs, _share(w, tasks, jobs))
        ctx.unload()
        sib = siblings_of(summaries)
        rank = _ranks(order_keys)
        say(f"the runs of {len(shas)} commits")
        for i, part in enumerate(batches):
            with open(spill / f"runs-{i}", "wb") as f:
                pickle.dump(run_views(ctx, part), f, protocol=pickle.HIGHEST_PROTOCOL)
        series_pages, commit_pages = pages.of(pages.SERIES), pages.of(pages.COMMIT)

        def write_series(summ: Summary) -> None:
            for page in series_pages:
                _write(w, page, ctx, summ, sib[summ.sid])

        def write_commits(i: int) -> None:
            part = batches[i]
            with open(spill / f"runs-{i}", "rb") as f:
                runs: dict[str, list[RunWithLog]] = pickle.load(f)
            loaded = []
            for g in range(len(fleet)):
                got = _spill_read(spill / f"rows-{g}-{i}", len(part))
                if got is not None:
                    loaded.append((*got, rank[g]))
            files = _Files()
            for k, sha in enumerate(part):
                text = commits.merged_rows([(p, int(at[k]), r) for p, at, r in loaded if at[k] >= 0])
                for page in commit_pages:
                    _write(w, page, ctx, sha, text, runs.get(sha, []), into=files)
            with w.exclusive():  # one directory for both processes: they take turns per batch, encoding meanwhile
                for rel, text in files.items:
                    w.write(rel, text)

        def write_summaries() -> None:  # they read the database: in this process only
            for page in pages.of(pages.SITE, full=True):
                _write(w, page, ctx, summaries)
            for b, order in orders.items():
                for page in pages.of(pages.BRANCH):
                    _write(w, page, ctx, b, order)

        tasks = [lambda x=x: write_series(x) for x in summaries]
        tasks += [lambda i=i: write_commits(i) for i in range(len(batches))]
        say(
            f"writing {len(summaries)} series and {len(shas)} commits' data" + (" in two processes" if jobs > 1 else "")
        )
        theirs = _add(theirs, _share(w, tasks, jobs, write_summaries))
        shutil.rmtree(spill)
        say("swapping the new version in")
        final = w.commit()
        cache.flush()
        keys = _series_keys(ctx, summaries, sib)
        heads = _heads_with_sha(conn, ctx.heads)
        save_state(cache, summaries, True, out, heads, ctx.tags, upto, keys, ctx.new_page_keys, w.failures)
    return PublishReport(
        out,
        final.name,
        False,
        len(w.written) + theirs[0],
        len(summaries),
        len(shas),
        cache.computed,
        cache.reused,
        time.perf_counter() - p.t0,
        w.linked + theirs[1],
        tuple(w.failures),
    )


def _share(
    w: SiteWriter, tasks: Sequence[Callable[[], None]], jobs: int, here_first: Callable[[], None] | None = None
) -> tuple[int, int]:
    """forkjoin.share: (files written, of them linked) by the second process; the pages that failed there are
    added to w.failures."""
    written, linked, failed = len(w.written), w.linked, len(w.failures)  # as the child starts: it counts from there
    try:
        got = forkjoin.share(
            tasks,
            jobs,
            here_first=here_first,
            child_result=lambda: (len(w.written) - written, w.linked - linked, w.failures[failed:]),
        )
    except forkjoin.ChildFailed as e:
        raise PublishError(f"writing the site in the second process failed: {e}") from None
    if got is None:
        return (0, 0)
    w.failures.extend(got[2])
    return got[0], got[1]


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def _write(w: SiteWriter, page: pages.Page, ctx: Context, *args: Any, into: Any = None) -> None:
    """page.write(into or w, ctx, *args), isolated: if it raises, the page's file says what went wrong, the failure
    is in w.failures and the publish goes on (isolate.py)."""
    with isolate.page(w, page.name, page.file_of(*args)):
        page.write(w if into is None else into, ctx, *args)


def _ranks(order_keys: list[list[tuple]]) -> list[np.ndarray]:
    """Per machine, the rank of each of its series among every machine's (commits.order_key)."""
    flat = [k for keys in order_keys for k in keys]
    rank = np.empty(len(flat), dtype=np.int64)
    rank[sorted(range(len(flat)), key=flat.__getitem__)] = np.arange(len(flat))
    bounds = np.cumsum([0] + [len(keys) for keys in order_keys]).tolist()
    return [rank[a:b] for a, b in itertools.pairwise(bounds)]


def _spill_write(path: Path, present: list[int], p: commits.RowParts) -> None:
    """One machine's rows of one batch of commits: the batch indexes of the commits it has rows at, the rows."""
    head = np.array([len(present), len(p.codes)], dtype=np.int64)
    with open(path, "wb") as f:
        for a in (head, np.asarray(present, dtype=np.int64), p.sizes, p.codes, p.lens):
            f.write(np.ascontiguousarray(a, dtype=np.int64).tobytes())
        f.write(p.blob)


def _spill_read(path: Path, batch: int) -> tuple[commits.RowParts, np.ndarray] | None:
    """What _spill_write wrote, and per commit of the batch its group in the rows (-1: none); None: no rows."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    groups, rows = np.frombuffer(data, dtype=np.int64, count=2).tolist()
    cols = np.frombuffer(data, dtype=np.int64, count=2 * groups + 2 * rows, offset=16)
    present, sizes = cols[:groups], cols[groups : 2 * groups]
    codes, lens = cols[2 * groups : 2 * groups + rows], cols[2 * groups + rows :]
    at = np.full(batch, -1, dtype=np.int64)
    at[present] = np.arange(groups)
    return commits.RowParts(sizes, codes, lens, data[16 + 8 * (2 * groups + 2 * rows) :]), at


class _Files:
    """Files rendered in memory, written later (SiteWriter.write's signature)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def write(self, rel: str, text: str) -> None:
        self.items.append((rel, text))


COMMIT_BATCH = 250  # commits per task: small enough to balance two processes, large enough to amortise a batch


def tag_changes(old: Mapping[str, str], new: Mapping[str, str]) -> set[str]:
    """Commits whose tags differ between two publishes (a tag added, moved or removed)."""
    return {
        sha
        for name in set(old) | set(new)
        if old.get(name) != new.get(name)
        for sha in (old.get(name), new.get(name))
        if sha
    }


def _tag_windows(
    conn: sqlite3.Connection, ctx: Context, retagged: set[str], windows: dict[str, tuple[int, int]]
) -> set[str]:
    """Branches where a tag changed; each gets at least the sparkline's window loaded (its series' summaries are
    recomputed: the rQPS of the latest point vs the previous release may change)."""
    branches = {b for sha in retagged for b in store.commits.positions_of(conn, sha)}
    for b in branches:
        lo = max(ctx.heads[b] - SPARK_WINDOW + 1, 0)
        windows[b] = (min(lo, windows.get(b, (lo, 0))[0]), ctx.heads[b])
    return branches


def _load_for_tags(
    conn: sqlite3.Connection,
    retagged: set[str],
    branches: set[str],
    cached: Mapping[str, Summary],
    where: dict[str, list[tuple[str, int]]],
) -> None:
    """What a tag change needs besides the windows: each (re)tagged commit and, per series measured there, its
    previous point (the commit's data shows rQPS vs previous), and the latest point of every series on those
    branches (for its summary; a series that stopped before the window has it further back)."""

    def add(sha: str | None, b: str, pos: int) -> None:
        if sha is not None and (b, pos) not in where.get(sha, []):
            where.setdefault(sha, []).append((b, pos))

    for sha in sorted(retagged):
        keys = store.series.keys_at(conn, [sha])
        for b, pos in store.commits.positions_of(conn, sha).items():
            add(sha, b, pos)
            for key in keys:
                prev = store.series.prev_point_position(conn, key, b, pos)
                if prev is not None:
                    add(store.commits.sha_at(conn, b, prev), b, prev)
    for summ in cached.values():
        if summ.branch in branches:
            add(summ.latest_sha, summ.branch, summ.last_position)


def _rows_where(
    conn: sqlite3.Connection, changed: set[str], keys: set[MeasureKey], where: Mapping[str, list[tuple[str, int]]]
) -> tuple[dict[str, list[tuple[str, int]]], list[str]]:
    """What to load for the rows of the `changed` commits' data (positions from `where`): those commits and, per
    series of `keys`, its previous point before each (its rQPS vs previous). Loaded alone, a series' point before a
    changed commit is then that previous point: the series has none between them. Also the commits, for load()."""
    out: dict[str, list[tuple[str, int]]] = {}
    sha_at: dict[tuple[str, int], str | None] = {}

    def add(sha: str | None, b: str, pos: int) -> None:
        if sha is not None and (b, pos) not in out.setdefault(sha, []):
            out[sha].append((b, pos))

    for sha in sorted(changed):
        for b, pos in where.get(sha, []):
            add(sha, b, pos)
            for key in keys:
                prev = store.series.prev_point_position(conn, key, b, pos)
                if prev is not None:
                    if (b, prev) not in sha_at:
                        sha_at[(b, prev)] = store.commits.sha_at(conn, b, prev)
                    add(sha_at[(b, prev)], b, prev)
    return out, list(out)


class _FullPublishNeeded(Exception):
    """The incremental path cannot prove it would match a full publish; the message says why."""


CATCH_UP_RUNS = 8  # more runs than this missing from the site (earlier publishes failed): one full publish instead


def publish_incremental(
    settings: Any,
    run_id: int,
    out_dir: Path | None = None,
    *,
    now: float | None = None,
    progress: Progress | None = None,
) -> PublishReport:
    """Re-render only what new runs changed; a full publish when there is no site (or cache) to build on.

    "New runs" are `run_id` and every run stored since the last publish that is not shown yet: a publish that
    failed (a locked database, a full disk) is caught up by the next one, one run at a time in id order. A run
    that an earlier publish already showed writes nothing. The output is byte-for-byte what a full publish would
    write (tests/unit/test_publish.py: test_incremental_publish_after_a_new_run_equals_a_full_publish).
    """
    out = Path(os.path.abspath(out_dir if out_dir else site_dir(settings)))
    now = time.time() if now is None else now
    say = progress or (lambda _m: None)
    with publish_lock(out):
        if not out.is_symlink():
            return _publish_all(settings, out, now, progress)
        try:
            pending = _pending_runs(settings, out, run_id)
            if not pending:
                return PublishReport(out, os.path.basename(os.readlink(out)), True, 0, 0, 0, 0, 0, 0.0)
            if len(pending) > 1:
                say(f"catching up {len(pending)} runs the site does not show yet: {pending}")
            reports = [_publish_incremental(settings, rid, out, now) for rid in pending]
        except _FullPublishNeeded as e:
            say(f"full publish: {e}")
            return _publish_all(settings, out, now, progress)
    last = reports[-1]
    return dataclasses.replace(
        last,
        files_written=sum(r.files_written for r in reports),
        series=sum(r.series for r in reports),
        commit_pages=sum(r.commit_pages for r in reports),
        ratios_computed=sum(r.ratios_computed for r in reports),
        ratios_reused=sum(r.ratios_reused for r in reports),
        seconds=sum(r.seconds for r in reports),
        failures=tuple(f for r in reports for f in r.failures),
    )


def publish_jobs(settings: Any, out_dir: Path | None = None, *, now: float | None = None) -> PublishReport:
    """Re-render what a finished job changes (its pages, the release pages: pages.of_jobs) on top of the live
    version, every other file hard-linked; a full publish when there is no site to build on."""
    return _publish_site_pages(settings, pages.of_jobs(), out_dir, now)


def publish_bisections(settings: Any, out_dir: Path | None = None, *, now: float | None = None) -> PublishReport:
    """Re-render what an ended bisection changes (the alert pages and feed: its outcome, culprit and the
    culprit's profile, pages.of_bisections) on top of the live version. A bisection ends in the bisection
    service, after the ingest of its last probe has published: without this the site said 'running' until the
    next commit was measured."""
    return _publish_site_pages(settings, pages.of_bisections(), out_dir, now)


def publish_health(settings: Any, out_dir: Path | None = None, *, now: float | None = None) -> PublishReport:
    """Re-render the farm health page on top of the live version: a worker refused or connected
    (master/workerlink.py) changes it without any run being stored."""
    return _publish_site_pages(settings, pages.of_health(), out_dir, now)


def _publish_site_pages(
    settings: Any, chosen: Sequence[pages.Page], out_dir: Path | None, now: float | None
) -> PublishReport:
    """The SITE-scope pages `chosen`, re-rendered on top of the live version, every other file hard-linked; a
    full publish when there is no site to build on."""
    out = Path(os.path.abspath(out_dir if out_dir else site_dir(settings)))
    now = time.time() if now is None else now
    with publish_lock(out):
        if not out.is_symlink():
            return _publish_all(settings, out, now, None)
        with _Publish(settings, out) as p:
            cache = p.cache
            cached, state = load_state(cache, out)
            if state is None or failed_pages(state):  # a full publish builds the pages the last one could not
                return _publish_all(settings, out, now, None)
            ctx = Context(p.conn, cache, bands(settings), settings)
            ctx.now = now
            ctx.page_keys = state.get("page_keys")
            w = p.writer(incremental=True)
            for page in chosen:
                _write(w, page, ctx, list(cached.values()))
            final = w.commit()
            cache.flush()
            if ctx.new_page_keys or w.failures:
                save_page_keys(cache, out, ctx.new_page_keys, w.failures)
    return p.incremental_report(final, 0, 0)


def _series_keys(ctx: Context, summaries: Sequence[Summary], sib: Mapping[str, list[Summary]]) -> dict[str, str] | None:
    """Per series, the digest of every SERIES page's inputs (None when a SERIES page has no key: always write; a
    series whose key raises has none either: its page is written, and fails there, isolated)."""
    chosen = pages.of(pages.SERIES)
    if any(p.key is None for p in chosen):
        return None
    out = {}
    for s in summaries:
        try:
            out[s.sid] = "/".join(p.key(ctx, s, sib[s.sid]) for p in chosen if p.key is not None)
        except isolate.ENVIRONMENT:
            raise
        except Exception:  # noqa: BLE001 - the page's own failure, reported where it is written
            continue
    return out


def _pending_runs(settings: Any, out: Path, run_id: int) -> list[int]:
    """The runs an incremental publish for `run_id` must show, in id order: every stored run above the last
    publish's `runs_upto` (including `run_id` unless an earlier publish showed it already)."""
    cache = open_cache(settings)
    try:
        _cached, state = load_state(cache, out)
    finally:
        cache.close()
    if state is None:
        raise _FullPublishNeeded("no publish state for this output directory")
    if "runs_upto" not in state:
        raise _FullPublishNeeded("the publish state predates catch-up (no runs_upto)")
    failed = failed_pages(state)
    if failed:
        raise _FullPublishNeeded(f"the last publish could not build {len(failed)} page(s), e.g. {failed[0].line()}")
    conn = _open(settings)
    try:
        if store.runs.run_of(conn, run_id) is None:
            raise ValueError(f"no run with id {run_id} in {settings.results_db}")
        pending = store.runs.run_ids_above(conn, int(state["runs_upto"]))
    finally:
        conn.close()
    if len(pending) > CATCH_UP_RUNS:
        raise _FullPublishNeeded(f"{len(pending)} runs are not shown yet (earlier publishes failed)")
    return pending


def _publish_incremental(settings: Any, run_id: int, out: Path, now: float) -> PublishReport:
    with _Publish(settings, out) as p:
        conn, cache = p.conn, p.cache
        cached, state = load_state(cache, out)
        if state is None:
            raise _FullPublishNeeded("no publish state for this output directory")
        upto = int(state.get("runs_upto", 0))
        run = store.runs.run_of(conn, run_id)
        if run is None:
            raise ValueError(f"no run with id {run_id} in {settings.results_db}")
        ctx = Context(conn, cache, bands(settings), settings)
        ctx.now = now
        ctx.page_keys = state.get("page_keys")
        retagged = tag_changes(state["tags"], ctx.tags)
        ctx.machines = None if retagged else {run.machine_id}  # a tag change redraws every machine's releases
        old_heads = {b: tuple(h) for b, h in state["heads"].items()}
        for b, (pos, sha) in old_heads.items():
            if b in ctx.heads and store.commits.sha_at(conn, b, pos) != sha:
                raise _FullPublishNeeded(f"branch {b} was rewritten")
        w = p.writer(incremental=True)
        at = store.commits.positions_of(conn, run.sha)
        # the run's own series: at an older commit every machine's runs are there too, and their series did not change
        # (all of them were loaded, their chunks and pages rewritten: ~7,500 files at 6,000 commits, docs/scale.md)
        mine = (run.machine_id, run.recipe, run.recipe_version)
        keys = (
            {k for k in store.series.keys_at(conn, [run.sha]) if (k.machine_id, k.recipe, k.recipe_version) == mine}
            if run.status == "ok"
            else set()
        )
        for key in keys:
            for b, pos in at.items():
                # a series this publish state does not know, with points before the run: stored rows moved into it
                # (store.adopt_workload_hashes), and their old series must go too
                if (
                    SeriesRef(key, b).sid not in cached
                    and store.series.prev_point_position(conn, key, b, pos) is not None
                ):
                    raise _FullPublishNeeded(
                        f"series {key.workload}/{key.metric} on {b} has earlier points the last publish did not show"
                    )
        # which commits' data change: the run's commit and, per series, the next tested commit after it
        # what to load per branch: the chunk of the run's commit (rewritten whole), each series' point before
        # that chunk (the rQPS of the chunk's first point), the sparkline's window
        windows: dict[str, tuple[int, int]] = {}
        for b, pos in at.items():
            start = pos // CHUNK * CHUNK
            lows = [start, max(ctx.heads[b] - SPARK_WINDOW + 1, 0)]
            lows += [
                p for p in (store.series.prev_point_position(conn, key, b, start) for key in keys) if p is not None
            ]
            windows[b] = (min(lows), ctx.heads[b])
        tag_branches = _tag_windows(conn, ctx, retagged, windows)
        orders = {b: store.commits.branch_order(conn, b, lo, hi) for b, (lo, hi) in windows.items()}
        where: dict[str, list[tuple[str, int]]] = {}
        for b, order in orders.items():
            for pos, sha in order:
                where.setdefault(sha, []).append((b, pos))
        _load_for_tags(conn, retagged, tag_branches, cached, where)
        # commit facts (for chart hovers) of the positions each branch gained since the last publish
        grown = {}
        for b, head in ctx.heads.items():
            old = old_heads.get(b, (-1, ""))[0]
            if head > old:
                grown[b] = store.commits.branch_order(conn, b, (old + 1) // CHUNK * CHUNK, head)
        ctx.commits.update(source.commits(conn, {sha for order in grown.values() for _, sha in order}))
        ctx.tag_positions = {}
        for sha in ctx.tags.values():
            for b, pos in store.commits.positions_of(conn, sha).items():
                ctx.tag_positions.setdefault(b, {})[sha] = pos
                if b in windows and (b, pos) not in where.get(sha, []):
                    where.setdefault(sha, []).append((b, pos))
        # a tag change touches every series of its branches (rQPS vs the previous release): load them all
        loaded_keys = None if retagged else keys
        ctx.load(where, list(where), loaded_keys)
        affected = {k: s for k, s in ctx.series.items() if k.branch in at and s.index_of(run.sha) is not None}
        changed = {run.sha}
        for s in affected.values():
            idx = s.index_of(run.sha)
            if idx + 1 < s.end:
                changed.add(s.table.sha[idx + 1])
        # the other series measured at the changed commits: their rows are on those commits' pages too
        more = store.series.keys_at(conn, sorted(changed)) - keys
        row_keys = keys | more
        if more and loaded_keys is None:  # every series is loaded over the windows (a tag change): far enough?
            for b, lo_hi in windows.items():
                starts = [pos for sha in changed for bb, pos in where.get(sha, []) if bb == b]
                for key in more:
                    prev = store.series.prev_point_position(conn, key, b, min(starts)) if starts else None
                    if prev is not None and prev < lo_hi[0]:
                        raise _FullPublishNeeded("a changed commit's other series reach back past the window")
        fresh = ctx.summaries(
            [*affected.values(), *(s for k, s in ctx.series.items() if k.branch in tag_branches and k not in affected)]
        )
        for sid, old in cached.items():
            if sid in fresh and old.first_position < fresh[sid].first_position:
                fresh[sid] = Summary.from_json({**fresh[sid].to_json(), "first_position": old.first_position})
        summaries_map = {**cached, **fresh}
        summaries = list(summaries_map.values())
        sib = siblings_of(summaries)
        for key, s in affected.items():
            summ = summaries_map[s.sid]
            if s.sid in cached:
                # the chunk of the run's point and of the next point (its rQPS vs previous): at an older commit the
                # chunks after them are as they were (the series' later chunks were all rewritten, docs/scale.md)
                idx = s.index_of(run.sha)
                assert idx is not None  # affected: measured at the run's commit
                ks = {at[key.branch] // CHUNK} | ({int(s.table.pos[idx + 1]) // CHUNK} if idx + 1 < s.end else set())
                spans = [(k, k) for k in sorted(ks)]
            else:
                spans = [(summ.first_position // CHUNK, summ.last_position // CHUNK)]
            for lo, hi in spans:
                for page in pages.of(pages.CHUNKS):
                    _write(w, page, ctx, s, lo, hi)
        # a series page whose inputs (markers, siblings, change points, summary) are what the last publish rendered
        # stays as it is: with 2,000 series, rendering them all was most of an incremental publish (docs/scale.md)
        keys = _series_keys(ctx, summaries, sib)
        old_keys = state.get("series_keys")
        for summ in summaries:
            if keys is not None and old_keys is not None and old_keys.get(summ.sid, "") == keys.get(summ.sid):
                continue
            for page in pages.of(pages.SERIES):
                _write(w, page, ctx, summ, sib[summ.sid])
        for b, order in grown.items():
            for page in pages.of(pages.BRANCH):
                _write(w, page, ctx, b, order)
        if more and loaded_keys is not None:
            # the changed commits' rows are every series measured there: those series at those commits and their
            # previous points only (over the windows, at an older commit that was every machine's history since it)
            ctx.load(*_rows_where(conn, changed, row_keys, where), row_keys)
        by_commit = commits.order(ctx, changed | retagged)
        rows = commits.rows(ctx, by_commit, range(len(by_commit.shas))) if by_commit is not None else {}
        runs = run_views(ctx, sorted(changed | retagged))
        ctx.messages = source.messages(conn, changed | retagged)
        ctx.positions = {sha: store.commits.positions_of(conn, sha) for sha in changed | retagged}
        # a (re)tagged commit's data lists its tags; it has a data file only if it has rows or runs (as in a full
        # publish)
        changed |= {sha for sha in retagged if sha in rows or sha in runs}
        for sha in sorted(changed):
            for page in pages.of(pages.COMMIT):
                _write(w, page, ctx, sha, rows.get(sha, "[]"), runs.get(sha, []))
        # the release tables (when=TAGS) depend only on the tags and the samples at tagged commits
        for page in pages.of(pages.SITE, tags_changed=bool(retagged) or run.sha in ctx.tag_at):
            _write(w, page, ctx, summaries)
        final = w.commit()
        cache.flush()
        save_state(
            cache,
            fresh.values(),
            False,
            out,
            _heads_with_sha(conn, ctx.heads),
            ctx.tags,
            max(run_id, upto),
            keys,
            ctx.new_page_keys,
            [*failed_pages(state), *w.failures],  # an earlier run's of this catch-up too
        )
    return p.incremental_report(final, len(fresh), len(changed))
