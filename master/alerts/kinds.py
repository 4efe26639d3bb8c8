"""Alert channel kinds: how each kind's message is built and which sender delivers it.

A kind is what its channel's settings must hold (`config.CHANNEL_NEEDS`, read when the settings load), how its
message is built (plain data, `messages.py`) and which sender delivers it (`channels.py`). Adding a kind is a
message builder, a sender if none fits, one line in `CHANNEL_KINDS` and one in `config.CHANNEL_NEEDS`
(tests/unit/test_alerts_kinds.py holds the two to the same kinds); `perffarm alerts`, sync and delivery read
this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from master.alerts import messages
from master.alerts.channels import (
    BrokenSender,
    EmailSender,
    HttpClient,
    RequestsHttpClient,
    Sender,
    SmtpClient,
    SmtplibClient,
    WebhookSender,
    invalid_url_reason,
    webhook_url_problem,
)
from master.alerts.config import ChannelConfig

Message = Callable[[messages.AlertSnapshot, str, str, str], dict[str, Any]]  # (view, event, key, channel name)
PlanMessage = Callable[[messages.PlanSnapshot, str, str], dict[str, Any]]  # (view, key, channel name)


@dataclass(frozen=True)
class Clients:
    """The network clients senders may use (injected: tests pass recorders)."""

    http: HttpClient
    smtp: SmtpClient
    timeout: float


@dataclass(frozen=True)
class ChannelKind:
    name: str
    message: Message
    sender: Callable[[ChannelConfig, Mapping[str, str], Clients], Sender]  # secrets are all present
    # a plan change no alert names (event `plan-change`); None: the kind cannot say one, its channels get none
    plan_message: PlanMessage | None = None


def _webhook_sender(c: ChannelConfig, secrets: Mapping[str, str], clients: Clients) -> Sender:
    assert c.url_secret is not None  # config.CHANNEL_NEEDS: a webhook or slack channel has one
    url = secrets[c.url_secret]
    if (problem := webhook_url_problem(url)) is not None:
        return BrokenSender(invalid_url_reason(c.url_secret, problem))
    signing = secrets.get(c.signing_secret) if c.signing_secret else None
    return WebhookSender(clients.http, url, clients.timeout, signing, secret_name=c.url_secret)


def _email_sender(c: ChannelConfig, secrets: Mapping[str, str], clients: Clients) -> Sender:
    password = secrets.get(c.password_secret) if c.password_secret else None
    return EmailSender(clients.smtp, c, password, clients.timeout)


CHANNEL_KINDS: dict[str, ChannelKind] = {
    k.name: k
    for k in (
        ChannelKind(
            "slack",
            lambda view, event, key, channel: messages.slack(view, event),
            _webhook_sender,
            lambda view, key, channel: messages.plan_slack(view),
        ),
        ChannelKind(
            "webhook",
            lambda view, event, key, channel: messages.webhook(view, event, key),
            _webhook_sender,
            lambda view, key, channel: messages.plan_webhook(view, key),
        ),
        ChannelKind("email", messages.email, _email_sender, messages.plan_email),
    )
}


def build_message(
    view: messages.AlertSnapshot, channel_kind: str, event: str, key: str, channel: str
) -> dict[str, Any]:
    """The message for one channel kind, as plain JSON-able data."""
    if event not in messages.EVENTS:
        raise ValueError(f"unknown event {event!r}")
    kind = CHANNEL_KINDS.get(channel_kind)
    if kind is None:
        raise ValueError(f"unknown channel kind {channel_kind!r}")
    return kind.message(view, event, key, channel)


def says_plan_changes(channel_kind: str) -> bool:
    """Whether channels of this kind can be sent a plan change's own message."""
    kind = CHANNEL_KINDS.get(channel_kind)
    return kind is not None and kind.plan_message is not None


def build_plan_message(view: messages.PlanSnapshot, channel_kind: str, key: str, channel: str) -> dict[str, Any]:
    """A plan change's own message (event `plan-change`) for one channel kind, as plain JSON-able data."""
    kind = CHANNEL_KINDS.get(channel_kind)
    if kind is None or kind.plan_message is None:
        raise ValueError(f"channel kind {channel_kind!r} has no plan-change message")
    return kind.plan_message(view, key, channel)


def build_senders(
    channels: tuple[ChannelConfig, ...],
    secrets: Mapping[str, str],
    *,
    timeout: float,
    http: HttpClient | None = None,
    smtp: SmtpClient | None = None,
) -> dict[str, Sender]:
    """One sender per configured channel; `secrets` maps secret names to values (from Buildbot's providers)."""
    clients = Clients(http or RequestsHttpClient(), smtp or SmtplibClient(), timeout)
    out: dict[str, Sender] = {}
    for c in channels:
        missing = [s for s in c.secret_names() if s not in secrets]
        if missing:
            out[c.name] = BrokenSender(f"secret {missing[0]!r} not found in Buildbot's secrets providers")
        else:
            out[c.name] = CHANNEL_KINDS[c.kind].sender(c, secrets, clients)
    return out
