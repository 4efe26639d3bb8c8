"""The versioned result JSON the runner writes, and its validator (documented in docs/result-schema.md).

One schema for every measurement, keyed by side (version 2): a run's result names its commit and holds its sides
(``run``, with ``reference`` before it when paired), a job's names its job and holds sides ``A`` to ``H``; each
side carries its raw samples and what its bench left (callgrind profiles, coverage, plans, waits). The master
derives what it stores from them (recipes/record.py: a run's ratios to its reference). Results of version 1 (a
run's merged workloads at the top level; ``perffarm-job-result`` for a job) are still read: one may wait in the
master's incoming/ across an upgrade.

Standard library only: the runner uses it on the worker, the master uses the same code to reject a malformed
result before anything is stored. Errors name the JSON path of the offending value.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any

SCHEMA = "perffarm-result"
SCHEMA_VERSION = 2  # keyed by side, for runs and jobs alike
RUN_RECORD_VERSION = 1  # a run's result of version 1: the form the master stores a run in (recipes/record.py)
JOB_SCHEMA = "perffarm-job-result"  # a job's result before version 2 (still read)
JOB_SCHEMA_VERSION = 1
RUN_SIDES = (("run",), ("reference", "run"))  # a run's side labels: unpaired, paired (recipes/paired.py)
CALLGRIND = "callgrind"  # optional: per instruction workload, the callgrind profile of what was counted
COVERAGE = "coverage"  # optional: which backend functions the instruction workloads exercise (recipes/pg/coverage)
COVERAGE_VERSION = 1
MAX_AREAS = 256  # source areas of a coverage figure
MAX_LISTED = 1_000  # named functions of a coverage figure
PLANS = "plans"  # optional: per analytic query, the shape of its plan (recipes/pg/plans.py)
MAX_PLANS = 256  # plans of one result
MAX_PLAN_SHAPE = 16_000  # characters of one plan's shape
WAITS = "waits"  # optional: per pgbench workload, each sample's wait events (recipes/pg/waits.py)
WAITS_REFERENCE = "waits_reference"  # a paired run's reference side's waits, in the same form
MAX_WAIT_SAMPLES = 10_000  # samples of one workload's waits
MAX_WAIT_NAMES = 64  # waits named in one sample (recipes/pg/waits.py folds the rest into `Other`)
MAX_OBSERVATIONS = 10**9  # backend-samples of one sample (a day at 1,000 Hz of 10 backends)
MAX_TICKS = 10**8
MAX_WAIT_HZ = 1000.0
WAIT_NAME_RE = re.compile(r"^[A-Za-z0-9_:]{1,128}$")
SHARE_SLACK = 1e-3  # shares are rounded to 6 decimals: their sum may pass 1 by that much
MAX_FUNCTION_NAME = 4096
SIDE_LABELS = "ABCDEFGH"
PATCH_ID_RE = re.compile(r"^[0-9a-f]{16}$")
STATUSES = ("ok", "build-failed", "bench-failed")
DIRECTIONS = ("higher", "lower")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
# A config hash is stored with every measurement and is part of each series' key: no control characters (the
# site's scan of the results DB separates keys with U+001E/U+001F).
HASH_RE = re.compile(r"^[^\x00-\x1f\x7f]+$")
# Bounds on everything the master stores (docs/result-schema.md, "Limits"): a result that breaks one is rejected
# with the path of the field, never half-stored or retried forever.
MAX_SAMPLES = 100_000  # per metric
MAX_TOTAL_SAMPLES = 1_000_000  # per result, all workloads and metrics together (the master holds it in memory)
# Every sample is 0 or of magnitude MIN_SAMPLE_MAGNITUDE ... MAX_SAMPLE_MAGNITUDE: far beyond any real measurement
# (instructions per transaction ~1e10, a petabyte in KiB ~1e12, a nanosecond in seconds 1e-9), and close enough to
# 1 that the ratio of any two samples (1e-60 ... 1e60), their squares and sums of a million of them stay finite.
MAX_SAMPLE_MAGNITUDE = 1e30
MIN_SAMPLE_MAGNITUDE = 1e-30
RATIO_UNIT = "ratio"  # a metric of ratios (the `.rqps` of a paired run): above 0
PER_SECOND = "/s"  # a unit ending in it counts something per second: with direction higher, a throughput
MAX_WORKLOADS = 1_000
MAX_METRICS = 100  # per workload
MAX_FLAGS = 64  # per workload
MAX_EXCERPT = 64_000
MAX_STRING = 64_000  # any string anywhere (only log_excerpt needs this much)
MAX_NAME = 128  # machine id, config hash, unit, flag, option and object member names
MAX_REF = 255
MAX_TEXT = 1_024  # strings in fingerprint, host_checks, options
MAX_MEMBERS = 64  # members of fingerprint, host_checks, options, timings (and objects inside them)
MAX_ITEMS = 256  # list items inside fingerprint, host_checks
MAX_TIME = 64  # started_at, finished_at
MAX_DEPTH = 16  # containers inside containers
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # SQLite's INTEGER
_MEMBER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_INF = math.inf


class ResultError(ValueError):
    """The result JSON does not follow the schema; the message says where and what to do."""


def _fail(path: str, problem: str) -> ResultError:
    return ResultError(f"{path}: {problem}")


def _show(value: Any) -> str:
    """A bounded, printable description of a value for an error message (repr escapes controls and surrogates)."""
    if isinstance(value, dict):
        return f"an object of {len(value)} members"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        return f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, str) and len(value) > 60:
        return repr(value[:60]) + "..."
    return repr(value)


def _member(path: str, key: str) -> str:
    """The JSON path of member `key` of the object at `path` (bracketed and escaped when not a plain name)."""
    if _MEMBER_RE.match(key) and len(key) <= MAX_NAME:
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key[:MAX_NAME])}]"


def text_problem(value: str, limit: int) -> str | None:
    """Why `value` cannot be stored as text (too long, NUL, a lone surrogate), or None."""
    if len(value) > limit:
        return f"a string of {len(value)} characters, more than the {limit} allowed"
    if "\x00" in value:
        return "contains NUL (\\u0000), which text cannot hold"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return f"contains a lone surrogate (U+{ord(value[e.start]):04X}): not Unicode text"
    return None


def clean_text(value: str) -> str:
    """`value` with NUL and lone surrogates replaced by U+FFFD: log text the validator accepts."""
    return _SURROGATE_RE.sub("\ufffd", value.replace("\x00", "\ufffd"))


def _check_values(value: Any, path: str, depth: int = 0) -> None:
    """Every value anywhere: strings are text of bounded length, integers fit SQLite, floats are finite, members
    have bounded names, containers are nested at most MAX_DEPTH deep. A `callgrind` member (profiles keyed by
    function names, which may be longer than member names) is checked by _callgrind instead."""
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise _fail(path, f"nested deeper than {MAX_DEPTH} levels")
        for key, item in value.items():
            if key == CALLGRIND and depth <= 2:
                continue
            where = _member(path, key)
            problem = text_problem(key, MAX_NAME)
            if problem:
                raise _fail(where, f"member name {problem}")
            _check_values(item, where, depth + 1)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise _fail(path, f"nested deeper than {MAX_DEPTH} levels")
        for i, item in enumerate(value):
            kind = type(item)
            if kind is float:  # the common case (samples), checked inline
                if not -_INF < item < _INF:
                    raise _fail(f"{path}[{i}]", f"expected a finite number, got {item!r}")
            elif kind is int:
                if not INT_MIN <= item <= INT_MAX:
                    raise _fail(f"{path}[{i}]", f"{_show(item)} is outside the signed 64-bit range")
            else:
                _check_values(item, f"{path}[{i}]", depth + 1)
    elif isinstance(value, str):
        problem = text_problem(value, MAX_STRING)
        if problem:
            raise _fail(path, problem)
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise _fail(path, f"{_show(value)} is outside the signed 64-bit range")
    elif isinstance(value, float):
        if not -_INF < value < _INF:
            raise _fail(path, f"expected a finite number, got {value!r}")
    else:
        raise _fail(path, f"{type(value).__name__} is not a JSON value")


def _small(value: Any, path: str, depth: int = 0) -> None:
    """A free-form part (fingerprint, host_checks, options): bounded members, items and strings."""
    if isinstance(value, dict):
        if len(value) > MAX_MEMBERS:
            raise _fail(path, f"an object of {len(value)} members, more than the {MAX_MEMBERS} allowed")
        for key, item in value.items():
            _small(item, _member(path, key), depth + 1)
    elif isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise _fail(path, f"a list of {len(value)} items, more than the {MAX_ITEMS} allowed")
        for i, item in enumerate(value):
            _small(item, f"{path}[{i}]", depth + 1)
    elif isinstance(value, str) and len(value) > MAX_TEXT:
        raise _fail(path, f"a string of {len(value)} characters, more than the {MAX_TEXT} allowed")


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object, got {type(value).__name__}")
    return value


def _str(
    obj: dict[str, Any], key: str, path: str, pattern: re.Pattern[str] | None = None, limit: int = MAX_NAME
) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(f"{path}.{key}", f"expected a non-empty string, got {_show(value)}")
    if len(value) > limit:
        raise _fail(f"{path}.{key}", f"a string of {len(value)} characters, more than the {limit} allowed")
    if pattern is not None and not pattern.match(value):
        raise _fail(f"{path}.{key}", f"{_show(value)} does not match {pattern.pattern}")
    return value


def _int(obj: dict[str, Any], key: str, path: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT_MAX:
        raise _fail(f"{path}.{key}", f"expected an integer from 0 to {INT_MAX}, got {_show(value)}")
    return value


def _time(obj: dict[str, Any], key: str) -> None:
    if key not in obj:
        return
    value = obj[key]
    if not isinstance(value, str) or len(value) > MAX_TIME:
        raise _fail(f"$.{key}", f"expected an ISO 8601 time of at most {MAX_TIME} characters, got {_show(value)}")
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        raise _fail(f"$.{key}", f"{_show(value)} is not an ISO 8601 time such as 2026-11-22T03:04:12+00:00") from None


def parse_json(data: bytes) -> Any:
    """A result file's bytes as JSON (not yet validated); ResultError says why they are not."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise ResultError(f"result is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise ResultError(f"result is not UTF-8 text: {e}") from None
    except RecursionError:
        raise ResultError(f"$: result is nested too deeply to read (the schema allows {MAX_DEPTH} levels)") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts (4,300)
        raise ResultError(f"result is not valid JSON for the schema: {str(e)[:200]}") from None


