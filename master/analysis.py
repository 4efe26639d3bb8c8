"""From stored runs to series and change points: what change detection sees, along first-parent order.

A series is (machine, recipe + version + the workload's config hash, workload, metric, branch). Its points are
the branch's commits in first-parent order that have `ok` runs, each with every raw sample of every such run
(bisection and forced runs add samples to a commit; build order never matters). After each ingest the touched series are
re-detected, their newest ``[detection] window`` commits (older change points are settled, kept as stored: see
``propose``), and `change_points` is reconciled: a change point keeps its identity (series + first commit) and
is updated in place when more data moves it, never duplicated; new points must survive Benjamini-Hochberg
across the farm's series; a point whose evidence more data has taken away is marked `retracted`, and comes
back under the same identity if the change reappears. The farm's `[detection]` settings (minimum effect,
FDR, retraction level) arrive as a ``DetectionSettings`` argument. Pure: no Buildbot or Twisted imports.

`master/detect/` is the statistics over arrays of samples and knows no database; this module is the other half:
it loads series from the store, runs the detectors, controls false discoveries across series and keeps stored
change points' identities.

A pass holds the results database's write lock only to write its outcome (docs/scale.md, "One writer at a
time"): each series is read in its own short read snapshot, detected with no lock held, and the outcome written
in one short `BEGIN IMMEDIATE` transaction that first checks that no other pass wrote those series meanwhile
(their `Stamp`); a series another pass wrote is read and detected again, so a pass never writes change points
reconciled against rows that are no longer there.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np

from master import store
from master.detect import fdr, rqps
from master.detect.config import WINDOW_EDGE, DetectionSettings
from master.detect.identity import Reconciliation, Reported, reconcile
from master.detect.model import ChangePoint, Direction, Kind, Series
from master.detect.tracker import Tracker, review_unmatched
from master.store.changes import Placement, StoredChangePoint
from master.store.series import SeriesKey

IDENTITY_WINDOW = 5  # commits: a re-detection this close (same kind) is the same change moved by data
WRITE_ROUNDS = 3  # passes whose series another pass wrote meanwhile re-read them this often outside the lock
# Commits at the left edge of a windowed pass that are settled with the older history: a change point stored there
# is kept as it is, and one detected there dropped (it has too little data on its left to be judged or placed),
# so a change point at the edge is neither retracted nor reported twice. 50 is also the reach of a change point's
# CI (_with_ci), so the CIs of the window's change points are those of the whole history.
EDGE = WINDOW_EDGE
# A windowed pass starts at a stored active change point when one lies this share of the window before its edge:
# the window then begins with a whole level.
SNAP = 0.25
WHOLE = 2**62  # a window longer than any history


@dataclass(frozen=True)
class LoadedSeries:
    """A loaded series: the detector's input plus the branch positions of its commits."""

    id: int
    key: SeriesKey
    direction: Direction
    unit: str
    series: Series
    positions: tuple[int, ...]
    rebases: tuple[int, ...] = ()  # indices where a ratio series' reference changes: segments, never changes


@dataclass(frozen=True)
class ChangeEvent:
    """What one analysis round did to one change point (for alerts and the site)."""

    change_point_id: int
    series_id: int
    action: str  # new | updated (moved, or back after a retraction) | retracted (more data took the evidence away)
    kind: str
    sha: str
    ratio: float
    metric: str  # the series' metric (which line of a regression starts its bisection: bisection.state.bisect_rank)


def load_series(conn: sqlite3.Connection, series_id: int, since: int | None = None) -> LoadedSeries:
    """Every ok sample of a series, grouped per commit in first-parent order (with ``since``: of the commits at
    branch positions ``since`` and later)."""
    s = store.series.get(conn, series_id)
    if s is None:
        raise KeyError(f"no series {series_id}")
    points = store.series.branch_samples(conn, s.key, since)
    return LoadedSeries(
        series_id,
        s.key,
        Direction.parse(s.direction),
        s.unit,
        Series.from_samples(points.samples, points.commits),
        tuple(points.positions),
        tuple(points.rebases()) if store.series.is_ratio_to_reference(s.key.metric) else (),
    )


