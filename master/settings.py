"""Farm settings: one documented TOML file with defaults, overridable by environment variables.

The defaults live in the repository's ``perffarm.toml`` (the documentation of every key). A deployment may
point ``PERFFARM_CONFIG`` at its own file; keys it leaves out keep the defaults. ``PERFFARM_<SECTION>_<KEY>``
environment variables override both. Invalid values fail at load time with a message naming the key.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from master import dburl, refnames
from master.alerts.config import ALERT_KEYS, AlertConfigError, AlertSettings
from master.config_values import NAME_RE, ConfigError, check, from_env
from master.detect.config import MIN_WINDOW, REPORT_ALPHA, WINDOW_EDGE, DetectionSettings
from master.redact import credentials_problem, redact_url
from recipes.sandbox import BWRAP_ENV

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULTS_FILE = REPO_ROOT / "perffarm.toml"
ENV_PREFIX = "PERFFARM_"
# Environment variables with the prefix that are not settings of the farm: a try submitter's login (perffarm try)
# and where a worker's bubblewrap is (recipes/sandbox.py). The loader refuses every other unknown PERFFARM_ name.
NOT_SETTINGS = frozenset({"PERFFARM_TRY_USER", "PERFFARM_TRY_PASSWORD_FILE", BWRAP_ENV})
WORKER_NAME_RE = NAME_RE


@dataclass(frozen=True)
class CfbotSettings:
    """The effective `[cfbot]` section: the master's timer that measures a repository of patch branches
    (master/cfbot_service.py, docs/jobs.md "A performance cfbot"). Off while `repo` is ""."""

    repo: str = ""
    branches: str = "cf/.*"
    base: str = "master"
    interval: int = 600


class SettingsError(ConfigError):
    """A setting is missing, unknown or has an invalid value; the message names the key."""


@dataclass(frozen=True)
class Settings:
    """The effective farm settings (see perffarm.toml for what each key means)."""

    repository_url: str  # never holds credentials (load_settings refuses them): see repository_password_secret
    repository_user: str  # "" unless the repository needs a password
    repository_password_secret: str  # name of the Buildbot secret with the repository's password or token, or ""
    branches: tuple[str, ...]
    tags: tuple[str, ...]
    poll_interval: int
    data_dir: Path
    web_host: str
    web_port: int
    worker_port: int
    worker_host: str
    web_users: tuple[str, ...]  # who may log in and control the farm; passwords are secrets web-user-<name>
    web_url_setting: str  # "" = http://<web_host>:<web_port>/
    reconcile_interval: int
    reconcile_grace: int  # seconds a commit must stay missing before the reconciler re-queues it
    max_attempts: int
    reconcile_window: int
    deferred_give_up_after: int  # seconds a deferred result is retried before it is set aside (master/ingest.py)
    queued: str  # "every": every watched commit is measured; "newest": queued commits collapse into the newest
    buildbot_db_url: str  # Buildbot's own database (master/buildbotdb.py); never holds a password
    buildbot_db_password_secret: str  # name of the Buildbot secret with that database's password, or ""
    worker_names: tuple[str, ...]
    worker_hosts: Mapping[str, str]
    run_local_worker: bool
    worker_lost_after: int  # seconds of silence before the master drops a worker connection (master/workerlink.py)
    recipes: tuple[str, ...]
    recipe_options: Mapping[str, tuple[str, ...]]  # recipe -> KEY=VALUE options for every build of it
    site_out_dir: Path | None  # None: <data_dir>/site (see the site_dir property)
    site_port: int
    throughput_references: Mapping[str, str]  # branch -> revision its throughput is paired with (docs/throughput.md)
    # worker -> (name, owner, description) of its machine, as people read it (master/machines.py)
    worker_about: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    detection: DetectionSettings = field(default_factory=DetectionSettings)  # passed down to analysis, bisection
    cfbot: CfbotSettings = field(default_factory=CfbotSettings)
    source_of: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:  # Buildbot logs step reprs (with their arguments) at every lock release
        return f"Settings(data_dir={str(self.data_dir)!r})"

    # Derived locations: one place that decides where things live.
    @property
    def master_dir(self) -> Path:
        return self.data_dir / "master"

    @property
    def results_db(self) -> Path:
        return self.data_dir / "results.sqlite"

    @property
    def secrets_dir(self) -> Path:
        return self.data_dir / "secrets"

    @property
    def incoming_dir(self) -> Path:
        return self.data_dir / "incoming"

    @property
    def mirror_dir(self) -> Path:
        return self.data_dir / "mirror.git"

    def worker_dir(self, name: str) -> Path:
        return self.data_dir / "workers" / name

    def host_of(self, worker: str) -> str:
        """The physical host a worker runs on (its measurement-lock key)."""
        return self.worker_hosts.get(worker, worker)

    @property
    def web_url(self) -> str:
        """The UI's address as users reach it (buildbotURL): master.web_url, else built from host and port."""
        if self.web_url_setting:
            return self.web_url_setting
        host = "127.0.0.1" if self.web_host in ("0.0.0.0", "::") else self.web_host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.web_port}/"

    @property
    def web_exposed(self) -> bool:
        """Whether the web UI listens beyond this machine's loopback interface."""
        return not is_loopback(self.web_host)

    @property
    def site_dir(self) -> Path:
        """Where the static history site is published (a symlink swapped atomically; see docs/site.md)."""
        return self.site_out_dir or self.data_dir / "site"

    @property
    def site_url(self) -> str:
        """Where `perffarm run` serves the site: always 127.0.0.1 (a static server with no auth)."""
        return f"http://127.0.0.1:{self.site_port}/"

    def ref_matches(self, ref: str) -> bool:
        """Whether a full ref name (refs/heads/X, refs/tags/Y) is watched.

        A name git itself would not create (`git check-ref-format`) or one starting with '-' is never watched,
        whatever the patterns: the poller fetches every watched ref in one `git fetch`, so a single broken or
        option-like ref in the repository would otherwise stop polling of every branch (seen in the chaos suite).
        """
        if ref.startswith("refs/heads/"):
            name, patterns = ref[len("refs/heads/") :], self.branches
        elif ref.startswith("refs/tags/"):
            name, patterns = ref[len("refs/tags/") :], self.tags
        else:
            return False
        if refnames.ref_problem(name) is not None:
            return False
        return any(re.fullmatch(p, name) for p in patterns)