def validate(doc: Any) -> dict[str, Any]:
    """Check a parsed result document of any version this master reads (a run's or a job's); return it unchanged
    or raise ResultError naming the bad field."""
    root = _obj(doc, "$")
    schema, version = root.get("schema"), root.get("schema_version")
    if schema == JOB_SCHEMA:  # a job's result before version 2: the same members as a job's of version 2
        if version != JOB_SCHEMA_VERSION:
            raise _fail(
                "$.schema_version",
                f"this master reads job results of version {JOB_SCHEMA_VERSION}, got {_show(version)}",
            )
        if "job" not in root:
            raise _fail("$.job", "expected the job's id")
    elif schema != SCHEMA:
        raise _fail("$.schema", f"expected {SCHEMA!r}, got {_show(schema)}; is this a perffarm result?")
    elif version == RUN_RECORD_VERSION:
        return validate_record(root)
    elif version != SCHEMA_VERSION:
        raise _fail(
            "$.schema_version",
            f"this master reads versions {RUN_RECORD_VERSION} and {SCHEMA_VERSION}, got {_show(version)}; "
            "the worker's recipes and the master are out of step (reconfig the master)",
        )
    _check_values(root, "$")
    status = _common(root)
    if ("commit" in root) == ("job" in root):
        raise _fail("$", "expected either commit (a run's result) or job (a job's result)")
    run = "commit" in root
    if run:
        commit = _obj(root["commit"], "$.commit")
        _str(commit, "sha", "$.commit", SHA_RE)
        _str(commit, "ref", "$.commit", limit=MAX_REF)
    else:
        _int(root, "job", "$")
    sides = root.get("sides")
    lo, hi = (1, 2) if run else (2, len(SIDE_LABELS))
    if not isinstance(sides, list) or not lo <= len(sides) <= hi:
        raise _fail("$.sides", f"expected a list of {lo} to {hi} sides, got {_show(sides)}")
    labels = RUN_SIDES[len(sides) - 1] if run else SIDE_LABELS
    total = 0
    for i, side in enumerate(sides):
        path = f"$.sides[{i}]"
        if _obj(side, path).get("label") != labels[i]:
            order = "a run's sides: reference (when paired), run" if run else "sides in label order"
            raise _fail(f"{path}.label", f"expected {labels[i]!r} ({order}), got {_show(side.get('label'))}")
        total = _side(side, path, status, total, run=run)
    if run:
        own = f"$.sides[{len(sides) - 1}]"
        if sides[-1]["sha"] != root["commit"]["sha"]:
            raise _fail(f"{own}.sha", "the run's side must be the commit the result names ($.commit.sha)")
        if status == "ok" and not sides[-1]["workloads"]:
            raise _fail(f"{own}.workloads", "an ok result must have at least one workload")
    return root