def _reported(data: LoadedSeries, rows: tuple[StoredChangePoint, ...]) -> list[Reported]:
    """Every change point stored for the series, retracted ones too (so a returning change keeps its identity)."""
    index_of = {sha: i for i, sha in enumerate(data.series.commits)}
    out = []
    for row in rows:
        if row.sha not in index_of:
            continue  # its commit left the branch (history rewritten): it cannot be matched
        cp = ChangePoint(
            row.sha, index_of[row.sha], row.ratio, Kind(row.kind), row.pvalue, _nan(row.ci_low), _nan(row.ci_high)
        )
        out.append(Reported(str(data.id), row.first_sha, cp, active=row.state == "active"))
    return out


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _with_ci(data: LoadedSeries, cp: ChangePoint, next_index: int | None) -> ChangePoint:
    """Ratio after/before with a bootstrap CI, from the segments on both sides of the change point (never across
    a rebase)."""
    s = data.series
    lo = max([0, cp.index - 50, *(b for b in data.rebases if b <= cp.index)])
    ends = [len(s), cp.index + 50, *(b for b in data.rebases if b > cp.index)]
    hi = min([*ends, next_index] if next_index is not None else ends)
    est = _median_ratio(s.samples(lo, cp.index), s.samples(cp.index, hi))
    if est is None:
        return cp
    return ChangePoint(cp.commit, cp.index, est[0], cp.kind, cp.pvalue, est[1], est[2])


# (ratio, low, high) per distinct pair of segments, least recently used first: ~20 MB at most. A machine's pass
# uses again the entries of its series' settled change points (at 60,000 commits ~30 per series, 3,000 a machine);
# what other machines' passes add in between is ~100 each, so those entries are still here at its next pass.
CI_CACHE_SIZE = 100_000
_ci_cache: OrderedDict[bytes, tuple[float, float, float] | None] = OrderedDict()
_ci_cache_lock = threading.Lock()  # the master runs the passes of several ingests in threads


def _median_ratio(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float] | None:
    """``rqps.median_ratio`` of two segments (None when it has no ratio), remembered by the segments' exact samples.

    The bootstrap is seeded, so the same samples give the same CI: each pass re-detects the whole history, but
    a change point's segments change only when data arrives near it or a neighbour moves, so most of a pass's CIs
    (2,000 resamples, 50-120 ms each) were computed by an earlier pass of the same process."""
    b, a = np.ascontiguousarray(before, dtype=float), np.ascontiguousarray(after, dtype=float)
    key = hashlib.blake2b(len(b).to_bytes(8, "little") + b.tobytes() + a.tobytes(), digest_size=20).digest()
    with _ci_cache_lock:
        if key in _ci_cache:
            _ci_cache.move_to_end(key)
            return _ci_cache[key]
    try:
        est = rqps.median_ratio(b, a)
        got: tuple[float, float, float] | None = (est.ratio, est.low, est.high)
    except ValueError:
        got = None
    with _ci_cache_lock:
        _ci_cache[key] = got
        if len(_ci_cache) > CI_CACHE_SIZE:
            _ci_cache.popitem(last=False)
    return got


@dataclass(frozen=True)
class Stamp:
    """What a series' proposal was reconciled against: when a pass last wrote the series and its stored change
    points. A pass writes a series only if its stamp is unchanged when the write lock is taken."""

    analysed_at: float | None
    change_points: tuple[StoredChangePoint, ...]


def stamp(conn: sqlite3.Connection, series_id: int) -> Stamp:
    s = store.series.get(conn, series_id)
    return Stamp(s.analysed_at if s else None, tuple(store.changes.for_series(conn, series_id)))


@dataclass(frozen=True)
class Proposal:
    """One series' detection round before it is written: what is new, moved, kept or withdrawn."""

    data: LoadedSeries
    result: Reconciliation
    stamp: Stamp | None = field(default=None, compare=False)


