"""Assemble Buildbot's configuration from the settings and the recipes (buildbot.cfg only calls this).

Builders are recipe x worker. Every watched commit gets its own build (collapseRequests=False everywhere) unless
`master.queued = "newest"`: then a commit build still waiting when a newer commit of its branch arrives is dropped.
Measurement steps of all builders on one physical host share one lock: a benchmark never overlaps another
benchmark or a compile on that host, because both would steal its CPU and memory bandwidth.
"""

from __future__ import annotations

import os
import re
from typing import Any

from buildbot.plugins import schedulers, secrets, steps, util, worker
from buildbot.process.results import FAILURE, SKIPPED, SUCCESS
from buildbot.schedulers import forcesched
from buildbot.util import safeTranslate
from twisted.internet import defer

from master import buildbotdb, health, job_steps, refnames, shipping, web
from master import job_service as jobs_service
from master.alerts.service import AlertDelivery
from master.bisection.service import BisectionService
from master.cfbot_service import CfbotService
from master.config_values import OPTION_RE
from master.ingest import MAX_RESULT_BYTES
from master.poller import FarmGitPoller
from master.reconcile import Reconciler
from master.settings import Settings
from master.steps import (
    Checkout,
    CheckSource,
    IngestResult,
    RecordAttempt,
    StartBisection,
    build_options,
    checkout_failed,
    not_stored_yet,
    result_dest,
    source_checked,
    upload_wanted,
)
from master.workerlink import WorkerWatch
from recipes import registry
from recipes.api import SOURCE_DIR
from recipes.result import NAME_RE

PYZ_ON_WORKER = shipping.ON_WORKER
RESULT_ON_WORKER = "result.json"
BUILD_TIMEOUT = 6 * 3600
CONTROL_WORKER = "perffarm-control"  # in-process worker for master-only builders (the bisection form)
BISECT_FORM_BUILDER = "bisect-request"
# the force and try forms' options field: space-separated KEY=VALUE (each checked again by OPTION_RE when run)
FORM_OPTIONS_REGEX = re.compile(r"^(\s*[a-z][a-z0-9_]{0,40}=\S{0,400})*\s*$")


def builder_name(recipe: str, worker_name: str) -> str:
    return f"{recipe}@{worker_name}"


class FormScheduler(schedulers.ForceScheduler):
    """Buildbot's ForceScheduler (a web form), limited to its own builders.

    Buildbot 4.3's `force()` takes the builder from the REST call's `builderid` without checking it against the
    form's `builderNames` (it does check a `builderNames` list), so the measure form's call with a job builder's id
    queued a build there. A builder outside the form's list, or a builderid that names no builder, is refused as a
    form error before any build request exists."""

    @defer.inlineCallbacks
    def computeBuilderNames(self, builderNames=None, builderid=None):  # noqa: N802, N803 (Buildbot's API)
        if builderNames is not None or builderid is None:
            names = yield super().computeBuilderNames(builderNames, builderid)
            return names
        try:
            number = int(builderid)
        except (TypeError, ValueError):
            raise forcesched.CollectedValidationError(
                {"builderid": f"{str(builderid)[:40]!r} is not a builder id; nothing was queued"}
            ) from None
        builder = yield self.master.data.get(("builders", number))
        name = builder["name"] if builder else None
        if name not in self.builderNames:
            shown = repr(name) if name else f"id {number}"
            raise forcesched.CollectedValidationError(
                {
                    "builderid": f"builder {shown} is not one of the builders of the form {self.name!r} "
                    f"({', '.join(self.builderNames)}); nothing was queued"
                }
            )
        return [name]


def runner_command(phase: str, recipe: str, defaults: tuple[str, ...] = ()):
    """The worker-side command of a phase, rendered per build: recipe options are the farm's `recipes.options`
    for this recipe (`defaults`), then the build property `perffarm_options` (a list of KEY=VALUE; bisection
    probes use it to measure only the bisected workload); a later KEY wins."""

    @util.renderer
    def render(props):
        options = build_options(props, defaults)
        bad = [o for o in options if not isinstance(o, str) or not OPTION_RE.match(o)]
        if bad:
            raise ValueError(f"perffarm_options: {bad!r} are not KEY=VALUE options")
        return shipping.worker_command(
            phase,
            recipe,
            props.getProperty("got_revision"),
            state="state",
            result=RESULT_ON_WORKER,
            where=("--ref", props.getProperty("branch") or "HEAD"),
            options=options,
        )

    return render