# (section, key) -> (type, attribute name; "group.field" is a field of a nested settings record such as
# Settings.detection). The order is the order `perffarm settings` prints.
_SCHEMA: dict[tuple[str, str], tuple[str, str]] = {
    ("repository", "url"): ("str", "repository_url"),
    ("repository", "user"): ("opt_text", "repository_user"),
    ("repository", "password_secret"): ("opt_name", "repository_password_secret"),
    ("repository", "branches"): ("regex_list", "branches"),
    ("repository", "tags"): ("regex_list", "tags"),
    ("repository", "poll_interval"): ("pos_int", "poll_interval"),
    ("master", "data_dir"): ("path", "data_dir"),
    ("master", "web_host"): ("str", "web_host"),
    ("master", "web_port"): ("port", "web_port"),
    ("master", "worker_port"): ("port", "worker_port"),
    ("master", "worker_host"): ("str", "worker_host"),
    ("master", "web_users"): ("name_list", "web_users"),
    ("master", "web_url"): ("opt_url", "web_url_setting"),
    ("master", "reconcile_interval"): ("pos_int", "reconcile_interval"),
    ("master", "reconcile_grace"): ("pos_int", "reconcile_grace"),
    ("master", "max_attempts"): ("pos_int", "max_attempts"),
    ("master", "reconcile_window"): ("pos_int", "reconcile_window"),
    ("master", "deferred_give_up_after"): ("pos_int", "deferred_give_up_after"),
    ("master", "queued"): ("queued", "queued"),
    ("master", "buildbot_db_url"): ("db_url", "buildbot_db_url"),
    ("master", "buildbot_db_password_secret"): ("opt_name", "buildbot_db_password_secret"),
    ("workers", "names"): ("name_list", "worker_names"),
    ("workers", "hosts"): ("host_map", "worker_hosts"),
    ("workers", "run_local"): ("bool", "run_local_worker"),
    ("workers", "lost_after"): ("pos_int", "worker_lost_after"),
    ("workers", "about"): ("about_map", "worker_about"),
    ("recipes", "enabled"): ("name_list", "recipes"),
    ("recipes", "options"): ("option_map", "recipe_options"),
    ("site", "out_dir"): ("opt_path", "site_out_dir"),
    ("site", "port"): ("port", "site_port"),
    ("throughput", "references"): ("ref_map", "throughput_references"),
    ("detection", "min_effect"): ("fraction", "detection.min_effect"),
    ("detection", "fdr"): ("fraction", "detection.fdr"),
    ("detection", "keep_alpha"): ("fraction", "detection.keep_alpha"),
    ("detection", "bisect_min_effect"): ("fraction", "detection.bisect_min_effect"),
    ("detection", "window"): ("pos_int", "detection.window"),
    ("cfbot", "repo"): ("opt_text", "cfbot.repo"),
    ("cfbot", "branches"): ("str", "cfbot.branches"),
    ("cfbot", "base"): ("str", "cfbot.base"),
    ("cfbot", "interval"): ("pos_int", "cfbot.interval"),
}
# [alerts]: its scalar keys are settings like any other (env overrides, sources, `perffarm settings`), checked by
# the same kinds; they are collected with its arrays of tables (overrides, channels) into AlertSettings.
_SCHEMA.update({("alerts", key): (kind, f"alerts.{attr}") for key, (kind, attr) in ALERT_KEYS.items()})
_ALERT_ARRAYS = ("overrides", "channels")
# Nested settings records: the attribute's group -> the frozen dataclass its fields are collected into.
_GROUPS: dict[str, type] = {"detection": DetectionSettings, "cfbot": CfbotSettings}


