"""Which change points alert, grouping by commit range, settings parsing and the lifecycle."""

from __future__ import annotations

import pytest

from master.alerts import grouping, lifecycle, rules
from master.alerts.config import AlertConfigError, AlertSettings, ChannelConfig, RetryPolicy


def mk(
    cp_id: int = 1,
    *,
    ratio: float = 0.9,
    pvalue: float = 1e-6,
    ci=(0.88, 0.92),
    direction: str = "higher",
    kind: str | None = None,
    workload: str = "ro",
    pos: int = 10,
    prev: int | None = 9,
    branch: str = "master",
    series: str = "s1",
    active: bool = True,
    metric: str = "tps",
    unit: str = "tps",
) -> rules.Line:
    if kind is None:
        worse = ratio < 1 if direction == "higher" else ratio > 1
        kind = "regression" if worse else "improvement"
    return rules.Line(
        cp_id,
        series,
        "m-1",
        "pg",
        workload,
        metric,
        branch,
        unit,
        direction,
        kind,
        f"sha{pos}",
        f"sha{pos}",
        f"sha{prev}" if prev is not None else None,
        pos,
        prev,
        ratio,
        ci[0] if ci else None,
        ci[1] if ci else None,
        pvalue,
        active,
    )


S = AlertSettings()


@pytest.mark.parametrize(
    "ratio, expected", [(0.98, None), (0.97, "warn"), (0.95, "warn"), (0.90, "critical"), (0.5, "critical")]
)
def test_thresholds_on_regressions(ratio: float, expected: str | None) -> None:
    assert rules.severity(mk(ratio=ratio, ci=(ratio - 0.005, ratio + 0.005)), S) == expected


def test_lower_is_better_metrics_use_the_inverse_ratio() -> None:
    # latency up 12% is a regression of goodness 1/1.12 = 0.893: critical
    assert rules.severity(mk(ratio=1.12, direction="lower", ci=(1.10, 1.14)), S) == "critical"
    # latency down 4%: an improvement of 4.2%, below the improvement warn (5%)
    assert rules.severity(mk(ratio=0.96, direction="lower", ci=(0.95, 0.97)), S) is None
    assert rules.severity(mk(ratio=0.90, direction="lower", ci=(0.89, 0.91)), S) == "warn"


def test_not_significant_does_not_alert() -> None:
    assert rules.severity(mk(pvalue=0.02), S) is None  # above max_pvalue 0.01
    assert rules.severity(mk(ci=(0.85, 1.01)), S) is None  # the CI allows 'no change'
    assert rules.severity(mk(ci=None), S) == "critical"  # no CI known: the p-value decides
    assert rules.severity(mk(pvalue=float("nan")), S) is None


def test_kind_that_contradicts_the_numbers_or_retracted_does_not_alert() -> None:
    assert rules.severity(mk(ratio=0.9, kind="improvement"), S) is None
    assert rules.severity(mk(active=False), S) is None


def test_per_workload_override_first_match_wins() -> None:
    s = AlertSettings.from_mapping(
        {
            "overrides": [
                {"workload": "pgbench-rw-*", "warn": 0.08, "critical": 0.2},
                {"workload": "*", "warn": 0.01, "critical": 0.05, "kind": "improvement"},
            ]
        }
    )
    assert rules.severity(mk(ratio=0.93, workload="pgbench-rw-c2", ci=(0.92, 0.94)), s) is None
    assert rules.severity(mk(ratio=0.93, workload="pgbench-ro-c2", ci=(0.92, 0.94)), s) == "warn"
    assert rules.severity(mk(ratio=1.02, workload="x", ci=(1.01, 1.03)), s) == "warn"  # improvement override
    assert rules.severity(mk(ratio=0.85, workload="pgbench-rw-c2", ci=(0.84, 0.86)), s) == "warn"


