"""A tiny C benchmark recipe: compile the repository's `perffarm_bench.c` and run it several times.

It exists so the whole farm (poller, scheduler, worker, upload, ingest, detection, bisection) can be exercised
in seconds on any repository that carries that file: the tests build git repositories with it. The program
prints lines `KEY VALUE`; each configured workload reads one key per run as a sample, and the recipe times
each run as well.

It measures sides (recipes/api.py SideSupport) as every recipe does: a run's commit, a paired run's reference
and commit (the option ``reference=<sha>``, recipes/paired.py) run alternately, sample by sample, so the farm's
paired path (rQPS series, rebases, bisection on rQPS) runs in seconds too; a job's sides the same way.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from recipes.api import (
    HIGHER,
    LOWER,
    BenchFailed,
    BuildFailed,
    Context,
    Metric,
    Recipe,
    Side,
    SideSupport,
    WorkloadResult,
    listed_workloads,
)
from recipes.sandbox import Sandbox
from recipes.sides import prepared, untrusted_dir

CONFIG = {
    "source": "perffarm_bench.c",
    "cflags": ["-O2", "-fno-omit-frame-pointer"],
    "ldlibs": ["-lm"],
    "samples": 5,
    "timeout_seconds": 60,
    "workloads": [
        {"name": "loop", "key": "ops", "metric": "throughput", "unit": "ops/s", "direction": HIGHER},
    ],
}


def _compile(ctx: Context, tree: Path, out: Path, what: str, sandbox: Sandbox | None = None) -> None:
    src = tree / CONFIG["source"]
    if not src.is_file():
        raise BuildFailed(f"{CONFIG['source']} is not in {what}; the fixture recipe needs it")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BuildFailed("no C compiler on this worker: apt-get install gcc")
    # A compile error raises CommandFailed, which the runner stores as build-failed with the log tail.
    box = sandbox.seeing(ro=[tree], rw=[out.parent]) if sandbox is not None else None
    ctx.run([cc, *CONFIG["cflags"], "-o", out, src, *CONFIG["ldlibs"]], timeout=120, sandbox=box)


def _parse(output: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                raise BenchFailed(f"bad output line {line!r}: expected 'KEY NUMBER'", output[-2000:]) from None
    return values


def _chosen(ctx: Context) -> list[dict]:
    wanted = [w for w in ctx.options.get("workloads", "").split(",") if w]
    chosen = [w for w in CONFIG["workloads"] if not wanted or w["name"] in wanted]
    if not chosen:
        raise BenchFailed(f"option workloads={','.join(wanted)} names no workload of this recipe")
    return chosen


class _Program:
    """One program's samples: per workload, and the wall time of each run (inside `sandbox` when given)."""

    def __init__(self, program: Path, chosen: list[dict], sandbox: Sandbox | None = None) -> None:
        self.program = program
        self.collected: dict[str, list[float]] = {w["name"]: [] for w in chosen}
        self.seconds: list[float] = []
        self.sandbox = sandbox.seeing(ro=[program]) if sandbox is not None else None

    def sample(self, ctx: Context, i: int, chosen: list[dict]) -> None:
        t0 = time.perf_counter()
        proc = ctx.run([self.program], timeout=CONFIG["timeout_seconds"], capture=True, sandbox=self.sandbox)
        self.seconds.append(time.perf_counter() - t0)
        values = _parse(proc.stdout)
        for w in chosen:
            if w["key"] not in values:
                raise BenchFailed(f"run {i + 1}: the program printed no {w['key']!r} line", proc.stdout[-2000:])
            value = values[w["key"]]
            if not math.isfinite(value):
                ctx.log(f"warning: run {i + 1} printed a non-finite {w['key']}: {value}")
            self.collected[w["name"]].append(value)

    def results(self, chosen: list[dict]) -> list[WorkloadResult]:
        return [
            WorkloadResult(
                name=w["name"],
                metrics=(
                    Metric(w["metric"], w["unit"], w["direction"], tuple(self.collected[w["name"]])),
                    Metric("wall", "s", LOWER, tuple(self.seconds)),
                ),
            )
            for w in chosen
        ]


def _shown(run: _Program) -> str:
    return " ".join(f"{k}={v[-1]:g}" for k, v in run.collected.items())


def _side_program(ctx: Context, side: Side) -> Path:
    """Where a side's program is: a patched side's in its own untrusted directory (recipes/sides.py)."""
    if side.untrusted:
        return untrusted_dir(ctx, side.label) / "bin" / "bench"
    return ctx.state_dir / f"bench-{side.label}"


def build_sides(ctx: Context, sides: Sequence[Side]) -> None:
    """Every side's program; a patched side's compiled inside the job's sandbox, seeing only its own tree."""
    for side in sides:
        side = prepared(ctx, side)
        assert side.tree is not None
        out = _side_program(ctx, side)
        out.parent.mkdir(parents=True, exist_ok=True)
        box = ctx.sandbox if side.untrusted else None
        _compile(ctx, side.tree, out, f"side {side.label}", sandbox=box)


def bench_sides(ctx: Context, sides: Sequence[Side]) -> dict[str, list[WorkloadResult]]:
    """Every side's program run in turn, sample by sample, the order rotating per round. In a try-job every side
    runs inside the sandbox, so that the patched side and the others are timed under the same conditions."""
    samples = int(ctx.options.get("samples", CONFIG["samples"]))
    chosen = _chosen(ctx)
    runs = {s.label: _Program(_side_program(ctx, s), chosen, ctx.sandbox) for s in sides}
    labels = [s.label for s in sides]
    for i in range(samples):
        k = i % len(labels)
        for label in labels[k:] + labels[:k]:
            runs[label].sample(ctx, i, chosen)
        ctx.log(f"sample {i + 1}/{samples}: " + ", ".join(f"{label} {_shown(runs[label])}" for label in labels))
    return {label: run.results(chosen) for label, run in runs.items()}


RECIPE = Recipe(
    name="fixture",
    version=1,
    description="Compile perffarm_bench.c from the commit and sample its printed throughput (test fixture).",
    config=CONFIG,
    sides=SideSupport(build_sides, bench_sides),
    workload_identity=listed_workloads(CONFIG),
)
