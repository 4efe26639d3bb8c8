"""What happens after a result is stored: detection, then (when present) alerts and the site.

One function the master's ingest step calls in a thread. Each stage is derived data that can be rebuilt from
the stored runs, so a failing stage is reported in the build log and never loses the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from master import analysis, store
from master.alerts import sync as alerting
from master.bisection import state as bisection
from master.settings import Settings


@dataclass
class AfterIngest:
    """Messages for the build log, and which stages failed."""

    messages: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    events: list[analysis.ChangeEvent] = field(default_factory=list)
    bisections_started: list[int] = field(default_factory=list)
    bisections_shared: list[int] = field(default_factory=list)  # running ones a new change point joined


def after_ingest(settings: Settings, run_id: int) -> AfterIngest:
    out = AfterIngest()
    conn = store.connect(settings.results_db)
    try:
        try:
            out.events = analysis.analyse_run(conn, run_id, settings.detection)
        except Exception as e:  # derived data: report, never lose the stored result
            out.failed.append("detect")
            out.messages.append(f"change detection failed: {type(e).__name__}: {e}")
        else:
            if not out.events:
                out.messages.append("change detection: no new or moved change points")
            for e in out.events:
                out.messages.append(
                    f"change point {e.action}: {e.kind} at {e.sha[:12]}, ratio {e.ratio:.4f} (id {e.change_point_id})"
                )
        try:
            for e in bisection.in_bisect_order(out.events):
                if e.action == "retracted":
                    continue
                with store.transaction(conn):
                    bid = bisection.auto_create(conn, e.change_point_id)
                    shared = bisection.sharing(conn, e.change_point_id) if bid is None else None
                if bid is not None:
                    out.bisections_started.append(bid)
                    moved = " (it moved; no bisection of it covers the new range)" if e.action != "new" else ""
                    out.messages.append(
                        f"bisection {bid} started: change point {e.change_point_id} spans untested commits{moved}"
                    )
                elif shared is not None and shared not in out.bisections_shared:
                    out.bisections_shared.append(shared)
        except Exception as e:
            out.failed.append("bisect")
            out.messages.append(f"starting a bisection failed: {type(e).__name__}: {e}")
        try:
            for event in alerting.sync(conn, settings.alerts):
                out.messages.append(
                    f"alert {event.alert_id} {event.action} (message version {event.message_version}): "
                    f"{', '.join(event.changes) or 'new'}; queued for {', '.join(event.queued) or '-'}"
                )
            for bid in [*out.bisections_started, *out.bisections_shared]:
                bisection.report_to_alert(conn, bid, settings.alerts)
        except Exception as e:
            out.failed.append("alerts")
            out.messages.append(f"alert sync failed: {type(e).__name__}: {e}")
    finally:
        conn.close()
    _publish(settings, run_id, out)
    return out


def _publish(settings: Settings, run_id: int, out: AfterIngest) -> None:
    """Re-render what the run changed in the static site (last: it shows detection, alerts, bisections)."""
    from master.publish import publish_incremental

    try:
        report = publish_incremental(settings, run_id)
    except Exception as e:  # the site is derived data: the result is stored, the next publish catches up
        out.failed.append("publish")
        out.messages.append(
            f"site publish failed: {type(e).__name__}: {e} (the result is stored; "
            f"`perffarm publish` re-renders the whole site into {settings.site_dir})"
        )
    else:
        out.messages.append(
            f"site: {report.files_written} files re-rendered in {report.seconds:.2f} s "
            f"({'incremental' if report.incremental else 'full'}) at {report.out_dir}"
        )
        if report.failures:  # every other page was published; these say on the site what went wrong
            out.failed.append("publish")
            out.messages += [f"site page could not be built: {f.line()}" for f in report.failures]