def test_overlapping_ranges_on_one_branch_and_kind_make_one_alert() -> None:
    lines = [
        mk(1, pos=10, prev=9, series="a"),
        mk(2, pos=12, prev=8, series="b"),
        mk(3, pos=10, prev=9, series="c"),
        mk(4, pos=20, prev=19, series="a"),
        mk(5, pos=10, prev=9, branch="REL_17_STABLE", series="d"),
        mk(6, ratio=1.2, ci=(1.1, 1.3), pos=10, prev=9, series="e"),
    ]
    placed = grouping.assign([], lines)
    assert placed[1] == placed[2] == placed[3]
    assert len({placed[1], placed[4], placed[5], placed[6]}) == 4
    assert placed[1] == grouping.alert_id(lines[0])  # founded by the earliest line: a stable id
    assert grouping.assign([], list(reversed(lines))) == placed  # order of arrival does not matter


def test_new_lines_join_an_existing_alert_and_narrow_its_range() -> None:
    existing = [grouping.OpenGroup("a-old", grouping.Range("master", "regression", 5, 12))]
    placed = grouping.assign(existing, [mk(7, pos=10, prev=8), mk(8, pos=30, prev=29)])
    assert placed[7] == "a-old" and placed[8] != "a-old"
    r = grouping.common_range([mk(1, pos=12, prev=5), mk(2, pos=10, prev=8)])
    assert (r.prev_position, r.position, r.commits) == (8, 10, 2)


def test_alert_id_depends_on_series_and_identity_commit_only() -> None:
    a = mk(1, pos=10, series="x")
    moved = rules.Line(**{**a.__dict__, "change_point_id": 99, "sha": "other", "position": 11, "ratio": 0.8})
    assert grouping.alert_id(a) == grouping.alert_id(moved)
    assert grouping.alert_id(a) != grouping.alert_id(mk(1, pos=10, series="y"))


def test_settings_reject_bad_values_naming_the_key() -> None:
    with pytest.raises(AlertConfigError, match="alerts.warn"):
        AlertSettings.from_mapping({"warn": "3%"})
    with pytest.raises(AlertConfigError, match="warn <= critical"):
        AlertSettings.from_mapping({"warn": 0.2, "critical": 0.1})
    with pytest.raises(AlertConfigError, match=r"alerts.nope"):
        AlertSettings.from_mapping({"nope": 1})
    with pytest.raises(AlertConfigError, match="secrets never go in the settings file"):
        AlertSettings.from_mapping({"channels": [{"name": "s", "kind": "slack", "url": "https://hooks.example/x"}]})
    with pytest.raises(AlertConfigError, match="url_secret"):
        AlertSettings.from_mapping({"channels": [{"name": "s", "kind": "slack"}]})
    with pytest.raises(AlertConfigError, match="duplicate channel"):
        AlertSettings.from_mapping({"channels": [{"name": "s", "kind": "slack", "url_secret": "a"}] * 2})
    with pytest.raises(AlertConfigError, match="kind"):
        ChannelConfig("p", "pager", url_secret="x")
    with pytest.raises(AlertConfigError, match="mail_from"):
        ChannelConfig("m", "email")
    with pytest.raises(AlertConfigError, match="link_template"):
        AlertSettings(link_template="{site}/{nope}")


def test_settings_parse_channels_and_retry_policy() -> None:
    s = AlertSettings.from_mapping(
        {
            "warn": 0.04,
            "retry_base_delay": 5,
            "retry_max_delay": 60,
            "failing_after": 3,
            "channels": [
                {
                    "name": "ops-mail",
                    "kind": "email",
                    "mail_from": "farm@x",
                    "mail_to": ["a@x"],
                    "smtp_user": "farm",
                    "password_secret": "alerts-smtp-password",
                    "min_severity": "critical",
                    "kinds": ["regression", "improvement"],
                }
            ],
        }
    )
    assert s.thresholds.warn == 0.04 and s.retry.failing_after == 3
    assert s.secret_names() == ("alerts-smtp-password",)
    ch = s.channel("ops-mail")
    assert ch.wants("improvement", "critical") and not ch.wants("regression", "warn")
    assert [s.retry.delay(n) for n in (1, 2, 3, 4, 5, 6)] == [5, 10, 20, 40, 60, 60]
    with pytest.raises(AlertConfigError):
        RetryPolicy(timeout=200, lease_seconds=100)