def web_user_secret(name: str) -> str:
    """The Buildbot secret (a file in the secrets directory) holding a web user's password."""
    return f"web-user-{name}"


def is_loopback(host: str) -> bool:
    """Whether an interface address is this machine's loopback (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: assume it resolves beyond loopback


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SettingsError(f"settings file {path} does not exist (PERFFARM_CONFIG points at it?)") from None
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"settings file {path} is not valid TOML: {e}") from None


def _env_name(section: str, key: str) -> str:
    return f"{ENV_PREFIX}{section}_{key}".upper()


def load_settings(path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load defaults, then the file named by PERFFARM_CONFIG (or `path`), then environment overrides."""
    env = os.environ if environ is None else environ
    defaults = _read_toml(DEFAULTS_FILE)
    chosen = path if path is not None else env.get(ENV_PREFIX + "CONFIG")
    user: dict[str, Any] = {}
    user_path: Path | None = None
    if chosen:
        user_path = Path(chosen).expanduser().resolve()
        if user_path != DEFAULTS_FILE:
            user = _read_toml(user_path)

    known_sections = {s for s, _ in _SCHEMA}
    for section, table in user.items():
        if section not in known_sections or not isinstance(table, dict):
            raise SettingsError(f"{section}: unknown section in {user_path} (known: {sorted(known_sections)})")
        for key in table:
            if (section, key) not in _SCHEMA and not (section == "alerts" and key in _ALERT_ARRAYS):
                raise SettingsError(f"{section}.{key}: unknown setting in {user_path}")
    for var in env:
        if var.startswith(ENV_PREFIX) and var != ENV_PREFIX + "CONFIG" and var not in NOT_SETTINGS:
            if not any(var == _env_name(s, k) for s, k in _SCHEMA):
                raise SettingsError(f"{var}: unknown environment setting (see perffarm.toml for the keys)")

    values: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
    alert_table: dict[str, Any] = {}
    source_of: dict[str, str] = {}
    for (section, key), (kind, attr) in _SCHEMA.items():
        name = f"{section}.{key}"
        base = DEFAULTS_FILE.parent
        if _env_name(section, key) in env:
            raw, src = from_env(kind, env[_env_name(section, key)]), f"env {_env_name(section, key)}"
            base = Path.cwd()
        elif key in user.get(section, {}):
            raw, src = user[section][key], str(user_path)
            base = user_path.parent if user_path else base
        elif key in defaults.get(section, {}):
            raw, src = defaults[section][key], "default"
        else:
            raise SettingsError(f"{name}: missing from {DEFAULTS_FILE}")
        group, dot, field_name = attr.partition(".")
        if section == "alerts":
            alert_table[key] = check(name, kind, raw, base, SettingsError)
        elif dot:
            groups[group][field_name] = check(name, kind, raw, base, SettingsError)
        else:
            values[attr] = check(name, kind, raw, base, SettingsError)
        source_of[name] = src

    try:
        for key in _ALERT_ARRAYS:
            table = user.get("alerts", {}) if key in user.get("alerts", {}) else defaults.get("alerts", {})
            if key in table:
                alert_table[key] = table[key]
                source_of[f"alerts.{key}"] = str(user_path) if table is user.get("alerts") else "default"
        alerts = AlertSettings.from_mapping(alert_table)
    except AlertConfigError as e:
        raise SettingsError(str(e) if str(e).startswith("alerts") else f"alerts: {e}") from None
    values.update({group: _GROUPS[group](**fields) for group, fields in groups.items()})
    alerts = dataclasses.replace(
        alerts,
        repository=values.get("repository_url", ""),
        machine_about=tuple((w, *about) for w, about in values.get("worker_about", {}).items()),
    )
    settings = Settings(**values, alerts=alerts, source_of=source_of)
    _check_repository(settings)
    _check_buildbot_db(settings)
    _check_detection(settings.detection)
    _check_cfbot(settings.cfbot)
    for worker in settings.worker_hosts:
        if worker not in settings.worker_names:
            raise SettingsError(f"workers.hosts: {worker!r} is not in workers.names")
    for worker in settings.worker_about:
        if worker not in settings.worker_names:
            raise SettingsError(f"workers.about: {worker!r} is not in workers.names")
    if settings.web_exposed and not settings.web_users:
        raise SettingsError(
            f"master.web_host: the web UI would listen on {settings.web_host}, beyond this machine, with no login: "
            "anyone who reaches it could force builds, which run code on the workers. Set master.web_users "
            "(each user's password in the secret file <data_dir>/secrets/web-user-NAME) and master.web_url, or "
            'keep web_host = "127.0.0.1" and reach the UI through an SSH tunnel (docs/security.md)'
        )
    if settings.web_port == settings.worker_port:
        raise SettingsError("master.worker_port: must differ from master.web_port")
    if settings.site_port in (settings.web_port, settings.worker_port):
        raise SettingsError(
            f"site.port: {settings.site_port} is already used by master.web_port or "
            "master.worker_port; choose another port"
        )
    for recipe in settings.recipe_options:
        if recipe not in settings.recipes:
            raise SettingsError(f"recipes.options: {recipe!r} is not in recipes.enabled")
    if settings.run_local_worker and "local" not in settings.worker_names:
        raise SettingsError("workers.run_local: true needs a worker named 'local' in workers.names")
    return settings


