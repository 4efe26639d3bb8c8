"""The master's cfbot timer: every `cfbot.interval` seconds, the pass `perffarm cfbot` runs by hand
(master/jobs/cfbot.py `one_pass`): fetch the patch repository, queue a try-job for every new branch head. The job
service then runs the jobs as any other. Only with `cfbot.repo` set (master/farm.py adds the service then).

A pass that fails (the repository gone, a fetch refused, the results database busy) is logged with what to do and
tried again at the next tick; it never stops the master. What each pass queued and skipped is logged, a skip only
when its reason is new, so a branch that never applies does not fill the log every ten minutes.
"""

from __future__ import annotations

from twisted.internet import threads
from twisted.python import log

from master import gitmirror
from master.jobs import cfbot
from master.periodic import PeriodicService
from master.redact import redact_text, redact_url
from master.settings import Settings
from master.textsafe import visible


class CfbotService(PeriodicService):
    name = "perffarm-cfbot"

    def checkConfig(self, settings: Settings, builders: tuple[str, ...] = ()) -> None:  # noqa: D102
        pass

    def reconfigService(self, settings: Settings, builders: tuple[str, ...] = ()) -> None:  # noqa: D102
        self.settings = settings
        self.builders = builders  # the farm's job builders; the first measures (as `perffarm cfbot` chooses)
        self.said: dict[tuple[str, str], str] = {}  # (branch, head) -> the skip reason logged last

    def interval_seconds(self) -> float:
        return float(self.settings.cfbot.interval)

    def _one_pass(self) -> list[cfbot.Outcome]:
        c = self.settings.cfbot
        return cfbot.one_pass(self.settings, c.repo, c.branches, c.base, self.builders[0], self.builders)

    async def run_pass(self) -> None:
        repo = redact_url(self.settings.cfbot.repo)
        try:
            outcomes = await threads.deferToThread(self._one_pass)
        except gitmirror.GitError as e:
            log.msg(
                f"perffarm cfbot: nothing queued this pass: {visible(redact_text(str(e)))}; check that cfbot.repo "
                f"({repo}) and the watched repository are reachable; trying again in {self.settings.cfbot.interval} s"
            )
            return
        queued = [o for o in outcomes if o.job_id is not None]
        for o in queued:
            log.msg(f"perffarm cfbot: {visible(o.branch)} {o.head[:12]}: job {o.job_id} queued")
        said = {}
        for o in outcomes:
            if o.job_id is None:
                said[(o.branch, o.head)] = o.reason
                if self.said.get((o.branch, o.head)) != o.reason:
                    log.msg(f"perffarm cfbot: {visible(o.branch)} {o.head[:12]}: skipped: {visible(o.reason)}")
        self.said = said
        if not outcomes:
            log.msg(f"perffarm cfbot: no branch of {repo} matches {visible(self.settings.cfbot.branches)}")
        if queued:
            jobs = self.master.service_manager.namedServices.get("perffarm-jobs")
            if jobs is not None:
                jobs.kick()  # submit them now, not at the job service's next tick
