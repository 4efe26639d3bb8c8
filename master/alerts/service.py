"""The Buildbot adapter: a service that derives alerts and drains the outbox, off the reactor.

Every `poll_interval` seconds (a PeriodicService: passes never overlap, `kick()` runs one now) it reads the
channels' secrets from Buildbot's secrets providers (`master.secrets_manager`: the values never pass through
settings or logs), then in a thread (`deferToThread`) runs `sync` and `deliver_once` against the results
database. The first pass frees leases left by a previous master process on this host that died mid-send, so
its messages go out at once (same idempotency key). Add it to `c['services']`:
`AlertDelivery(settings=alert_settings, results_db=path)`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from buildbot import config as bbconfig
from twisted.internet import threads
from twisted.python import log

from master import store
from master.alerts import delivery
from master.alerts.channels import redact
from master.alerts.config import AlertSettings
from master.alerts.kinds import build_senders
from master.alerts.sync import sync
from master.periodic import PeriodicService


class AlertDelivery(PeriodicService):
    """Periodic pass: alerts.sync, then send due outbox messages through each channel's sender.

    `kick()` (from PeriodicService) runs a pass at once, e.g. right after an ingest found a change point.
    """

    name = "perffarm-alerts"

    def checkConfig(self, settings: AlertSettings, results_db: str | Path) -> None:  # noqa: D102
        if not isinstance(settings, AlertSettings):
            bbconfig.error("perffarm-alerts: settings must be an AlertSettings (master.alerts.config)")

    def reconfigService(self, settings: AlertSettings, results_db: str | Path) -> None:  # noqa: D102
        self.settings = settings
        self.results_db = Path(results_db)
        self.first_pass = True
        self.last_report: delivery.DeliveryReport | None = None

    def interval_seconds(self) -> float:
        return self.settings.poll_interval

    async def run_pass(self) -> None:
        await self.pass_once()

    async def channel_secrets(self) -> dict[str, str]:
        """Values of the secrets the channels name, from Buildbot's providers (missing ones left out)."""
        out: dict[str, str] = {}
        for name in self.settings.secret_names():
            details = await self.master.secrets_manager.get(name)
            if details is not None and details.value is not None:
                out[name] = details.value
        return out

    async def pass_once(self) -> delivery.DeliveryReport:
        secrets = await self.channel_secrets()
        report = await threads.deferToThread(self.work, secrets)
        self.last_report = report
        for key, reason in report.failed:
            log.msg(f"perffarm alerts: {key} not delivered ({redact(reason, secrets)}); will retry")
        if report.sent:
            log.msg(f"perffarm alerts: delivered {len(report.sent)} message(s): {', '.join(report.sent)}")
        return report

    def work(self, secrets: Mapping[str, str]) -> delivery.DeliveryReport:
        """The blocking part (SQLite, HTTP, SMTP): runs in a thread, never on the reactor."""
        conn = store.connect(self.results_db)
        try:
            if self.first_pass:
                delivery.release_dead_leases(conn)
                self.first_pass = False
            sync(conn, self.settings, time.time())
            senders = build_senders(self.settings.channels, secrets, timeout=self.settings.retry.timeout)
            return delivery.deliver_once(conn, self.settings, senders, secrets=secrets)
        finally:
            conn.close()