def _check_repository(settings: Settings) -> None:
    """Refuse credentials in repository.url (they would reach logs, Buildbot's changes and the web UI) and
    half-configured credentials; every message shows the URL redacted."""
    url = settings.repository_url
    problem = credentials_problem(url)
    if problem:
        raise SettingsError(
            f"repository.url: {redact_url(url)}: {problem}. Keep the URL free of credentials (without the user "
            "info and the query string), put the user name in repository.user, the password or token in a "
            f"Buildbot secret (a file {settings.secrets_dir}/NAME, mode 0600) and its NAME in "
            "repository.password_secret; see docs/security.md"
        )
    user, secret = settings.repository_user, settings.repository_password_secret
    if bool(user) != bool(secret):
        raise SettingsError(
            "repository.password_secret: repository.user and repository.password_secret go together (a token "
            "needs a user name too: any name the host accepts, e.g. x-access-token or oauth2)"
        )
    if secret and not url.lower().startswith(("https://", "http://")):
        raise SettingsError(
            "repository.password_secret: credentials apply to http(s) URLs only (ssh authenticates with a key)"
        )


def _check_buildbot_db(settings: Settings) -> None:
    """An sqlite database is a file in the data directory; a password secret needs a server database with a user
    to log in as."""
    problem = dburl.sqlite_problem(
        settings.buildbot_db_url,
        data_dir=settings.data_dir,
        master_dir=settings.master_dir,
        results_db=settings.results_db,
        secrets_dir=settings.secrets_dir,
        incoming_dir=settings.incoming_dir,
    )
    if problem:
        raise SettingsError(f"master.buildbot_db_url: {problem}")
    if not settings.buildbot_db_password_secret:
        return
    url = dburl.parse(settings.buildbot_db_url)
    if url.is_sqlite or not url.user:
        raise SettingsError(
            "master.buildbot_db_password_secret: a password needs a server database with a user name in "
            f"master.buildbot_db_url, e.g. postgresql://perffarm@db.example.org/buildbot (got "
            f"{dburl.display_url(settings.buildbot_db_url)})"
        )


