"""Series: what change detection and the site read (tables series, and the runs and measurements along a
branch's first-parent order)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeriesKey:
    """A series' identity (docs/glossary.md): samples compare only within one of these."""

    machine_id: str
    recipe: str
    recipe_version: int
    config_hash: str  # the workload's (measurements.config_hash)
    workload: str
    metric: str
    branch: str