def validate_job(doc: Any) -> dict[str, Any]:
    """Check a parsed job result (every side's samples side by side); return it or raise ResultError."""
    root = _obj(doc, "$")
    if root.get("schema") == SCHEMA and root.get("schema_version") == RUN_RECORD_VERSION:
        raise _fail("$.schema_version", "a commit's run's result of version 1, not a job's: is this the job's file?")
    root = validate(root)
    if "job" not in root:
        raise _fail("$.job", "expected a job's result, got a commit's run's ($.commit); is this the job's file?")
    return root


def _side(side: Any, path: str, status: str, total: int, run: bool) -> int:
    """Check one side of a version 2 result; returns the running count of samples."""
    side = _obj(side, path)
    _str(side, "sha", path, SHA_RE)
    if side.get("patch") is not None:
        if run:
            raise _fail(f"{path}.patch", "a commit's run has no patch")
        _str(side, "patch", path, PATCH_ID_RE)
    if "version" in side:
        _str(side, "version", path, limit=MAX_NAME)
    # a run's sides may each be empty (a paired run's reference measures no instruction workload): the run's own
    # side must not be when the run is ok (checked by the caller)
    total = _workloads(side.get("workloads"), status == "ok" and not run, f"{path}.workloads", total)
    if CALLGRIND in side:
        _callgrind(side[CALLGRIND], f"{path}.{CALLGRIND}")
    if COVERAGE in side:
        _coverage(side[COVERAGE], f"{path}.{COVERAGE}")
    if WAITS in side:
        _waits(side[WAITS], f"{path}.{WAITS}", {w.get("name") for w in side["workloads"]})
    if PLANS in side:
        _plans(side[PLANS], f"{path}.{PLANS}")
    return total