def not_searched(conn: sqlite3.Connection, key: SeriesKey) -> str | None:
    """Why a series is kept and shown but not searched for changes, or None when it is (docs/throughput.md).

    A paired run stores the reference's own samples (``<metric>.reference``): their moves are the machine's
    drift, not the code. Its absolute wall-clock values (throughput, latency, CPU and context switches per
    transaction) are as unpaired as before, and a re-measurement of an old commit would read the machine's drift
    as a change: changes are searched on the ratio series (``<metric>.rqps``, ``<metric>.ratio``) the run also
    stores, which is what pairing is for.
    """
    if key.metric.endswith(store.series.REFERENCE_SUFFIX):
        return "the reference build's own samples (a paired run's other side): its moves are the machine's"
    if not store.series.is_ratio_to_reference(key.metric):
        for suffix in store.series.RATIO_SUFFIXES:
            if store.series.exists(conn, replace(key, metric=key.metric + suffix)):
                return f"measured paired: changes are searched on {key.metric + suffix}"
    return None


def window_start(n: int, reported: list[Reported], window: int) -> int:
    """Where a pass's re-detection of a series of ``n`` commits starts: 0 (the whole history) when the series is
    no longer than ``window``; otherwise ``n - window``, or the newest stored active change point up to a quarter
    of a window before that (the window starts with a whole level)."""
    if n <= window:
        return 0
    edge = n - window
    before = [r.current.index for r in reported if r.active and edge - SNAP * window <= r.current.index <= edge]
    return max(before, default=edge)


def _since(conn: sqlite3.Connection, series_id: int, window: int) -> int | None:
    """The branch position a pass loads a series from: None (the whole history) when it has at most a window and
    its snap range (``window_start``) of tested commits, else the first of the newest that many."""
    s = store.series.get(conn, series_id)
    if s is None:
        raise KeyError(f"no series {series_id}")
    count = window + math.ceil(SNAP * window)
    head = store.branch_head(conn, s.key.branch)
    if head is None or head[0] < count:
        return None  # the branch (positions from 0) has no more commits than that: no need to count its tested ones
    tail = store.series.tail_positions(conn, s.key, count + 1)
    return tail[count - 1] if len(tail) > count else None


def _shifted(cp: ChangePoint, by: int) -> ChangePoint:
    return replace(cp, index=cp.index + by)


def _windowed(data: LoadedSeries, reported: list[Reported], lo: int) -> tuple[LoadedSeries, list[Reported]]:
    """The series from commit ``lo`` on, and the reported change points it judges (past ``lo + EDGE``), in its
    indices; those before are settled: kept as stored, neither matched, moved nor retracted."""
    part = replace(
        data,
        series=data.series.window(lo, len(data.series)),
        positions=data.positions[lo:],
        rebases=tuple(b - lo for b in data.rebases if b > lo),
    )
    live = [replace(r, current=_shifted(r.current, -lo)) for r in reported if r.current.index >= lo + EDGE]
    return part, live


def _not_settled(detected: list[ChangePoint], settled: list[Reported], lo: int) -> list[ChangePoint]:
    """Detections of a windowed pass (window indices) that are not at its edge nor a settled change point again
    (same kind within IDENTITY_WINDOW commits)."""
    return [
        d
        for d in detected
        if d.index >= EDGE
        and not any(
            r.current.kind is d.kind and abs(r.current.index - lo - d.index) <= IDENTITY_WINDOW for r in settled
        )
    ]


