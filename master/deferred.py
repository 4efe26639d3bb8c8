"""Deferred results: what waits in incoming/ to be stored again, and what the farm gave up on.

A result the store could not take (a busy or full database, a commit not yet synced) is kept in
`<data_dir>/incoming/` beside its build context and retried by `master.ingest.retry_deferred`; one retried for
longer than `master.deferred_give_up_after` moves to incoming/gave-up/ with its reason. This module reads that
state without the ingest machinery, for `perffarm status`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from master.settings import Settings

GAVE_UP = "gave-up"  # incoming/gave-up/: deferred results the farm stopped retrying, each with its reason


def deferral(ctx_file: Path, now: float) -> tuple[float, int]:
    """(since when, how many times) the result beside `ctx_file` has been deferred, from its saved context;
    (now, 0) when it has none yet (or one written before the context counted)."""
    try:
        saved = json.loads(ctx_file.read_bytes())["deferred"]
        since, tries = float(saved["since"]), int(saved["tries"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return now, 0
    return (since, tries) if math.isfinite(since) and tries >= 0 else (now, 0)


@dataclass(frozen=True)
class Backlog:
    """Deferred results waiting in incoming/ and those given up on, for `perffarm status`."""

    waiting: int
    oldest: float | None  # when the longest-waiting one was first deferred
    gave_up: int


def backlog(settings: Settings) -> Backlog:
    """How many deferred results wait to be stored (and since when) and how many were given up on."""
    now = time.time()
    contexts = sorted(settings.incoming_dir.glob("*.json.context"))
    since = [deferral(c, now)[0] for c in contexts]
    gave_up = len(list((settings.incoming_dir / GAVE_UP).glob("*.json.error")))
    return Backlog(len(contexts), min(since) if since else None, gave_up)
