"""The job builder's steps: check the job on the master, build and bench its sides on the worker, store the result.

Thin adapters: master/jobs/core.py and ingest.py do the work, in a thread."""

from __future__ import annotations

import time
from pathlib import Path

from buildbot.plugins import steps, util
from buildbot.process.buildstep import BuildStep
from buildbot.process.results import CANCELLED, FAILURE, SUCCESS, WARNINGS
from twisted.internet import threads

from master import gitmirror, ingest, refnames, shipping, store
from master import job_service as jobs_service
from master.config_values import OPTION_RE
from master.jobs import ingest as job_ingest
from master.publish import logged
from master.redact import redact_text
from master.settings import Settings
from master.steps import result_path as steps_result_path
from master.textsafe import visible

JOB = jobs_service.JOB_PROPERTY  # build property: the job this build runs
SIDES = "perffarm_job_sides"  # build property: ["A=<sha>", ...] as CheckJob read them from the job
PATCHED = "perffarm_job_patched"  # build property: the label of the patched side, or ""
OPTIONS = "perffarm_job_options"
CHECKED = "perffarm_job_checked"
ENDED = "perffarm_job_ended"  # build property: the job had ended when this build started (done or failed)
PATCH_ON_WORKER = "job.patch"
RESULT_ON_WORKER = "job.json"


def patch_path(settings: Settings, job_id: int | str) -> Path:
    return settings.data_dir / "jobs" / f"{job_id}.patch"


def result_path(settings: Settings, builder: str, buildnumber: int | str) -> Path:
    """Where a job build's uploaded result lands on the master (`steps.result_path`, prefixed `job-`)."""
    return steps_result_path(settings, builder, buildnumber, prefix="job-")


def checked(step: BuildStep) -> bool:
    return bool(step.getProperty(CHECKED))


def has_patch(step: BuildStep) -> bool:
    return checked(step) and bool(step.getProperty(PATCHED))


def result_produced(step: BuildStep) -> bool:
    """doStepIf for the result upload: only a result this build produced, i.e. job-build or job-bench ran to its end
    here. A build stopped before them (the master's shutdown during check-job) skipped the removal of the previous
    job's job.json on the worker too: uploading that file would hand ingest another job's result."""
    return checked(step) and any(
        s.name in ("job-build", "job-bench") and s.results in (SUCCESS, WARNINGS, FAILURE)
        for s in step.build.executedSteps
    )


def ingest_wanted(step: BuildStep) -> bool:
    """doStepIf for ingest-job: a checked build stores its result; a build of an ended job (Buildbot retried it
    after the master was killed mid-ingest) only finishes what the killed one left undone, the job's pages; a
    stopped build (the master's shutdown, the Stop button) says what becomes of the job."""
    return checked(step) or bool(step.getProperty(ENDED)) or step.build.stopped


def _fail_job(settings: Settings, job_id: int, reason: str) -> None:
    conn = store.connect(settings.results_db)
    try:
        with store.transaction(conn):
            store.jobs.finish(conn, job_id, result=None, error=reason, machine_id=None, now=time.time())
    finally:
        conn.close()


