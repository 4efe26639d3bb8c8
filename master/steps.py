"""Master-side build steps: thin adapters that run the pure core in a thread and report in the build log."""

from __future__ import annotations

from pathlib import Path

from buildbot.plugins import util
from buildbot.process.buildstep import BuildStep
from buildbot.process.results import FAILURE, SUCCESS, WARNINGS
from twisted.internet import threads

from master import ingest, pipeline, store
from master.settings import Settings

SOURCE_BY_SCHEDULER = {"commits": "poll", "force": "force", "bisect": "bisect"}


def result_path(settings: Settings, builder: str, buildnumber: int | str) -> Path:
    """Where a build's uploaded result lands on the master (builder names are sanitised for the path)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in builder)
    return settings.incoming_dir / f"{safe}-{buildnumber}.json"


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


class RecordAttempt(BuildStep):
    """Note in the results database that this revision is being built (caps re-queues after crashes)."""

    name = "record-attempt"
    hideStepIf = True

    def __init__(self, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    async def run(self) -> int:
        revision = _requested_revision(self)
        if not revision:
            return SUCCESS
        builder, build_id = self.build.builder.name, self.build.buildid

        def record() -> None:
            conn = store.connect(self.settings.results_db)
            try:
                store.record_attempt(conn, build_id, revision, builder)
            finally:
                conn.close()

        await threads.deferToThread(record)
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
        )
        log = await self.addLog("ingest")
        try:
            outcome = await threads.deferToThread(ingest.ingest_file, self.settings, path, run, self.recipe)
        except ingest.IngestRejected as e:
            await log.addStderr(
                f"REJECTED, nothing stored: {e}\n"
                f"The file is kept in {path.parent / 'rejected'} for inspection. Fix the recipe (or the worker's "
                "recipe version) and force a rebuild of this revision.\n"
            )
            self.descriptionDone = ["result rejected"]
            await log.finish()
            return FAILURE
        except ingest.NoResult as e:
            await log.addStderr(f"NOT STORED: {e}\n")
            self.descriptionDone = ["no result"]
            await log.finish()
            return FAILURE
        except ingest.IngestDeferred as e:
            await log.addStderr(f"NOT STORED YET: {e}\nThe result is kept in {path} and will be retried.\n")
            self.descriptionDone = ["ingest deferred"]
            await log.finish()
            return WARNINGS
        except store.AlreadyStored as e:
            await log.addStdout(f"{e}; nothing to do\n")
            await log.finish()
            return SUCCESS
        await log.addStdout(outcome.message + "\n")
        after = await threads.deferToThread(pipeline.after_ingest, self.settings, outcome.run_id)
        await log.addStdout("".join(m + "\n" for m in after.messages))
        bisection = self.master.service_manager.namedServices.get("perffarm-bisection")
        if bisection is not None and (run.bisection_id is not None or after.bisections_started):
            bisection.kick()
        await log.finish()
        self.descriptionDone = [f"stored run {outcome.run_id}"]
        return WARNINGS if after.failed else SUCCESS


class StartBisection(BuildStep):
    """The bisection form's only step: create the bisection the user asked for (the service runs it)."""

    name = "start-bisection"

    def __init__(self, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    async def run(self) -> int:
        from master.bisection import state

        args = {k: (self.getProperty(k) or "").strip() for k in ("good", "bad", "workload", "metric", "branch",
                                                                    "measure_on")}
        log = await self.addLog("bisection")

        def create() -> int:
            conn = store.connect(self.settings.results_db)
            try:
                with store.transaction(conn):
                    return state.create(conn, good=args["good"], bad=args["bad"], workload=args["workload"],
                                        metric=args["metric"] or None, branch=args["branch"] or "master",
                                        builder=args["measure_on"] or None,
                                        requested_by=f"web form ({self.getProperty('owner') or 'anonymous'})")
            finally:
                conn.close()

        try:
            bisection_id = await threads.deferToThread(create)
        except state.BisectionError as e:
            await log.addStderr(f"cannot start the bisection: {e}\n")
            await log.finish()
            self.descriptionDone = ["bisection not started"]
            return FAILURE
        await log.addStdout(f"bisection {bisection_id} started; its probes appear as builds of the measurement "
                            f"builder. Follow it with: perffarm bisect --status {bisection_id}\n")
        await log.finish()
        self.descriptionDone = [f"bisection {bisection_id} started"]
        return SUCCESS
