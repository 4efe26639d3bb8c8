"""The publish cache, `<data_dir>/publish-cache.sqlite` (derived data: deleting it costs time, never correctness):
the ratio table of ratios.RatioCache, and per output directory what the last publish there showed (every series'
summary, the branch heads and tags), which an incremental publish builds on."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from master.publish.context import bands
from master.publish.isolate import PageFailure
from master.publish.ratios import RatioCache
from master.publish.views import Summary


def cache_path(settings: Any) -> Path:
    return Path(settings.data_dir) / "publish-cache.sqlite"


def open_cache(settings: Any) -> RatioCache:
    """The publish cache of these settings, with the farm's colour bands; close() it."""
    return RatioCache(cache_path(settings), bands(settings))


def _state_tables(cache: RatioCache) -> sqlite3.Connection | None:
    """The cache's connection with the two state tables created (None: a cache without a file)."""
    if cache.conn is not None:
        cache.conn.execute(
            "CREATE TABLE IF NOT EXISTS site_summary (out TEXT, sid TEXT, json TEXT NOT NULL, PRIMARY KEY (out, sid))"
        )
        cache.conn.execute("CREATE TABLE IF NOT EXISTS site_state (out TEXT PRIMARY KEY, json TEXT NOT NULL)")
    return cache.conn


def save_state(
    cache: RatioCache,
    summaries: Iterable[Summary],
    replace_all: bool,
    out: Path,
    heads: Mapping[str, tuple[int, str]],
    tags: Mapping[str, str],
    runs_upto: int,
    series_keys: Mapping[str, str] | None = None,
    page_keys: Mapping[str, str] | None = None,
    failed: Sequence[PageFailure] = (),
) -> None:
    """What the next incremental publish into `out` builds on: summaries, branch heads and tags as published, the
    highest run id up to which every stored run is shown (the next incremental publish catches up from it), per
    series the digest of its page's inputs (pages.Page.key; None: unknown, every series page is written), per
    file the digest of a SITE page rendered by key (an alert's page: Context.page_keys), and the pages this
    publish could not build (isolate.py: the next publish is a full one, which builds them again)."""
    conn = _state_tables(cache)
    if conn is None:
        return
    key = str(out)
    with conn:
        if replace_all:
            conn.execute("DELETE FROM site_summary WHERE out = ?", (key,))
        conn.executemany(
            "INSERT OR REPLACE INTO site_summary VALUES (?, ?, ?)",
            [(key, s.sid, json.dumps(s.to_json(), sort_keys=True)) for s in summaries],
        )
        conn.execute(
            "INSERT OR REPLACE INTO site_state VALUES (?, ?)",
            (
                key,
                json.dumps(
                    {
                        "heads": {b: list(h) for b, h in heads.items()},
                        "tags": dict(tags),
                        "runs_upto": runs_upto,
                        **({"series_keys": dict(series_keys)} if series_keys is not None else {}),
                        **({"page_keys": dict(page_keys)} if page_keys is not None else {}),
                        **({"failed_pages": [f.to_json() for f in failed]} if failed else {}),
                    },
                    sort_keys=True,
                ),
            ),
        )


def save_page_keys(
    cache: RatioCache, out: Path, page_keys: Mapping[str, str], failed: Sequence[PageFailure] = ()
) -> None:
    """Update the page keys of the publish state of `out` (a publish of some SITE pages only: publish_bisections)
    and add the pages it could not build, the rest as it was; nothing without a state."""
    conn = _state_tables(cache)
    if conn is None:
        return
    with conn:
        row = conn.execute("SELECT json FROM site_state WHERE out = ?", (str(out),)).fetchone()
        if row is not None:
            state = json.loads(row[0])
            state["page_keys"] = {**state.get("page_keys", {}), **page_keys}
            if failed:
                state["failed_pages"] = [*state.get("failed_pages", []), *(f.to_json() for f in failed)]
            conn.execute("UPDATE site_state SET json = ? WHERE out = ?", (json.dumps(state, sort_keys=True), str(out)))


def load_state(cache: RatioCache, out: Path) -> tuple[dict[str, Summary], dict[str, Any] | None]:
    conn = _state_tables(cache)
    if conn is None:
        return {}, None
    key = str(out)
    summaries = {
        sid: Summary.from_json(json.loads(text))
        for sid, text in conn.execute("SELECT sid, json FROM site_summary WHERE out = ?", (key,))
    }
    row = conn.execute("SELECT json FROM site_state WHERE out = ?", (key,)).fetchone()
    return summaries, (json.loads(row[0]) if row else None)


def failed_pages(state: Mapping[str, Any]) -> list[PageFailure]:
    """The pages the publish that saved `state` could not build (none in a state from before they were kept)."""
    return [PageFailure.from_json(d) for d in state.get("failed_pages", [])]