def _runner_step(
    phase: str, recipe: str, lock: util.MasterLock, defaults: tuple[str, ...] = (), **kwargs: Any
) -> steps.ShellCommand:
    return steps.ShellCommand(
        name=phase,
        doStepIf=not_stored_yet,
        command=runner_command(phase, recipe, defaults),
        workdir=".",
        decodeRC={0: SUCCESS, 3: FAILURE},
        locks=[lock.access("exclusive" if phase == "bench" else "counting")],
        timeout=BUILD_TIMEOUT,
        maxTime=BUILD_TIMEOUT,
        **kwargs,
    )


def repository_auth(settings: Settings) -> tuple[str, util.Secret] | None:
    """`auth_credentials` for Buildbot's GitPoller and Git step: the user setting and the password *secret*, so
    the URL Buildbot stores in changes and shows in logs never holds credentials (docs/security.md)."""
    if not settings.repository_password_secret:
        return None
    return (settings.repository_user, util.Secret(settings.repository_password_secret))


def _checkout(settings: Settings, **kwargs: Any) -> Checkout:
    return Checkout(
        repourl=settings.repository_url,
        auth_credentials=repository_auth(settings),
        workdir=SOURCE_DIR,
        mode="full",
        method="clean",
        retryFetch=True,
        haltOnFailure=True,
        **kwargs,
    )


def _job_factory(settings: Settings, recipe: str, w: str, pyz: str, lock: util.MasterLock) -> util.BuildFactory:
    """Jobs (master/jobs): every side of a job built and measured interleaved in one build."""
    name = jobs_service.job_builder_name(recipe, w)
    return util.BuildFactory(
        job_steps.job_steps(settings, recipe, name, _checkout(settings, doStepIf=job_steps.checked), pyz, lock)
    )


def _hidden_codebase() -> list[util.CodebaseParameter]:
    """The codebase of a form whose build names no commit of its own (try, bisect): all fixed and hidden, so
    the form shows only its own fields and a posted branch or revision is ignored."""
    return [
        util.CodebaseParameter(
            "",
            hide=True,
            branch=util.FixedParameter(name="branch", default=""),
            revision=util.FixedParameter(name="revision", default=""),
            repository=util.FixedParameter(name="repository", default=""),
            project=util.FixedParameter(name="project", default=""),
        )
    ]


def _try_form(job_names: tuple[str, ...]) -> schedulers.ForceScheduler:
    """The try form (and `perffarm try`, which posts to it): a base and a patch, measured as an interleaved A/B
    job on a worker. Its one step (StartTry) validates the patch against the base in the master's mirror and
    queues the job, or refuses with one line and queues nothing."""
    return FormScheduler(
        name=job_steps.TRY_SCHEDULER,
        builderNames=[job_steps.TRY_FORM_BUILDER],
        label="Try a patch",
        buttonName="Try",
        reason=util.StringParameter(name="reason", label="Reason", default="try", size=60),
        codebases=_hidden_codebase(),
        properties=[
            util.StringParameter(
                name="base",
                label="Base (branch, tag or sha)",
                default="master",
                size=45,
                regex=refnames.FORM_REVISION_REGEX,
            ),
            util.TextParameter(name="patch", label="Patch (unified diff)", required=True, cols=80, rows=12),
            util.ChoiceStringParameter(
                name="measure_on", label="Measure on", choices=list(job_names), default=job_names[0]
            ),
            util.StringParameter(
                name="options",
                label="Recipe options (KEY=VALUE ...)",
                default="",
                size=60,
                regex=FORM_OPTIONS_REGEX,
            ),
        ],
    )