def validate_record(doc: Any) -> dict[str, Any]:
    """Check a run's result of version 1, which is also the form the master stores a run in (recipes/record.py):
    the commit's workloads at the top level, a paired run's ratios merged into them."""
    root = _obj(doc, "$")
    if root.get("schema") != SCHEMA or root.get("schema_version") != RUN_RECORD_VERSION:
        raise _fail("$.schema_version", f"expected {SCHEMA!r} version {RUN_RECORD_VERSION}")
    _check_values(root, "$")
    commit = _obj(root.get("commit"), "$.commit")
    _str(commit, "sha", "$.commit", SHA_RE)
    _str(commit, "ref", "$.commit", limit=MAX_REF)
    status = _common(root)
    _workloads(root.get("workloads"), status == "ok")
    if CALLGRIND in root:
        _callgrind(root[CALLGRIND], f"$.{CALLGRIND}")
    if COVERAGE in root:
        _coverage(root[COVERAGE], f"$.{COVERAGE}")
    if PLANS in root:
        _plans(root[PLANS], f"$.{PLANS}")
    names = {w.get("name") for w in root["workloads"]}
    for key in (WAITS, WAITS_REFERENCE):
        if key in root:
            _waits(root[key], f"$.{key}", names)
    return root


def _callgrind(value: Any, path: str) -> None:
    """{workload: {"queries": N, "profile": <recipes.callgrind JSON>}}: each profile checked by its own reader,
    every function name bounded text."""
    from recipes.callgrind import MAX_JSON_FUNCTIONS, Profile

    profiles = _obj(value, path)
    if len(profiles) > MAX_WORKLOADS:
        raise _fail(path, f"{len(profiles)} profiles, more than the {MAX_WORKLOADS} allowed")
    for name, entry in profiles.items():
        where = _member(path, name)
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise _fail(where, "expected a workload name as the member name")
        entry = _obj(entry, where)
        queries = entry.get("queries")
        if isinstance(queries, bool) or not isinstance(queries, int) or not 1 <= queries <= 10**9:
            raise _fail(f"{where}.queries", f"expected the number of counted queries, got {_show(queries)}")
        doc = _obj(entry.get("profile"), f"{where}.profile")
        functions = doc.get("functions")
        if isinstance(functions, dict):
            if len(functions) > MAX_JSON_FUNCTIONS:
                raise _fail(f"{where}.profile.functions", f"more than {MAX_JSON_FUNCTIONS} functions")
            for fn in functions:
                problem = text_problem(fn, MAX_FUNCTION_NAME) if isinstance(fn, str) else "is not text"
                if problem:
                    raise _fail(f"{where}.profile.functions", f"a function name {problem}")
        for k, f in enumerate(doc.get("files") or []):
            problem = text_problem(f, MAX_FUNCTION_NAME) if isinstance(f, str) else "is not text"
            if problem:
                raise _fail(f"{where}.profile.files[{k}]", problem)
        try:
            Profile.from_json(doc)
        except (ValueError, TypeError) as e:
            raise _fail(f"{where}.profile", str(e)) from None


