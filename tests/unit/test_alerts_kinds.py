"""Channel kinds are a table (master/alerts/kinds.py) with their settings' needs beside the settings
(master/alerts/config.py): a new kind is a message, a sender, one entry in each.

The test adds a kind the farm does not have ("pager") to the two tables, and nothing else: settings accept it
with its own rule, sync queues its message, and delivery hands that message to its sender.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from master.alerts import config, kinds
from master.alerts.config import AlertConfigError, AlertSettings, ChannelConfig
from master.alerts.delivery import deliver_once
from master.alerts.sync import sync
from tests.alerts_support import Farm


class Paged:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, row) -> None:
        self.sent.append(row.payload)


@pytest.fixture
def pager(monkeypatch: pytest.MonkeyPatch) -> Paged:
    paged = Paged()
    monkeypatch.setitem(
        config.CHANNEL_NEEDS, "pager", lambda c: None if c.url_secret else ".url_secret: a pager needs its service key"
    )
    kind = kinds.ChannelKind(
        "pager",
        message=lambda view, event, key, channel: {"summary": f"{view.kind} on {view.branch}", "key": key},
        sender=lambda c, secrets, clients: paged,
    )
    monkeypatch.setitem(kinds.CHANNEL_KINDS, "pager", kind)
    return paged


def test_a_kind_added_to_the_table_is_validated_messaged_and_sent(tmp_path: Path, pager: Paged) -> None:
    with pytest.raises(AlertConfigError, match=r"alerts.channels\['p'\].url_secret: a pager needs its service key"):
        ChannelConfig("p", "pager")
    settings = AlertSettings(settle_seconds=0, channels=(ChannelConfig("p", "pager", url_secret="k"),))
    farm = Farm(tmp_path / "results.sqlite")
    farm.change_point(farm.series("ro"), 10, 0.9)
    (event,) = sync(farm.conn, settings, now=1)
    assert list(event.queued) == ["p"]
    senders = kinds.build_senders(settings.channels, {"k": "service-key"}, timeout=1)
    report = deliver_once(farm.conn, settings, senders, now=lambda: 2.0)
    assert not report.failed, report.failed
    (message,) = pager.sent
    assert message["summary"] == "regression on master" and message["key"].startswith(event.alert_id)


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(AlertConfigError, match=r"'pager' is not one of \('slack', 'webhook', 'email'\)"):
        ChannelConfig("p", "pager", url_secret="k")


def test_the_settings_and_the_table_of_kinds_name_the_same_kinds() -> None:
    assert list(config.CHANNEL_NEEDS) == list(kinds.CHANNEL_KINDS)
