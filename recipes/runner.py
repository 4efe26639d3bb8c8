"""Run one phase of a recipe on a worker and write the result JSON.

The build phase and the bench phase are separate commands so the master can hold the per-host measurement
lock exclusively around the bench alone. Exit codes: 0 the phase succeeded; 3 the recipe failed and a result
saying so was written (build-failed / bench-failed: a result, not a crash); 2 bad usage; 1 the runner itself
crashed and wrote nothing (the master re-queues the commit).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recipes import paired, registry
from recipes import sandbox as sandboxing
from recipes.api import Context, Recipe, RecipeFailure, Side, WorkloadResult, callgrind_file, side_file
from recipes.record import run_record
from recipes.result import (
    CALLGRIND,
    COVERAGE,
    PLANS,
    SCHEMA,
    SCHEMA_VERSION,
    WAITS,
    clean_text,
    validate_job,
)
from recipes.sides import open_sandbox, parse_sides, untrusted_dir
from workers import hostinfo

EXIT_OK, EXIT_CRASH, EXIT_USAGE, EXIT_RECIPE_FAILED = 0, 1, 2, 3
BUILD_MARKER = "build-ok.json"  # a successful build phase: of which run or job, its timings


def _now() -> str:
    # milliseconds, so that a run's measurement window [finished_at - bench_seconds, finished_at] can be compared
    # with its neighbours' on one host (the per-host measurement lock, docs/scale.md)
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Write sorted-key JSON through a temp file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True, indent=1) + "\n")
    os.replace(tmp, path)


def callgrind_profiles(ctx: Context, label: str) -> dict[str, Any]:
    """The callgrind profiles a side kept (recipes.api.callgrind_file; recipes/pg/profile.py callgrind=1), in the
    result's form: per workload, the number of counted queries and the size-bounded profile JSON."""
    from recipes import callgrind

    out: dict[str, Any] = {}
    pattern = callgrind_file(ctx.state_dir, label, "*")
    for path in sorted(pattern.parent.glob(pattern.name)):
        queries = path.with_suffix(".queries")
        if not queries.exists():
            continue
        workload = path.name[len(label) + 2 : -len(".out")]
        started = time.monotonic()
        try:
            prof = callgrind.parse(path)
        except Exception as e:  # noqa: BLE001 - a try-job's profile was written inside its sandbox: any input
            ctx.log(f"warning: the callgrind profile of {workload} is unreadable, left out: {str(e)[:200]}")
            continue
        out[workload] = {"queries": int(queries.read_text()), "profile": prof.to_json()}
        ctx.log(  # the profile's whole cost: callgrind already ran for the instruction counts (docs/explain.md)
            f"side {label}: callgrind profile of {workload} parsed in {time.monotonic() - started:.2f} s "
            f"({path.stat().st_size:,} bytes, {len(prof.functions):,} functions)"
        )
    return out


def _side_file(ctx: Context, kind: str, label: str, what: str) -> dict[str, Any]:
    """A side's JSON document of `kind` (recipes.api.side_file), per workload; {} without it, and a warning
    naming `what` (e.g. "plans of B") when it is unreadable (a try-job's files were written inside its sandbox)."""
    path = side_file(ctx.state_dir, kind, label)
    try:
        return dict(json.loads(path.read_text())) if path.exists() else {}
    except (OSError, ValueError) as e:
        ctx.log(f"warning: the {what} are unreadable, left out: {str(e)[:200]}")
        return {}


def sampled_waits(ctx: Context, label: str) -> dict[str, Any]:
    """The wait events a side sampled during its pgbench samples (recipes/pg/waits.py), per workload; {} without."""
    return _side_file(ctx, "waits", label, f"sampled waits of side {label}")


def captured_plans(ctx: Context, label: str) -> dict[str, Any]:
    """The plan shapes a label's analytic queries ran with (recipes/pg/plans.py), per workload; {} without."""
    return _side_file(ctx, "plans", label, f"plans of {label}")


def result_doc(
    recipe: Recipe,
    ctx: Context,
    status: str,
    sides: Sequence[Side],
    results: Mapping[str, Sequence[WorkloadResult]],
    log_excerpt: str,
    timings: dict[str, float],
    started_at: str,
    job: int | None = None,
) -> dict[str, Any]:
    """A result (recipes/result.py, one schema for runs and jobs): the run's commit or the job's id, and every
    side's raw samples, side by side."""
    fp = hostinfo.fingerprint()
    which: dict[str, Any] = {"commit": {"sha": ctx.sha, "ref": ctx.ref}} if job is None else {"job": job}
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        **which,
        "recipe": {
            "name": recipe.name,
            "version": recipe.version,
            "config_hash": recipe.config_hash(),
            "options": dict(ctx.options),
        },
        "machine": {"id": hostinfo.machine_id(fp), "fingerprint": fp},
        "host_checks": hostinfo.host_checks(),
        "status": status,
        "log_excerpt": log_excerpt,
        "sides": [
            {
                "label": s.label,
                "sha": s.sha,
                "patch": s.patch_id,
                # each workload's series identity: adding or changing one workload leaves the others' series whole
                "workloads": [
                    {**w.to_json(), "config_hash": recipe.workload_hash(w.name)} for w in results.get(s.label, ())
                ],
            }
            for s in sides
        ],
        "timings": timings,
        "started_at": started_at,
        "finished_at": _now(),
    }


