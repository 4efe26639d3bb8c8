"""Numbers and JSON text for the data files, without one encoder call per value where a column does it.

The chart columns are integers over one power of ten (`fixed`); the tools' JSON keeps floats (`nums`); large
float arrays are written as text columns (render.float_column) and cut per chunk (`FloatText`); a JSON object
is assembled from members already encoded (`json_object`, `enc`), byte for byte what the sort_keys encoders
write.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from master.publish.render import _JSON_ENCODER, Column, join_columns, literal_column

enc = _JSON_ENCODER.encode


def fixed(*cols: np.ndarray) -> tuple[int, list[list[int]] | list[list[float | None]]]:
    """Columns of rounded values as integers over one power of ten (integers encode ~5x faster than floats;
    page data only, the tool JSON keeps floats). Exact for values rounded to <= the chosen decimals. Values an
    int64 cannot hold exactly (|x| >= 2**53, NaN, infinities) never go through the integers: they would wrap to
    -9223372036854775808; the columns are then plain JSON floats over a scale of 1 (NaN as null)."""
    both = np.concatenate(cols) if cols else np.empty(0)
    finite = both[np.isfinite(both) & (both != 0)]
    if not np.isfinite(both).all() or (finite.size and float(np.max(np.abs(finite))) >= 2.0**53):
        return 1, [[x if math.isfinite(x) else None for x in c.tolist()] for c in cols]
    if not finite.size:
        return 1, [np.zeros(len(c), dtype=np.int64).tolist() for c in cols]
    decimals = int(np.clip(5 - np.floor(np.log10(np.abs(finite))), 0, 15).max())
    top = float(np.max(np.abs(finite)))
    decimals = max(0, min(decimals, math.floor(math.log10(2**52 / top))))  # stay exact in a double
    scale = 10**decimals
    return scale, [np.rint(c * scale).astype(np.int64).tolist() for c in cols]


def nums(a: np.ndarray, digits: int | None = None) -> list[float | None]:
    """A float column for JSON: NaN as null, optionally rounded to `digits` decimals."""
    if digits is not None:
        a = np.round(a, digits)
    return [None if math.isnan(x) else x for x in a.tolist()]


def json_object(members: dict[str, str]) -> str:
    """A JSON object from already encoded member values, keys sorted (as the sort_keys encoders write it)."""
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in sorted(members.items())) + "}"


@dataclass
class FloatText:
    """A float column of rows [start, ...) as JSON text, each value followed by ',': array(a, b) is the JSON
    array of rows a..b-1."""

    text: str
    off: list[int]
    start: int

    @classmethod
    def of(cls, col: Column, start: int) -> FloatText:
        """The text of a column (render.float_column) whose first row is row `start`."""
        blob, off = join_columns([col, literal_column(",", len(col[0]))])
        return cls(blob.decode("ascii"), off.tolist(), start)

    def array(self, a: int, b: int) -> str:
        return "[" + self.text[self.off[a - self.start] : self.off[b - self.start] - 1] + "]" if b > a else "[]"
