"""What the site says about a workload beyond its numbers: the group (subsystem) it is listed under and, for a
workload that runs fixed SQL (an operation of the suite, a pgbench script), that SQL. Both come from the recipes
package the master runs (Recipe.workload_info, Recipe.groups), so they are the current recipe's: the SQL is shown
only for a series measured by that very workload definition (same recipe version and workload hash), never for a
series an earlier definition measured. The group is a label only, shown for every series of the workload."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from recipes import registry
from recipes.api import Recipe

OTHER = "other"


@functools.cache
def _recipes() -> dict[str, Recipe]:
    """Every recipe, discovered once per process (discovery hashes every data file of every recipe)."""
    try:
        return registry.discover()
    except Exception:  # noqa: BLE001 - a broken recipe module must not stop the site: its workloads are "other"
        return {}


@dataclass(frozen=True)
class WorkloadInfo:
    group: str
    sql: str  # "" when none, or when the series is not of the current definition


@functools.cache
def info(recipe: str, version: int, config_hash: str, workload: str) -> WorkloadInfo:
    r = _recipes().get(recipe)
    if r is None or r.workload_info is None:
        return WorkloadInfo(OTHER, "")
    got = r.workload_info(workload)
    current = r.version == version and r.workload_hash(workload) == config_hash
    return WorkloadInfo(got.get("group") or OTHER, got.get("sql", "") if current else "")


def group_order() -> dict[str, str]:
    """Every group the recipes know, in the order the site lists them, with what each holds; `other` last."""
    out: dict[str, str] = {}
    for r in _recipes().values():
        for name, about in r.groups.items():
            out.setdefault(name, about)
    out.setdefault(OTHER, "Workloads of recipes that name no group")
    return out