def _context(args: argparse.Namespace) -> Context:
    options = {}
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--option {item!r}: expected KEY=VALUE")
        options[key] = value
    for d in (args.work, args.state):
        Path(d).mkdir(parents=True, exist_ok=True)
    return Context(
        src_dir=Path(args.src).resolve(),
        work_dir=Path(args.work).resolve(),
        state_dir=Path(args.state).resolve(),
        sha=args.sha,
        ref=args.ref or "job",  # a job's, for logs and build directories
        options=options,
    )


def _phase(args: argparse.Namespace, phase: str) -> int:
    """The build or bench phase of a run (its commit, and the reference when paired: recipes/paired.py) or of a job
    (`--job` and its `--side`s): both build their sides, then measure them interleaved (recipes/api.py
    SideSupport). A build starts afresh and leaves a marker; the bench needs it (of the same run or job) and carries
    its timings on; a RecipeFailure is written as a result saying so."""
    recipe = registry.get(args.recipe)
    job, building = args.job is not None, phase == "build"
    sides: list[Side] = []
    try:
        if job:
            sides = parse_sides(args.side or [], args.patch or [])
        elif args.side or args.patch or args.ref is None:
            raise ValueError(
                "a run is given --ref (its sides are the commit, and the reference when paired); "
                "--side and --patch are a job's, with --job"
            )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    ctx = _context(args)
    if not job:
        sides = [paired.commit_side(ctx)]  # and the reference when paired, once its option is checked (below)
    marker = ctx.state_dir / BUILD_MARKER
    result_path = Path(args.result)
    started_at, t0 = _now(), time.monotonic()
    timings: dict[str, float] = {}
    seconds = f"{phase}_seconds"
    what = f"job {args.job}" if job else f"the run of {ctx.sha[:12]}"
    if building:
        marker.unlink(missing_ok=True)
        result_path.unlink(missing_ok=True)
    else:
        prior = json.loads(marker.read_text()) if marker.exists() else None
        if prior is None or prior.get("job") != args.job or prior.get("sha") != ctx.sha:
            print(f"no successful build of {what} in {ctx.state_dir}; run the build phase first", file=sys.stderr)
            return EXIT_USAGE
        timings.update(prior.get("timings", {}))
        started_at = prior.get("started_at", started_at)

    def document(status: str, results: Mapping[str, Sequence[WorkloadResult]], excerpt: str) -> dict[str, Any]:
        return result_doc(
            recipe, ctx, status, sides, results, excerpt, timings, started_at, job=args.job if job else None
        )

    if job:
        listing = ", ".join(f"{s.label}={s.sha[:12]}" + ("+patch" if s.patch else "") for s in sides)
        ctx.log(f"recipe {recipe.name} v{recipe.version}: {phase} of job {args.job}: {listing}")
    else:
        ctx.log(f"recipe {recipe.name} v{recipe.version} ({recipe.config_hash()}): {phase} {ctx.sha[:12]} ({ctx.ref})")
    results: Mapping[str, Sequence[WorkloadResult]] = {}
    try:
        if not job:  # a run is one side, the commit checked out; two when paired (recipes/paired.py)
            sides = paired.run_sides(ctx)
            if len(sides) > 1:
                ctx.log("paired: " + ", ".join(f"{s.label}={s.sha[:12]}" for s in sides))
        if building:
            # what an earlier job's patched side left is never seen again (recipes/sandbox.py)
            sandboxing.remove_tree(untrusted_dir(ctx))
            ctx = open_sandbox(ctx, sides)
            ctx.state_dir.mkdir(parents=True, exist_ok=True)
            # a run's own commit first: a reference at the same commit then reuses its install; the recipe prepares
            # the trees it builds (recipes/sides.py prepared)
            recipe.sides.build(ctx, sorted(sides, key=lambda s: not s.checkout))
        else:
            ctx = open_sandbox(ctx, sides)
            try:
                results = recipe.sides.bench(ctx, sides)
            finally:
                sandboxing.remove_tree(untrusted_dir(ctx))
    except RecipeFailure as e:
        status = "build-failed" if building else "bench-failed"
        ctx.log(f"{status}: {e.message}")
        timings[seconds] = round(time.monotonic() - t0, 3)
        excerpt = clean_text(f"{e.message}\n{e.log_excerpt or ctx.tail()}".strip()[-60_000:])
        write_json_atomic(result_path, document(status, {}, excerpt))
        return EXIT_RECIPE_FAILED
    except Exception:
        if phase != "bench":
            raise  # a bug in the recipe's build (or a job's) code: let the runner crash so it is seen and retried
        tb = traceback.format_exc()
        ctx.log("bench-failed: the recipe raised an exception")
        print(tb, file=sys.stderr)
        timings[seconds] = round(time.monotonic() - t0, 3)
        write_json_atomic(result_path, document("bench-failed", {}, clean_text(f"{tb}\n{ctx.tail()}"[-60_000:])))
        return EXIT_RECIPE_FAILED
    timings[seconds] = round(time.monotonic() - t0, 3)
    if building:
        write_json_atomic(marker, {"timings": timings, "started_at": started_at, "sha": ctx.sha, "job": args.job})
        ctx.log(f"{phase} of {what} done in {timings[seconds]:.1f} s")
        return EXIT_OK
    doc = document("ok", results, "")
    _add_side_files(ctx, doc)
    write_json_atomic(result_path, doc)
    try:
        # what the master checks: a run's record is its sides joined (recipes/record.py)
        (validate_job if job else run_record)(json.loads(json.dumps(doc)))
    except ValueError as e:
        # Written anyway: the master is the gatekeeper and will reject it with the same message.
        ctx.log(f"warning: this {'job ' if job else ''}result will be rejected by the master: {e}")
    ctx.log(f"{phase} of {what} done in {timings[seconds]:.1f} s; result written to {result_path}")
    return EXIT_OK


