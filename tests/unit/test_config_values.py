"""One loader for every section (issue #13, item 7): master/config_values.py checks each kind of value the same
way for `[master]`, `[detection]` and `[alerts]`, and `[alerts]`' keys are settings like any other (environment
overrides, sources, `perffarm settings`)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from master.alerts.config import AlertConfigError, AlertSettings
from master.config_values import ConfigError, check, from_env
from master.settings import SettingsError, describe, load_settings


@pytest.mark.parametrize(
    "kind, value, expected",
    [
        ("number", 3, 3.0),
        ("number", -0.5, -0.5),
        ("pos_int", 5, 5),
        ("port", 8010, 8010),
        ("bool", False, False),
        ("str", "  x ", "x"),
        ("str_list", ["a", "b"], ("a", "b")),
        ("fraction", 0.25, 0.25),
    ],
)
def test_a_valid_value_is_returned_as_the_settings_hold_it(kind, value, expected):
    assert check("s.k", kind, value) == expected


@pytest.mark.parametrize(
    "kind, value, says",
    [
        ("number", True, "expected a number"),
        ("number", math.nan, "expected a number"),
        ("number", "3%", "expected a number"),
        ("pos_int", 5.0, "expected an integer"),
        ("pos_int", 0, "out of range"),
        ("port", 70000, "out of range 1..65535"),
        ("bool", "yes", "expected true or false"),
        ("str", "", "expected a non-empty string"),
        ("str_list", ["a", 1], "expected a list of strings"),
        ("fraction", 1.0, "expected a number in (0, 1)"),
    ],
)
def test_a_bad_value_is_refused_naming_the_key(kind, value, says):
    with pytest.raises(ConfigError, match=r"^s\.k: .*" + re.escape(says)):
        check("s.k", kind, value)


def test_the_error_class_is_the_callers():
    with pytest.raises(AlertConfigError):
        check("alerts.warn", "number", "x", error=AlertConfigError)
    with pytest.raises(SettingsError):
        check("master.web_port", "port", "x", error=SettingsError)


def test_environment_text_parses_as_a_file_would_give_it():
    assert from_env("number", "0.05") == 0.05
    assert from_env("bool", "off") is False
    assert from_env("str_list", "a, b,") == ["a", "b"]
    assert from_env("pos_int", "x") == "x"  # left for check() to report with the key's name


def test_an_alerts_key_is_overridden_by_the_environment_and_shown_with_its_source():
    s = load_settings(environ={"PERFFARM_ALERTS_WARN": "0.05", "PERFFARM_ALERTS_SEND_TIMEOUT": "5"})
    assert s.alerts.thresholds.warn == 0.05 and s.alerts.retry.timeout == 5.0
    assert s.alerts.thresholds.critical == AlertSettings().thresholds.critical  # the others keep their defaults
    rows = {name: (value, source) for name, value, source in describe(s)}
    assert rows["alerts.warn"] == (0.05, "env PERFFARM_ALERTS_WARN")
    assert rows["alerts.critical"] == (0.10, "default")
    assert rows["alerts.retry_base_delay"] == (30.0, "default")


def test_a_bad_alerts_value_from_the_environment_names_the_key():
    with pytest.raises(SettingsError, match=r"alerts\.warn: expected a number, got '3%'"):
        load_settings(environ={"PERFFARM_ALERTS_WARN": "3%"})
    with pytest.raises(SettingsError, match="warn <= critical"):
        load_settings(environ={"PERFFARM_ALERTS_WARN": "0.5"})


def test_a_file_sets_alerts_keys_and_channels_and_unknown_keys_are_refused(tmp_path: Path):
    f = tmp_path / "farm.toml"
    f.write_text(
        '[alerts]\nwarn = 0.04\n[[alerts.channels]]\nname = "hook"\nkind = "webhook"\nurl_secret = "hook-url"\n'
    )
    s = load_settings(f, environ={})
    assert s.alerts.thresholds.warn == 0.04 and [c.name for c in s.alerts.channels] == ["hook"]
    rows = {name: source for name, _, source in describe(s)}
    assert rows["alerts.warn"] == str(f)
    f.write_text("[alerts]\nnope = 1\n")
    with pytest.raises(SettingsError, match=r"alerts\.nope: unknown setting"):
        load_settings(f, environ={})


def test_a_channel_port_is_checked_like_every_other_port():
    with pytest.raises(AlertConfigError, match=r"alerts\.channels\[0\]\.smtp_port: 70000 is out of range 1..65535"):
        AlertSettings.from_mapping(
            {"channels": [{"name": "m", "kind": "email", "mail_from": "a@b", "mail_to": ["c@d"], "smtp_port": 70000}]}
        )


def test_branch_references_are_settings_with_safe_names():
    s = load_settings(environ={"PERFFARM_THROUGHPUT_REFERENCES": "master=REL_17_0, REL_16_STABLE=REL_16_0"})
    assert dict(s.throughput_references) == {"master": "REL_17_0", "REL_16_STABLE": "REL_16_0"}
    rows = {name: value for name, value, _ in describe(s)}
    assert rows["throughput.references"] == ["master=REL_17_0", "REL_16_STABLE=REL_16_0"]
    assert dict(load_settings(environ={}).throughput_references) == {}  # default: every build unpaired
    for bad in ("master", "--upload-pack=x=REL_1", "master=--output=/tmp/x"):
        with pytest.raises(SettingsError, match=r"throughput\.references: .* should look like 'BRANCH=REVISION'"):
            load_settings(environ={"PERFFARM_THROUGHPUT_REFERENCES": bad})


def test_a_build_with_a_reference_passes_it_to_the_recipe_before_its_own_options():
    from buildbot.process.properties import Properties

    from master.farm import runner_command
    from master.steps import REFERENCE

    props = Properties()
    props.setProperty("got_revision", "a" * 40, "test")
    props.setProperty(REFERENCE, "b" * 40, "test")
    props.setProperty("perffarm_options", ["reference=" + "c" * 40], "test")  # a forced build's own choice wins
    rendered: list = []
    runner_command("bench", "pg-quick", ("pin=auto",)).getRenderingFor(props).addBoth(rendered.append)
    options = [a for a in rendered[0] if a.startswith("--option=")]
    assert options == ["--option=pin=auto", "--option=reference=" + "b" * 40, "--option=reference=" + "c" * 40]
