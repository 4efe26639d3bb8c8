"""Paired throughput, for any recipe: a commit's wall-clock workloads measured interleaved with a reference build.

With the recipe option ``reference=<sha>`` a run has two sides (``run_sides``): the runner's build phase builds
the reference commit too (from the worker's own clone), and its bench phase measures both in one job, alternating.
Throughput measured alone carries the moment's neighbours, the machine's drift and one process's memory layout; the
ratio of two builds measured side by side does not (docs/throughput.md).

The result keeps the commit's own samples as before, and adds, per wall-clock metric of every workload that both
sides measured:

* ``<metric>.reference``: the reference's raw samples, in the order taken (same unit and direction);
* ``<metric>.rqps`` for a throughput (direction ``higher``, unit per second), ``<metric>.ratio`` for every other
  wall-clock metric (latency, CPU and context switches per transaction: the metric's own direction): the ratio
  commit / reference per **order-balanced block** of two rounds (``recipes.stats.block_ratios``: round 2j ran
  the reference first, round 2j + 1 the commit first, and their geometric mean cancels what going first costs),
  unit ``ratio``. These are the paired samples whose median is the commit's rQPS and whose spread is its
  uncertainty; a paired run's absolute values are shown, never searched (master/analysis.py ``not_searched``).

A workload whose ratios are such blocks carries the flag ``BALANCED_FLAG``. Results from before it stored one
ratio per round, biased by the order of an odd number of rounds (docs/throughput.md, "The order bias"): the master
starts a new segment of the series where the flag appears, as at a reference rebase.

This module is the contract the master checks (``master/ingest.py``) and stores (``master/store/series.py``); a
recipe needs nothing of its own for it: the reference is one more side (recipes/api.py ``SideSupport``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from recipes import result
from recipes.api import HIGHER, BuildFailed, Context, Metric, Side, WorkloadResult
from recipes.stats import NoRatio, block_ratios  # pure stdlib statistics, shared with perffarm compare

OPTION = "reference"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
REFERENCE_SUFFIX = ".reference"
RQPS_SUFFIX = ".rqps"  # a throughput's ratio to the reference (higher is better)
RATIO_SUFFIX = ".ratio"  # any other wall-clock metric's ratio to the reference, in the metric's own direction
RATIO_SUFFIXES = (RQPS_SUFFIX, RATIO_SUFFIX)
BALANCED_FLAG = "paired:order-balanced"  # the workload's ratios are per order-balanced block (block_ratios)
# Units of metrics a paired run leaves unpaired: sizes and counts of what the run set up (memory, idle connections
# held), which neither drift with the machine nor depend on when they were measured.
UNPAIRED_UNITS = ("KiB", "connections", "ratio")


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


REFERENCE, RUN = result.RUN_SIDES[-1]  # a run's side labels; the reference's kept tree is work/sides/reference/


def commit_side(ctx: Context) -> Side:
    """A run's own side: the commit checked out for the builder."""
    return Side(RUN, ctx.sha, tree=ctx.src_dir, checkout=True)


def run_sides(ctx: Context) -> list[Side]:
    """The sides of a commit's run: the commit checked out for the builder, and before it the reference when the run
    is paired (it takes round 0's first slot, the commit the second; then they alternate). The reference is built as
    a job's side is (recipes/sides.py: exported from the worker's own clone, never fetched from elsewhere, into a
    kept tree beside a kept build directory) and measured only for the ratios (Side.ratio_only)."""
    run = commit_side(ctx)
    sha = requested(ctx)
    if sha is None:
        return [run]
    _require_commit(ctx, sha)
    return [Side(REFERENCE, sha, ratio_only=True), run]


def is_throughput(m: Metric) -> bool:
    """A metric rQPS applies to: higher is better and it counts something per second (recipes/result.py, whose
    validator holds its samples above 0)."""
    return result.is_throughput(m.unit, m.direction)


def is_wall_clock(m: Metric) -> bool:
    """A metric a paired run pairs: measured on the clock of a shared machine, so its absolute value moves with
    the machine and only its ratio to the reference measured alongside says what the code did."""
    return m.unit not in UNPAIRED_UNITS and not m.name.endswith((*RATIO_SUFFIXES, REFERENCE_SUFFIX))


def is_paired_ratio(metric: str) -> bool:
    """Whether a metric's samples are ratios to the run's reference (``.rqps``, ``.ratio``)."""
    return metric.endswith(RATIO_SUFFIXES)


def is_paired_throughput(metric: str) -> bool:
    """Whether a metric is a throughput's ratio to the reference (``.rqps``), the series the paired gate and the
    ``paired`` alert thresholds are sized for. The other ratios (``.ratio``: latency percentiles, CPU and context
    switches per transaction) keep the noise of what they measure after pairing (one run's ``latency_p95.ratio``
    blocks read 0.30, 1.11, 2.04): they are segmented by reference like rQPS but judged by the rank gate and the
    unpaired thresholds (docs/throughput.md)."""
    return metric.endswith(RQPS_SUFFIX)


def merge(run: Sequence[WorkloadResult], reference: Sequence[WorkloadResult]) -> list[WorkloadResult]:
    """The commit's results with, per wall-clock metric, the reference's samples and the ratios per block.

    Round i of the commit pairs with round i of the reference (they ran back to back, the reference first in even
    rounds); a workload whose sides have different sample counts (a failed round) pairs its first common rounds.
    A metric with a sample at or below 0 on either side forms no ratio and stays unpaired.
    """
    ref_index = {(w.name, m.name): m for w in reference for m in w.metrics}
    out = []
    for w in run:
        extra: list[Metric] = []
        for m in w.metrics:
            r = ref_index.get((w.name, m.name))
            if r is None or not is_wall_clock(m):
                continue
            n = min(len(m.samples), len(r.samples))
            try:
                ratios = block_ratios(r.samples[:n], m.samples[:n]) if n else []
            except NoRatio:
                continue
            if not ratios:
                continue
            extra.append(Metric(m.name + REFERENCE_SUFFIX, m.unit, m.direction, tuple(r.samples)))
            if is_throughput(m):
                extra.append(Metric(m.name + RQPS_SUFFIX, "ratio", HIGHER, tuple(ratios)))
            else:
                extra.append(Metric(m.name + RATIO_SUFFIX, "ratio", m.direction, tuple(ratios)))
        flags = w.flags if not extra or BALANCED_FLAG in w.flags else (*w.flags, BALANCED_FLAG)
        out.append(WorkloadResult(w.name, (*w.metrics, *extra), flags) if extra else w)
    return out
