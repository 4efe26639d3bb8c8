"""The results store: the only code that speaks SQL to the results database (`<data_dir>/results.sqlite`).

Every run, every raw sample, commits in first-parent order, series, change points, alerts and bisections (SQLite,
WAL), separate from Buildbot's state.sqlite. The schema is an append-only list of migrations tracked by
PRAGMA user_version (`migrations`; docs/results-db.md documents every table and which module here owns it).
Callers get typed records, never sqlite3.Row, and hold the transaction (`transaction`) where several calls must
be atomic. Nothing here imports Buildbot or Twisted; the master calls it from a thread, never from the reactor.
Keeping all SQL in this package is what would let the store move to PostgreSQL the way Buildbot's own database
does (tests/unit/test_store_boundary.py holds the rest of the code to it).

    connection  connect, connect_readonly, migrate, transaction, read_snapshot
    migrations  the schema
    commits     commits, branch_commits, tags
    runs        runs, measurements, machines, attempts, rejections
    series      series: the key of one, what detection and the site read
    changes     change_points
    alerts      alerts, alert_lines, alert_history, alert_links, plan_changes, alert_outbox
    bisections  bisections, bisection_runs, and what their probes measured
    jobs        jobs: sides measured interleaved in one build (release archaeology, try-jobs)
    workers     refused_logins: worker logins the master refused, for the health page
    machines    machines' binding to the worker that first reported them, machine_refusals
"""

from __future__ import annotations

from master.store import (
    alerts,
    bisections,
    changes,
    commits,
    connection,
    jobs,
    machines,
    migrations,
    runs,
    series,
    workers,
)
from master.store.commits import (
    CommitInfo,
    append_branch,
    branch_head,
    commit_exists,
    copy_branch_prefix,
    reset_branch,
    set_message,
    set_tags,
    upsert_commits,
)
from master.store.connection import StoreError, connect, connect_readonly, migrate, read_snapshot, transaction
from master.store.migrations import MIGRATIONS
from master.store.runs import (
    AUTOMATIC_SOURCES,
    AlreadyStored,
    RunContext,
    adopt_workload_hashes,
    attempt_counts,
    automatic_run_for,
    counts,
    insert_run,
    latest_per_ref,
    list_runs,
    measurements_for,
    record_attempt,
    record_rejection,
    results_for,
    run_for_request,
    short_ref,
    workload_config_hash,
)

__all__ = [
    "AUTOMATIC_SOURCES",
    "MIGRATIONS",
    "AlreadyStored",
    "CommitInfo",
    "RunContext",
    "StoreError",
    "adopt_workload_hashes",
    "alerts",
    "append_branch",
    "bisections",
    "attempt_counts",
    "automatic_run_for",
    "branch_head",
    "changes",
    "commit_exists",
    "copy_branch_prefix",
    "commits",
    "connect",
    "connect_readonly",
    "connection",
    "counts",
    "insert_run",
    "jobs",
    "latest_per_ref",
    "list_runs",
    "machines",
    "measurements_for",
    "migrate",
    "migrations",
    "read_snapshot",
    "record_attempt",
    "record_rejection",
    "reset_branch",
    "results_for",
    "series",
    "run_for_request",
    "runs",
    "set_message",
    "set_tags",
    "short_ref",
    "transaction",
    "upsert_commits",
    "workers",
    "workload_config_hash",
]