def _pair(value: Any, path: str) -> None:
    """[exercised, total]: two counts, the first at most the second."""
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT_MAX for v in value)
    )
    if not ok or value[0] > value[1]:
        raise _fail(path, f"expected [exercised, total] with 0 <= exercised <= total, got {_show(value)}")


def _coverage(value: Any, path: str) -> None:
    """{"version": 1, "rule": share, "listed": N, "groups": {group: {"functions": [hit, total], "areas": {area:
    [hit, total]}, "listed": [function, ...]}}}: the coverage figure of a run (recipes/pg/coverage.py)."""
    doc = _obj(value, path)
    if doc.get("version") != COVERAGE_VERSION:
        raise _fail(f"{path}.version", f"expected {COVERAGE_VERSION}, got {_show(doc.get('version'))}")
    rule = doc.get("rule")
    if isinstance(rule, bool) or not isinstance(rule, (int, float)) or not 0 < rule < 1:
        raise _fail(f"{path}.rule", f"expected the share of a workload's instructions (0 to 1), got {_show(rule)}")
    listed = doc.get("listed")
    if isinstance(listed, bool) or not isinstance(listed, int) or not 0 <= listed <= MAX_LISTED:
        raise _fail(f"{path}.listed", f"expected the number of named functions, got {_show(listed)}")
    groups = _obj(doc.get("groups"), f"{path}.groups")
    if len(groups) > MAX_MEMBERS:
        raise _fail(f"{path}.groups", f"{len(groups)} groups, more than the {MAX_MEMBERS} allowed")
    for name, group in groups.items():
        where = _member(f"{path}.groups", name)
        if not NAME_RE.match(name):
            raise _fail(where, "expected a group name as the member name")
        group = _obj(group, where)
        _pair(group.get("functions"), f"{where}.functions")
        areas = _obj(group.get("areas"), f"{where}.areas")
        if len(areas) > MAX_AREAS:
            raise _fail(f"{where}.areas", f"{len(areas)} areas, more than the {MAX_AREAS} allowed")
        for area, pair in areas.items():
            _pair(pair, _member(f"{where}.areas", area))
        hits = group.get("listed")
        if not isinstance(hits, list) or len(hits) > listed or not all(isinstance(h, str) and h for h in hits):
            raise _fail(f"{where}.listed", f"expected at most {listed} function names, got {_show(hits)}")


