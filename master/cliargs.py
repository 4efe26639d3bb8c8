"""Argument types for the `perffarm` verbs' numbers: ids, counts, ports, seconds.

A value out of range is an argparse usage error that names the argument and the range (exit 2), never a traceback
further down: a job, try-job or bisection id beyond SQLite's INTEGER range ended in OverflowError, a huge --limit
in "datatype mismatch", and a negative --limit meant "no limit" to SQLite. Standard library only: every verb
imports this.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_ROW_ID = 2**63 - 1  # SQLite's largest INTEGER: no row has a larger id, and a larger one cannot be bound
MAX_COUNT = 10**9  # far beyond any table here; LIMIT takes it as it is


def _whole(what: str, lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        expected = f"expected {what}, a whole number from {lo} to {hi}"
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number: {expected}") from None
        if not lo <= value <= hi:
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise argparse.ArgumentTypeError(f"{shown} is out of range: {expected}")
        return value

    parse.__name__ = what.replace(" ", "_")  # argparse names the type in some messages
    return parse


row_id = _whole("an id", 1, MAX_ROW_ID)
count = _whole("a count", 1, MAX_COUNT)
port = _whole("a TCP port", 1, 65535)


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: expected a positive number of seconds, e.g. 30")
    return value