def _factory(settings: Settings, recipe: str, w: str, pyz: str, lock: util.MasterLock) -> util.BuildFactory:
    f = util.BuildFactory()
    f.addStep(RecordAttempt(settings))
    f.addStep(CheckSource(settings))  # before anything runs on the worker: branch and revision are safe names
    # A build only ever uploads the result it produced: the previous build's file goes before the checkout.
    f.addStep(
        steps.RemoveDirectory(name="remove old result", dir=RESULT_ON_WORKER, doStepIf=not_stored_yet, hideStepIf=True)
    )
    f.addStep(_checkout(settings, doStepIf=not_stored_yet))
    f.addStep(
        steps.RemoveDirectory(
            name="discard broken checkout",
            dir=SOURCE_DIR,
            alwaysRun=True,
            doStepIf=checkout_failed,
            hideStepIf=lambda results, step: results == SKIPPED,
        )
    )
    f.addStep(
        steps.FileDownload(
            name="ship recipes",
            mastersrc=pyz,
            workerdest=PYZ_ON_WORKER,
            workdir=".",
            haltOnFailure=True,
            doStepIf=not_stored_yet,
        )
    )
    defaults = settings.recipe_options.get(recipe, ())
    f.addStep(_runner_step("build", recipe, lock, defaults, haltOnFailure=True))
    f.addStep(_runner_step("bench", recipe, lock, defaults))
    f.addStep(
        steps.FileUpload(
            name="upload result",
            workersrc=RESULT_ON_WORKER,
            masterdest=result_dest(settings, builder_name(recipe, w)),
            workdir=".",
            maxsize=MAX_RESULT_BYTES,
            alwaysRun=True,
            doStepIf=upload_wanted,
        )
    )
    f.addStep(IngestResult(settings, recipe, doStepIf=source_checked))
    return f


COMMITS_SCHEDULER = "commits"


def collapsible(new_scheduler: str | None, old_scheduler: str | None) -> bool:
    """Only builds the commit scheduler queued for watched commits collapse (`master.queued = "newest"`);
    forced builds, bisection probes and re-queued commits are always measured."""
    return new_scheduler == old_scheduler == COMMITS_SCHEDULER


def collapse_queued_commits(master, builder, new_br: dict, old_br: dict):
    """Buildbot collapseRequests hook (returns a Deferred of bool): a queued commit build is dropped (SKIPPED)
    when a newer commit of the same branch is queued behind it, so a busy worker measures the newest commit of a
    push. The commits in between stay untested: change detection reports the range and a bisection measures
    what it needs of it."""
    return defer.ensureDeferred(_collapse(master, new_br, old_br))


async def _collapse(master, new_br: dict, old_br: dict) -> bool:
    schedulers_of = []
    for br in (new_br, old_br):
        props = await master.data.get(("buildsets", str(br["buildsetid"]), "properties")) or {}
        schedulers_of.append((props.get("scheduler") or (None,))[0])
    if not collapsible(*schedulers_of):
        return False
    from buildbot.process.buildrequest import BuildRequest

    return bool(await BuildRequest.canBeCollapsed(master, new_br, old_br))


def buildbot_db(settings: Settings) -> dict[str, Any]:
    """Buildbot's db config: `master.buildbot_db_url`, and its password from the secret named by
    `master.buildbot_db_password_secret`, joined to the URL only when Buildbot renders it (in memory; Buildbot
    logs the URL with the password stripped), so no file, setting or log holds the password."""
    url = settings.buildbot_db_url
    if not settings.buildbot_db_password_secret:
        return {"db_url": url}
    return {"db_url": util.Transform(buildbotdb.with_password, url, util.Secret(settings.buildbot_db_password_secret))}


def www_config(settings: Settings) -> dict[str, Any]:
    """The web UI: its port, the origins its REST API accepts and, with master.web_users, login and roles."""
    hosts = web.allowed_hosts(settings.web_url, settings.web_host, settings.web_port)
    www: dict[str, Any] = {
        "port": f"tcp:{settings.web_port}:interface={settings.web_host}",
        "plugins": {"waterfall_view": {}, "console_view": {}, "grid_view": {}},
        "allowed_origins": list(web.allowed_origins(hosts)),
    }
    if settings.web_users:
        www["auth"] = web.SecretFileAuth(settings.secrets_dir, settings.web_users)
        www["authz"] = web.authz(settings.web_users)
    return www