def _check_cfbot(cfbot: CfbotSettings) -> None:
    """A branch pattern that compiles, a base git would name a branch, a patch repository without credentials."""
    try:
        re.compile(cfbot.branches)
    except re.error as e:
        raise SettingsError(
            f"cfbot.branches: {cfbot.branches!r} is not a regular expression ({e}); e.g. 'cf/.*'"
        ) from None
    if (problem := refnames.ref_problem(cfbot.base)) is not None:
        raise SettingsError(f"cfbot.base: {cfbot.base!r}: {problem}; name the branch the patches are rebased on")
    if cfbot.repo.startswith("-"):
        raise SettingsError(f"cfbot.repo: {cfbot.repo!r} starts with '-'; give a path or URL of the patch repository")
    if cfbot.repo and (problem := credentials_problem(cfbot.repo)):
        raise SettingsError(
            f"cfbot.repo: {redact_url(cfbot.repo)}: {problem}; keep the URL free of credentials (the patches are "
            "fetched anonymously)"
        )


def _check_detection(detection: DetectionSettings) -> None:
    """Refuse a retraction level stricter than the level that reports a change point (it would flap)."""
    if detection.window < MIN_WINDOW:
        raise SettingsError(
            f"detection.window: {detection.window} commits leave too little to detect on past the settled edge "
            f"of {WINDOW_EDGE} commits; expected at least {MIN_WINDOW}"
        )
    reported_at = REPORT_ALPHA
    if detection.keep_alpha < reported_at:
        raise SettingsError(
            f"detection.keep_alpha: {detection.keep_alpha:g} is stricter than the level that reports a change point "
            f"({reported_at:g}): a borderline point would be reported and withdrawn by turns; expected a number in "
            f"[{reported_at:g}, 1)"
        )


def describe(settings: Settings) -> list[tuple[str, Any, str]]:
    """(key, value, source) rows for `perffarm settings`; URLs are shown redacted (belt and braces: settings
    never hold credentials)."""
    rows = []
    for (section, key), (_, attr) in _SCHEMA.items():
        name = f"{section}.{key}"
        value = functools.reduce(getattr, attr.split("."), settings)
        if attr == "repository_url":
            value = redact_url(value)
        elif attr == "buildbot_db_url":
            value = dburl.display_url(value)
        elif isinstance(value, Path):
            value = str(value)
        elif value is None:
            value = ""
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping) and attr == "throughput_references":
            value = [f"{k}={v}" for k, v in value.items()]
        elif isinstance(value, Mapping) and attr == "worker_about":
            value = [f"{k}={'|'.join(v)}" for k, v in value.items()]
        elif isinstance(value, Mapping) and attr == "recipe_options":
            value = [f"{k}:{o}" for k, opts in value.items() for o in opts]
        elif isinstance(value, Mapping):
            value = [f"{k}={v}" for k, v in value.items()]
        rows.append((name, value, settings.source_of.get(name, "")))
    return rows
