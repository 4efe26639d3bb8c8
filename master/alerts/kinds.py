"""Alert channel kinds: the one table that names them.

A kind is what its channel's settings must hold, how its message is built (plain data, `messages.py`) and which
sender delivers it (`channels.py`). Adding a kind is a message builder, a sender if none fits, and one line in
`CHANNEL_KINDS`; settings validation, `perffarm alerts`, sync and delivery read the table.
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


@dataclass(frozen=True)
class Clients:
    """The network clients senders may use (injected: tests pass recorders)."""

    http: HttpClient
    smtp: SmtpClient
    timeout: float


@dataclass(frozen=True)
class ChannelKind:
    name: str
    # what a channel of this kind misses in its settings (".key: why" or ": why", after the channel), else None
    lacks: Callable[[ChannelConfig], str | None]
    message: Message
    sender: Callable[[ChannelConfig, Mapping[str, str], Clients], Sender]  # secrets are all present


def _lacks_url(c: ChannelConfig) -> str | None:
    if not c.url_secret:
        return f".url_secret: a {c.kind} channel needs the name of the secret holding its URL"
    return None


def _lacks_mail(c: ChannelConfig) -> str | None:
    if not c.mail_from or not c.mail_to:
        return ": an email channel needs mail_from and mail_to"
    if c.password_secret and not c.smtp_user:
        return ".smtp_user: needed with password_secret"
    return None


def _webhook_sender(c: ChannelConfig, secrets: Mapping[str, str], clients: Clients) -> Sender:
    assert c.url_secret is not None  # _lacks_url
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
            "slack", _lacks_url, lambda view, event, key, channel: messages.slack(view, event), _webhook_sender
        ),
        ChannelKind(
            "webhook", _lacks_url, lambda view, event, key, channel: messages.webhook(view, event, key), _webhook_sender
        ),
        ChannelKind("email", _lacks_mail, messages.email, _email_sender),
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