def build_master_config(settings: Settings) -> dict[str, Any]:
    """The BuildmasterConfig dictionary for these settings; raises ValueError naming a bad setting."""
    known = registry.discover()
    for name in settings.recipes:
        if name not in known:
            raise ValueError(f"recipes.enabled: no recipe named {name!r} (known: {', '.join(sorted(known))})")
    settings.secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(settings.secrets_dir, 0o700)
    settings.incoming_dir.mkdir(parents=True, exist_ok=True)
    pyz = str(shipping.build_zipapp(settings.data_dir / "ship"))

    locks = {
        host: util.MasterLock(f"measure@{host}", maxCount=1000)
        for host in {settings.host_of(w) for w in settings.worker_names}
    }
    builders, job_builders = [], []
    for recipe in settings.recipes:
        for w in settings.worker_names:
            # the job builder shares the commit builder's directory on the worker (clone, build trees, install
            # cache: a job reuses every install the farm built) and its measurement lock; a worker runs one build
            # at a time (max_builds=1), so the two never use the directory together
            workdir = safeTranslate(builder_name(recipe, w)).decode()
            builders.append(
                util.BuilderConfig(
                    name=builder_name(recipe, w),
                    workernames=[w],
                    workerbuilddir=workdir,
                    factory=_factory(settings, recipe, w, pyz, locks[settings.host_of(w)]),
                    collapseRequests=collapse_queued_commits if settings.queued == "newest" else False,
                    properties={"perffarm_recipe": recipe},
                    tags=[recipe, w],
                )
            )
            job_builders.append(
                util.BuilderConfig(
                    name=jobs_service.job_builder_name(recipe, w),
                    workernames=[w],
                    workerbuilddir=workdir,
                    factory=_job_factory(settings, recipe, w, pyz, locks[settings.host_of(w)]),
                    collapseRequests=False,
                    properties={"perffarm_recipe": recipe},
                    tags=[recipe, w, "jobs"],
                )
            )
    names = [b.name for b in builders]
    job_names = tuple(b.name for b in job_builders)
    if settings.cfbot.repo and not job_names:
        raise ValueError(
            "cfbot.repo: the cfbot queues try-jobs, and no enabled recipe measures jobs (none is enabled): enable one "
            '(pg-quick) in recipes.enabled, or set cfbot.repo to ""'
        )
    builders += job_builders
    # try-jobs run someone's C code on a worker: submitting one needs a login (master.web_users), never open
    try_enabled = bool(settings.web_users and job_names)
    if try_enabled:
        form_steps = util.BuildFactory([job_steps.StartTry(settings, job_names)])
        builders.append(
            util.BuilderConfig(
                name=job_steps.TRY_FORM_BUILDER, workernames=[CONTROL_WORKER], factory=form_steps, tags=["jobs"]
            )
        )
    form = util.BuildFactory()
    form.addStep(StartBisection(settings))
    builders.append(
        util.BuilderConfig(name=BISECT_FORM_BUILDER, workernames=[CONTROL_WORKER], factory=form, tags=["bisection"])
    )

    return {
        "title": "perffarm",
        "titleURL": settings.web_url,
        "buildbotURL": settings.web_url,
        "buildbotNetUsageData": None,
        "db": buildbot_db(settings),
        "protocols": {"pb": {"port": f"tcp:{settings.worker_port}:interface={settings.worker_host}"}},
        "www": www_config(settings),
        "secretsProviders": [secrets.SecretInAFile(dirname=str(settings.secrets_dir))],
        "workers": [worker.Worker(w, util.Secret(f"worker-{w}"), max_builds=1) for w in settings.worker_names]
        + [worker.LocalWorker(CONTROL_WORKER)],
        "change_source": [
            FarmGitPoller(
                repourl=settings.repository_url,
                auth_credentials=repository_auth(settings),
                branches=settings.ref_matches,
                pollInterval=settings.poll_interval,
                pollAtLaunch=True,
                buildPushesWithNoCommits=True,
                workdir="gitpoller-work",
                project="perffarm",
            )
        ],
        "schedulers": [
            schedulers.AnyBranchScheduler(name=COMMITS_SCHEDULER, builderNames=names, treeStableTimer=None),
            FormScheduler(
                name="force",
                builderNames=names,
                label="Measure a commit",
                buttonName="Measure",
                reason=util.StringParameter(name="reason", label="Reason", default="forced", size=60),
                properties=[
                    util.StringParameter(
                        name="perffarm_options",
                        label="Recipe options (KEY=VALUE ..., e.g. workloads=NAME,NAME)",
                        default="",
                        size=60,
                        regex=FORM_OPTIONS_REGEX,
                    )
                ],
                codebases=[
                    util.CodebaseParameter(
                        "",
                        label="Commit",
                        branch=util.StringParameter(
                            name="branch", label="Branch or tag", size=40, regex=refnames.FORM_REF_REGEX
                        ),
                        revision=util.StringParameter(
                            name="revision", label="Revision (sha)", size=45, regex=refnames.FORM_REVISION_REGEX
                        ),
                        repository=util.FixedParameter(name="repository", default=settings.repository_url),
                        project=util.FixedParameter(name="project", default="perffarm"),
                    )
                ],
            ),
            # Bisection probes: real builds at a chosen revision, submitted by the bisection service.
            schedulers.Triggerable(name="bisect", builderNames=names),
            # Jobs (perffarm releases / try): submitted by the job service, one build per job.
            *([schedulers.Triggerable(name=jobs_service.SCHEDULER, builderNames=list(job_names))] if job_names else []),
            *([_try_form(job_names)] if try_enabled else []),
            FormScheduler(
                name="bisect-form",
                builderNames=[BISECT_FORM_BUILDER],
                label="Bisect a slowdown",
                buttonName="Bisect",
                reason=util.StringParameter(name="reason", label="Reason", default="bisect", size=60),
                codebases=_hidden_codebase(),
                properties=[
                    util.StringParameter(
                        name="good",
                        label="Good commit or tag",
                        required=True,
                        size=45,
                        regex=refnames.FORM_REVISION_REGEX,
                    ),
                    util.StringParameter(
                        name="bad",
                        label="Bad commit or tag",
                        required=True,
                        size=45,
                        regex=refnames.FORM_REVISION_REGEX,
                    ),
                    util.StringParameter(
                        name="workload", label="Workload", required=True, size=40, regex=NAME_RE.pattern
                    ),
                    util.StringParameter(
                        name="metric",
                        label="Metric (empty: the workload's first)",
                        size=30,
                        regex=f"^(?:{NAME_RE.pattern[1:-1]})?$",
                    ),
                    util.StringParameter(
                        name="branch", label="Branch", default="master", size=30, regex=refnames.FORM_REF_REGEX
                    ),
                    util.ChoiceStringParameter(
                        name="measure_on", label="Measure on", choices=names, default=names[0] if names else ""
                    ),
                ],
            ),
        ],
        "builders": builders,
        "collapseRequests": False,
        "services": [
            Reconciler(settings=settings, builder_names=names),
            BisectionService(
                settings=settings,
                job_builders=tuple(
                    (builder_name(r, w), jobs_service.job_builder_name(r, w))
                    for r in settings.recipes
                    for w in settings.worker_names
                    if jobs_service.job_builder_name(r, w) in job_names
                ),
            ),
            jobs_service.JobService(settings=settings, builders=job_names),
            *([CfbotService(settings=settings, builders=job_names)] if settings.cfbot.repo else []),
            AlertDelivery(settings=settings.alerts, results_db=str(settings.results_db)),
            web.WebGuard(hosts=web.allowed_hosts(settings.web_url, settings.web_host, settings.web_port)),
            health.StorageWatch(),
            WorkerWatch(settings=settings),
        ],
    }