def propose(conn: sqlite3.Connection, series_id: int, detection: DetectionSettings) -> Proposal:
    """Detect on one series and reconcile with its stored change points, without writing anything.

    The series is read in one short read snapshot (its samples, its change points and its stamp agree); the
    detection runs after it, holding no lock. Only the newest ``detection.window`` commits are re-detected
    (``window_start``), and a longer series is read from the start of its snap range (``_since``); the
    proposal's data is then that window, its change points' indices are in it."""
    with store.read_snapshot(conn):
        since = _since(conn, series_id, detection.window)
        data = load_series(conn, series_id, since)
        searched = not_searched(conn, data.key) is None
        stamped = stamp(conn, series_id)
    reported = _reported(data, stamped.change_points)
    lo = window_start(len(data.series), reported, detection.window) if searched else 0
    windowed = searched and (lo > 0 or since is not None)
    settled: list[Reported] = []
    if windowed:
        settled = [r for r in reported if r.current.index < lo + EDGE]
        data, reported = _windowed(data, reported, lo)
    if not searched:
        return Proposal(data, Reconciliation(tuple(reported), (), (), ()), stamped)
    tracker = Tracker.configured(
        str(series_id),
        data.direction,
        detection,
        window=IDENTITY_WINDOW,
        ratio=store.series.is_paired_throughput(data.key.metric),
    )
    detected = tracker.detections(data.series, data.rebases) if len(data.series) else []
    if windowed:
        detected = _not_settled(detected, settled, lo)
    detected = [
        _with_ci(data, cp, detected[i + 1].index if i + 1 < len(detected) else None) for i, cp in enumerate(detected)
    ]
    result = reconcile(str(series_id), reported, detected, IDENTITY_WINDOW)
    if len(data.series):
        result = review_unmatched(
            data.series, result, detected, data.direction, tracker.offline_settings, tracker.keep_alpha, data.rebases
        )
    return Proposal(data, result, stamped)


def admit(proposals: list[Proposal], n_series: int, q: float) -> list[Proposal]:
    """Benjamini-Hochberg across series: keep only the new change points that survive at level ``q``
    (the farm's ``[detection] fdr``).

    The family is every series of the farm that detection searches (``n_series``,
    ``store.series.searched_count``; series not re-tested in this pass count as p = 1; a series kept but never
    searched, ``not_searched``, is no hypothesis), the p-values those of the change points the pass would newly
    report. Points already
    reported are not re-judged here; they stay until ``review_unmatched`` withdraws them.
    """
    flat = [(i, r) for i, prop in enumerate(proposals) for r in prop.result.new]
    mask = fdr.benjamini_hochberg([r.current.pvalue for _, r in flat], q, m=max(n_series, len(flat)))
    dropped = {(i, r.first_commit) for (i, r), ok in zip(flat, mask) if not ok}
    if not dropped:
        return proposals
    return [
        replace(
            prop,
            result=replace(prop.result, new=tuple(r for r in prop.result.new if (i, r.first_commit) not in dropped)),
        )
        for i, prop in enumerate(proposals)
    ]


def write(conn: sqlite3.Connection, proposal: Proposal, now: float) -> list[ChangeEvent]:
    """Store one series' round: insert new points, update moved or returning ones, retract withdrawn ones."""
    data, result = proposal.data, proposal.result
    series_id = data.id
    events = []
    for rep, action in [(r, "updated") for r in result.updated] + [(r, "new") for r in result.new]:
        cp = rep.current
        prev = cp.index - 1 if cp.index > 0 else None
        values = Placement(
            sha=cp.commit,
            prev_sha=data.series.commits[prev] if prev is not None else None,
            position=data.positions[cp.index],
            prev_position=data.positions[prev] if prev is not None else None,
            kind=cp.kind.value,
            ratio=float(cp.ratio),
            ci_low=None if math.isnan(cp.ci_low) else float(cp.ci_low),
            ci_high=None if math.isnan(cp.ci_high) else float(cp.ci_high),
            pvalue=float(cp.pvalue),
        )
        if action == "new":
            cp_id = store.changes.report(conn, series_id, rep.first_commit, values, now)
        else:
            cp_id = store.changes.move(conn, series_id, rep.first_commit, values, now)
        events.append(ChangeEvent(cp_id, series_id, action, cp.kind.value, cp.commit, float(cp.ratio), data.key.metric))
    for rep in result.withdrawn:
        # The evidence is gone: keep the row (alerts and the site refer to it) but mark it retracted.
        cp_id = store.changes.retract(conn, series_id, rep.first_commit, now)
        cp = rep.current
        events.append(
            ChangeEvent(cp_id, series_id, "retracted", cp.kind.value, cp.commit, float(cp.ratio), data.key.metric)
        )
    store.series.mark_analysed(conn, series_id, now)
    return events


