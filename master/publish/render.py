"""Jinja2 environment (autoescape, StrictUndefined) and encoders for data files loaded as scripts."""

from __future__ import annotations

import datetime as dt
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

SITE_DIR = Path(__file__).resolve().parent.parent.parent / "site"
FORMAT_VERSION = 1

_JS_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


# check_circular=False: the data are fresh trees of lists and dicts, never cyclic; the check keeps a dict entry per
# container, about a third of the encoding time of the million per-commit rows. The output bytes are the same.
_JS_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False,
                               check_circular=False)
_JSON_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False, check_circular=False)


def _script_safe(text: str) -> str:
    """Escape what could end a <script> element or confuse a JS parser (fast path: numbers-only data)."""
    if "<" in text or ">" in text or "&" in text or "\u2028" in text or "\u2029" in text:
        return text.translate(_JS_ESCAPES)
    return text


def js_literal(value: Any) -> str:
    """JSON that is safe anywhere in a script: no '<', '>', '&' or line separators can end or confuse it."""
    return _script_safe(_JS_ENCODER.encode(value))


def js_call(func: str, *args: Any) -> str:
    """`perffarm.<func>(args...);` for data files loaded with <script src> (works from file://, no fetch)."""
    if not func.isidentifier():
        raise ValueError(f"not an identifier: {func!r}")
    return f"perffarm.{func}({','.join(js_literal(a) for a in args)});\n"


def wrap_js(func: str, *args_then_json: Any) -> str:
    """`perffarm.<func>(args..., <json text>);`: a JSON document served as a script without re-encoding it."""
    *args, text = args_then_json
    if not func.isidentifier():
        raise ValueError(f"not an identifier: {func!r}")
    head = ",".join(js_literal(a) for a in args)
    return f"perffarm.{func}({head},{_script_safe(text.rstrip())});\n"


def json_document(kind: str, body: dict[str, Any], clean: bool = True) -> str:
    """A versioned, deterministic JSON file for other tools (sorted keys, NaN as null).

    clean=False skips the NaN walk for large, already-clean bodies (a NaN then raises instead of slipping out).
    """
    doc = {"format": f"perffarm-{kind}", "version": FORMAT_VERSION, **body}
    return _JSON_ENCODER.encode(_clean(doc) if clean else doc) + "\n"


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def fmt_value(x: float | None) -> str:
    """A measured value with sensible precision."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 0.01 or ax == 0:
        return f"{x:.3f}"
    return f"{x:.3g}"


def fmt_ratio(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.3f}"


def fmt_time(ts: float | int | None) -> str:
    if not ts:
        return "–"
    return dt.datetime.fromtimestamp(float(ts), dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def author_name(author: str) -> str:
    """'Name <email>' to 'Name' (the site does not republish addresses)."""
    name = author.split("<", 1)[0].strip()
    return name or "unknown"


@lru_cache(maxsize=4)
def environment(template_dir: str = str(SITE_DIR)) -> jinja2.Environment:
    """The one jinja2 environment: autoescape everywhere, unknown names are errors."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(value=fmt_value, ratio=fmt_ratio, when=fmt_time, short=lambda s: s[:12])
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
