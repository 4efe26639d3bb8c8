"""Alerts: one message per regression, updated with the culprit, never lost, never repeated (issue #6).

Pure core (no Buildbot/Twisted): `config` (settings as data), `rules` (which change points alert),
`grouping` (one alert per commit range), `lifecycle` (states), `neutralise` (untrusted text), `messages`
(payloads as plain data), `sync` (derive alerts, queue messages), `channels` (senders over injected clients),
`delivery` (outbox draining, health). Adapters: `service` (BuildbotService), `cli`. Their SQL is in the results
store (master/store/alerts.py).

Entry points for the master:
    sync(conn, settings, now) -> list[AlertEvent]       after each analysis round (idempotent)
    channel_health(conn, settings) -> list[ChannelHealth] for `perffarm status` and the site
    master.alerts.service.AlertDelivery(settings, results_db)  for c['services']
"""

from __future__ import annotations

from master.alerts.config import AlertConfigError, AlertSettings, ChannelConfig
from master.alerts.delivery import ChannelHealth, channel_health, deliver_once
from master.alerts.sync import AlertEvent, record_bisection, set_state, sync

__all__ = [
    "AlertConfigError",
    "AlertEvent",
    "AlertSettings",
    "ChannelConfig",
    "ChannelHealth",
    "channel_health",
    "deliver_once",
    "record_bisection",
    "set_state",
    "sync",
]