def analyse_many(
    conn: sqlite3.Connection, series_ids: list[int], detection: DetectionSettings, now: float | None = None
) -> list[ChangeEvent]:
    """One analysis pass: detect each series, control false alarms across them (one FDR family), store.

    Inside the caller's transaction, all of it happens there. Otherwise the series are read and detected with no
    lock held and only the outcome is written, in one short transaction (``_write_pass``)."""
    now = time.time() if now is None else now
    if conn.in_transaction:
        proposals = [propose(conn, sid, detection) for sid in series_ids]
        admitted = admit(proposals, store.series.searched_count(conn), detection.fdr)
        return [e for prop in admitted for e in write(conn, prop, now)]
    return _write_pass(conn, {sid: propose(conn, sid, detection) for sid in series_ids}, detection, now)


def _write_pass(
    conn: sqlite3.Connection, proposals: dict[int, Proposal], detection: DetectionSettings, now: float
) -> list[ChangeEvent]:
    """Write a pass computed outside the lock, in one short ``BEGIN IMMEDIATE`` transaction.

    A series whose stamp changed since it was read was written by another pass meanwhile (two runs of one machine
    stored close together): its proposal was reconciled against change points that are no longer those stored,
    and that pass may have seen newer data, so writing it could duplicate events or put older figures over newer
    ones. Such series are read and detected again, outside the lock, up to ``WRITE_ROUNDS`` times, then inside
    it, so a pass always ends; then the whole pass is judged as one FDR family and written. New data alone
    (a run stored since the read, whose own pass has not written yet) is no reason: the outcome is the one a pass
    run just before that run was stored would have written, and that run's pass follows and sees it."""
    for round_ in range(WRITE_ROUNDS + 1):
        with store.transaction(conn):
            stale = [sid for sid, prop in proposals.items() if prop.stamp != stamp(conn, sid)]
            if stale and round_ == WRITE_ROUNDS:
                proposals.update({sid: propose(conn, sid, detection) for sid in stale})
                stale = []
            if not stale:
                admitted = admit(list(proposals.values()), store.series.searched_count(conn), detection.fdr)
                return [e for prop in admitted for e in write(conn, prop, now)]
        proposals.update({sid: propose(conn, sid, detection) for sid in stale})
    raise AssertionError("unreachable: the last round writes")


def analyse_series(
    conn: sqlite3.Connection, series_id: int, detection: DetectionSettings, now: float | None = None
) -> list[ChangeEvent]:
    """Re-detect one series and reconcile its change points (in the caller's transaction, or see analyse_many)."""
    return analyse_many(conn, [series_id], detection, now)


def analyse_run(conn: sqlite3.Connection, run_id: int, detection: DetectionSettings) -> list[ChangeEvent]:
    """Re-detect every series a newly stored run touches, in one FDR family; the write lock is held to create the
    run's series and to write the outcome, not while reading and detecting (analyse_many)."""
    with store.transaction(conn):
        series_ids = sorted(set(store.series.ensure_for_run(conn, run_id)))
    return analyse_many(conn, series_ids, detection)


def analyse_all(conn: sqlite3.Connection, detection: DetectionSettings) -> list[ChangeEvent]:
    """Re-detect every series over its whole history, not a window (after a detector upgrade, or to rebuild
    change_points)."""
    with store.transaction(conn):
        run_ids = store.runs.ok_run_ids(conn)
        series_ids = sorted({sid for run_id in run_ids for sid in store.series.ensure_for_run(conn, run_id)})
    return analyse_many(conn, series_ids, replace(detection, window=WHOLE))


def series_summary(data: LoadedSeries) -> dict[str, object]:
    """Small facts for logs and status: commits, samples, latest median."""
    s = data.series
    latest = float(np.median(s.samples(len(s) - 1, len(s)))) if len(s) else None
    return {"commits": len(s), "samples": int(len(s.values)), "latest_median": latest}
