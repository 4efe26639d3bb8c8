"""Build requests the farm's own services make (bisection probes, jobs, re-queued commits) and the ones Buildbot
has not finished: one way to submit a build of a commit on a builder, and one way to see what is already queued.

Buildbot adapter (needs a running master's data API); the services decide what to build in their pure cores.
"""

from __future__ import annotations

from typing import Any

from buildbot.data import resultspec


async def pending_requests(master) -> set[tuple[int, str]]:
    """(builderid, revision) of every build request not finished yet (waiting or running)."""
    reqs = await master.data.get(("buildrequests",), filters=[resultspec.Filter("complete", "eq", [False])])
    pending = set()
    buildsets: dict[int, list[str]] = {}
    for req in reqs:
        bsid = req["buildsetid"]
        if bsid not in buildsets:
            bs = await master.data.get(("buildsets", bsid))
            buildsets[bsid] = [ss.get("revision") for ss in (bs or {}).get("sourcestamps", [])]
        for rev in buildsets[bsid]:
            if rev:
                pending.add((req["builderid"], rev))
    return pending


async def submit(
    master,
    builderid: int,
    *,
    repository: str,
    branch: str,
    revision: str,
    scheduler: str,
    label: str,
    source: str,
    reason: str,
    properties: dict[str, Any] | None = None,
    codebase: str = "",
    project: str = "perffarm",
) -> int:
    """Submit one build of ``revision`` on a builder, as ``scheduler``; ``label`` is its properties' source (shown in
    the web UI), ``source`` the run's `perffarm_source` (bisect, job, requeue). Returns the build request's id."""
    props = {"perffarm_source": (source, label), "scheduler": (scheduler, label)}
    props.update({k: (v, label) for k, v in (properties or {}).items()})
    _bsid, brids = await master.data.updates.addBuildset(
        waited_for=False,
        scheduler=scheduler,
        sourcestamps=[
            {"codebase": codebase, "repository": repository, "branch": branch, "revision": revision, "project": project}
        ],
        reason=reason,
        properties=props,
        builderids=[builderid],
    )
    return brids[builderid]
