"""Alert settings as frozen data: thresholds, per-workload overrides, channels and the retry policy.

The `[alerts]` table of perffarm.toml maps onto `AlertSettings.from_mapping`; every default lives here so the
core runs (and is tested) without a settings file. Channels name the Buildbot *secret* that holds each
webhook URL or password: the settings file never holds the value itself.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from master.config_values import ConfigError, check
from recipes.paired import is_paired_throughput

SEVERITIES = ("warn", "critical")
KINDS = ("regression", "improvement")
# A plan change no alert names (master/alerts/plan_events.py): an event of its own, sent to the channels that list
# it in `kinds`, whatever their min_severity (it has none)
PLAN_CHANGE = "plan-change"
EVENT_KINDS = (*KINDS, PLAN_CHANGE)  # what a channel's `kinds` may list
# git.postgresql.org's commitdiff page, the form pgsql-committers mails link to
POSTGRES_COMMIT_URL = "https://git.postgresql.org/pg/commitdiff/{sha}"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


class AlertConfigError(ConfigError):
    """An `[alerts]` setting is missing or invalid; the message names the key."""


@dataclass(frozen=True)
class Thresholds:
    """Relative change (|1 - goodness ratio|) at which a change point alerts as warn or critical."""

    warn: float = 0.03
    critical: float = 0.10

    def __post_init__(self) -> None:
        if not (0 < self.warn <= self.critical < 10):
            raise AlertConfigError(
                f"thresholds need 0 < warn <= critical, got warn={self.warn} critical={self.critical}"
            )


@dataclass(frozen=True)
class Override:
    """Thresholds for workloads matching a glob (first match wins), for one kind or both."""

    workload: str
    thresholds: Thresholds
    kind: str = "both"

    def matches(self, workload: str, kind: str) -> bool:
        return (self.kind in ("both", kind)) and fnmatch.fnmatchcase(workload, self.workload)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for failed sends; rows are never dropped, only retried less often."""

    base_delay: float = 30.0
    max_delay: float = 3600.0
    factor: float = 2.0
    failing_after: int = 5  # consecutive failed attempts of one message before its channel counts as failing
    lease_seconds: float = 120.0  # a claimed message is re-claimable after this (a deliverer died mid-send)
    timeout: float = 10.0  # per send; must be well below lease_seconds

    def __post_init__(self) -> None:
        if not (0 < self.base_delay <= self.max_delay) or self.factor < 1 or self.failing_after < 1:
            raise AlertConfigError("alerts retry: need 0 < retry_base_delay <= retry_max_delay, factor >= 1")
        if not 0 < self.timeout < self.lease_seconds:
            raise AlertConfigError("alerts.send_timeout must be positive and below alerts.lease_seconds")

    def delay(self, attempts: int) -> float:
        """Seconds to wait after the `attempts`-th failure (1-based)."""
        return min(self.max_delay, self.base_delay * self.factor ** max(0, attempts - 1))


