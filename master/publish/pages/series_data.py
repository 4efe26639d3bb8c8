"""data/series/<sid>/<chunk>.{js,json,samples.js}: a series' points per chunk of CHUNK branch positions, for its
chart (.js: integer columns), for tools (.json) and the raw samples on demand (.samples.js)."""

from __future__ import annotations

import json

import numpy as np

from master.publish.context import Context
from master.publish.encode import FloatText, enc, fixed, json_object, nums
from master.publish.model import SiteSeries
from master.publish.render import FORMAT_VERSION, float_column, js_call, json_document, sig6_decimals, wrap_js
from master.publish.source import CHUNK
from master.publish.writer import SiteWriter


def _chunk_bounds(s: SiteSeries, k: int) -> tuple[int, int]:
    """Rows [a, b) of series s whose positions are in chunk k."""
    p = s.positions
    return (s.start + int(np.searchsorted(p, k * CHUNK)), s.start + int(np.searchsorted(p, (k + 1) * CHUNK)))


_SAMPLES = "\u0000samples\u0000"


def write(w: SiteWriter, ctx: Context, s: SiteSeries, lo_chunk: int, hi_chunk: int) -> None:
    """Per chunk of branch positions: chart columns (.js), everything for tools (.json) and the raw samples
    for the page (.samples.js). Samples are spliced in as stored (JSON text), never decoded and re-encoded;
    render.wrap_js escapes anything that could end a script element."""
    base = f"data/series/{s.sid}"
    t = ctx.table
    bounds = [_chunk_bounds(s, k) if t is not None else (0, 0) for k in range(lo_chunk, hi_chunk + 1)]
    # the float arrays of the .json files as text, for all these chunks at once (None: encoded per chunk below)
    floats = _float_lists(ctx, bounds[0][0], bounds[-1][1]) if t is not None and bounds else None
    for k, (a, b) in zip(range(lo_chunk, hi_chunk + 1), bounds):
        pos = t.pos[a:b].tolist() if b > a else []
        n = t.n[a:b].tolist() if b > a else []
        flags = ((t.noisy[a:b].astype(np.int64)) | (t.sla[a:b].astype(np.int64) * 2)).tolist() if b > a else []
        scale, ints = fixed(ctx.med_r[a:b], ctx.lo_r[a:b], ctx.hi_r[a:b])
        w.write(
            f"{base}/{k}.js",
            js_call(
                "points",
                s.sid,
                k,
                {"pos": pos, "scale": scale, "med": ints[0], "lo": ints[1], "hi": ints[2], "n": n, "flag": flags},
            ),
        )
        samples = "[" + ",".join(t.text[a:b] if b > a else []) + "]"
        sha, runs = t.sha[a:b] if b > a else [], t.runs[a:b] if b > a else []
        noisy, sla = t.noisy[a:b].tolist() if b > a else [], t.sla[a:b].tolist() if b > a else []
        if floats is not None:  # json_document's bytes, assembled from encoded members
            med, ratio, low, high = (f.array(a, b) for f in floats)
            text = (
                json_object(
                    {
                        "chunk": enc(k),
                        "chunk_size": enc(CHUNK),
                        "direction": enc(s.direction),
                        "format": enc("perffarm-series-chunk"),
                        "median": med,
                        "noisy": enc(noisy),
                        "position": enc(pos),
                        "runs": enc(runs),
                        "samples": samples,
                        "series": enc(s.sid),
                        "sha": enc(sha),
                        "sla_miss": enc(sla),
                        "unit": enc(s.unit),
                        "version": enc(FORMAT_VERSION),
                        "vs_previous": json_object({"ci_high": high, "ci_low": low, "ratio": ratio}),
                    }
                )
                + "\n"
            )
        else:
            text = json_document(
                "series-chunk",
                {
                    "series": s.sid,
                    "chunk": k,
                    "chunk_size": CHUNK,
                    "unit": s.unit,
                    "direction": s.direction,
                    "position": pos,
                    "sha": sha,
                    "median": ctx.med_r[a:b].tolist() if b > a else [],
                    "samples": _SAMPLES,
                    "runs": runs,
                    "noisy": noisy,
                    "sla_miss": sla,
                    "vs_previous": {
                        "ratio": nums(ctx.prev_ratio[a:b], 6) if b > a else [],
                        "ci_low": nums(ctx.prev_low[a:b], 6) if b > a else [],
                        "ci_high": nums(ctx.prev_high[a:b], 6) if b > a else [],
                    },
                },
                clean=False,
            ).replace(json.dumps(_SAMPLES), samples, 1)
        w.write(f"{base}/{k}.json", text)
        # raw samples on demand (the chart's "Samples" button): positions and the stored sample arrays only
        w.write(
            f"{base}/{k}.samples.js",
            wrap_js("samples", s.sid, k, f'{{"position":{json.dumps(pos)},"samples":{samples}}}'),
        )


def _float_lists(ctx: Context, a: int, b: int) -> list[FloatText] | None:
    """Median, rQPS vs the previous point, its CI low and high of rows [a, b) as the JSON encoder writes them
    (render.float_column: ~2x faster than a Python float and its repr per value); None when a value's text is
    not proven there (the caller then encodes as before)."""
    med = ctx.med_r[a:b]
    cols = [float_column(med, sig6_decimals(med))]  # the places round6 rounded them to
    cols += [float_column(np.round(c[a:b], 6), 6, nan=True) for c in (ctx.prev_ratio, ctx.prev_low, ctx.prev_high)]
    if any(c is None for c in cols):
        return None
    return [FloatText.of(col, a) for col in cols]
