"""`perffarm alerts list|show|ack|set-state|channels`: through the real `perffarm` parser, on a real DB file."""

from __future__ import annotations

import json
from pathlib import Path

from master.alerts.config import AlertSettings, ChannelConfig
from master.alerts.sync import sync
from master.cli import main
from tests.alerts_support import HOSTILE_SUBJECT, Farm


def make(tmp_path: Path) -> tuple[Farm, str]:
    farm = Farm(tmp_path / "results.sqlite")
    farm.set_subject(10, HOSTILE_SUBJECT)
    farm.change_point(farm.series("ro"), 10, 0.9)
    farm.change_point(farm.series("rw"), 10, 0.95)
    (e,) = sync(farm.conn, AlertSettings(channels=(ChannelConfig("hook", "webhook", url_secret="u"),)), now=1)
    return farm, e.alert_id


def test_list_show_ack_set_state(tmp_path: Path, capsys) -> None:
    farm, aid = make(tmp_path)
    db = ["--db", str(farm.path)]
    assert main(["alerts", "list", *db]) == 0
    out = capsys.readouterr().out
    assert aid in out and "2 workload(s)" in out and "new" in out
    assert main(["alerts", "show", aid[:6], *db]) == 0
    out = capsys.readouterr().out
    assert "ro tps on m-1: rQPS 0.900" in out and "hook" in out and "pending" in out
    assert main(["alerts", "ack", aid, "--by", "alice", "--note", "on it", *db]) == 0
    assert capsys.readouterr().out.strip() == f"{aid}: new -> acknowledged"
    assert main(["alerts", "list", *db]) == 0
    assert "no alerts open" in capsys.readouterr().out
    assert main(["alerts", "set-state", aid, "won't fix", *db]) == 0
    assert capsys.readouterr().out.strip() == f"{aid}: acknowledged -> wontfix"
    assert main(["alerts", "list", "--state", "wontfix", "--format", "json", *db]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["id"] == aid and row["state"] == "wontfix" and row["state_by"]
    assert main(["alerts", "show", aid, "--format", "json", *db]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [h["new_state"] for h in doc["history"]] == ["new", "acknowledged", "wontfix"]
    assert {d["state"] for d in doc["deliveries"]} == {"cancelled"}


def test_errors_are_clear(tmp_path: Path, capsys) -> None:
    farm, aid = make(tmp_path)
    db = ["--db", str(farm.path)]
    assert main(["alerts", "ack", "a-nope", *db]) == 2  # an unknown id is an input error, as for every verb
    assert "no alert matches 'a-nope'" in capsys.readouterr().err
    assert main(["alerts", "set-state", aid, "closed", *db]) == 2
    assert "unknown alert state 'closed'" in capsys.readouterr().err
    assert main(["alerts", "set-state", aid, "culprit-found", *db]) == 2
    assert "set by bisection" in capsys.readouterr().err
    assert main(["alerts", "list", "--db", str(tmp_path / "none.sqlite")]) == 2


def test_channels_health_from_an_alerts_config(tmp_path: Path, capsys) -> None:
    farm, _ = make(tmp_path)
    cfg = tmp_path / "a.toml"
    cfg.write_text('[alerts]\n[[alerts.channels]]\nname = "hook"\nkind = "webhook"\nurl_secret = "u"\n')
    assert main(["alerts", "channels", "--db", str(farm.path), "--alerts-config", str(cfg), "--format", "json"]) == 0
    (h,) = json.loads(capsys.readouterr().out)
    assert (h["name"], h["status"], h["pending"]) == ("hook", "ok", 1)
    cfg.write_text('[alerts]\n[[alerts.channels]]\nname = "hook"\nkind = "webhook"\nurl = "https://x"\n')
    assert main(["alerts", "channels", "--db", str(farm.path), "--alerts-config", str(cfg)]) == 2
    assert "secrets never go in the settings file" in capsys.readouterr().err


def test_show_colours_lines_with_the_configured_bands(tmp_path: Path, capsys) -> None:
    # `alerts show` used the default bands whatever the farm's settings said
    farm, aid = make(tmp_path)
    db = ["--db", str(farm.path)]
    assert main(["alerts", "show", aid, *db, "--format", "json"]) == 0
    colours = {x["workload"]: x["colour"] for x in json.loads(capsys.readouterr().out)["lines"]}
    assert colours == {"ro": "red", "rw": "red"}  # defaults: red at rQPS <= 0.97
    cfg = tmp_path / "a.toml"
    cfg.write_text("[alerts]\nband_red = 0.92\n")
    assert main(["alerts", "show", aid, *db, "--alerts-config", str(cfg), "--format", "json"]) == 0
    colours = {x["workload"]: x["colour"] for x in json.loads(capsys.readouterr().out)["lines"]}
    assert colours == {"ro": "red", "rw": "grey"}  # 0.95 is no longer red
    env_cfg = tmp_path / "farm.toml"
    env_cfg.write_text(f'[master]\ndata_dir = "{tmp_path}/data"\n[alerts]\nband_red = 0.85\n')
    assert main(["--config", str(env_cfg), "alerts", "show", aid, *db]) == 0
    out = capsys.readouterr().out
    assert "ro tps on m-1: rQPS 0.900" in out and "grey" in out and "red" not in out  # the farm's own settings


def test_show_json_and_the_webhook_name_the_message_version_alike(tmp_path: Path, capsys) -> None:
    # issue #26, item 11: the webhook payload said `revision` where `alerts show --format json`, the database and the
    # outbox say `message_version`; `revision` stays in the payload for receivers that parse it (docs/alerts.md)
    import sqlite3

    farm, aid = make(tmp_path)
    assert main(["alerts", "show", aid, "--format", "json", "--db", str(farm.path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    (payload_text,) = sqlite3.connect(farm.path).execute("SELECT payload FROM alert_outbox").fetchone()
    payload = json.loads(payload_text)
    assert payload["alert"]["message_version"] == shown["alert"]["message_version"] == 1
    assert shown["deliveries"][0]["message_version"] == 1
    assert payload["alert"]["revision"] == payload["alert"]["message_version"]  # the deprecated alias, same value

    def keys(o) -> set[str]:
        if isinstance(o, dict):
            return set(o) | {k for x in o.values() for k in keys(x)}
        return {k for x in o for k in keys(x)} if isinstance(o, list) else set()

    assert "revision" not in keys(shown)