def _plans(value: Any, path: str) -> None:
    """{workload: shape}: the plan of each analytic query, one node a line (recipes/pg/plans.py)."""
    doc = _obj(value, path)
    if len(doc) > MAX_PLANS:
        raise _fail(path, f"{len(doc)} plans, more than the {MAX_PLANS} allowed")
    for name, shape in doc.items():
        where = _member(path, name)
        if not NAME_RE.match(name):
            raise _fail(where, "expected a workload name as the member name")
        if not isinstance(shape, str) or not shape.strip() or len(shape) > MAX_PLAN_SHAPE:
            raise _fail(where, f"expected a plan's shape of 1 to {MAX_PLAN_SHAPE:,} characters, got {_show(shape)}")
        if any(not (c.isprintable() or c == "\n") for c in shape):
            raise _fail(where, "a plan's shape holds a control character; expected node names, one a line")


def _waits(value: Any, path: str, workloads: set[Any]) -> None:
    """{workload: [{observations, ticks, hz, shares: {wait: share}}, ...]}: each sample's wait events, sampled from
    pg_stat_activity (recipes/pg/waits.py). Names are `[A-Za-z0-9_:]` (`LWLock:WALWrite`, `CPU`), shares of the
    observations in [0, 1] adding up to at most 1, counts bounded: a worker's (or a try-job's server's) word."""
    doc = _obj(value, path)
    for name, samples in doc.items():
        where = _member(path, name)
        if name not in workloads:
            raise _fail(where, "names no workload of this result: waits belong to a measured workload")
        if not isinstance(samples, list) or not 1 <= len(samples) <= MAX_WAIT_SAMPLES:
            raise _fail(where, f"expected a list of 1 to {MAX_WAIT_SAMPLES:,} samples, got {_show(samples)}")
        for i, sample in enumerate(samples):
            at = f"{where}[{i}]"
            sample = _obj(sample, at)
            extra = set(sample) - {"observations", "ticks", "hz", "shares"}
            if extra:
                raise _fail(at, f"unknown member {sorted(extra)[0]!r}: expected observations, ticks, hz, shares")
            n = sample.get("observations")
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_OBSERVATIONS:
                raise _fail(f"{at}.observations", f"expected an integer from 0 to {MAX_OBSERVATIONS:,}, got {_show(n)}")
            ticks = sample.get("ticks")
            if isinstance(ticks, bool) or not isinstance(ticks, int) or not 0 <= ticks <= MAX_TICKS:
                raise _fail(f"{at}.ticks", f"expected an integer from 0 to {MAX_TICKS:,}, got {_show(ticks)}")
            hz = sample.get("hz")
            if isinstance(hz, bool) or not isinstance(hz, int | float) or not 0 < hz <= MAX_WAIT_HZ:
                raise _fail(f"{at}.hz", f"expected a rate in Hz above 0 and at most {MAX_WAIT_HZ:.0f}, got {_show(hz)}")
            shares = _obj(sample.get("shares"), f"{at}.shares")
            if len(shares) > MAX_WAIT_NAMES:
                raise _fail(f"{at}.shares", f"{len(shares)} waits, more than the {MAX_WAIT_NAMES} allowed")
            if n == 0 and shares:
                raise _fail(f"{at}.shares", "shares of no observation: expected {} when observations is 0")
            for wait, share in shares.items():
                w_at = _member(f"{at}.shares", wait)
                if not WAIT_NAME_RE.match(wait):
                    raise _fail(w_at, "a wait's name is Type:Event or CPU, of 1 to 128 letters, digits, _ and :")
                if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
                    raise _fail(w_at, f"expected a share from 0 to 1, got {_show(share)}")
            if sum(shares.values()) > 1 + SHARE_SLACK:
                raise _fail(f"{at}.shares", f"the shares add up to {sum(shares.values()):.4f}, more than 1")


