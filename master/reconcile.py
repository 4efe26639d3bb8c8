"""Nothing lost: re-queue watched commits that have no result, without duplicating runs.

Buildbot 4.3 cancels a running build on SIGTERM and never retries it; a master killed between a poll and its
scheduler's buildset loses the commit too. This service compares the poller's recent changes with the results
database and Buildbot's unfinished build requests, and submits a build for a (commit, builder) that has
neither — after seeing it missing on two consecutive passes at least `master.reconcile_grace` seconds apart (a
burst of new commits can take Buildbot's scheduler a minute or more to queue on a busy master: a change it is
still handling must not be doubled), and at most `max_attempts` times. Buildbot's queue is read again right
before submitting, so a request the scheduler made while the pass was deciding is not doubled either. It also
retries results whose ingest was deferred.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from twisted.internet import threads
from twisted.python import log

from master import buildsets, ingest, store
from master.atomicfile import write_atomic
from master.periodic import PeriodicService
from master.settings import Settings

REQUEUE_SCHEDULER = "perffarm-requeue"


@dataclass
class PassReport:
    """What one reconcile pass saw and did (written to <data_dir>/reconcile.json for `perffarm status`)."""

    at: float
    changes: int = 0
    missing: list[dict] = field(default_factory=list)
    scheduled_meanwhile: int = 0  # pairs the pass would have re-queued but Buildbot queued while it decided
    requeued: list[dict] = field(default_factory=list)
    gave_up: list[dict] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)


def plan_requeues(
    changes: list[dict],
    builders: dict[str, int],
    have: dict[str, set[str]],
    pending: set[tuple[int, str]],
    attempts: dict[str, dict[str, int]],
    seen_missing: Mapping[tuple[str, str], float],
    max_attempts: int,
    newest_only: bool = False,
    *,
    now: float = 0.0,
    grace: float = 0.0,
) -> tuple[list[tuple[dict, str]], list[tuple[dict, str]], dict[tuple[str, str], float]]:
    """Pure decision: which (change, builder) to re-queue now, which to give up on, and what is missing.

    `seen_missing` maps each (builder, revision) missing on the previous pass to when it was first seen missing;
    the third result is the same for this pass (first sightings at `now`). A pair is re-queued only if it was
    already missing on the previous pass, first seen missing at least `grace` seconds before `now`, has no stored
    result, no unfinished build request, and fewer than `max_attempts` started builds. With `newest_only`
    (`master.queued = "newest"`), a commit is not missing when a newer change of its branch (in `changes`,
    oldest first) has a result or a request on that builder: it was skipped on purpose, and detection and
    bisection cover it.
    """
    requeue: list[tuple[dict, str]] = []
    give_up: list[tuple[dict, str]] = []
    missing_now: dict[tuple[str, str], float] = {}
    done = {
        (i, name)
        for i, change in enumerate(changes)
        for name, builderid in builders.items()
        if change["revision"] in have.get(name, set()) or (builderid, change["revision"]) in pending
    }
    newest_done = {(name, changes[i].get("branch")): i for i, name in sorted(done)}  # (builder, branch) -> index
    for i, change in enumerate(changes):
        rev = change["revision"]
        for name in builders:
            if (i, name) in done or (newest_only and newest_done.get((name, change.get("branch")), -1) > i):
                continue
            key = (name, rev)
            first_seen = seen_missing.get(key, now)
            missing_now[key] = first_seen
            if key not in seen_missing or now - first_seen < grace:
                continue
            if attempts.get(name, {}).get(rev, 0) >= max_attempts:
                give_up.append((change, name))
            else:
                requeue.append((change, name))
    return requeue, give_up, missing_now


class Reconciler(PeriodicService):
    """Periodic pass that finds watched commits with no result and queues them again."""

    name = "perffarm-reconciler"

    def checkConfig(self, settings: Settings, builder_names: list[str]) -> None:  # noqa: D102
        pass

    def reconfigService(self, settings: Settings, builder_names: list[str]) -> None:  # noqa: D102
        self.settings = settings
        self.builder_names = builder_names
        self.seen_missing: dict[tuple[str, str], float] = {}

    def interval_seconds(self) -> float:
        return self.settings.reconcile_interval

    async def run_pass(self) -> None:
        await self.reconcile_once()

    async def _builder_ids(self) -> dict[str, int]:
        ids = {}
        for name in self.builder_names:
            ids[name] = await self.master.data.updates.findBuilderId(name)
        return ids

    async def reconcile_once(self) -> PassReport:
        report = PassReport(at=time.time())
        report.retried = await threads.deferToThread(ingest.retry_deferred, self.settings)
        changes = await self.master.data.get(("changes",), order=["-changeid"], limit=self.settings.reconcile_window)
        changes = [c for c in changes if c.get("revision") and c.get("repository") == self.settings.repository_url]
        report.changes = len(changes)
        builders = await self._builder_ids()
        pending = await buildsets.pending_requests(self.master)
        revisions = sorted({c["revision"] for c in changes})

        def lookup() -> tuple[dict[str, set[str]], dict[str, dict[str, int]]]:
            conn = store.connect(self.settings.results_db)
            try:
                have = {b: store.results_for(conn, revisions, b) for b in builders}
                attempts = {b: store.attempt_counts(conn, revisions, b) for b in builders}
            finally:
                conn.close()
            return have, attempts

        have, attempts = await threads.deferToThread(lookup)
        # Oldest first, so a re-queued backlog is measured in commit order.
        ordered = sorted(changes, key=lambda c: c["changeid"])
        requeue, give_up, missing_now = plan_requeues(
            ordered,
            builders,
            have,
            pending,
            attempts,
            self.seen_missing,
            self.settings.max_attempts,
            newest_only=self.settings.queued == "newest",
            now=report.at,
            grace=self.settings.reconcile_grace,
        )
        if requeue:  # the scheduler may have queued some of them while this pass read and decided
            queued = await buildsets.pending_requests(self.master)
            kept = [(c, n) for c, n in requeue if (builders[n], c["revision"]) not in queued]
            report.scheduled_meanwhile = len(requeue) - len(kept)
            requeue = kept
        self.seen_missing = missing_now
        report.missing = [{"builder": b, "revision": r} for b, r in sorted(missing_now)]
        for change, name in requeue:
            await self._submit(change, builders[name])
            report.requeued.append({"builder": name, "revision": change["revision"], "branch": change["branch"]})
            log.msg(f"perffarm: re-queued {change['revision'][:12]} ({change['branch']}) on {name}: no result yet")
        for change, name in give_up:
            report.gave_up.append({"builder": name, "revision": change["revision"], "branch": change["branch"]})
        await threads.deferToThread(self._write_report, report)
        return report

    async def _submit(self, change: dict, builderid: int) -> None:
        await buildsets.submit(
            self.master,
            builderid,
            repository=change["repository"],
            branch=change["branch"],
            revision=change["revision"],
            codebase=change.get("codebase", ""),
            project=change.get("project", ""),
            scheduler=REQUEUE_SCHEDULER,
            label="Reconciler",
            source="requeue",
            reason="perffarm: re-queued, this commit has no result (build cancelled or lost)",
        )

    def _write_report(self, report: PassReport) -> None:
        write_atomic(self.settings.data_dir / "reconcile.json", json.dumps(report.__dict__, indent=1, sort_keys=True))