# the case: a +1.27% instructions/query regression, bisected to its culprit, raised no alert at warn = 3%
@pytest.mark.parametrize(
    ("metric", "unit", "direction", "ratio", "expected"),
    [
        ("instructions", "instructions/query", "lower", 1.0127, "warn"),  # steady: alerts from the detection floor
        ("instructions", "instructions/query", "lower", 1.004, None),  # below the floor
        ("instructions", "instructions/query", "lower", 1.06, "critical"),
        ("tps.rqps", "ratio", "higher", 0.975, "warn"),  # paired: from its minimum detectable effect
        ("tps.rqps", "ratio", "higher", 0.985, None),
        ("tps", "tx/s", "higher", 0.975, None),  # the same step measured alone does not alert
        ("tps", "tx/s", "higher", 0.965, "warn"),
    ],
)
def test_regression_thresholds_follow_the_metric_kind(metric, unit, direction, ratio, expected) -> None:
    line = mk(metric=metric, unit=unit, direction=direction, ratio=ratio, ci=(ratio - 0.001, ratio + 0.001))
    assert rules.severity(line, S) == expected


def test_metric_kinds_and_overrides() -> None:
    s = AlertSettings.from_mapping(
        {
            "steady_warn": 0.01,
            "paired_warn": 0.03,
            "steady_units": ["instructions/*", "bytes"],
            "overrides": [{"workload": "noisy-*", "warn": 0.2, "critical": 0.3}],
        }
    )
    assert [s.metric_kind(m, u) for m, u in (("tps.rqps", "ratio"), ("rss", "bytes"), ("tps", "tx/s"))] == [
        "paired",
        "steady",
        "unpaired",
    ]
    assert s.thresholds_for("ro", "regression", "instructions", "instructions/tx").warn == 0.01
    assert s.thresholds_for("ro", "regression", "tps.rqps", "ratio").warn == 0.03
    assert s.thresholds_for("noisy-1", "regression", "tps.rqps", "ratio").warn == 0.2  # an override still wins
    assert s.thresholds_for("ro", "improvement", "tps.rqps", "ratio") == s.improvement_thresholds
    with pytest.raises(AlertConfigError, match="warn <= critical"):
        AlertSettings.from_mapping({"paired_warn": 0.2})


def test_lifecycle() -> None:
    assert lifecycle.parse_state("won't fix") == "wontfix"
    assert lifecycle.parse_state("Backed out") == "backed-out"
    assert lifecycle.parse_state("ack") == "acknowledged"
    with pytest.raises(lifecycle.LifecycleError, match="unknown alert state"):
        lifecycle.parse_state("closed")
    with pytest.raises(lifecycle.LifecycleError, match="set by bisection"):
        lifecycle.after_triage("new", "culprit-found")
    assert lifecycle.after_bisection("new", "running", None) == "bisecting"
    assert lifecycle.after_bisection("bisecting", "culprit", "abc") == "culprit-found"
    assert lifecycle.after_bisection("bisecting", "ambiguous", None) == "new"
    assert lifecycle.after_bisection("acknowledged", "culprit", "abc") == "acknowledged"
    with pytest.raises(lifecycle.LifecycleError, match="needs the culprit"):
        lifecycle.after_bisection("bisecting", "culprit", None)


def test_docs_example_parses_and_documents_every_setting() -> None:
    import re as _re
    import tomllib
    from pathlib import Path

    from master.alerts.config import _CHANNEL_KEYS, _TOP

    doc = (Path(__file__).resolve().parents[2] / "docs" / "alerts.md").read_text()
    block = _re.search(r"```toml\n(.*?)```", doc, _re.S).group(1)
    data = tomllib.loads(block)["alerts"]
    s = AlertSettings.from_mapping(data)
    assert [c.kind for c in s.channels] == ["slack", "webhook", "email"] and len(s.overrides) == 1
    keys = set(data) | {"overrides", "channels"}
    assert _TOP <= keys, f"settings missing from docs/alerts.md: {sorted(_TOP - keys)}"
    channel_keys = {k for c in data["channels"] for k in c}
    assert channel_keys <= _CHANNEL_KEYS
    scalars = {k: v for k, v in data.items() if k not in ("overrides", "channels")}
    assert AlertSettings.from_mapping(scalars) == AlertSettings()  # the documented values are the defaults
    for key in ("warn", "critical", "max_pvalue", "settle_seconds", "retry_base_delay", "lease_seconds"):
        assert f"{key} = " in block
