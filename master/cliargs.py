"""Argument types for the `perffarm` verbs' numbers: ids, counts, ports, seconds.

A value out of range is an argparse usage error that names the argument and the range (exit 2), never a traceback
further down: a job, try-job or bisection id beyond SQLite's INTEGER range ended in OverflowError, a huge --limit
in "datatype mismatch", and a negative --limit meant "no limit" to SQLite. Standard library only: every verb
imports this.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

# The exit codes of every verb (README "The command line"): 0 the verb did what was asked and found nothing wrong;
# 1 it ran and the answer is "something is wrong" (a gate found a regression: detect, compare; the master is
# down: status; a job failed; a page could not be built) or the farm's state stopped it (a database at another
# schema, a master running); 2 the command line is wrong (usage, an unknown id, no results database where it
# points, an unreadable file, a revision that does not exist): nothing was done.
EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2

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


def no_results_db(verb: str, path: Path, what: str = "nothing stored yet") -> int:
    """Say (naming the verb) that there is no results database, and how to get one; returns EXIT_USAGE."""
    print(
        f"perffarm {verb}: no results database at {path}: {what}; start the farm (make run) or point "
        "master.data_dir (PERFFARM_MASTER_DATA_DIR) at a farm's data directory",
        file=sys.stderr,
    )
    return EXIT_USAGE


def actions(p: argparse.ArgumentParser, dest: str) -> argparse._SubParsersAction:
    """Sub-commands (`jobs list|show`) on a verb that keeps its old flag spellings (`--status ID`, `--list`) as
    aliases: the sub-command is optional, and options given after it do not reset those given before it (every
    sub-command's defaults are SUPPRESS, so the verb's own defaults stand)."""
    return p.add_subparsers(dest=dest, metavar="ACTION", required=False)


def action(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=help_text, argument_default=argparse.SUPPRESS)