def _common(root: dict[str, Any]) -> str:
    """The members a run result and a job result share (recipe, machine, status, excerpt, times); the status."""
    recipe = _obj(root.get("recipe"), "$.recipe")
    _str(recipe, "name", "$.recipe", NAME_RE)
    _int(recipe, "version", "$.recipe")
    _str(recipe, "config_hash", "$.recipe", HASH_RE)
    if "options" in recipe:
        options = _obj(recipe["options"], "$.recipe.options")
        _small(options, "$.recipe.options")
        for key, value in options.items():
            if not isinstance(value, str):
                raise _fail(_member("$.recipe.options", key), f"expected a string, got {_show(value)}")
    machine = _obj(root.get("machine"), "$.machine")
    _str(machine, "id", "$.machine")
    fingerprint = _obj(machine.get("fingerprint"), "$.machine.fingerprint")
    _small(fingerprint, "$.machine.fingerprint")
    for key in ("cpu_model", "kernel", "compiler"):
        _str(fingerprint, key, "$.machine.fingerprint", limit=MAX_TEXT)
    for key in ("cores", "memory_bytes"):
        _int(fingerprint, key, "$.machine.fingerprint")
    checks = _obj(root.get("host_checks", {}), "$.host_checks")
    _small(checks, "$.host_checks")
    if not isinstance(checks.get("noisy", False), bool):
        raise _fail("$.host_checks.noisy", f"expected true or false, got {_show(checks['noisy'])}")
    reasons = checks.get("noisy_reasons", [])
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise _fail("$.host_checks.noisy_reasons", "expected a list of strings")
    status = root.get("status")
    if status not in STATUSES:
        raise _fail("$.status", f"expected one of {', '.join(STATUSES)}, got {_show(status)}")
    excerpt = root.get("log_excerpt", "")
    if not isinstance(excerpt, str) or len(excerpt) > MAX_EXCERPT:
        raise _fail("$.log_excerpt", f"expected a string of at most {MAX_EXCERPT} characters")
    if status != "ok" and not excerpt:
        raise _fail("$.log_excerpt", f"a {status} result must carry the log excerpt that explains it")
    if "timings" in root:
        timings = _obj(root["timings"], "$.timings")
        _small(timings, "$.timings")
        for key, value in timings.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _fail(_member("$.timings", key), f"expected a number of seconds, got {_show(value)}")
    _time(root, "started_at")
    _time(root, "finished_at")
    return str(status)


def _workloads(workloads: Any, required: bool, path: str = "$.workloads", total: int = 0) -> int:
    """Check a list of workload results (`required`: at least one); returns the running count of samples (bounded
    per whole result)."""
    if not isinstance(workloads, list):
        raise _fail(path, "expected a list")
    if required and not workloads:
        raise _fail(path, "an ok result must have at least one workload")
    if len(workloads) > MAX_WORKLOADS:
        raise _fail(path, f"{len(workloads)} workloads, more than the {MAX_WORKLOADS} allowed")
    seen: set[str] = set()
    for i, w in enumerate(workloads):
        wpath = f"{path}[{i}]"
        w = _obj(w, wpath)
        wname = _str(w, "name", wpath, NAME_RE)
        if wname in seen:
            raise _fail(f"{wpath}.name", f"workload {wname!r} appears twice")
        seen.add(wname)
        if "config_hash" in w:  # optional: without it the workload's series identity is recipe.config_hash
            _str(w, "config_hash", wpath, NAME_RE)
        flags = w.get("flags", [])
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise _fail(f"{wpath}.flags", "expected a list of strings")
        if len(flags) > MAX_FLAGS:
            raise _fail(f"{wpath}.flags", f"{len(flags)} flags, more than the {MAX_FLAGS} allowed")
        for k, flag in enumerate(flags):
            if not flag or len(flag) > MAX_NAME:
                raise _fail(f"{wpath}.flags[{k}]", f"expected a flag of 1 to {MAX_NAME} characters, got {_show(flag)}")
        metrics = w.get("metrics")
        if not isinstance(metrics, list) or not metrics:
            raise _fail(f"{wpath}.metrics", "expected a non-empty list")
        if len(metrics) > MAX_METRICS:
            raise _fail(f"{wpath}.metrics", f"{len(metrics)} metrics, more than the {MAX_METRICS} allowed")
        mseen: set[str] = set()
        for j, m in enumerate(metrics):
            mpath = f"{wpath}.metrics[{j}]"
            m = _obj(m, mpath)
            mname = _str(m, "name", mpath, NAME_RE)
            if mname in mseen:
                raise _fail(f"{mpath}.name", f"metric {mname!r} appears twice in workload {wname!r}")
            mseen.add(mname)
            _str(m, "unit", mpath)
            if m.get("direction") not in DIRECTIONS:
                raise _fail(f"{mpath}.direction", f"expected 'higher' or 'lower', got {_show(m.get('direction'))}")
            samples = m.get("samples")
            if not isinstance(samples, list) or not samples:
                raise _fail(f"{mpath}.samples", "expected a non-empty list of numbers")
            if len(samples) > MAX_SAMPLES:
                raise _fail(f"{mpath}.samples", f"{len(samples)} samples, more than the {MAX_SAMPLES} allowed")
            total += len(samples)
            if total > MAX_TOTAL_SAMPLES:
                raise _fail(path, f"more than {MAX_TOTAL_SAMPLES} samples in all (at {mpath})")
            _samples(samples, f"{mpath}.samples", m["unit"], m["direction"])
    return total


