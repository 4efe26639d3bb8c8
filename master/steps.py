"""Master-side build steps: thin adapters that run the pure core in a thread and report in the build log."""

from __future__ import annotations

import secrets
from pathlib import Path

from buildbot.plugins import steps, util
from buildbot.process.buildstep import BuildStep
from buildbot.process.results import FAILURE, SUCCESS, WARNINGS
from twisted.internet import threads

from master import gitmirror, ingest, pipeline, refnames, store
from master.atomicfile import create_once
from master.publish import logged
from master.redact import redact_text
from master.settings import Settings
from recipes.paired import OPTION as REFERENCE_OPTION

SOURCE_BY_SCHEDULER = {"commits": "poll", "force": "force", "bisect": "bisect"}


def result_path(settings: Settings, builder: str, buildnumber: int | str, prefix: str = "") -> Path:
    """Where a build's uploaded result lands on the master (builder names are sanitised for the path; a job
    build's file is prefixed `job-`, master/job_steps.py)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in builder)
    return settings.incoming_dir / f"{prefix}{safe}-{buildnumber}.json"


def result_dest(settings: Settings, builder: str) -> util.Interpolate:
    return util.Interpolate(str(result_path(settings, builder, "%(prop:buildnumber)s")))


def _source(step: BuildStep) -> str:
    explicit = step.getProperty("perffarm_source")
    if explicit:
        return str(explicit)
    return SOURCE_BY_SCHEDULER.get(step.getProperty("scheduler") or "", "force")


def _int_or_none(value: object) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _requested_revision(step: BuildStep) -> str | None:
    ss = step.build.getSourceStamp("")
    return ss.revision if ss is not None else None


def _requested_branch(step: BuildStep) -> str | None:
    ss = step.build.getSourceStamp("")
    return ss.branch if ss is not None else None


INSTANCE_FILE = "perffarm-instance"


def master_instance(settings: Settings) -> str:
    """A random id of this Buildbot master directory, created once: build request ids restart when Buildbot's
    database is recreated, so a measurement's idempotency key is "<instance>/<request id>"."""
    settings.master_dir.mkdir(parents=True, exist_ok=True)
    return create_once(settings.master_dir / INSTANCE_FILE, lambda: secrets.token_hex(8), 0o644)


def request_key(settings: Settings, step: BuildStep) -> str | None:
    """The build request this build serves, as the measurement's idempotency key (None outside a request)."""
    requests = getattr(step.build, "requests", None) or []
    return f"{master_instance(settings)}/{requests[0].id}" if requests else None


STORED_RUN = "perffarm_stored_run"  # build property: this build request's result is already stored (run id)
COMMIT = "perffarm_commit"  # build property: the commit the master resolved the requested revision to
REFERENCE = "perffarm_reference"  # build property: the reference commit its throughput is paired with, if any


def build_options(props, defaults: tuple[str, ...] = ()) -> list:
    """The recipe options a build runs with, in order (a later KEY wins): the farm's `recipes.options` for the
    recipe (`defaults`), `reference=<sha>` when the branch is paired (property REFERENCE), then the build
    property `perffarm_options` (a forced build's own options; bisection probes measure one workload)."""
    options = props.getProperty("perffarm_options") or []
    if isinstance(options, str):  # the force form's text field: space-separated KEY=VALUE
        options = options.split()
    reference = props.getProperty(REFERENCE)
    return [*defaults, *([f"{REFERENCE_OPTION}={reference}"] if reference else []), *options]


def not_stored_yet(step: BuildStep) -> bool:
    """doStepIf for the checkout, build and bench steps: skip them when a retried build's result is stored."""
    return not step.getProperty(STORED_RUN)


