"""Every ok measurement of the results DB as flat columns, read in one pass (pure: a store read and numpy only).

A full publish reads a million measurement rows. Grouping them per measure key in SQL (GROUP BY over the
runs ⋈ measurements join) made SQLite sort the million rows: ~5 s, half of a cold publish. Here SQLite only
concatenates the rows in storage order (~1 s, in C: store.series.scan_measurements), numpy parses all samples in
one call, and the grouping by key, branch and position is a sort of integer columns (master.publish.model.load).
No samples cache is needed.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from master import store
from master.publish import forkjoin
from master.store.series import MeasureKey


@dataclass
class Measured:
    """Ok measurement rows in storage order. Per run: id, sha, noisy; per key: MeasureKey, unit, direction;
    per row: its run (index into the run columns), key (index into `keys`), samples (as stored and parsed)."""

    run_id: np.ndarray  # int64, ascending
    run_sha: list[str]
    run_noisy: np.ndarray  # bool
    keys: list[MeasureKey]
    units: list[str]
    directions: list[str]
    run: np.ndarray  # int64 per row
    key: np.ndarray  # int64 per row
    text: list[str]  # the samples as stored (JSON), spliced into data files without re-encoding
    off: np.ndarray  # int64 per row: offset of its samples in `flat`
    n: np.ndarray  # int64 per row: number of samples
    flat: np.ndarray  # float64, every sample in row order
    sla: np.ndarray  # bool per row: flagged sla-miss


def _counts(big: str, texts: list[str]) -> np.ndarray:
    """Samples per row: commas + 1, or 0 for an empty array (not a valid result, but never a crash here)."""
    counts = np.fromiter(map(str.count, texts, itertools.repeat(",")), dtype=np.int64, count=len(texts)) + 1
    if "[]" in big:  # only an empty array can contain "[]"; rare, so checked per row only then
        counts[[i for i, t in enumerate(texts) if t.strip() == "[]"]] = 0
    return counts


def _parse(big: str, texts: list[str], counts: np.ndarray, jobs: int = 1) -> np.ndarray:
    """All samples as one float64 array, parsed by numpy's C parser (~0.2 us per sample); with jobs=2 the second
    half of the text is parsed in a forked child at the same time."""
    if not (counts == 0).any():
        # "[a, b]|[c]" -> " a, b , c ": one comma-separated list of every sample
        cut = big.find("|", len(big) // 2) if jobs > 1 and len(big) > SPLIT_MIN_CHARS else -1
        if cut < 0:
            flat = _numbers(big)
        else:
            flat = np.concatenate(forkjoin.both(lambda: _numbers(big[:cut]), lambda: _numbers(big[cut + 1 :])))
    else:
        flat = _numbers(",".join(t.strip()[1:-1] for t, c in zip(texts, counts.tolist()) if c), flatten=False)
    if len(flat) != int(counts.sum()):
        raise ValueError(f"stored samples do not parse: {len(flat)} numbers for {int(counts.sum())} expected")
    return flat


def _numbers(text: str, flatten: bool = True) -> np.ndarray:
    body = text.translate(_FLATTEN) if flatten else text
    return np.empty(0) if not body or body.isspace() else np.fromstring(body, sep=",")


SPLIT_MIN_CHARS = 1_000_000  # below ~50,000 samples a fork costs more than it saves
_FLATTEN = str.maketrans("[]|", "  ,")


def read(
    conn: sqlite3.Connection,
    shas: Iterable[str] | None = None,
    jobs: int = 1,
    machines: Iterable[tuple[str, str, int]] | None = None,
) -> Measured:
    """Every ok run's measurements (optionally only of runs at `shas`, only of runs by these (machine, recipe,
    recipe version)) as columns. jobs=2: parse in two processes (only from a single-threaded process: it forks)."""
    scanned = store.series.scan_measurements(conn, shas, machines)
    ids_text, wm_text, big, sla_text = scanned.row_runs, scanned.row_keys, scanned.row_samples, scanned.row_sla
    run_id = np.array(scanned.run_id, dtype=np.int64)
    run_sha = list(scanned.run_sha)
    run_noisy = np.array([bool(x) for x in scanned.run_noisy], dtype=bool)
    if not ids_text:
        empty = np.empty(0, dtype=np.int64)
        return Measured(
            run_id, run_sha, run_noisy, [], [], [], empty, empty, [], empty, empty, np.empty(0), np.empty(0, dtype=bool)
        )
    row_run = np.searchsorted(run_id, np.fromstring(ids_text, sep=",", dtype=np.int64))
    parts = wm_text.split("\x1e")
    if len(parts) != len(row_run):
        raise ValueError(
            "a stored workload or metric name or config hash contains a control character (not a valid result)"
        )
    # a key is (the run's machine, recipe, version) x (workload, metric, the workload's config hash): code both
    # halves, then pair them
    cfg_of: dict[tuple, int] = {}
    run_cfg = np.array(
        [
            cfg_of.setdefault((m, r, int(v)), len(cfg_of))
            for m, r, v in zip(scanned.run_machine, scanned.run_recipe, scanned.run_version)
        ],
        dtype=np.int64,
    )
    # codes via C-level map calls: a Python-level loop over the million rows costs ~0.5 s
    wm_of = {x: i for i, x in enumerate(dict.fromkeys(parts))}
    wm = np.fromiter(map(wm_of.__getitem__, parts), dtype=np.int64, count=len(parts))
    uniq, key = np.unique(run_cfg[row_run] * len(wm_of) + wm, return_inverse=True)
    cfgs, wms = list(cfg_of), [x.split("\x1f", 2) for x in wm_of]
    keys = [MeasureKey(*cfgs[p // len(wm_of)], wms[p % len(wm_of)][2], *wms[p % len(wm_of)][:2]) for p in uniq.tolist()]
    _, first_from_end = np.unique(key[::-1], return_index=True)
    newest = len(key) - 1 - first_from_end  # each key's last row: its newest run
    units = _units(conn, run_id[row_run[newest]].tolist(), keys)
    texts = big.split("|")
    counts = _counts(big, texts)
    flat = _parse(big, texts, counts, jobs)
    off = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    sla = np.frombuffer(sla_text.encode("ascii"), dtype=np.uint8) == ord("1")
    return Measured(
        run_id,
        run_sha,
        run_noisy,
        keys,
        [u.unit for u in units],
        [u.direction for u in units],
        row_run,
        key,
        texts,
        off,
        counts,
        flat,
        sla,
    )


def _units(conn: sqlite3.Connection, runs: list[int], keys: list[MeasureKey]) -> list[store.series.MetricUnit]:
    """Unit and direction of each key as measured by the given run (its newest); one query for all keys: the
    newest runs are mostly the same few."""
    got = store.series.units(conn, runs)
    return [got[(r, k.workload, k.metric)] for r, k in zip(runs, keys)]