def _add_side_files(ctx: Context, doc: dict[str, Any]) -> None:
    """What each side's bench left besides its workloads: callgrind profiles, coverage, sampled waits and plans
    (each release's plans, so that the site names a query planned differently by another release)."""
    for side in doc["sides"]:
        label = side["label"]
        profiles = callgrind_profiles(ctx, label)
        if profiles:
            side[CALLGRIND] = profiles
        figure = _side_file(ctx, COVERAGE, label, f"coverage of {label}")
        if figure:
            side[COVERAGE] = figure
        found = sampled_waits(ctx, label)
        if found:
            side[WAITS] = found
        shapes = captured_plans(ctx, label)
        if shapes:
            side[PLANS] = shapes


def _list(_: argparse.Namespace) -> int:
    rows = [
        {"name": r.name, "version": r.version, "config_hash": r.config_hash(), "description": r.description}
        for r in registry.discover().values()
    ]
    print(json.dumps(sorted(rows, key=lambda r: r["name"]), indent=1))
    return EXIT_OK


def _fingerprint(_: argparse.Namespace) -> int:
    fp = hostinfo.fingerprint()
    doc = {"machine_id": hostinfo.machine_id(fp), "fingerprint": fp, "host_checks": hostinfo.host_checks()}
    print(json.dumps(doc, indent=1, sort_keys=True))
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="perffarm-recipes",
        description="Run perffarm recipes on a worker. The master ships this zipapp with every build.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for phase in ("build", "bench"):
        s = sub.add_parser(
            phase,
            help=f"the {phase} phase of a run (--ref) or of a job (--job, --side)",
            description=f"The {phase} phase of a commit's run (--ref: the commit checked out in --src, and the "
            "reference when --option reference=SHA pairs it) or of a job (--job with 2 to 8 --side: commits "
            "exported from the clone in --src, measured interleaved).",
        )
        s.add_argument("--recipe", required=True, help="recipe name (see `list`)")
        s.add_argument("--src", required=True, help="the checked-out commit; a job's sides are exported from it")
        s.add_argument("--work", required=True, help="persistent directory for this builder (build trees)")
        s.add_argument("--state", required=True, help="this build's scratch directory")
        s.add_argument("--sha", required=True, help="the commit checked out in --src")
        s.add_argument("--ref", help="a run's: the branch or tag that asked for it (a job's: a name for logs)")
        s.add_argument("--job", type=int, help="a job's: the master's job id (written into the result)")
        s.add_argument("--side", action="append", metavar="LABEL=SHA", help="a job's side (A, B, ...)")
        s.add_argument("--patch", action="append", metavar="LABEL=FILE", help="a patch applied on top of a job's side")
        s.add_argument("--result", required=True, help="where to write the result JSON")
        s.add_argument("--option", action="append", metavar="KEY=VALUE", help="recipe option (repeatable)")
        s.set_defaults(func=lambda a, phase=phase: _phase(a, phase))
    sub.add_parser("list", help="list recipes as JSON").set_defaults(func=_list)
    sub.add_parser("fingerprint", help="print this machine's fingerprint and host checks").set_defaults(
        func=_fingerprint
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except registry.UnknownRecipe as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
