"""The kinds of value a setting can have, checked one way for every section of perffarm.toml.

`master/settings.py` (every section) and `master/alerts/config.py` (the `[alerts]` table, also read alone by the
alert core and its tests) describe their keys as (name, kind) tables and check each value here, so a number, a
port, a path or a list of names is validated, converted and reported alike everywhere. Environment overrides
(`PERFFARM_<SECTION>_<KEY>`) are parsed by `from_env` into what a TOML file would hold, then checked the same.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from master import dburl, refnames
from master.redact import redact_url

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")  # worker, user, recipe, channel and secret names
# A recipe option as a build passes it to the runner (--option KEY=VALUE).
OPTION_RE = re.compile(r"^[a-z][a-z0-9_]{0,40}=[^\x00\n]{0,400}$")
QUEUED_MODES = ("every", "newest")


class ConfigError(ValueError):
    """A setting is missing, unknown or has an invalid value; the message names the key."""


def from_env(kind: str, text: str) -> Any:
    """An environment variable's text as the value a TOML file would give for a setting of this kind (what it
    cannot parse is returned as text, for `check` to report with the setting's name)."""
    if kind in ("regex_list", "name_list", "host_map", "str_list", "ref_map"):  # about_map: ";" below
        return [part.strip() for part in text.split(",") if part.strip()]
    if kind == "option_map":  # values may hold commas (workloads=A,B): whitespace-separated
        return text.split()
    if kind == "about_map":  # descriptions hold commas and spaces: entries separated by ';'
        return [part.strip() for part in text.split(";") if part.strip()]
    if kind in ("pos_int", "port"):
        try:
            return int(text)
        except ValueError:
            return text  # reported by check with the key's name
    if kind in ("fraction", "number"):
        try:
            return float(text)
        except ValueError:
            return text
    if kind == "bool":
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        return text
    return text