class RecordAttempt(BuildStep):
    """Note in the results database that this revision is being built (caps re-queues after crashes), and find
    out whether its result is stored already: this build request's (the master was killed after storing it and
    Buildbot retried the request), or, for an automatic build, this commit's on this builder (Buildbot's GitPoller
    reports commits again when the master is killed before it saved its state: the chaos suite saw it). Then the
    build only finishes what a killed one left undone; a forced build always measures."""

    name = "record-attempt"
    hideStepIf = True

    def __init__(self, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    async def run(self) -> int:
        revision = _requested_revision(self)
        builder, build_id = self.build.builder.name, self.build.buildid
        settings = self.settings
        automatic = _source(self) in store.AUTOMATIC_SOURCES

        def record() -> int | None:
            key = request_key(settings, self)
            conn = store.connect(settings.results_db)
            try:
                stored = store.run_for_request(conn, key)
                if stored is None and automatic and revision:
                    stored = store.automatic_run_for(conn, revision, builder)
                if revision and stored is None:
                    store.record_attempt(conn, build_id, revision, builder)
                return stored
            finally:
                conn.close()

        stored = await threads.deferToThread(record)
        if stored is not None:
            self.setProperty(STORED_RUN, stored, "RecordAttempt")
        return SUCCESS


def end_of_options(command: list[str], repourl: str) -> list[str]:
    """A git command of Buildbot's Git step with `--end-of-options` before its user-supplied positional values,
    where git (>= 2.24) accepts it: `fetch` (repository, branch) and `cat-file -e` (revision). `checkout` does
    not accept it in git 2.39; CheckSource's validation is what keeps its revision from being an option."""
    if command[:1] == ["fetch"] and repourl in command:
        i = command.index(repourl)
        return [*command[:i], "--end-of-options", *command[i:]]
    if command[:2] == ["cat-file", "-e"]:
        return [*command[:2], "--end-of-options", *command[2:]]
    return command


def single_branch(command: list[str]) -> list[str]:
    """`git clone` of Buildbot's Git step with `--single-branch`: the worker's clone fetches the branch it builds
    (every later build fetches its own branch explicitly), not every ref of the repository. A clone of all refs
    fails as a whole on one malformed ref in the upstream repository ("has a null OID", found by the chaos run:
    every build after the worker's clone was discarded failed), and of postgres.git it also fetches every
    release branch a builder never builds."""
    if command[:1] == ["clone"] and "--single-branch" not in command:
        return ["clone", "--single-branch", *command[1:]]
    return command


class Checkout(steps.Git):
    """Buildbot's Git step, with `--end-of-options` where git takes it (defence in depth behind CheckSource) and
    single-branch clones."""

    def _dovccmd(self, command, abandonOnFailure=True, collectStdout=False, initialStdin=None):
        command = single_branch(end_of_options(list(command), self.repourl))
        return super()._dovccmd(
            command, abandonOnFailure=abandonOnFailure, collectStdout=collectStdout, initialStdin=initialStdin
        )


SOURCE_REFUSED = "perffarm_source_refused"  # build property: CheckSource refused the branch or revision


def source_checked(step: BuildStep) -> bool:
    """doStepIf for upload and ingest: nothing to take from a build whose source was refused or whose result is
    stored already (the ingest step still finishes derived stages for the latter)."""
    return not step.getProperty(SOURCE_REFUSED)


def checkout_failed(step: BuildStep) -> bool:
    """doStepIf for discarding the worker's clone: the checkout of an accepted source produced no revision (a
    corrupt clone, a failed fetch), so the next attempt clones afresh instead of failing the same way."""
    return source_checked(step) and not_stored_yet(step) and not step.getProperty("got_revision")


def upload_wanted(step: BuildStep) -> bool:
    """doStepIf for the result upload: only after a checkout this build made (got_revision set), of a source
    CheckSource accepted, when the request's result is not stored already."""
    return source_checked(step) and not_stored_yet(step) and bool(step.getProperty("got_revision"))


class CheckSource(BuildStep):
    """Refuse a build whose branch or revision is not a safe name before anything runs on the worker, and
    resolve the requested revision to a commit of the watched repository in the master's own mirror.

    Every way a build starts (poll, force form, REST API, re-queue, bisection) passes here, so a "branch" such
    as `--upload-pack=...` never reaches `git fetch` on the worker; the resolved commit is what the result
    must be for (see ingest), whatever the worker says.
    """

    name = "check-source"
    haltOnFailure = True
    flunkOnFailure = True

    def __init__(self, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    async def run(self) -> int:
        branch, revision = _requested_branch(self), _requested_revision(self)
        log = await self.addLog("check")
        problems = []
        if branch:
            problem = refnames.ref_problem(branch)
            if problem:
                problems.append(f"branch {refnames.show(branch)} {problem}")
        if revision:
            problem = refnames.revision_problem(revision)
            if problem:
                problems.append(f"revision {refnames.show(revision)} {problem}")
        if problems:
            await log.addStderr(
                "REFUSED, nothing was run on the worker: " + "; ".join(problems) + ".\n"
                "Give a branch or tag name as `git check-ref-format --branch` accepts it and a commit sha.\n"
            )
            await log.finish()
            self.setProperty(SOURCE_REFUSED, True, "CheckSource")
            self.descriptionDone = ["refused: unsafe branch or revision"]
            return FAILURE
        if revision:
            try:
                sha = await threads.deferToThread(ingest.resolve_commit, self.settings, revision)
            except gitmirror.GitError as e:
                await log.addStderr(f"REFUSED, nothing was run on the worker: {e}\n")
                await log.finish()
                self.setProperty(SOURCE_REFUSED, True, "CheckSource")
                self.descriptionDone = ["refused: unknown revision"]
                return FAILURE
            self.setProperty(COMMIT, sha, "CheckSource")
            await log.addStdout(f"revision {revision} is commit {sha}\n")
            reference, note = await threads.deferToThread(ingest.reference_for, self.settings, branch, sha)
            if reference is not None:
                self.setProperty(REFERENCE, reference, "CheckSource")
            if note:
                await (log.addStdout if reference else log.addStderr)(note + "\n")
        await log.finish()
        return SUCCESS


class IngestResult(BuildStep):
    """Validate the uploaded result and store it (off the reactor); a malformed result fails this step."""

    name = "ingest"

    def __init__(self, settings: Settings, recipe: str, **kwargs) -> None:
        kwargs.setdefault("alwaysRun", True)
        super().__init__(**kwargs)
        self.settings = settings
        self.recipe = recipe

    async def run(self) -> int:
        builder = self.build.builder.name
        log = await self.addLog("ingest")
        stored = self.getProperty(STORED_RUN)
        if stored:  # a retried build: its result was stored before the master died; finish the derived stages
            await log.addStdout(
                f"a result of this build request or, for an automatic build, of this commit is "
                f"stored already (run {stored}); not measured again\n"
            )
            return await self._after(log, int(stored), bisection_probe=bool(self.getProperty("perffarm_bisection")))
        path = result_path(self.settings, builder, self.getProperty("buildnumber"))
        builderid = await self.build.builder.getBuilderId()
        run = store.RunContext(
            builder=builder,
            worker=self.getProperty("workername") or "",
            source=_source(self),
            build_id=self.build.buildid,
            build_url=f"{self.master.config.buildbotURL}#/builders/{builderid}/builds/{self.getProperty('buildnumber')}",
            got_revision=self.getProperty("got_revision"),
            revision=_requested_revision(self),
            bisection_id=_int_or_none(self.getProperty("perffarm_bisection")),
            request_key=await threads.deferToThread(request_key, self.settings, self),
            ref=store.short_ref(_requested_branch(self) or "HEAD"),
            expected_sha=self.getProperty(COMMIT),
            reference=ingest.requested_reference(
                build_options(self.build.getProperties(), self.settings.recipe_options.get(self.recipe, ()))
            ),
        )
        try:
            outcome = await threads.deferToThread(ingest.ingest_file, self.settings, path, run, self.recipe)
        except ingest.MachineRefused as e:
            await log.addStderr(
                f"REFUSED, nothing stored: {redact_text(str(e))}\n"
                f"The file is kept in {path.parent / 'rejected'}; the health page and `perffarm status` list it.\n"
            )
            await log.addStdout(await threads.deferToThread(logged.health_line, self.settings) + "\n")
            self.descriptionDone = ["result refused: machine"]
            await log.finish()
            return FAILURE
        except ingest.IngestRejected as e:
            await log.addStderr(
                f"REJECTED, nothing stored: {redact_text(str(e))}\n"
                f"The file is kept in {path.parent / 'rejected'} for inspection. Fix the recipe (or the worker's "
                "recipe version) and force a rebuild of this revision.\n"
            )
            self.descriptionDone = ["result rejected"]
            await log.finish()
            return FAILURE
        except ingest.NoResult as e:
            await log.addStderr(f"NOT STORED: {redact_text(str(e))}\n")
            self.descriptionDone = ["no result"]
            await log.finish()
            return FAILURE
        except ingest.IngestDeferred as e:
            await log.addStderr(
                f"NOT STORED YET: {redact_text(str(e))}\nThe result is kept in {path} and will be retried.\n"
            )
            self.descriptionDone = ["ingest deferred"]
            await log.finish()
            return WARNINGS
        except store.AlreadyStored as e:
            await log.addStdout(f"{e}; not stored again\n")
            if e.run_id is None:
                await log.finish()
                return SUCCESS
            return await self._after(log, e.run_id, bisection_probe=run.bisection_id is not None)
        await log.addStdout(outcome.message + "\n")
        return await self._after(log, outcome.run_id, bisection_probe=run.bisection_id is not None)

    async def _after(self, log, run_id: int, bisection_probe: bool) -> int:
        """Detection, alerts and the site for a stored run (idempotent: derived data)."""
        after = await threads.deferToThread(pipeline.after_ingest, self.settings, run_id)
        await log.addStdout("".join(m + "\n" for m in after.messages))
        bisection = self.master.service_manager.namedServices.get("perffarm-bisection")
        if bisection is not None and (bisection_probe or after.bisections_started):
            bisection.kick()
        await log.finish()
        self.descriptionDone = [f"stored run {run_id}"]
        return WARNINGS if after.failed else SUCCESS


class StartBisection(BuildStep):
    """The bisection form's only step: create the bisection the user asked for (the service runs it)."""

    name = "start-bisection"

    def __init__(self, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    async def run(self) -> int:
        from master.bisection import state

        args = {
            k: (self.getProperty(k) or "").strip()
            for k in ("good", "bad", "workload", "metric", "branch", "measure_on")
        }
        log = await self.addLog("bisection")

        def create() -> int:
            conn = store.connect(self.settings.results_db)
            try:
                with store.transaction(conn):
                    return state.create(
                        conn,
                        good=args["good"],
                        bad=args["bad"],
                        workload=args["workload"],
                        metric=args["metric"] or None,
                        branch=args["branch"] or "master",
                        builder=args["measure_on"] or None,
                        requested_by=f"web form ({self.getProperty('owner') or 'anonymous'})",
                    )
            finally:
                conn.close()

        try:
            bisection_id = await threads.deferToThread(create)
        except state.BisectionError as e:
            await log.addStderr(f"cannot start the bisection: {e}\n")
            await log.finish()
            self.descriptionDone = ["bisection not started"]
            return FAILURE
        await log.addStdout(
            f"bisection {bisection_id} started; its probes appear as builds of the measurement "
            f"builder. Follow it with: perffarm bisect --status {bisection_id}\n"
        )
        await log.finish()
        self.descriptionDone = [f"bisection {bisection_id} started"]
        return SUCCESS
