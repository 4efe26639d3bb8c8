"""The Buildbot adapter reads channel secrets from Buildbot's real SecretInAFile provider and sends with them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from buildbot.secrets.manager import SecretManager
from buildbot.secrets.providers.file import SecretInAFile
from twisted.internet import defer

from master.alerts.config import AlertSettings, ChannelConfig
from master.alerts.service import AlertDelivery
from tests.alerts_support import Farm, HttpReceiver


def _result(d: defer.Deferred):
    out = []
    d.addBoth(out.append)
    assert out, "the file provider answers synchronously"
    if isinstance(out[0], Exception) or hasattr(out[0], "raiseException"):
        out[0].raiseException()
    return out[0]


def test_service_reads_secrets_from_buildbot_and_delivers(tmp_path: Path) -> None:
    receiver = HttpReceiver().start()
    try:
        secrets_dir = tmp_path / "secrets"
        secrets_dir.mkdir(mode=0o700)
        (secrets_dir / "alerts-hook-url").write_text(receiver.url + "\n")
        (secrets_dir / "alerts-hook-url").chmod(0o600)
        provider = SecretInAFile(dirname=str(secrets_dir))
        _result(defer.maybeDeferred(provider.reconfigService, dirname=str(secrets_dir)))
        manager = SecretManager()
        provider.setServiceParent(manager)

        farm = Farm(tmp_path / "results.sqlite")
        farm.change_point(farm.series("ro"), 10, 0.9)
        settings = AlertSettings(
            settle_seconds=0,
            channels=(
                ChannelConfig("hook", "webhook", url_secret="alerts-hook-url"),
                ChannelConfig("chat", "slack", url_secret="alerts-chat-url"),
            ),
        )  # this secret does not exist
        svc = AlertDelivery(settings=settings, results_db=str(farm.path))
        svc.reconfigService(settings=settings, results_db=str(farm.path))
        svc.parent = SimpleNamespace(master=SimpleNamespace(secrets_manager=manager))  # only what it reads

        secrets = _result(defer.ensureDeferred(svc.channel_secrets()))
        assert secrets == {"alerts-hook-url": receiver.url}
        report = svc.work(secrets)  # what the service runs in deferToThread
        assert len(report.sent) == 1 and len(receiver.processed) == 1
        assert report.failed == [
            (report.failed[0][0], "secret 'alerts-chat-url' not found in Buildbot's secrets providers")
        ]
    finally:
        receiver.stop()