@dataclass(frozen=True)
class ChannelConfig:
    """One destination: its kind, which secrets it reads, and which alerts it wants."""

    name: str
    kind: str
    url_secret: str | None = None  # slack, webhook: the Buildbot secret holding the URL
    signing_secret: str | None = None  # webhook: HMAC-SHA256 key for X-Perffarm-Signature (optional)
    smtp_host: str = "127.0.0.1"
    smtp_port: int = 25
    smtp_starttls: bool = False
    smtp_user: str | None = None
    password_secret: str | None = None  # email: the Buildbot secret holding the SMTP password (optional)
    mail_from: str = ""
    mail_to: tuple[str, ...] = ()
    min_severity: str = "warn"
    kinds: tuple[str, ...] = ("regression",)

    def __post_init__(self) -> None:
        where = f"alerts.channels[{self.name!r}]"
        if not NAME_RE.match(self.name):
            raise AlertConfigError(f"{where}.name: letters, digits, '.', '_', '-' only (at most 63)")
        needs = CHANNEL_NEEDS.get(self.kind)
        if needs is None:
            raise AlertConfigError(f"{where}.kind: {self.kind!r} is not one of {tuple(CHANNEL_NEEDS)}")
        if (lacks := needs(self)) is not None:
            raise AlertConfigError(where + lacks)
        if self.min_severity not in SEVERITIES:
            raise AlertConfigError(f"{where}.min_severity: {self.min_severity!r} is not one of {SEVERITIES}")
        bad = [k for k in self.kinds if k not in EVENT_KINDS]
        if bad or not self.kinds:
            raise AlertConfigError(f"{where}.kinds: need a non-empty subset of {EVENT_KINDS}, got {list(self.kinds)}")
        for secret in self.secret_names():
            if not NAME_RE.match(secret):
                raise AlertConfigError(f"{where}: {secret!r} is not a valid secret name")

    def secret_names(self) -> tuple[str, ...]:
        """Every Buildbot secret this channel reads."""
        return tuple(s for s in (self.url_secret, self.signing_secret, self.password_secret) if s)

    def wants(self, kind: str, severity: str) -> bool:
        """Whether an alert of this kind and severity is sent here."""
        return kind in self.kinds and SEVERITIES.index(severity) >= SEVERITIES.index(self.min_severity)

    @property
    def wants_plan_changes(self) -> bool:
        """Whether plan changes that no alert names are sent here (`kinds` lists "plan-change")."""
        return PLAN_CHANGE in self.kinds


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


# The channel kinds and what a channel of each must hold in its settings: what it lacks (".key: why" or ": why",
# after the channel), else None. master/alerts/kinds.py `CHANNEL_KINDS` gives the same kinds their message and
# sender; the settings are checked here, so loading them loads no sender (requests) and no statistics.
CHANNEL_NEEDS: dict[str, Callable[[ChannelConfig], str | None]] = {
    "slack": _lacks_url,
    "webhook": _lacks_url,
    "email": _lacks_mail,
}