def check(name: str, kind: str, value: Any, base: Path | None = None, error: type[ConfigError] = ConfigError) -> Any:
    """Check one value against its kind and return it as the settings hold it; raise `error` naming the key.

    Relative paths resolve against `base` (the directory of the file that set them; default: the current one).
    """
    if kind == "number":  # any finite number; the record it goes into checks its range against its neighbours
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise error(f"{name}: expected a number, got {value!r}")
        return float(value)
    if kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise error(f"{name}: expected a non-empty string, got {value!r}")
        return value.strip()
    if kind == "opt_url":
        if not isinstance(value, str):
            raise error(f'{name}: expected a URL (or "" for the default), got {value!r}')
        value = value.strip()
        if not value:
            return ""
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.username or parts.password:
            raise error(
                f"{name}: {redact_url(value)!r} should look like https://perf.example.org/ (http or "
                "https, a host, no user or password)"
            )
        return value if value.endswith("/") else value + "/"
    if kind == "db_url":  # Buildbot's database: sqlite or postgresql, never with a password in it
        try:
            return dburl.parse(value).text
        except ValueError as e:
            raise error(f"{name}: {e}") from None
    if kind == "opt_text":
        if not isinstance(value, str) or not value.isprintable():
            raise error(f'{name}: expected a string without control characters (or "")')
        return value.strip()
    if kind == "opt_name":
        if not isinstance(value, str) or (value.strip() and not NAME_RE.match(value.strip())):
            raise error(f"{name}: expected a secret name (letters, digits, '.', '_', '-'; at most 63) or \"\"")
        return value.strip()
    if kind == "opt_path":
        if not isinstance(value, str):
            raise error(f'{name}: expected a path (or "" for the default), got {value!r}')
        if not value.strip():
            return None
        kind = "path"
    if kind == "path":
        if not isinstance(value, str) or not value.strip():
            raise error(f"{name}: expected a path, got {value!r}")
        p = Path(value).expanduser()
        return (p if p.is_absolute() else (base or Path.cwd()) / p).resolve()
    if kind in ("pos_int", "port"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise error(f"{name}: expected an integer, got {value!r}")
        lo, hi = (1, 65535) if kind == "port" else (1, 10**9)
        if not lo <= value <= hi:
            raise error(f"{name}: {value} is out of range {lo}..{hi}")
        return value
    if kind == "fraction":  # a share, a level or a relative change: strictly between 0 and 1
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise error(f"{name}: expected a number in (0, 1), got {value!r}")
        if not 0.0 < value < 1.0:  # NaN fails too
            raise error(f"{name}: {value!r} is out of range: expected a number in (0, 1), both ends excluded")
        return float(value)
    if kind == "queued":
        if value not in QUEUED_MODES:
            raise error(f"{name}: expected one of {', '.join(QUEUED_MODES)}, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise error(f"{name}: expected true or false, got {value!r}")
        return value
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):  # a tuple: checked once
        raise error(f"{name}: expected a list of strings, got {value!r}")
    if kind == "str_list":
        return tuple(value)
    if kind == "regex_list":
        for v in value:
            try:
                re.compile(v)
            except re.error as e:
                raise error(f"{name}: {v!r} is not a valid regular expression: {e}") from None
        return tuple(value)
    if kind == "name_list":
        for v in value:
            if not NAME_RE.match(v):
                raise error(f"{name}: {v!r} is not a valid name (letters, digits, '.', '_', '-'; at most 63)")
        if len(set(value)) != len(value):
            raise error(f"{name}: duplicate entries in {value!r}")
        return tuple(value)
    if kind == "host_map":
        hosts: dict[str, str] = {}
        for v in value:
            worker, sep, host = v.partition("=")
            if not sep or not NAME_RE.match(worker.strip()) or not host.strip():
                raise error(f"{name}: {v!r} should look like 'worker=host'")
            hosts[worker.strip()] = host.strip()
        return hosts
    if kind == "about_map":  # WORKER=NAME|OWNER|DESCRIPTION: what people read for a worker's machine
        about: dict[str, tuple[str, str, str]] = {}
        for v in value:
            worker, sep, rest = (part.strip() for part in v.partition("="))
            fields = [f.strip() for f in rest.split("|")]
            if not sep or not NAME_RE.match(worker) or not NAME_RE.match(fields[0]) or len(fields) > 3:
                raise error(
                    f"{name}: {v[:80]!r} should look like 'worker=NAME|OWNER|DESCRIPTION' (NAME: letters, digits, "
                    "'.', '_', '-'; owner and description optional)"
                )
            if any(not f.isprintable() or len(f) > 200 for f in fields):
                raise error(f"{name}: {worker}: owner and description are one line of at most 200 characters")
            if worker in about or fields[0] in {a[0] for a in about.values()}:
                raise error(f"{name}: {worker!r} or its name {fields[0]!r} is given twice")
            about[worker] = (fields[0], *(fields[1:] + ["", ""])[:2])  # type: ignore[assignment]
        return about
    if kind == "ref_map":  # BRANCH=REVISION: the reference each branch's throughput is paired with
        refs: dict[str, str] = {}
        for v in value:
            branch, sep, revision = (part.strip() for part in v.partition("="))
            problem = refnames.ref_problem(branch) if sep else "has no '='"
            problem = problem or refnames.revision_problem(revision)
            if problem:
                raise error(f"{name}: {v!r} should look like 'BRANCH=REVISION' (e.g. 'master=REL_17_0'): {problem}")
            refs[branch] = revision
        return refs
    if kind == "option_map":
        options: dict[str, list[str]] = {}
        for v in value:
            recipe, sep, option = v.partition(":")
            if not sep or not NAME_RE.match(recipe.strip()) or not OPTION_RE.match(option.strip()):
                raise error(
                    f"{name}: {v!r} should look like 'RECIPE:KEY=VALUE' (e.g. "
                    "'pg-quick:workloads=instr-point-select-prepared')"
                )
            options.setdefault(recipe.strip(), []).append(option.strip())
        return {r: tuple(o) for r, o in options.items()}
    raise AssertionError(f"unknown setting kind {kind}")  # a bug in a settings table, not user input
