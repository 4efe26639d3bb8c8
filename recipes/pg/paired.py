"""PostgreSQL's part of paired throughput (the contract is recipes/paired.py): the reference's install.

The build phase builds the reference commit once into the install cache (or reuses it), so pairing costs bench
time, not builds; the bench phase then runs the profile on both installs in one job, in alternating slices and
rounds, exactly as ``perffarm compare`` does. Instruction counts are exact, so they are counted on the commit only.
"""

from __future__ import annotations

from recipes.api import Context
from recipes.paired import reference_tree, reference_work
from recipes.pg import build as pgbuild

STATE_FILE = "pg-reference.json"


def build_reference(ctx: Context, spec: pgbuild.BuildSpec, sha: str, own: pgbuild.Install) -> pgbuild.Install:
    """The reference's install: the commit's own when they are the same, else cached or built once."""
    if sha == own.sha:
        ctx.log(f"reference {sha[:12]} is this commit: an A-vs-A pair on one install")
        return own
    cached = pgbuild.cached_install(ctx, spec, sha)
    if cached is not None:
        ctx.log(f"reference {sha[:12]}: reusing the cached install in {cached.prefix}")
        return cached
    ctx.log(f"reference {sha[:12]}: not cached yet, building it once (later builds reuse it)")
    # in its kept tree and build directory, laid out as a side's (recipes/sides.py) and built as one: "job"
    return pgbuild.build_install(ctx, spec, src=reference_tree(ctx, sha), sha=sha, ref="job", work=reference_work(ctx))