@dataclass(frozen=True)
class AlertSettings:
    """Everything the alert core needs; the defaults are the documented defaults of `[alerts]`."""

    enabled: bool = True
    thresholds: Thresholds = field(default_factory=Thresholds)
    improvement_thresholds: Thresholds = field(default_factory=lambda: Thresholds(0.05, 0.15))
    # Regressions per metric kind (metric_kind): deterministic counts alert from the detection floor, paired
    # throughput from its measured minimum detectable effect; wall-clock throughput measured alone keeps `thresholds`
    steady_thresholds: Thresholds = field(default_factory=lambda: Thresholds(0.005, 0.05))
    paired_thresholds: Thresholds = field(default_factory=lambda: Thresholds(0.02, 0.10))
    steady_units: tuple[str, ...] = ("instructions/*",)
    overrides: tuple[Override, ...] = ()
    max_pvalue: float = 0.01
    band_red: float = 0.97
    band_green: float = 1.03
    site_url: str = "http://127.0.0.1:8011/"  # [site] port: where `perffarm run` serves the site
    link_template: str = "{site_url}alerts/alert-{alert_id}.html"  # the page master/publish writes
    # A commit's web page, "{sha}" replaced: "" picks git.postgresql.org's commitdiff when the repository is
    # postgres.git (POSTGRES_COMMIT_URL), "none" shows no link
    commit_url: str = ""
    repository: str = ""  # repository.url (not an [alerts] key): for the commit link and the reproduce command
    machine_about: tuple[tuple[str, str, str, str], ...] = ()  # workers.about: (worker, name, owner, description)
    settle_seconds: float = 300.0
    poll_interval: float = 10.0
    channels: tuple[ChannelConfig, ...] = ()
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        if not 0 < self.max_pvalue <= 1:
            raise AlertConfigError(f"alerts.max_pvalue: must be in (0, 1], got {self.max_pvalue}")
        if not 0 < self.band_red <= 1 <= self.band_green:
            raise AlertConfigError("alerts.band_red/band_green: need 0 < band_red <= 1 <= band_green")
        if self.settle_seconds < 0 or self.poll_interval <= 0:
            raise AlertConfigError("alerts.settle_seconds must be >= 0 and alerts.poll_interval > 0")
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise AlertConfigError(f"alerts.channels: duplicate channel names in {names}")
        if self.commit_url not in ("", "none"):
            from master.textsafe import safe_link

            if "{sha}" not in self.commit_url or safe_link(self.commit_url.replace("{sha}", "0" * 40)) is None:
                raise AlertConfigError(
                    f"alerts.commit_url: {self.commit_url[:80]!r} is not an https URL with {{sha}} in it, e.g. "
                    f'{POSTGRES_COMMIT_URL!r}; use "" for the default or "none" for no link'
                )
        try:
            self.link_template.format(site_url=self.site_url, alert_id="a-0")
        except (KeyError, IndexError, ValueError) as e:
            raise AlertConfigError(
                f"alerts.link_template: only {{site_url}} and {{alert_id}} are known ({e})"
            ) from None

    def commit_link(self, sha: str) -> str | None:
        """The commit's web page, or None: `commit_url`, else git.postgresql.org's for a postgres.git repository."""
        template = self.commit_url
        if template == "none":
            return None
        if not template:
            name = self.repository.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
            if name not in ("postgres", "postgresql"):
                return None
            template = POSTGRES_COMMIT_URL
        return template.replace("{sha}", sha) if re.fullmatch(r"[0-9a-f]{40,64}", sha) else None

    def metric_kind(self, metric: str, unit: str) -> str:
        """How a series is measured, which decides how small a regression alerts: ``paired`` (a throughput's ratio
        to the reference measured interleaved in the same run, ``<metric>.rqps``), ``steady`` (a deterministic
        count: its unit matches ``steady_units``) or ``unpaired`` (wall-clock: measured alone, or a latency or CPU
        ratio ``<metric>.ratio``, which pairing frees of drift but not of its own noise)."""
        if is_paired_throughput(metric):
            return "paired"
        if any(fnmatch.fnmatchcase(unit, pattern) for pattern in self.steady_units):
            return "steady"
        return "unpaired"

    def thresholds_for(self, workload: str, kind: str, metric: str = "", unit: str = "") -> Thresholds:
        """The thresholds that apply to one series and kind: the first matching override, else for a regression
        those of its metric kind (``metric_kind``), for an improvement the improvement tiers."""
        for o in self.overrides:
            if o.matches(workload, kind):
                return o.thresholds
        if kind != "regression":
            return self.improvement_thresholds
        return {
            "paired": self.paired_thresholds,
            "steady": self.steady_thresholds,
            "unpaired": self.thresholds,
        }[self.metric_kind(metric, unit)]

    def channel(self, name: str) -> ChannelConfig | None:
        return next((c for c in self.channels if c.name == name), None)

    def secret_names(self) -> tuple[str, ...]:
        return tuple(sorted({s for c in self.channels for s in c.secret_names()}))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> AlertSettings:
        """Parse the `[alerts]` TOML table (missing keys keep their defaults); errors name the key."""
        return _parse(dict(data or {}))


# --------------------------------------------------------------------------------------------- parsing

# The scalar keys of `[alerts]`: key -> (kind, where the value goes). The kinds are those of every section
# (master/config_values.py); the records' __post_init__ checks the constraints between keys (warn <= critical).
ALERT_KEYS: dict[str, tuple[str, str]] = {
    "enabled": ("bool", "enabled"),
    "warn": ("number", "thresholds.warn"),
    "critical": ("number", "thresholds.critical"),
    "improvement_warn": ("number", "improvement_thresholds.warn"),
    "improvement_critical": ("number", "improvement_thresholds.critical"),
    "steady_warn": ("number", "steady_thresholds.warn"),
    "steady_critical": ("number", "steady_thresholds.critical"),
    "steady_units": ("str_list", "steady_units"),
    "paired_warn": ("number", "paired_thresholds.warn"),
    "paired_critical": ("number", "paired_thresholds.critical"),
    "max_pvalue": ("number", "max_pvalue"),
    "band_red": ("number", "band_red"),
    "band_green": ("number", "band_green"),
    "site_url": ("str", "site_url"),
    "link_template": ("str", "link_template"),
    "commit_url": ("opt_text", "commit_url"),
    "settle_seconds": ("number", "settle_seconds"),
    "poll_interval": ("number", "poll_interval"),
    "retry_base_delay": ("number", "retry.base_delay"),
    "retry_max_delay": ("number", "retry.max_delay"),
    "retry_factor": ("number", "retry.factor"),
    "failing_after": ("pos_int", "retry.failing_after"),
    "lease_seconds": ("number", "retry.lease_seconds"),
    "send_timeout": ("number", "retry.timeout"),
}
_TOP = {*ALERT_KEYS, "overrides", "channels"}
_NESTED = ("thresholds", "improvement_thresholds", "steady_thresholds", "paired_thresholds", "retry")
_CHANNEL_KEYS = {f.name for f in fields(ChannelConfig)}
_SECRETISH = re.compile(r"(^url$|password$|token$|webhook$)")