class CheckJob(BuildStep):
    """Read the job this build runs (one that has ended already is not run again), re-check every side in the
    master's mirror, hand the patch to the worker."""

    name = "check-job"
    haltOnFailure = True

    def __init__(self, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    async def run(self) -> int:
        log = await self.addLog("job")
        try:
            job_id = int(self.getProperty(JOB))
        except (TypeError, ValueError):
            await log.addStderr("REFUSED: this builder only runs jobs (perffarm releases / perffarm try)\n")
            await log.finish()
            return FAILURE

        def load():
            conn = store.connect(self.settings.results_db)
            try:
                return store.jobs.get(conn, job_id)
            finally:
                conn.close()

        job = await threads.deferToThread(load)
        if job is not None and job.state in store.jobs.ENDED:
            # a job is measured once (its id is the idempotency key): this is a retry of a build the master was
            # killed in after the job's result was stored, or a second build of it; nothing runs on the worker
            self.setProperty(ENDED, job.state, "CheckJob")
            await log.addStdout(job_ingest.ended_message(job) + "\n")
            await log.finish()
            self.descriptionDone = [f"job {job_id} ended already: not measured again"]
            return SUCCESS
        problem = None
        if job is None:
            problem = f"no job {job_id}"
        else:
            for side in job.sides:
                try:
                    sha = await threads.deferToThread(ingest.resolve_commit, self.settings, side.sha)
                except gitmirror.GitError as e:
                    problem = f"side {side.label} ({side.revision}): {e}"
                    break
                if sha != side.sha:
                    problem = f"side {side.label}: {side.sha} is not a commit sha of the watched repository"
                    break
            bad = [o for o in job.options if not OPTION_RE.match(o)]
            if bad:
                problem = f"options {bad!r} are not KEY=VALUE"
        if problem:
            await log.addStderr(f"REFUSED, nothing was run on the worker: {redact_text(problem)}\n")
            await log.finish()
            if job is not None:
                await threads.deferToThread(_fail_job, self.settings, job_id, problem)
            return FAILURE
        assert job is not None
        patched = next((s.label for s in job.sides if s.patched), "")
        if patched:
            if job.patch is None:
                await threads.deferToThread(_fail_job, self.settings, job_id, "a patched side but no patch stored")
                return FAILURE
            path = patch_path(self.settings, job_id)

            def write() -> None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(job.patch or "")

            await threads.deferToThread(write)
        self.setProperty(SIDES, [f"{s.label}={s.sha}" for s in job.sides], "CheckJob")
        self.setProperty(PATCHED, patched, "CheckJob")
        self.setProperty(OPTIONS, list(job.options), "CheckJob")
        self.setProperty(CHECKED, True, "CheckJob")
        for s in job.sides:
            await log.addStdout(f"side {s.label}: {s.revision} = {s.sha}" + (" + patch" if s.patched else "") + "\n")
        await log.finish()
        self.descriptionDone = [f"{job.kind} job {job_id}: {len(job.sides)} sides"]
        return SUCCESS


def job_command(phase: str, recipe: str, defaults: tuple[str, ...] = ()):
    """The worker-side command of a job phase: the sides CheckJob read, the patch if any, the recipe's farm-wide
    options and then the job's own (a later KEY wins)."""

    @util.renderer
    def render(props):
        patched = props.getProperty(PATCHED) or ""
        # every side keeps the callgrind profiles of its instruction workloads (no extra run): the job's page shows
        # where the instructions went
        options = [*defaults, "callgrind=1", *(props.getProperty(OPTIONS) or [])]
        return shipping.worker_command(
            phase,
            recipe,
            props.getProperty("got_revision"),
            state="job-state",
            result=RESULT_ON_WORKER,
            where=(
                "--job",
                str(props.getProperty(JOB)),
                *[f"--side={s}" for s in props.getProperty(SIDES) or []],
                *([f"--patch={patched}={PATCH_ON_WORKER}"] if patched else []),
            ),
            options=options,
        )

    return render


def job_steps(settings: Settings, recipe: str, builder: str, checkout: BuildStep, pyz: str, lock) -> list[BuildStep]:
    """The job builder's steps, in order."""
    defaults = settings.recipe_options.get(recipe, ())
    timeout = 6 * 3600
    return [
        CheckJob(settings),
        steps.RemoveDirectory(name="remove old result", dir=RESULT_ON_WORKER, doStepIf=checked, hideStepIf=True),
        checkout,
        steps.FileDownload(
            name="ship recipes",
            mastersrc=pyz,
            workerdest=shipping.ON_WORKER,
            workdir=".",
            haltOnFailure=True,
            doStepIf=checked,
        ),
        steps.FileDownload(
            name="ship patch",
            mastersrc=util.Interpolate(str(settings.data_dir / "jobs" / "%(prop:perffarm_job)s.patch")),
            workerdest=PATCH_ON_WORKER,
            workdir=".",
            haltOnFailure=True,
            doStepIf=has_patch,
            hideStepIf=lambda results, step: not has_patch(step),
        ),
        steps.ShellCommand(
            name="job-build",
            command=job_command("build", recipe, defaults),
            workdir=".",
            doStepIf=checked,
            haltOnFailure=True,
            decodeRC={0: SUCCESS, 3: FAILURE},
            locks=[lock.access("counting")],
            timeout=timeout,
            maxTime=timeout,
        ),
        steps.ShellCommand(
            name="job-bench",
            command=job_command("bench", recipe, defaults),
            workdir=".",
            doStepIf=checked,
            decodeRC={0: SUCCESS, 3: FAILURE},
            locks=[lock.access("exclusive")],
            timeout=timeout,
            maxTime=timeout,
        ),
        steps.FileUpload(
            name="upload result",
            workersrc=RESULT_ON_WORKER,
            masterdest=util.Interpolate(str(result_path(settings, builder, "%(prop:buildnumber)s"))),
            workdir=".",
            maxsize=ingest.MAX_RESULT_BYTES,
            alwaysRun=True,
            doStepIf=result_produced,
        ),
        IngestJob(settings, doStepIf=ingest_wanted),
    ]


class IngestJob(BuildStep):
    """Validate the uploaded job result against the job and store it; the job is done or failed after this."""

    name = "ingest-job"

    def __init__(self, settings: Settings, **kwargs) -> None:
        kwargs.setdefault("alwaysRun", True)
        super().__init__(**kwargs)
        self.settings = settings

    async def run(self) -> int:
        log = await self.addLog("ingest")
        builder = self.build.builder.name
        path = result_path(self.settings, builder, self.getProperty("buildnumber"))
        builderid = await self.build.builder.getBuilderId()
        url = f"{self.master.config.buildbotURL}#/builders/{builderid}/builds/{self.getProperty('buildnumber')}"
        if self.getProperty(ENDED):
            outcome = job_ingest.JobOutcome(
                self.getProperty(ENDED), f"job {self.getProperty(JOB)} ended already: nothing measured, nothing stored"
            )
        else:
            outcome = await threads.deferToThread(
                job_ingest.ingest_file,
                self.settings,
                path,
                int(self.getProperty(JOB)),
                self.build.buildid,
                url,
                self._stopped(),
                self.getProperty("workername") or "",
            )
        write = log.addStdout if outcome.state == "done" else log.addStderr
        await write(redact_text(outcome.message) + "\n")
        self.descriptionDone = [f"job {outcome.state}"]
        message = await threads.deferToThread(logged.jobs_line, self.settings)
        await log.addStdout(message + "\n")
        await log.finish()
        return {"done": SUCCESS, "queued": CANCELLED}.get(outcome.state, FAILURE)

    def _stopped(self) -> job_ingest.Stopped | None:
        """Why this build was stopped before it ended the job, if it was. The master's shutdown (SIGTERM) cancels
        the running build and Buildbot 4.3 does not retry it: the job is queued again, never failed by a restart.
        Someone's Stop button fails the job with their reason."""
        if not self.build.stopped:
            return None
        number = self.getProperty("buildnumber")
        if self.master.botmaster.shuttingDown or self.build.stopped_reason == "Master Shutdown":
            return job_ingest.Stopped(
                f"queued again by the farm: its build {number} was cancelled by the master's shutdown", requeue=True
            )
        why = visible(str(self.build.stopped_reason or "no reason given"))[:200]
        return job_ingest.Stopped(f"its build {number} was stopped before the job ended ({why})", requeue=False)


TRY_FORM_BUILDER = "try-request"
TRY_SCHEDULER = "try"


def submit_try(
    settings: Settings,
    base: str,
    patch: bytes,
    builder: str,
    builders: list[str],
    options: list[str],
    requested_by: str,
) -> int:
    """Validate a try request and queue its job (blocking: run it in a thread); JobError says why not."""
    from master.jobs import core

    text = core.check_patch(patch)
    base = base.strip()
    problem = refnames.revision_problem(base)
    if problem:
        raise core.JobError(f"base {refnames.show(base)} {problem}")
    try:
        sha = ingest.resolve_commit(settings, base)
    except gitmirror.GitError as e:
        raise core.JobError(
            f"base {refnames.show(base)} is not a branch, tag or commit of the watched repository ({e})"
        ) from None
    mirror = gitmirror.Mirror(settings.repository_url, settings.mirror_dir)
    conn = store.connect(settings.results_db)
    try:
        return core.create_try(conn, base, sha, text, mirror.patch_problem, builder, builders, options, requested_by)
    finally:
        conn.close()


class StartTry(BuildStep):
    """The try form's only step (master side): validate the request and queue the try-job; the job service runs
    it. A refused request queues nothing and says why in one line."""

    name = "start-try"

    def __init__(self, settings: Settings, builders: tuple[str, ...], **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.builders = builders

    async def run(self) -> int:
        from master.jobs import core

        props = {k: self.getProperty(k) or "" for k in ("base", "patch", "measure_on", "options")}
        log = await self.addLog("try")
        user = self.getProperty("owner") or "anonymous"
        try:
            job_id = await threads.deferToThread(
                submit_try,
                self.settings,
                str(props["base"]) or "master",
                str(props["patch"]).encode(),
                str(props["measure_on"]) or (self.builders[0] if self.builders else ""),
                list(self.builders),
                str(props["options"]).split(),
                f"try ({user})",
            )
        except core.JobError as e:
            message = redact_text(str(e))
            await log.addStderr(f"REFUSED, nothing queued: {message}\n")
            await log.finish()
            self.descriptionDone = [f"refused: {message}"[:200]]
            return FAILURE
        await log.addStdout(f"try job {job_id} queued; follow it with: perffarm try --status {job_id}\n")
        await log.finish()
        self.descriptionDone = [f"try job {job_id} queued"]
        return SUCCESS