def is_throughput(unit: str, direction: str) -> bool:
    """A metric that counts something per second, higher is better (tx/s, ops/s, rows/s): rQPS applies to it."""
    return direction == "higher" and unit.endswith(PER_SECOND)


def must_be_positive(unit: str, direction: str) -> bool:
    """Whether a metric's samples must be above 0, not only at least 0: a throughput or a ratio is what ratios
    (rQPS, a job's B/A) are formed of, and 0 there is a benchmark that measured nothing."""
    return unit == RATIO_UNIT or is_throughput(unit, direction)


def _samples(samples: list[Any], path: str, unit: str, direction: str) -> None:
    """Every sample a finite number that the metric can be (docs/result-schema.md, "What a sample can be"): no
    metric is negative (each is a rate, a time, a count, a size or a ratio), a throughput or a ratio is above 0,
    and 0 or of magnitude 1e-30 ... 1e30, so any ratio of two samples is finite. Integers are bounded to SQLite's
    range by _check_values."""
    positive = must_be_positive(unit, direction)
    lo, hi = MIN_SAMPLE_MAGNITUDE, MAX_SAMPLE_MAGNITUDE
    for k, v in enumerate(samples):
        kind = type(v)
        if (kind is float or kind is int) and (lo <= v <= hi or (v == 0 and not positive)):
            continue
        raise _fail(f"{path}[{k}]", sample_problem(v, unit, direction) or f"expected a finite number, got {v!r}")


def sample_problem(v: Any, unit: str, direction: str) -> str | None:
    """Why `v` cannot be a sample of a metric in `unit` with `direction` (None: it can): the rule it breaks."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        return f"expected a finite number, got {_show(v)}"
    if abs(v) > MAX_SAMPLE_MAGNITUDE:
        return f"{_show(v)} is beyond ±{MAX_SAMPLE_MAGNITUDE:g}: not a plausible measurement"
    what = f"{_show(v)} {unit}"[:160]
    if must_be_positive(unit, direction) and v <= 0:
        kind = "a ratio" if unit == RATIO_UNIT else "a throughput (per second, higher is better)"
        return (
            f"{what}: {kind} must be above 0 to form ratios; a benchmark that measured nothing must report "
            "bench-failed, not a number"
        )
    if v < 0:
        return f"{what}: a metric cannot be negative (it is a rate, a time, a count, a size or a ratio)"
    if v != 0 and abs(v) < MIN_SAMPLE_MAGNITUDE:
        return (
            f"{_show(v)} is below {MIN_SAMPLE_MAGNITUDE:g} and not 0: not a plausible measurement (ratios to it "
            "would overflow)"
        )
    return None
