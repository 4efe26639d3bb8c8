"""Measure PostgreSQL build times through the recipe's build code: cold, ccache-warm, incremental, cached install.

    .venv/bin/python tests/benchmarks/pg_build_times.py --repo /tmp/pg-repo [--skip-cold]

The repository must come from scripts/pg-source-repo.sh (a release tag, then a commit that changes one file,
src/backend/tcop/postgres.c). Steps, each timed and printed:
  cold         empty private ccache, fresh build directory: configure + full compile + install
  ccache-warm  fresh build directory, the ccache the cold step filled (what a new branch or worker costs)
  incremental  the same build directory, next commit (one .c file changed): make + install
  cached       the same commit again: the install cache answers without compiling
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from recipes.api import Context  # noqa: E402
from recipes.pg.build import BuildSpec, build_install  # noqa: E402


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def timed(label: str, ctx: Context, sha: str, ref: str) -> float:
    t0 = time.monotonic()
    inst = build_install(ctx, BuildSpec(), sha=sha, ref=ref)
    seconds = time.monotonic() - t0
    print(f"RESULT {label:12s} {seconds:7.1f} s   ({inst.how}, PostgreSQL {inst.version})", flush=True)
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True, type=Path)
    p.add_argument("--skip-cold", action="store_true", help="use the normal (warm) ccache; skip the cold step")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pf-buildtimes-"))
    try:
        src = tmp / "src"
        subprocess.run(["git", "clone", "-q", str(args.repo), str(src)], check=True)
        tag = git(src, "describe", "--tags", "--abbrev=0", "HEAD")
        first, head = git(src, "rev-parse", f"{tag}^{{commit}}"), git(src, "rev-parse", "HEAD")
        changed = git(src, "diff", "--name-only", f"{head}~1", head)
        options: dict[str, str] = {}
        if not args.skip_cold:
            options["ccache_dir"] = str(tmp / "ccache")
        results = {}

        def ctx_for(work: Path) -> Context:
            work.mkdir(parents=True, exist_ok=True)
            (work / "state").mkdir(exist_ok=True)
            return Context(
                src_dir=src, work_dir=work, state_dir=work / "state", sha=first, ref="master", options=options
            )

        git(src, "checkout", "-q", "--detach", first)
        if not args.skip_cold:
            results["cold"] = timed("cold", ctx_for(tmp / "w1"), first, "master")
        results["ccache-warm"] = timed("ccache-warm", ctx_for(tmp / "w2"), first, "master")
        # The next commit in the same build directory: only the changed file recompiles.
        time.sleep(1.1)  # mtime granularity: make must see the checked-out file as newer
        git(src, "checkout", "-q", "--detach", f"{head}~1")
        git(src, "checkout", "-q", "--detach", head)
        print(f"incremental step: {head[:12]} changes {changed.replace(chr(10), ', ')}")
        results["incremental"] = timed("incremental", ctx_for(tmp / "w2"), head, "master")
        results["cached"] = timed("cached", ctx_for(tmp / "w2"), head, "master")
        print("SUMMARY " + "  ".join(f"{k}={v:.1f}s" for k, v in results.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
