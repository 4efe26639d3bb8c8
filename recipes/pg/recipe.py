"""Turn a profile's data into a Recipe: the sides' build and bench entry points shared by pg-quick, pg-full and
pg-sweeps (recipes/api.py SideSupport: a run, a paired run and a job alike)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from recipes.api import BenchFailed, Context, Recipe, Side, SideSupport, WorkloadResult
from recipes.pg import build as pgbuild
from recipes.pg import deps
from recipes.pg.profile import (
    COVERAGE_OPTION,
    conf_text,
    group_descriptions,
    identities,
    identity_of,
    load_profile,
    needs_valgrind,
    overlays_for,
    run_bench,
    wanted_workloads,
    workload_info,
)
from recipes.sides import build_place, prepared


def _on_sigterm(signum: int, frame: Any) -> None:
    # Turn a stop request into an exception so every `finally` runs: servers stopped, directories removed.
    raise BenchFailed(f"terminated by signal {signum} during the benchmark")


def data_file_hashes() -> dict[str, str]:
    """Hashes of the postgresql.conf files and SQL scripts: editing one changes the recipe's config hash (the whole
    recipe's; a workload's own hash covers only the files it uses, see profile.identities)."""
    base = resources.files("recipes.pg")
    out = {}

    def walk(folder: Any, rel: str) -> None:  # sql/ops/ holds the operation suite's scripts
        for f in sorted(folder.iterdir(), key=lambda p: p.name):
            if f.is_dir():
                walk(f, f"{rel}/{f.name}")
            elif f.name.endswith((".conf", ".sql")):
                out[f"{rel}/{f.name}"] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]

    for sub in ("conf", "sql"):
        walk(base.joinpath(sub), sub)
    return out


def make_recipe(profile_name: str, name: str, version: int) -> Recipe:
    """A Recipe whose config is the profile's data plus the build settings (so the config hash covers both), and
    whose workload hashes cover, per workload, only what that workload measures (profile.identities)."""
    profile = load_profile(profile_name)
    spec = pgbuild.BuildSpec()
    build_config = {
        "cflags": list(spec.cflags),
        "configure_args": list(spec.configure_args),
        "meson_args": list(spec.meson_args),
    }
    config = {"profile": profile, "build": build_config, "data_files": data_file_hashes()}
    found = identities(profile, build_config)

    def build_sides(ctx: Context, sides: Sequence[Side]) -> None:
        deps.check_bench(needs_valgrind(profile, wanted_workloads(ctx.options)))
        for side in sides:
            if side.untrusted:
                # someone else's code: built inside the job's sandbox, never cached (recipes/sandbox.py)
                tree = prepared(ctx, side).tree
                assert tree is not None
                install = pgbuild.build_untrusted(ctx, spec, tree, side.sha, side.label)
            else:
                # a cached install leaves the kept tree as it is (recipes/sides.py prepared); else a run's commit
                # builds in the builder's checkout and build directory, and a build directory per label (or layout)
                # keeps a job's sides incremental from one job to the next, laid out as a commit build's so that a
                # release or base the farm has built hits ccache (recipes/sides.py build_place)
                install = pgbuild.cached_install(ctx, spec, side.key)
                if install is not None:
                    ctx.log(f"side {side.label}: reusing the cached install of {side.key[:12]} in {install.prefix}")
                else:
                    src, work, name = build_place(ctx, side)
                    install = pgbuild.build_install(ctx, spec, src=src, sha=side.key, ref=name, work=work)
                if ctx.sandbox is not None:  # a try-job: every side's server runs in the sandbox, measured alike
                    install = dataclasses.replace(install, jailed=True)
            pgbuild.save_install(ctx, install, f"pg-side-{side.label}.json")

    def side_install(ctx: Context, side: Side) -> pgbuild.Install:
        return pgbuild.load_install(ctx, f"pg-side-{side.label}.json")

    def bench_sides(ctx: Context, sides: Sequence[Side]) -> dict[str, list[WorkloadResult]]:
        installs = {s.label: side_install(ctx, s) for s in sides}
        # a variant is the side's install without one of its conf overlays, measured in the same job
        confs = {s.label: conf_text(profile, installs[s.label].major, without={s.variant}) for s in sides if s.variant}
        # instructions are exact: a paired run's reference is measured for the throughput ratios alone
        counted = {s.label for s in sides if not s.ratio_only}
        # the coverage figure of a run's instruction workloads, from its checkout (docs/coverage.md); coverage=0
        # leaves it out
        checkout = [s.tree for s in sides if s.checkout and s.tree is not None]
        src = checkout[0] if checkout and ctx.options.get(COVERAGE_OPTION, "1") != "0" else None
        previous: Callable[..., Any] | int | None = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            return run_bench(
                ctx,
                profile,
                installs,
                threads=os.cpu_count() or 2,
                count_instructions=counted,
                confs=confs or None,
                coverage_src=src,
            )
        finally:
            signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)

    def describe(ctx: Context, side: Side) -> dict[str, Any]:
        install = side_install(ctx, side)
        return {"version": install.version, "major": install.major}

    def variants(ctx: Context, side: Side) -> dict[str, str]:
        """Each conf overlay that applies to the side's major: measured without it, its settings are at
        PostgreSQL's defaults."""
        major = side_install(ctx, side).major
        return {
            name: f"without {name} (its settings at PostgreSQL's defaults)" for name in overlays_for(profile, major)
        }

    return Recipe(
        name=name,
        version=version,
        description=profile["description"],
        config=config,
        sides=SideSupport(build_sides, bench_sides, describe=describe, variants=variants),
        workload_identity=lambda workload: identity_of(profile, found, workload),
        workload_info=lambda workload: workload_info(profile, workload),
        groups=group_descriptions(),
    )
