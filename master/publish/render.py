"""Jinja2 environment (autoescape, StrictUndefined) and encoders for data files loaded as scripts."""

from __future__ import annotations

import datetime as dt
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
import numpy as np
from markupsafe import Markup

from master.textsafe import visible

SITE_DIR = Path(__file__).resolve().parent.parent.parent / "site"
FORMAT_VERSION = 1

_JS_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


# check_circular=False: the data are fresh trees of lists and dicts, never cyclic; the check keeps a dict entry per
# container, about a third of the encoding time of the million per-commit rows. The output bytes are the same.
_JS_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False, check_circular=False
)
_JSON_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False, check_circular=False)


def script_safe(text: str) -> str:
    """Escape what could end a <script> element or confuse a JS parser (fast path: numbers-only data)."""
    if "<" in text or ">" in text or "&" in text or "\u2028" in text or "\u2029" in text:
        return text.translate(_JS_ESCAPES)
    return text


def js_literal(value: Any) -> str:
    """JSON that is safe anywhere in a script: no '<', '>', '&' or line separators can end or confuse it."""
    return script_safe(_JS_ENCODER.encode(value))


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
    return f"perffarm.{func}({head},{script_safe(text.rstrip())});\n"


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
    return dt.datetime.fromtimestamp(float(ts), dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def author_name(author: str) -> str:
    """'Name <email>' to 'Name' (the site does not republish addresses)."""
    name = author.split("<", 1)[0].strip()
    return name or "unknown"


def _finalize(value: Any) -> Any:
    """Every text a template writes: controls and bidi characters shown as escapes (autoescape then escapes HTML);
    markup the templates made themselves is left alone. The Atom feed stays well-formed XML this way too."""
    return visible(value, lines=True) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


@lru_cache(maxsize=4)
def environment(template_dir: str = str(SITE_DIR)) -> jinja2.Environment:
    """The one jinja2 environment: autoescape everywhere, unknown names are errors, no raw control characters."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters.update(value=fmt_value, ratio=fmt_ratio, when=fmt_time, short=lambda s: s[:12], safe_svg=safe_svg)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


# ------------------------------------------------------------------------------------------------ text columns
# Large JSON arrays of numbers (a million per-commit rows, the series chunks) built as byte matrices with integer
# array operations instead of one Python object and one encoder call per value. A column is (m, keep): row i's
# text is m[i][keep[i]] (ASCII, or UTF-8 for `vocab` columns). The bytes are what the JSON encoders write.

Column = tuple[np.ndarray, np.ndarray]
_P10 = 10 ** np.arange(19, dtype=np.int64)


def _digits(v: np.ndarray, width: int, m: np.ndarray, keep: np.ndarray, first: int) -> None:
    """Non-negative integers v right-aligned in m[:, first:first + width], leading zeros not kept (a lone 0 is)."""
    lead = np.ones(len(v), dtype=bool)
    for j in range(width):
        digit = (v // _P10[width - 1 - j]) % 10
        m[:, first + j] = digit + 48
        lead &= digit == 0
        keep[:, first + j] = True if j == width - 1 else ~lead


def _width(v: np.ndarray) -> int:
    return len(str(int(v.max()))) if len(v) else 1


def int_column(v: np.ndarray, null: np.ndarray | None = None) -> Column:
    """Integers as JSON (int.__repr__); `null` marks values written as null."""
    v = np.asarray(v, dtype=np.int64)
    size = len(v)
    if null is not None and null.any():
        v = np.where(null, 0, v)
    neg = v < 0
    a = np.abs(v)
    width = max(_width(a), 4 if null is not None and null.any() else 1)
    m = np.empty((size, 1 + width), dtype=np.uint8)
    keep = np.empty((size, 1 + width), dtype=bool)
    m[:, 0] = ord("-")
    keep[:, 0] = neg
    _digits(a, width, m, keep, 1)
    if null is not None and null.any():
        m[null, 1 + width - 4 :] = np.frombuffer(b"null", dtype=np.uint8)
        keep[null, 1:] = False
        keep[null, 1 + width - 4 :] = True
    return m, keep


def sig6_decimals(a: np.ndarray) -> np.ndarray:
    """Decimal places that keep 6 significant digits of each value (5 where a value has no magnitude: 0, NaN)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.floor(np.log10(np.abs(a)))
    return np.clip(5 - np.where(np.isfinite(mag), mag, 0), 0, 15).astype(np.int64)


def float_column(x: np.ndarray, decimals: np.ndarray | int, nan: bool = False) -> Column | None:
    """What the JSON encoders write for each float of x (float.__repr__; NaN as null when `nan`), for values
    already rounded to `decimals` places (per value or one for all). A value rounded to d places is the double
    nearest to K / 10**d; while the spacing of doubles there is finer than 10**-d, the shortest decimal that
    reads back as it (which repr writes) is K / 10**d without trailing zeros. None when that is not proven for
    every value (not exactly K / 10**d, K >= 2**52, below 1e-4 where repr switches to exponents, zero, an
    infinity, NaN without `nan`): the caller then encodes as before."""
    x = np.asarray(x, dtype=np.float64)
    size = len(x)
    nans = np.isnan(x)
    if nans.any() and not nan:
        return None
    d = np.broadcast_to(np.asarray(decimals, dtype=np.int64), x.shape)
    if size and (d.min() < 0 or d.max() > 15):
        return None
    a = np.where(nans, 1.0, np.abs(x))
    scale = _P10[d].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.rint(a * scale)
        if not ((a >= 1e-4) & (k < 2.0**52) & (k / scale == a)).all():  # False for an infinity
            return None
    k = k.astype(np.int64)
    whole = k // _P10[d]
    wf = max(int(d.max()) if size else 1, 1)  # fraction digits, left-aligned: "null" fits in the >= 4 columns
    frac = (k - whole * _P10[d]) * _P10[wf - d]
    wi = _width(whole)
    width = 1 + wi + 1 + wf
    m = np.empty((size, width), dtype=np.uint8)
    keep = np.empty((size, width), dtype=bool)
    m[:, 0] = ord("-")
    keep[:, 0] = np.signbit(x) & ~nans
    _digits(whole, wi, m, keep, 1)
    m[:, 1 + wi] = ord(".")
    keep[:, 1 + wi] = True
    tail = np.ones(size, dtype=bool)  # in the fraction's trailing zeros
    for j in range(wf - 1, -1, -1):
        digit = (frac // _P10[wf - 1 - j]) % 10
        m[:, 2 + wi + j] = digit + 48
        tail &= digit == 0
        keep[:, 2 + wi + j] = True if j == 0 else ~tail  # at least one fraction digit: "1.0"
    if nans.any():
        m[nans, :4] = np.frombuffer(b"null", dtype=np.uint8)
        keep[nans] = False
        keep[nans, :4] = True
    return m, keep


def text_column(texts: list[str]) -> Column:
    """Texts that are already JSON (stored sample arrays), one per row, made script-safe (script_safe): spliced as
    they are, never decoded and re-encoded. One join and a length per row, no per-row Python encoding."""
    joined = "".join(texts)
    if "<" in joined or ">" in joined or "&" in joined or "\u2028" in joined or "\u2029" in joined:
        texts = [script_safe(t) for t in texts]
        joined = "".join(texts)
    raw = joined.encode("utf-8")
    if len(raw) == len(joined):  # ASCII (what json.dumps writes): a character is a byte
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    else:
        lengths = np.array([len(t.encode("utf-8")) for t in texts], dtype=np.int64)
    width = int(lengths.max()) if len(texts) else 1
    keep = np.arange(max(width, 1))[None, :] < lengths[:, None]
    m = np.zeros(keep.shape, dtype=np.uint8)
    m[keep] = np.frombuffer(raw, dtype=np.uint8)
    return m, keep


def vocab(texts: list[str]) -> Column:
    """A small vocabulary of (already encoded) texts as a column, one row per text: index it with codes."""
    raw = [t.encode("utf-8") for t in texts]
    width = max((len(b) for b in raw), default=0) or 1
    joined = np.frombuffer(b"".join(b.ljust(width, b"\0") for b in raw), dtype=np.uint8)
    lengths = np.array([len(b) for b in raw], dtype=np.int64)
    return joined.reshape(len(raw), width), np.arange(width)[None, :] < lengths[:, None]


def vocab_column(v: Column, codes: np.ndarray) -> Column:
    """v's texts[codes[i]] per row."""
    return v[0][codes], v[1][codes]


def literal_column(text: str, size: int) -> Column:
    b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.broadcast_to(b, (size, len(b))), np.ones((size, len(b)), dtype=bool)


def join_columns(cols: list[Column]) -> tuple[bytes, np.ndarray]:
    """Each row's texts concatenated, rows one after another: (the bytes, offsets of row starts and the end)."""
    m = np.concatenate([c[0] for c in cols], axis=1)
    keep = np.concatenate([c[1] for c in cols], axis=1)
    ends = np.cumsum(np.count_nonzero(keep, axis=1))
    return m[keep].tobytes(), np.concatenate([[0], ends]).astype(np.int64)


def safe_svg(svg: str) -> Markup:
    """A flame graph from master/profiles/flame.py, inserted as markup: that module XML-escapes every function
    name and title it writes (tests/unit/test_flame.py feeds it `<script>`), and the SVG holds no script."""
    if not svg.startswith("<svg") or "<script" in svg.lower():
        raise ValueError("not a flame graph SVG from master/profiles/flame.py")
    return Markup(svg)
