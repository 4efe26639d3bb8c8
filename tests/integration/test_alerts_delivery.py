"""Delivery to real receivers on 127.0.0.1: Slack-style and JSON webhooks over HTTP, email over SMTP.

Payloads arrive exactly as stored (and as golden-tested), hostile commit text is inert in every channel,
a receiver that is down and comes back gets each message once, failures back off and show in channel health,
and no secret value reaches the database or an error text.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from master.alerts.channels import RequestsHttpClient, SendError, WebhookSender
from master.alerts.config import AlertSettings, ChannelConfig, RetryPolicy
from master.alerts.delivery import deliver_once
from master.alerts.health import channel_health
from master.alerts.kinds import build_senders
from master.alerts.sync import sync
from master.store import alerts as db
from tests.alerts_support import HOSTILE_AUTHOR, HOSTILE_SUBJECT, Farm, HttpReceiver, SmtpSink, free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RETRY = RetryPolicy(base_delay=10, max_delay=300, failing_after=3, lease_seconds=30, timeout=5)
SMTP_PASSWORD = "s3cret-smtp-pass"
SIGNING_KEY = "hmac-key-123456"


@pytest.fixture
def receivers():
    chat, hook, sink = HttpReceiver().start(), HttpReceiver().start(), SmtpSink(password=SMTP_PASSWORD).start()
    yield chat, hook, sink
    chat.stop(), hook.stop(), sink.stop()


def settings_for(sink: SmtpSink) -> AlertSettings:
    return AlertSettings(
        settle_seconds=0,
        retry=RETRY,
        channels=(
            ChannelConfig("chat", "slack", url_secret="alerts-chat-url"),
            ChannelConfig("hook", "webhook", url_secret="alerts-hook-url", signing_secret="alerts-hook-key"),
            ChannelConfig(
                "mail",
                "email",
                smtp_host="127.0.0.1",
                smtp_port=sink.port,
                smtp_user="farm",
                password_secret="alerts-smtp-password",
                mail_from="farm@perf.example",
                mail_to=("pgsql-perf@example.org",),
            ),
        ),
    )


def secrets_for(chat: HttpReceiver, hook: HttpReceiver) -> dict[str, str]:
    return {
        "alerts-chat-url": chat.url,
        "alerts-hook-url": hook.url,
        "alerts-hook-key": SIGNING_KEY,
        "alerts-smtp-password": SMTP_PASSWORD,
    }


ACTIVE = [
    re.compile(p)
    for p in (r"<!channel>", r"<script", r"@here", r"\[click\]\(", r"\*FREE\*", r"<@U0", "\u202e", r"\nBcc:")
]


def test_every_channel_gets_its_payload_once_with_hostile_text_inert(tmp_path: Path, receivers) -> None:
    chat, hook, sink = receivers
    farm = Farm(tmp_path / "results.sqlite")
    farm.set_subject(10, HOSTILE_SUBJECT, HOSTILE_AUTHOR)
    for w in ("pgbench-ro", "pgbench-rw"):
        farm.change_point(farm.series(w), 10, 0.88)
    settings = settings_for(sink)
    secrets = secrets_for(chat, hook)
    (event,) = sync(farm.conn, settings, now=1000)
    senders = build_senders(settings.channels, secrets, timeout=RETRY.timeout)
    report = deliver_once(farm.conn, settings, senders, now=lambda: 1000.0, secrets=secrets)
    assert sorted(report.sent) == sorted(f"{event.alert_id}/{c}/r1" for c in ("chat", "hook", "mail"))
    assert deliver_once(farm.conn, settings, senders, now=lambda: 2000.0).sent == []  # nothing twice

    stored = {r["channel"]: json.loads(r["payload"]) for r in farm.outbox()}
    assert len(chat.requests) == 1 and chat.requests[0].json == stored["chat"]
    assert chat.requests[0].path == "/hook/T000/SECRETPATH"
    assert chat.requests[0].key == f"{event.alert_id}/chat/r1"
    (h,) = hook.requests
    assert h.json == stored["hook"] and h.json["delivery_id"] == h.key
    expected = "sha256=" + hmac.new(SIGNING_KEY.encode(), h.body, hashlib.sha256).hexdigest()
    assert h.headers["X-Perffarm-Signature"] == expected
    (mail,) = sink.mails
    msg = mail.message
    assert mail.rcpt == ["pgsql-perf@example.org"] and sink.auth_failures == 0
    assert msg["Message-ID"] == f"<{event.alert_id}.mail@perffarm.alerts>"
    assert msg["X-Perffarm-Idempotency-Key"] == f"{event.alert_id}/mail/r1"
    assert msg["Bcc"] is None and "\n" not in str(msg["Subject"])
    assert msg.get_content().replace("\r\n", "\n") == stored["mail"]["text"]

    texts = {"chat": chat.requests[0].body.decode(), "hook": h.body.decode(), "mail": mail.data.decode()}
    for channel, text in texts.items():
        decoded = json.loads(text) if channel != "mail" else text
        flat = json.dumps(decoded, ensure_ascii=False) if channel != "mail" else msg.get_content() + str(msg["Subject"])
        assert "FREE" in flat, f"{channel}: the subject must still be shown"
        for pattern in ACTIVE:
            assert not pattern.search(flat), f"{channel}: {pattern.pattern} survived"
    # No secret value in the database.
    dump = "\n".join(farm.conn.iterdump())
    for value in secrets.values():
        assert value not in dump


def test_receiver_down_then_up_is_delivered_once(tmp_path: Path) -> None:
    port = free_port()
    farm = Farm(tmp_path / "results.sqlite")
    farm.change_point(farm.series("ro"), 10, 0.9)
    settings = AlertSettings(
        settle_seconds=0, retry=RETRY, channels=(ChannelConfig("hook", "webhook", url_secret="alerts-hook-url"),)
    )
    secrets = {"alerts-hook-url": f"http://127.0.0.1:{port}/in/TOKEN-abcdef"}
    senders = build_senders(settings.channels, secrets, timeout=2)
    sync(farm.conn, settings, now=1000)
    t = [1000.0]
    clock = lambda: t[0]  # noqa: E731

    report = deliver_once(farm.conn, settings, senders, now=clock, secrets=secrets)
    assert report.sent == [] and len(report.failed) == 1
    assert "TOKEN" not in report.failed[0][1] and "127.0.0.1" not in report.failed[0][1]
    (row,) = farm.outbox()
    assert (row["attempts"], row["available_at"], row["state"]) == (1, 1010.0, "pending")
    (health,) = channel_health(farm.conn, settings, now=1001)
    assert (health.status, health.pending) == ("retrying", 1)
    t[0] = 1005.0
    assert deliver_once(farm.conn, settings, senders, now=clock).failed == []  # backing off: not tried
    t[0] = 1010.0
    deliver_once(farm.conn, settings, senders, now=clock)  # second failure: next in 20 s
    assert farm.outbox()[0]["available_at"] == 1030.0

    receiver = HttpReceiver(port=port).start()
    try:
        t[0] = 1030.0
        assert len(deliver_once(farm.conn, settings, senders, now=clock).sent) == 1
        for t[0] in (1031.0, 5000.0, 99999.0):
            assert deliver_once(farm.conn, settings, senders, now=clock).sent == []
        assert len(receiver.requests) == 1 and receiver.duplicates() == 0
        (health,) = channel_health(farm.conn, settings, now=t[0])
        assert (health.status, health.pending, health.sent) == ("ok", 0, 1)
    finally:
        receiver.stop()


def test_failing_channel_is_reported_and_recovers(tmp_path: Path) -> None:
    receiver = HttpReceiver(status=503).start()
    try:
        farm = Farm(tmp_path / "results.sqlite")
        farm.change_point(farm.series("ro"), 10, 0.9)
        settings = AlertSettings(
            settle_seconds=0,
            retry=RETRY,
            channels=(
                ChannelConfig("hook", "webhook", url_secret="u"),
                ChannelConfig("nosecret", "slack", url_secret="gone"),
            ),
        )
        senders = build_senders(settings.channels, {"u": receiver.url}, timeout=2)
        sync(farm.conn, settings, now=0)
        for t in (0, 10, 30, 70):  # 503 four times: failing after 3
            deliver_once(farm.conn, settings, senders, now=lambda t=t: float(t))
        health = {h.name: h for h in channel_health(farm.conn, settings, now=80)}
        assert health["hook"].status == "failing" and health["hook"].last_error == "HTTP 503"
        assert health["nosecret"].status == "failing"
        assert health["nosecret"].last_error == "secret 'gone' not found in Buildbot's secrets providers"
        assert len(receiver.requests) == 4
        receiver.status = 200
        deliver_once(farm.conn, settings, senders, now=lambda: 10_000.0)
        health = {h.name: h for h in channel_health(farm.conn, settings, now=10_001)}
        assert health["hook"].status == "ok" and len(receiver.processed) == 1
    finally:
        receiver.stop()


def test_a_permanent_http_error_waits_the_longest_delay(tmp_path: Path) -> None:
    receiver = HttpReceiver(status=404).start()
    try:
        farm = Farm(tmp_path / "results.sqlite")
        farm.change_point(farm.series("ro"), 10, 0.9)
        settings = AlertSettings(
            settle_seconds=0, retry=RETRY, channels=(ChannelConfig("hook", "webhook", url_secret="u"),)
        )
        sync(farm.conn, settings, now=0)
        deliver_once(
            farm.conn, settings, build_senders(settings.channels, {"u": receiver.url}, timeout=2), now=lambda: 0.0
        )
        (row,) = farm.outbox()
        assert row["last_permanent"] == 1 and row["available_at"] == RETRY.max_delay
        assert channel_health(farm.conn, settings, now=1)[0].status == "failing"
    finally:
        receiver.stop()


def test_smtp_password_refused_is_permanent_and_not_logged(tmp_path: Path) -> None:
    sink = SmtpSink(password="the-right-one").start()
    try:
        farm = Farm(tmp_path / "results.sqlite")
        farm.change_point(farm.series("ro"), 10, 0.9)
        settings = settings_for(sink)
        settings = AlertSettings(settle_seconds=0, retry=RETRY, channels=(settings.channels[2],))
        secrets = {"alerts-smtp-password": "a-wrong-password"}
        sync(farm.conn, settings, now=0)
        report = deliver_once(
            farm.conn, settings, build_senders(settings.channels, secrets, timeout=2), now=lambda: 0.0, secrets=secrets
        )
        assert sink.mails == [] and sink.auth_failures == 1
        assert report.failed[0][1] == "SMTP authentication refused (535)"
        assert "a-wrong-password" not in "\n".join(farm.conn.iterdump())
    finally:
        sink.stop()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_never_followed_and_the_channel_fails(tmp_path: Path, status: int) -> None:
    target = HttpReceiver().start()
    redirecting = HttpReceiver(status=status).start()
    redirecting.location = f"{target.url}?token=LOCATION-SECRET"
    try:
        farm = Farm(tmp_path / "results.sqlite")
        farm.change_point(farm.series("ro"), 10, 0.9)
        settings = AlertSettings(
            settle_seconds=0, retry=RETRY, channels=(ChannelConfig("hook", "webhook", url_secret="u"),)
        )
        secrets = {"u": redirecting.url}
        sync(farm.conn, settings, now=0)
        report = deliver_once(
            farm.conn, settings, build_senders(settings.channels, secrets, timeout=2), now=lambda: 0.0, secrets=secrets
        )
        assert len(redirecting.requests) == 1 and redirecting.requests[0].method == "POST"
        assert target.requests == []  # the Location was not followed, with any method
        assert report.sent == []
        reason = report.failed[0][1]
        assert reason == (
            f"HTTP {status} redirect refused (delivery never follows redirects; point the channel at the final URL)"
        )
        (row,) = farm.outbox()
        assert (row["state"], row["sent_at"], row["last_permanent"]) == ("pending", None, 1)
        (health,) = channel_health(farm.conn, settings, now=1)
        assert (health.status, health.last_error) == ("failing", reason)
        assert "LOCATION-SECRET" not in "\n".join(farm.conn.iterdump())
    finally:
        redirecting.stop(), target.stop()


UNUSABLE_URLS = [
    "hooks.example/T000/SECRET-TOKEN",  # no scheme: urllib's ValueError quotes the whole URL
    "ftp://hooks.example/T000/SECRET-TOKEN",
    "file:///tmp/SECRET-TOKEN",
    "http:///T000/SECRET-TOKEN",  # no host
    "http://hooks.example:SECRET-TOKEN/x",  # http.client.InvalidURL quotes the port
    "http://hooks.example:99999/SECRET-TOKEN",
    "http://[hooks.example/SECRET-TOKEN",  # ValueError: Invalid IPv6 URL
    "http://127.0.0.1:1/SECRET TOKEN",  # InvalidURL quotes the path
    "http://127.0.0.1:1/SECRET-TOKEN\r\nX-Injected: 1",
    "http://h\u00e4oks.example/SECRET-TOKEN",  # UnicodeError
    "https://farm:SECRET-TOKEN@hooks.example/x",  # user:password in the URL
]


@pytest.mark.parametrize("url", UNUSABLE_URLS)
def test_an_unusable_webhook_url_fails_its_channel_without_showing_it(tmp_path: Path, url: str) -> None:
    good = HttpReceiver().start()
    try:
        farm = Farm(tmp_path / "results.sqlite")
        farm.change_point(farm.series("ro"), 10, 0.9)
        settings = AlertSettings(
            settle_seconds=0,
            retry=RETRY,
            channels=(
                ChannelConfig("bad", "slack", url_secret="alerts-bad-url"),
                ChannelConfig("good", "webhook", url_secret="alerts-good-url"),
            ),
        )
        secrets = {"alerts-bad-url": url, "alerts-good-url": good.url}
        sync(farm.conn, settings, now=0)
        report = deliver_once(
            farm.conn, settings, build_senders(settings.channels, secrets, timeout=2), now=lambda: 0.0, secrets=secrets
        )
        assert len(report.sent) == 1 and len(good.processed) == 1  # the other channel is not held up
        ((key, reason),) = report.failed
        assert key.endswith("/bad/r1")
        assert reason.startswith("the webhook URL in secret 'alerts-bad-url' is not a valid http(s) URL")
        for part in ("SECRET", "TOKEN", "hooks", "example", "127.0.0.1", "tmp", "X-Injected", "farm"):
            assert part not in reason
        health = {h.name: h for h in channel_health(farm.conn, settings, now=1)}
        assert (health["bad"].status, health["bad"].last_error) == ("failing", reason)
        assert health["good"].status == "ok"
        assert "SECRET" not in "\n".join(farm.conn.iterdump())
    finally:
        good.stop()


def test_perffarm_alerts_deliver_reports_an_unparseable_url_without_a_traceback(tmp_path: Path) -> None:
    farm = Farm(tmp_path / "results.sqlite")
    farm.change_point(farm.series("ro"), 10, 0.9)
    farm.conn.close()
    config = tmp_path / "alerts.toml"
    config.write_text(
        "[alerts]\nsettle_seconds = 0\n"
        '[[alerts.channels]]\nname = "hook"\nkind = "webhook"\nurl_secret = "alerts-hook-url"\n'
    )
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    (secrets / "alerts-hook-url").write_text("hooks.example/T000/SECRET-TOKEN\n")
    common = ["--db", str(farm.path), "--alerts-config", str(config)]

    def perffarm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "master.cli", "alerts", *args, *common],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    deliver = perffarm("deliver", "--once", "--secrets-dir", str(secrets))
    channels = perffarm("channels")
    out = deliver.stdout + deliver.stderr + channels.stdout + channels.stderr
    assert deliver.returncode == 0 and channels.returncode == 0, out
    assert "Traceback" not in out and "SECRET" not in out and "hooks.example" not in out
    assert "failed a-" in deliver.stdout and "not a valid http(s) URL" in deliver.stdout
    (line,) = channels.stdout.splitlines()
    assert line.split()[:3] == ["hook", "webhook", "failing"]
    assert "error: the webhook URL in secret 'alerts-hook-url' is not a valid http(s) URL" in line


@pytest.mark.parametrize("url", UNUSABLE_URLS)
def test_the_http_client_itself_never_quotes_an_unusable_url(tmp_path: Path, url: str) -> None:
    """Belt and braces behind build_senders' check: the sender turns any error into a reason without the URL."""
    farm = Farm(tmp_path / "results.sqlite")
    farm.change_point(farm.series("ro"), 10, 0.9)
    settings = AlertSettings(settle_seconds=0, channels=(ChannelConfig("hook", "webhook", url_secret="u"),))
    sync(farm.conn, settings, now=0)
    (row,) = db.claim(farm.conn, "me", 0.0, 30, 10)
    with pytest.raises(SendError) as caught:
        WebhookSender(RequestsHttpClient(), url, 2, secret_name="u").send(row)
    assert caught.value.permanent
    assert str(caught.value).startswith("the webhook URL in secret 'u' is not a valid http(s) URL")
    assert "SECRET" not in str(caught.value) and "hooks" not in str(caught.value)
