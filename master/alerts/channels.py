"""Senders: turn an outbox message into one HTTP POST or one email, through an injected client.

The clients are the only code that touches the network: `RequestsHttpClient` (requests, the farm's one HTTP
client) and `SmtplibClient`. Errors carry no URL and no password: a sender raises `SendError` with a short reason
that is safe to store and log. A webhook URL *is* a secret: requests' exception texts quote it (they are reduced
to the underlying OS error here) and urllib3's debug log prints its path (urllib3 is kept at WARNING).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import smtplib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from typing import Protocol

import requests

from master.alerts.config import ChannelConfig
from master.store.alerts import OutboxRow

IDEMPOTENCY_HEADER = "Idempotency-Key"
SIGNATURE_HEADER = "X-Perffarm-Signature"
USER_AGENT = "perffarm-alerts/1"


class SendError(Exception):
    """A send failed; `permanent` when retrying the same request cannot help (bad URL, auth refused)."""

    def __init__(self, reason: str, permanent: bool = False) -> None:
        super().__init__(reason)
        self.permanent = permanent


class HttpClient(Protocol):
    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> int:
        """POST and return the HTTP status (a 3xx is returned, never followed); raise OSError when no response came
        and ValueError (or any non-OSError) when the request could not be made from the URL."""


class SmtpClient(Protocol):
    def send(
        self,
        msg: EmailMessage,
        *,
        host: str,
        port: int,
        starttls: bool,
        user: str | None,
        password: str | None,
        timeout: float,
    ) -> None:
        """Hand one message to the SMTP server; raise smtplib.SMTPException or OSError on failure."""


class Sender(Protocol):
    def send(self, row: OutboxRow) -> None:
        """Deliver one message or raise SendError."""


def _os_reason(e: BaseException) -> str:
    """The OS-level cause of a requests failure in words without the URL ("ConnectionRefusedError: Connection
    refused"), else the exception's type name: requests' and urllib3's own texts quote the host and path."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, OSError) and not isinstance(x, requests.RequestException) and x.strerror:
            return f"{type(x).__name__}: {x.strerror}"
        todo += [
            x.__cause__,
            x.__context__,
            getattr(x, "reason", None) if isinstance(getattr(x, "reason", None), BaseException) else None,
        ]
        todo += [a for a in x.args if isinstance(a, BaseException)]
    return type(e).__name__


class RequestsHttpClient:
    """POST with requests: never follows a redirect (a 3xx is returned as the status), reads at most 64 KiB of
    the answer, and keeps urllib3's logger at WARNING so its debug lines (which show the URL's path) never appear."""

    def __init__(self) -> None:
        logging.getLogger("urllib3").setLevel(max(logging.getLogger("urllib3").level, logging.WARNING))
        self.session = requests.Session()

    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> int:
        if webhook_url_problem(url) is not None:  # never file://, ftp:// or a URL whose error would quote it
            raise ValueError("not a usable http(s) URL")
        try:
            with self.session.post(
                url, data=body, headers=dict(headers), timeout=timeout, allow_redirects=False, stream=True
            ) as resp:
                resp.raw.read(65536)
                return int(resp.status_code)
        except (
            requests.exceptions.InvalidURL,
            requests.exceptions.MissingSchema,
            requests.exceptions.InvalidSchema,
            requests.exceptions.URLRequired,
        ):
            raise ValueError("not a usable http(s) URL") from None  # WebhookSender reports it without its text
        except requests.exceptions.Timeout:
            raise OSError("timed out") from None
        except requests.RequestException as e:  # refused, reset, TLS, a broken answer: no response
            raise OSError(_os_reason(e)) from None


class SmtplibClient:
    """smtplib, with optional STARTTLS and login."""

    def send(
        self,
        msg: EmailMessage,
        *,
        host: str,
        port: int,
        starttls: bool,
        user: str | None,
        password: str | None,
        timeout: float,
    ) -> None:
        with smtplib.SMTP(host, port, timeout=timeout) as smtp:
            if starttls:
                smtp.starttls()
            if user and password is not None:
                smtp.login(user, password)
            smtp.send_message(msg)


def webhook_url_problem(url: str) -> str | None:
    """What makes `url` unusable as a webhook URL, in words that quote no part of it (None: usable).

    Checked before anything is sent, because urllib's and http.client's errors for such URLs (ValueError,
    InvalidURL, UnicodeError) quote the URL, and a webhook URL is a secret.
    """
    if not url.isascii() or any(ch.isspace() or not ch.isprintable() for ch in url):
        return "it holds spaces, control or non-ASCII characters (percent-encode them)"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0..65535
    except ValueError:
        return "it cannot be parsed (brackets or port)"
    if parts.scheme.lower() not in ("http", "https"):
        return "the scheme must be http or https"
    if not parts.hostname:
        return "it has no host"
    if parts.username is not None or parts.password is not None:
        return "user:password@ in the URL is not supported"
    return None