def _parse(d: dict[str, Any]) -> AlertSettings:
    unknown = sorted(set(d) - _TOP)
    if unknown:
        raise AlertConfigError(f"alerts.{unknown[0]}: unknown setting (known: {sorted(_TOP)})")
    base = AlertSettings()
    kw: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {group: {} for group in _NESTED}
    for key, (kind, attr) in ALERT_KEYS.items():
        if key not in d:
            continue
        value = check(f"alerts.{key}", kind, d[key], error=AlertConfigError)
        group, dot, name = attr.partition(".")
        if dot:
            nested[group][name] = value
        else:
            kw[attr] = value
    try:
        for group in _NESTED:  # thresholds and the retry policy: the given keys over the defaults
            kw[group] = dataclasses.replace(getattr(base, group), **nested[group])
        kw["overrides"] = tuple(_override(i, o) for i, o in enumerate(_list("alerts.overrides", d.get("overrides"))))
        kw["channels"] = tuple(_channel(i, c) for i, c in enumerate(_list("alerts.channels", d.get("channels"))))
        return AlertSettings(**kw)
    except TypeError as e:  # a dataclass got a value of the wrong shape
        raise AlertConfigError(f"alerts: {e}") from None


def _list(name: str, value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise AlertConfigError(f"{name}: expected an array of tables ([[{name}]]), got {value!r}")
    return value


def _override(i: int, o: dict[str, Any]) -> Override:
    where = f"alerts.overrides[{i}]"
    unknown = sorted(set(o) - {"workload", "warn", "critical", "kind"})
    if unknown:
        raise AlertConfigError(f"{where}.{unknown[0]}: unknown key (known: workload, warn, critical, kind)")
    if not isinstance(o.get("workload"), str) or not o["workload"]:
        raise AlertConfigError(f"{where}.workload: expected a glob such as 'pgbench-rw-*'")
    kind = o.get("kind", "both")
    if kind not in ("both", *KINDS):
        raise AlertConfigError(f"{where}.kind: {kind!r} is not one of both, regression, improvement")
    if "warn" not in o or "critical" not in o:
        raise AlertConfigError(f"{where}: needs both warn and critical")
    try:
        th = Thresholds(
            check(f"{where}.warn", "number", o["warn"], error=AlertConfigError),
            check(f"{where}.critical", "number", o["critical"], error=AlertConfigError),
        )
    except AlertConfigError as e:
        raise AlertConfigError(f"{where}: {e}") from None
    return Override(o["workload"], th, kind)


def _channel(i: int, c: dict[str, Any]) -> ChannelConfig:
    where = f"alerts.channels[{i}]"
    unknown = sorted(set(c) - _CHANNEL_KEYS)
    for key in unknown:
        if _SECRETISH.search(key):
            raise AlertConfigError(
                f"{where}.{key}: secrets never go in the settings file; store the value as "
                f"a Buildbot secret and name it in url_secret / password_secret"
            )
    if unknown:
        raise AlertConfigError(f"{where}.{unknown[0]}: unknown key (known: {sorted(_CHANNEL_KEYS)})")
    for key in ("name", "kind"):
        if not isinstance(c.get(key), str):
            raise AlertConfigError(f"{where}.{key}: required string")
    kw = dict(c)
    for key, kind in (("mail_to", "str_list"), ("kinds", "str_list"), ("smtp_port", "port"), ("smtp_starttls", "bool")):
        if key in kw:
            kw[key] = check(f"{where}.{key}", kind, kw[key], error=AlertConfigError)
    return ChannelConfig(**kw)
