"""The `[cfbot]` settings (the master's cfbot timer): off by default, and a bad value is refused at load time with
one line naming the key, what is wrong and what to give instead."""

from __future__ import annotations

import pytest

from master.settings import CfbotSettings, SettingsError, load_settings


def test_the_timer_is_off_by_default_and_takes_its_values_from_the_environment() -> None:
    assert load_settings(environ={}).cfbot == CfbotSettings(repo="", branches="cf/.*", base="master", interval=600)
    s = load_settings(environ={"PERFFARM_CFBOT_REPO": "/srv/patches.git", "PERFFARM_CFBOT_INTERVAL": "30"})
    assert (s.cfbot.repo, s.cfbot.interval) == ("/srv/patches.git", 30)


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("BRANCHES", "cf/([", "cfbot.branches: 'cf/([' is not a regular expression"),
        ("BASE", "--upload-pack=x", "cfbot.base: '--upload-pack=x': starts with '-'"),
        ("REPO", "https://token@git.example.org/patches.git", "cfbot.repo: https://***@git.example.org/patches.git"),
        ("REPO", "--upload-pack=x", "cfbot.repo: '--upload-pack=x' starts with '-'"),
        ("INTERVAL", "0", "cfbot.interval: 0 is out of range"),
    ],
)
def test_a_bad_cfbot_setting_is_refused_with_what_to_do(key: str, value: str, says: str) -> None:
    with pytest.raises(SettingsError) as e:
        load_settings(environ={f"PERFFARM_CFBOT_{key}": value})
    assert str(e.value).startswith(says) and "\n" not in str(e.value) and "token@" not in str(e.value)


def test_a_farm_that_measures_no_jobs_refuses_the_timer_at_start(tmp_path) -> None:
    from master.farm import build_master_config

    settings = load_settings(
        environ={
            "PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"),
            "PERFFARM_RECIPES_ENABLED": "",
            "PERFFARM_CFBOT_REPO": str(tmp_path / "patches"),
        }
    )
    with pytest.raises(ValueError, match=r"^cfbot\.repo: .*no enabled recipe measures jobs.*recipes\.enabled"):
        build_master_config(settings)