def invalid_url_reason(secret_name: str, problem: str) -> str:
    """The stored and logged reason for an unusable webhook URL: names the secret, never quotes the URL."""
    return f"the webhook URL in secret {secret_name!r} is not a valid http(s) URL: {problem}"


def _http_error(status: int) -> SendError:
    if 300 <= status < 400:
        # Permanent: a webhook that redirects is pointed at the wrong URL (moved, http -> https), which retrying
        # cannot fix, so the channel is reported failing at once. The Location is neither followed nor kept: it
        # could carry a token.
        return SendError(
            f"HTTP {status} redirect refused (delivery never follows redirects; point the channel at the final URL)",
            permanent=True,
        )
    permanent = 400 <= status < 500 and status not in (408, 425, 429)
    return SendError(f"HTTP {status}", permanent=permanent)


@dataclass(frozen=True)
class WebhookSender:
    """Slack/Mattermost incoming webhook or the generic JSON webhook: POST the payload as JSON."""

    http: HttpClient
    url: str
    timeout: float
    signing_key: str | None = None
    secret_name: str = "?"  # the secret the URL came from, named in errors instead of the URL

    def __repr__(self) -> str:  # never show the URL (it is the secret)
        return f"WebhookSender(signed={self.signing_key is not None})"

    def send(self, row: OutboxRow) -> None:
        body = json.dumps(row.payload, sort_keys=True, ensure_ascii=False).encode()
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            IDEMPOTENCY_HEADER: row.key,
            "User-Agent": USER_AGENT,
        }
        if self.signing_key:
            mac = hmac.new(self.signing_key.encode(), body, hashlib.sha256).hexdigest()
            headers[SIGNATURE_HEADER] = f"sha256={mac}"
        try:
            status = self.http.post(self.url, body, headers, self.timeout)
        except (TimeoutError, OSError) as e:
            raise SendError(f"no response: {e}") from None
        except Exception as e:  # noqa: BLE001 - ValueError, InvalidURL, UnicodeError, ...: their texts quote the URL
            raise SendError(invalid_url_reason(self.secret_name, type(e).__name__), permanent=True) from None
        if not 200 <= status < 300:
            raise _http_error(status)


@dataclass(frozen=True)
class EmailSender:
    """Email over SMTP: the payload's subject, text and headers, plus From/To from the channel settings."""

    smtp: SmtpClient
    channel: ChannelConfig
    password: str | None
    timeout: float

    def __repr__(self) -> str:
        return f"EmailSender({self.channel.name})"

    def message(self, row: OutboxRow) -> EmailMessage:
        msg = EmailMessage()
        msg["From"] = self.channel.mail_from
        msg["To"] = ", ".join(self.channel.mail_to)
        msg["Subject"] = row.payload["subject"]
        msg["Date"] = formatdate(localtime=False)
        for name, value in row.payload["headers"].items():
            msg[name] = value
        msg.set_content(row.payload["text"])
        return msg

    def send(self, row: OutboxRow) -> None:
        c = self.channel
        try:
            self.smtp.send(
                self.message(row),
                host=c.smtp_host,
                port=c.smtp_port,
                starttls=c.smtp_starttls,
                user=c.smtp_user,
                password=self.password,
                timeout=self.timeout,
            )
        except smtplib.SMTPAuthenticationError as e:
            raise SendError(f"SMTP authentication refused ({e.smtp_code})", permanent=True) from None
        except smtplib.SMTPResponseException as e:
            raise SendError(f"SMTP {e.smtp_code}", permanent=500 <= e.smtp_code < 600) from None
        except smtplib.SMTPRecipientsRefused:
            raise SendError("SMTP: every recipient refused", permanent=True) from None
        except (smtplib.SMTPException, OSError) as e:
            raise SendError(f"SMTP: {type(e).__name__}: {e}") from None


@dataclass(frozen=True)
class BrokenSender:
    """A channel that cannot send at all (a secret is missing): every attempt fails with the reason."""

    reason: str

    def send(self, row: OutboxRow) -> None:
        raise SendError(self.reason, permanent=True)


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """Replace any secret value that slipped into an error text (belt and braces)."""
    for name, value in secrets.items():
        if value and len(value) >= 4:
            text = text.replace(value, f"<secret {name}>")
    return text
