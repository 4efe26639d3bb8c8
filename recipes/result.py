"""The versioned result JSON a recipe run produces, and its validator (documented in docs/result-schema.md).

Standard library only: the runner uses it on the worker, the master uses the same code to reject a malformed
result before anything is stored. Errors name the JSON path of the offending value.
"""

from __future__ import annotations

import math
import re
from typing import Any

SCHEMA = "perffarm-result"
SCHEMA_VERSION = 1
STATUSES = ("ok", "build-failed", "bench-failed")
DIRECTIONS = ("higher", "lower")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
MAX_SAMPLES = 100_000
MAX_EXCERPT = 64_000


class ResultError(ValueError):
    """The result JSON does not follow the schema; the message says where and what to do."""


def _fail(path: str, problem: str) -> ResultError:
    return ResultError(f"{path}: {problem}")


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object, got {type(value).__name__}")
    return value


def _str(obj: dict[str, Any], key: str, path: str, pattern: re.Pattern[str] | None = None) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(f"{path}.{key}", f"expected a non-empty string, got {value!r}"[:200])
    if pattern is not None and not pattern.match(value):
        raise _fail(f"{path}.{key}", f"{value!r} does not match {pattern.pattern}"[:200])
    return value


def _int(obj: dict[str, Any], key: str, path: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(f"{path}.{key}", f"expected a non-negative integer, got {value!r}"[:200])
    return value


def validate(doc: Any) -> dict[str, Any]:
    """Check a parsed result document; return it unchanged or raise ResultError naming the bad field."""
    root = _obj(doc, "$")
    if root.get("schema") != SCHEMA:
        raise _fail("$.schema", f"expected {SCHEMA!r}, got {root.get('schema')!r}; is this a perffarm result?")
    version = root.get("schema_version")
    if version != SCHEMA_VERSION:
        raise _fail(
            "$.schema_version",
            f"this master reads version {SCHEMA_VERSION}, got {version!r}; "
            "the worker's recipes and the master are out of step (reconfig the master)",
        )
    commit = _obj(root.get("commit"), "$.commit")
    _str(commit, "sha", "$.commit", SHA_RE)
    _str(commit, "ref", "$.commit")
    recipe = _obj(root.get("recipe"), "$.recipe")
    _str(recipe, "name", "$.recipe", NAME_RE)
    _int(recipe, "version", "$.recipe")
    _str(recipe, "config_hash", "$.recipe")
    machine = _obj(root.get("machine"), "$.machine")
    _str(machine, "id", "$.machine")
    fingerprint = _obj(machine.get("fingerprint"), "$.machine.fingerprint")
    for key in ("cpu_model", "kernel", "compiler"):
        _str(fingerprint, key, "$.machine.fingerprint")
    for key in ("cores", "memory_bytes"):
        _int(fingerprint, key, "$.machine.fingerprint")
    _obj(root.get("host_checks", {}), "$.host_checks")
    status = root.get("status")
    if status not in STATUSES:
        raise _fail("$.status", f"expected one of {', '.join(STATUSES)}, got {status!r}"[:200])
    excerpt = root.get("log_excerpt", "")
    if not isinstance(excerpt, str) or len(excerpt) > MAX_EXCERPT:
        raise _fail("$.log_excerpt", f"expected a string of at most {MAX_EXCERPT} characters")
    if status != "ok" and not excerpt:
        raise _fail("$.log_excerpt", f"a {status} result must carry the log excerpt that explains it")
    workloads = root.get("workloads")
    if not isinstance(workloads, list):
        raise _fail("$.workloads", "expected a list")
    if status == "ok" and not workloads:
        raise _fail("$.workloads", "an ok result must have at least one workload")
    seen: set[str] = set()
    for i, w in enumerate(workloads):
        wpath = f"$.workloads[{i}]"
        w = _obj(w, wpath)
        wname = _str(w, "name", wpath, NAME_RE)
        if wname in seen:
            raise _fail(f"{wpath}.name", f"workload {wname!r} appears twice")
        seen.add(wname)
        flags = w.get("flags", [])
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise _fail(f"{wpath}.flags", "expected a list of strings")
        metrics = w.get("metrics")
        if not isinstance(metrics, list) or not metrics:
            raise _fail(f"{wpath}.metrics", "expected a non-empty list")
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
                raise _fail(f"{mpath}.direction", f"expected 'higher' or 'lower', got {m.get('direction')!r}")
            samples = m.get("samples")
            if not isinstance(samples, list) or not samples:
                raise _fail(f"{mpath}.samples", "expected a non-empty list of numbers")
            if len(samples) > MAX_SAMPLES:
                raise _fail(f"{mpath}.samples", f"more than {MAX_SAMPLES} samples")
            for k, v in enumerate(samples):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise _fail(f"{mpath}.samples[{k}]", f"expected a finite number, got {v!r}"[:200])
    return root
