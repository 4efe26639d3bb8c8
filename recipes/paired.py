"""Paired throughput, for any recipe: a commit's wall-clock workloads measured interleaved with a reference build.

With the recipe option ``reference=<sha>`` a recipe's build phase also builds the reference commit (from the
worker's own clone), and its bench phase runs both in one job, alternating. Throughput measured alone carries the
moment's neighbours, the machine's drift and one process's memory layout; the ratio of two builds measured side by
side does not (docs/throughput.md).

The result keeps the commit's own samples as before, and adds, per throughput metric (direction ``higher``, unit
per second) of every workload:

* ``<metric>.reference``: the reference's raw samples, in the order taken (same unit and direction);
* ``<metric>.rqps``: the per-round ratios commit / reference (unit ``ratio``, higher is better), the paired
  samples whose median is the commit's rQPS and whose spread is its uncertainty.

This module is the contract the master checks (``master/ingest.py``) and stores (``master/store/series.py``);
``recipes/pg/paired.py`` adds PostgreSQL's install cache, ``recipes/fixture.py`` shows the smallest use.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from recipes import result
from recipes.api import HIGHER, BuildFailed, Context, Metric, WorkloadResult
from recipes.pg.stats import paired_ratios  # pure stdlib statistics, shared with perffarm compare

OPTION = "reference"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
REFERENCE_SUFFIX = ".reference"
RQPS_SUFFIX = ".rqps"


def requested(ctx: Context) -> str | None:
    """The reference sha the run was given, validated; None when the run is unpaired."""
    value = ctx.options.get(OPTION, "").strip()
    if not value:
        return None
    if not SHA_RE.match(value):
        raise BuildFailed(
            f"{OPTION}={value[:80]!r}: expected the reference commit's full 40-hex sha "
            "(lowercase), e.g. reference=$(git rev-parse REL_17_0^{commit})"
        )
    return value


def _require_commit(ctx: Context, sha: str) -> None:
    probe = ctx.run(
        ["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=ctx.src_dir, check=False, capture=True, timeout=60
    )
    if probe.returncode != 0:
        raise BuildFailed(
            f"the reference commit {sha} is not in this worker's clone of {ctx.ref}: choose a "
            "reference on the branch being built (an ancestor of the commit), or run unpaired "
            "without the reference option"
        )


def reference_tree(ctx: Context, sha: str) -> Path:
    """A tree of the reference commit, exported from the worker's own clone (never fetched from elsewhere)."""
    _require_commit(ctx, sha)
    tree = ctx.work_dir / "reference-src"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = ctx.work_dir / "reference-src.tar"
    try:
        ctx.run(["git", "archive", "--format=tar", "-o", str(archive), sha], cwd=ctx.src_dir, timeout=600)
        ctx.run(["tar", "-xf", str(archive), "-C", str(tree)], timeout=600)
    finally:
        archive.unlink(missing_ok=True)
    return tree


def is_throughput(m: Metric) -> bool:
    """A metric rQPS applies to: higher is better and it counts something per second (recipes/result.py, whose
    validator holds its samples above 0)."""
    return result.is_throughput(m.unit, m.direction)


def merge(run: Sequence[WorkloadResult], reference: Sequence[WorkloadResult]) -> list[WorkloadResult]:
    """The commit's results with, per throughput metric, the reference's samples and the per-round ratios.

    Round i of the commit pairs with round i of the reference (they ran back to back, in alternating order);
    a workload whose sides have different sample counts (a failed round) pairs its first common rounds.
    """
    ref_index = {(w.name, m.name): m for w in reference for m in w.metrics}
    out = []
    for w in run:
        extra: list[Metric] = []
        for m in w.metrics:
            r = ref_index.get((w.name, m.name))
            if r is None or not is_throughput(m):
                continue
            n = min(len(m.samples), len(r.samples))
            ratios = paired_ratios(r.samples[:n], m.samples[:n])
            extra.append(Metric(m.name + REFERENCE_SUFFIX, m.unit, m.direction, tuple(r.samples)))
            if ratios:
                extra.append(Metric(m.name + RQPS_SUFFIX, "ratio", HIGHER, tuple(ratios)))
        out.append(WorkloadResult(w.name, (*w.metrics, *extra), w.flags) if extra else w)
    return out
