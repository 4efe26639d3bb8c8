"""The site's view of the results store: series file ids, commit text made visible, and the optional tables.

Read only: the publisher never writes results.sqlite, and it reads it only through master/store (which holds
every query). Here the store's records get what only the site needs: the stable file id of each series (`sid`),
commit subjects and authors with control and bidi characters shown as escapes, and empty lists for the tables a
later migration adds (`series`, `change_points`, `alerts`, ...) when it has not landed yet (PRAGMA table_info).
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from master import machines, plans, store
from master.publish.names import digest
from master.store.alerts import Alert, Delivery, HistoryEntry
from master.store.bisections import Bisection
from master.store.commits import Commit
from master.store.series import MeasureKey
from master.textsafe import visible

CHUNK = 1000  # branch positions per data chunk: a new run at the head rewrites one chunk per series


@dataclass(frozen=True)
class SeriesRef:
    """A series as the site addresses it: the store's identity (`store.series.SeriesKey`) held as a shared
    `MeasureKey` plus the branch, so the publisher's many per-branch keys reuse one measure key, with the series'
    file id (`sid`)."""

    measure: MeasureKey
    branch: str

    @functools.cached_property
    def sid(self) -> str:
        """Stable file id of the series (a digest of its key, so no untrusted text reaches a path)."""
        m = self.measure
        return digest(
            "\x1f".join(
                [m.machine_id, m.recipe, str(m.recipe_version), m.config_hash, m.workload, m.metric, self.branch]
            )
        )


def sid_of(key: store.series.SeriesKey) -> str:
    """The file id of a series the store names."""
    return SeriesRef(
        MeasureKey(key.machine_id, key.recipe, key.recipe_version, key.config_hash, key.workload, key.metric),
        key.branch,
    ).sid


@dataclass(frozen=True)
class ChangeView:
    """A change point as its series page lists it (the page's data holds these fields, in this order)."""

    id: int
    sha: str
    prev_sha: str | None
    position: int
    kind: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    pvalue: float
    state: str


def has_table(conn: sqlite3.Connection, table: str) -> list[str]:
    """Column names of `table`, or [] when it does not exist (yet)."""
    return store.connection.table_columns(conn, table)


def commits(conn: sqlite3.Connection, shas: Iterable[str] | None = None) -> dict[str, Commit]:
    """Commit facts; subject and author with control and bidi characters shown as escapes (textsafe), so they
    can neither reorder a page nor hide in it, whichever template or script shows them."""
    return {
        sha: Commit(sha, visible(c.subject), visible(c.author), c.authored_at, c.parents)
        for sha, c in store.commits.commits(conn, shas).items()
    }


def messages(conn: sqlite3.Connection, shas: Iterable[str] | None) -> dict[str, str]:
    """sha -> the commit's message body (after the subject), control and bidi characters shown as escapes (tab
    and newline kept); none for a commit measured before schema 22."""
    if not has_table(conn, "commit_messages"):
        return {}
    return {sha: visible(body, lines=True) for sha, body in store.commits.messages(conn, shas).items()}


def change_points(conn: sqlite3.Connection) -> dict[str, list[ChangeView]]:
    """Per series (its site id), its change points in id order; {} before migration 2's tables are filled."""
    if not has_table(conn, "change_points") or not has_table(conn, "series"):
        return {}
    out: dict[str, list[ChangeView]] = {}
    for c in store.changes.change_points(conn):
        view = ChangeView(
            c.id,
            c.sha,
            c.prev_sha,
            int(c.position),
            c.kind,
            float(c.ratio),
            c.ci_low,
            c.ci_high,
            float(c.pvalue),
            c.state,
        )
        out.setdefault(sid_of(c.key), []).append(view)
    return out


def paired(conn: sqlite3.Connection) -> tuple[dict[str, list[tuple[int, str]]], dict[str, str]]:
    """Paired throughput (docs/throughput.md): per ratio series (sid) its rebases, (position, what the new segment
    is: its reference and method), and per absolute series that is measured paired, the sid of its ratio series."""
    if not has_table(conn, "series") or "reference" not in store.connection.table_columns(conn, "runs"):
        return {}, {}
    rebases: dict[str, list[tuple[int, str]]] = {}
    ratio_of: dict[str, str] = {}
    for key, points in store.series.references(conn).items():
        sid = sid_of(key)
        rebases[sid] = [
            (pos, seg.label()) for (pos, seg), (_, before) in zip(points[1:], points[:-1], strict=True) if seg != before
        ]
        plain = store.series.absolute_metric(key.metric)
        for metric in (plain, plain + store.series.REFERENCE_SUFFIX):
            ratio_of[sid_of(dataclasses.replace(key, metric=metric))] = sid
    return rebases, ratio_of


@dataclass(frozen=True)
class PlanChangeRow:
    """A plan change (master/plans.py) with where its series is: the site id, machine and branch."""

    sid: str
    machine_id: str
    branch: str
    change: plans.PlanChange


def plan_history(conn: sqlite3.Connection) -> tuple[dict[str, list[plans.PlanSpan]], list[PlanChangeRow]]:
    """Per series of an analytic query, the plans it ran with (spans), and every plan change of every series,
    oldest first; nothing before migration 19's table exists."""
    if not has_table(conn, "plans"):
        return {}, []
    spans: dict[str, list[plans.PlanSpan]] = {}
    changes: list[PlanChangeRow] = []
    for key, points in store.series.plan_points(conn).items():
        sid = sid_of(key)
        spans[sid] = plans.spans(points)
        changes += [PlanChangeRow(sid, key.machine_id, key.branch, c) for c in plans.changes(key.workload, points)]
    changes.sort(key=lambda r: (r.branch, r.change.position, r.change.workload, r.machine_id))
    return spans, changes


# ------------------------------------------------------------------------------------------------ alerts


@dataclass(frozen=True)
class AlertLineRow:
    """One workload of an alert: its change point and series."""

    alert_id: str
    change_point_id: int
    sid: str
    workload: str
    metric: str
    machine_id: str
    recipe: str
    recipe_version: int
    unit: str
    direction: str
    kind: str
    severity: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    sha: str
    prev_sha: str | None
    state: str


def alert_rows(conn: sqlite3.Connection) -> list[Alert]:
    """Every alert (migration 3), newest first; [] when the table does not exist."""
    if not has_table(conn, "alerts"):
        return []
    return store.alerts.alerts_newest_first(conn)


def alert_lines(conn: sqlite3.Connection) -> list[AlertLineRow]:
    if not has_table(conn, "alert_lines"):
        return []
    out = []
    for line in store.alerts.lines_by_workload(conn):
        c, k = line.change_point, line.change_point.key
        out.append(
            AlertLineRow(
                line.alert_id,
                c.id,
                sid_of(k),
                k.workload,
                k.metric,
                k.machine_id,
                k.recipe,
                int(k.recipe_version),
                c.unit,
                c.direction,
                c.kind,
                line.severity,
                float(c.ratio),
                c.ci_low,
                c.ci_high,
                c.sha,
                c.prev_sha,
                c.state,
            )
        )
    return out


def alert_history(conn: sqlite3.Connection) -> dict[str, list[HistoryEntry]]:
    if not has_table(conn, "alert_history"):
        return {}
    return store.alerts.histories(conn)


def alert_links(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """alert id -> the URLs where it is tracked, oldest first."""
    return {aid: [k.url for k in ks] for aid, ks in store.alerts.links(conn).items()}


def alert_deliveries(conn: sqlite3.Connection) -> dict[str, list[Delivery]]:
    """alert id -> its messages per channel (state, attempts, last error; never the payload)."""
    if not has_table(conn, "alert_outbox"):
        return {}
    return store.alerts.deliveries(conn)


def bisections_by_change_point(conn: sqlite3.Connection) -> dict[int, Bisection]:
    """change point id -> its bisection (state, culprit, ratio, probes, log as JSON lines)."""
    if not has_table(conn, "bisections"):
        return {}
    return store.bisections.by_change_point(conn)


def bisection_counters(conn: sqlite3.Connection, bisections: Iterable[Bisection]) -> dict[int, Any]:
    """bisection id -> the exact counters (system calls, WAL, buffers) that changed from the culprit's parent to the
    culprit (master.explain.report), where both commits' runs counted them."""
    from master.explain import report

    out = {}
    for b in bisections:
        r = report.for_bisection(conn, b)
        if r is not None:
            out[int(b.id)] = r
    return out


def bisection_waits(conn: sqlite3.Connection, bisections: Iterable[Bisection]) -> dict[int, Any]:
    """bisection id -> the sampled waits whose share moved from the culprit's parent to the culprit
    (master.explain.report.waits_for_bisection), where both commits' runs sampled them."""
    from master.explain import report

    if not has_table(conn, "waits"):
        return {}
    out = {}
    for b in bisections:
        r = report.waits_for_bisection(conn, b)
        if r is not None:
            out[int(b.id)] = r
    return out


def bisection_explanations(conn: sqlite3.Connection, bisections: Iterable[Bisection]) -> dict[int, Any]:
    """bisection id -> the culprit's per-function diff against its parent (master.profiles.report), where both
    probe runs kept a callgrind profile."""
    from master.profiles import report

    if not has_table(conn, "profiles"):
        return {}
    out = {}
    for b in bisections:
        e = report.for_bisection(conn, b)
        if e is not None:
            out[int(b.id)] = e
    return out


class MachineViews(dict[str, "machines.MachineView"]):
    """Every stored machine as people read it (master/machines.py), by id; an id with no stored machine reads as
    itself (an unbound id, or one a test stored runs for without a binding)."""

    def __missing__(self, machine_id: str) -> machines.MachineView:
        return machines.view(machine_id, None, {}, ())


def machine_views(conn: sqlite3.Connection, about: Iterable[machines.About]) -> MachineViews:
    """Each stored machine's name, owner and description (`workers.about`, as the alerts name them), loaded once per
    publish: the pages show the name with the id beside it; ids stay in links, file names and data keys. The
    machines of a worker whose fingerprint changed are its generations ("tern (generation 2)")."""
    about = tuple(about)
    bound = store.machines.bindings(conn)
    gens = machines.generations((b.id, b.worker, b.first_seen) for b in bound.values())
    return MachineViews({m: machines.view(m, b.worker, b.fingerprint, about, gens.get(m, 0)) for m, b in bound.items()})
