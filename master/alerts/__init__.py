"""Alerts: one message per regression, updated with the culprit, never lost, never repeated (issue #6).

Pure core (no Buildbot/Twisted): `config` (settings as data), `rules` (which change points alert),
`grouping` (one alert per commit range), `lifecycle` (states), `neutralise` (untrusted text), `messages`
(payloads as plain data), `sync` (derive alerts, queue messages), `channels` (senders over injected clients),
`delivery` (outbox draining), `health` (each channel's state). Adapters: `service` (BuildbotService), `cli`.
Their SQL is in the results store (master/store/alerts.py).

A package's face only: import the module you use. The settings read `config`, so importing it must not load the
statistics behind `sync` or the HTTP client behind `channels`.

Entry points for the master:
    sync.sync(conn, settings, now) -> list[AlertEvent]            after each analysis round (idempotent)
    health.channel_health(conn, settings) -> list[ChannelHealth]  for `perffarm status` and the site
    service.AlertDelivery(settings, results_db)                   for c['services']
"""
