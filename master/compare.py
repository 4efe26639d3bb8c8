"""`perffarm compare --repo PATH A B [--patch FILE] [--profile quick]`: A/B-measure two commits locally.

Builds both commits (or commit A and commit B with a patch applied) with the PostgreSQL recipes' build code,
runs the profile's workloads with A and B samples interleaved in one job, and prints each workload's B/A median
ratio with a bootstrap 95% confidence interval. No master needed. The commits are checked out in a private clone
under --work, never in the user's repository, so one persistent build directory rebuilds incrementally between
A and B and the install cache makes a repeated comparison start at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from recipes.api import Context, RecipeFailure, checkout_layout
from recipes.pg import ab
from recipes.pg import build as pgbuild
from recipes.pg.profile import load_profile, selected_names

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def default_work_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perffarm" / "compare"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="base commit (sha, branch or tag)")
    p.add_argument("b", metavar="B", help="candidate commit (use the same as A with --patch to test a patch)")
    p.add_argument("--repo", required=True, help="path (or URL) of a PostgreSQL git repository")
    p.add_argument("--patch", help="a patch file applied on top of B (git apply)")
    p.add_argument("--profile", default="quick", choices=["quick", "full"], help="workload profile (default quick)")
    p.add_argument(
        "--work",
        default=str(default_work_dir()),
        help="persistent directory for the clone, build trees and installs (default %(default)s)",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="profile overrides, e.g. samples=20, duration_s=5, workloads=pgbench-ro-prepared-c1",
    )
    p.add_argument("--json", dest="json_out", help="also write every raw sample and estimate to this JSON file")
    p.add_argument("--all-metrics", action="store_true", help="show latency/CPU metrics too, not just the primary")


def _git(args: Sequence[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RecipeFailure(f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout.strip()


def _clone(repo: str, work: Path) -> Path:
    """A private clone under `work` (created once, then fetched), so the user's checkout is never touched."""
    src = checkout_layout(work)[0]
    if not (src / ".git").exists():
        work.mkdir(parents=True, exist_ok=True)
        _git(["clone", "--quiet", "--no-checkout", "--", repo, str(src)])
    else:
        _git(["fetch", "--quiet", "--force", "--tags", "--", repo, "+refs/heads/*:refs/remotes/origin/*"], cwd=src)
    return src


def _checkout(src: Path, sha: str, patch: Path | None) -> None:
    """Check out `sha` (git rewrites only the files that differ, keeping incremental builds incremental)."""
    _git(["checkout", "--quiet", "--force", "--detach", sha], cwd=src)
    _git(["clean", "-fdxq"], cwd=src)
    if patch is not None:
        _git(["apply", "--whitespace=nowarn", str(patch)], cwd=src)


def _resolve(repo: str, rev: str) -> str:
    if rev.startswith("-"):
        raise RecipeFailure(f"not a revision: {rev!r}")
    return _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], cwd=Path(repo))


def run(args: argparse.Namespace) -> int:
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"perffarm compare: --option {item!r}: expected KEY=VALUE", file=sys.stderr)
            return EXIT_USAGE
        options[key] = value
    work = Path(args.work).resolve()
    patch = Path(args.patch).resolve() if args.patch else None
    if patch is not None and not patch.is_file():
        print(f"perffarm compare: no such patch file: {patch}", file=sys.stderr)
        return EXIT_USAGE
    profile = load_profile(args.profile)
    try:
        sha_a, sha_b = _resolve(args.repo, args.a), _resolve(args.repo, args.b)
        src = _clone(args.repo, work)
        ctx = Context(
            src_dir=src,
            work_dir=checkout_layout(work)[1],
            state_dir=work / "state",
            sha=sha_b,
            ref="compare",
            options=options,
        )
        ctx.state_dir.mkdir(parents=True, exist_ok=True)
        spec = pgbuild.BuildSpec()
        installs = {}
        for label, sha, p in (("A", sha_a, None), ("B", sha_b, patch)):
            key = sha if p is None else f"{sha}-p{hashlib.sha256(p.read_bytes()).hexdigest()[:12]}"
            slot = pgbuild.install_cache(ctx) / f"{key}-{spec.key()}"
            if not (slot / pgbuild.INSTALL_MARKER).exists():
                _checkout(src, sha, p)
            ctx.log(f"{label}: {sha[:12]}" + (f" + {p.name}" if p else ""))
            installs[label] = pgbuild.build_install(ctx, spec, src=src, sha=key, ref="compare")
        ctx.log(f"comparing with profile {args.profile}: " + ", ".join(selected_names(profile, options)))
        comparisons = ab.run_ab(ctx, profile, installs["A"], installs["B"])
    except RecipeFailure as e:
        print(f"perffarm compare: {e.message}", file=sys.stderr)
        if e.log_excerpt:
            print(e.log_excerpt[-4000:], file=sys.stderr)
        return EXIT_FAILED
    print()
    print(f"A = {args.a} ({sha_a[:12]})   B = {args.b} ({sha_b[:12]})" + (f" + {patch.name}" if patch else ""))
    print("B/A is the median of paired ratios (rQPS for throughput); the CI is a 95% bootstrap interval.")
    print(ab.format_table(comparisons, None if args.all_metrics else ["tps"]))
    if args.json_out:
        doc = {
            "a": sha_a,
            "b": sha_b,
            "patch": str(patch) if patch else None,
            "profile": args.profile,
            "options": options,
            "comparisons": [c.to_json() for c in comparisons],
        }
        Path(args.json_out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="perffarm compare", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
