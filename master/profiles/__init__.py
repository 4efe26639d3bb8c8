"""Where the instructions went between two callgrind profiles: a per-function diff and a differential flame graph.

Pure (no Buildbot, no Twisted): `diff` compares two `recipes.callgrind.Profile`s per query, `flame` draws them.
Hand-written rather than taken from a library because the project's dependencies are fixed (buildbot, sqlite,
jinja2, requests, scipy) and the flame graph must render offline, in static site pages and as a plain file,
without JavaScript: a self-contained SVG is a few hundred lines of code.
"""

from __future__ import annotations

from master.profiles.diff import DiffRow, ProfileDiff, Reconciliation, diff, format_table, summary
from master.profiles.flame import differential_svg, folded, folded_text

__all__ = [
    "DiffRow",
    "ProfileDiff",
    "Reconciliation",
    "diff",
    "differential_svg",
    "folded",
    "folded_text",
    "format_table",
    "summary",
]
