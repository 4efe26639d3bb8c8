"""Measure the quick profile's noise and what A/B mode can separate on this machine.

    .venv/bin/python tests/benchmarks/pg_ab_noise.py --repo /tmp/pg-repo aa [--samples 10]
    .venv/bin/python tests/benchmarks/pg_ab_noise.py --repo /tmp/pg-repo inject --iterations 0,300,1000 \
        [--workloads pgbench-ro-prepared-c1,instr-point-select] [--samples 10]
    .venv/bin/python tests/benchmarks/pg_ab_noise.py --repo /tmp/pg-repo wall

`aa` runs the head commit against itself through `perffarm compare` (interleaved, one job) and prints, per quick
workload, the CV of each side's samples and the 95% CI half-width of the A-vs-A median ratio. `inject` compares
the head against the head plus a test-only busy loop of N iterations in standard_ExecutorRun (tests/benchmarks/
pg_inject.py) and prints the ratio, CI and verdict per N, in throughput and in instructions. `wall` times one
default quick-profile bench phase through `python -m recipes` (what a worker runs per commit, after the build).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from master import compare  # noqa: E402
from recipes.api import checkout_layout  # noqa: E402
from recipes.record import run_record  # noqa: E402
from tests.benchmarks.pg_inject import busy_loop_patch  # noqa: E402

PRIMARY = ("tps", "cpu_per_tx", "instructions")


def head(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def run_compare(repo: Path, work: Path, sha: str, options: list[str], patch: Path | None, out: Path) -> dict:
    argv = ["--repo", str(repo), "--work", str(work), sha, sha, "--json", str(out)]
    for o in options:
        argv += ["--option", o]
    if patch is not None:
        argv += ["--patch", str(patch)]
    t0 = time.monotonic()
    rc = compare.main(argv)
    if rc != 0:
        raise SystemExit(f"perffarm compare failed with {rc}")
    doc = json.loads(out.read_text())
    doc["seconds"] = time.monotonic() - t0
    return doc


def cmd_aa(args: argparse.Namespace, tmp: Path) -> None:
    opts = [f"samples={args.samples}"] + ([f"workloads={args.workloads}"] if args.workloads else [])
    doc = run_compare(args.repo, args.work, head(args.repo), opts, None, tmp / "aa.json")
    print(f"\nA-vs-A, {args.samples} interleaved samples per side, {doc['seconds']:.0f} s")
    print(f"{'workload':34s} {'metric':13s} {'CV A':>8s} {'CV B':>8s} {'ratio':>8s} {'CI +-':>8s}")
    for c in doc["comparisons"]:
        if c["metric"] in PRIMARY:
            print(
                f"RESULT {c['workload']:27s} {c['metric']:13s} {c['cv_a']:8.2%} {c['cv_b']:8.2%} "
                f"{c['ratio']:8.4f} {c['ci_half_width']:8.2%}"
            )


def cmd_inject(args: argparse.Namespace, tmp: Path) -> None:
    sha = head(args.repo)
    src = compare._clone(str(args.repo), args.work)
    compare._checkout(src, sha, None)
    opts = [f"samples={args.samples}", f"workloads={args.workloads}"]
    print(f"\nA = head, B = head + busy loop of N iterations per ExecutorRun; {args.samples} samples per side")
    counts = [int(x) for x in args.iterations.split(",")]
    for n in counts:  # all from the clean tree: each compare leaves its patch applied in the clone
        (tmp / f"busy-{n}.patch").write_text(busy_loop_patch(src, n))
    for n in counts:
        patch = tmp / f"busy-{n}.patch"
        doc = run_compare(args.repo, args.work, sha, opts, patch, tmp / f"inject-{n}.json")
        for c in doc["comparisons"]:
            if c["metric"] in PRIMARY:
                print(
                    f"RESULT N={n:<6d} {c['workload']:27s} {c['metric']:13s} ratio {c['ratio']:.4f} "
                    f"CI [{c['ci_low']:.4f}, {c['ci_high']:.4f}] (+-{c['ci_half_width']:.2%}) {c['verdict']}",
                    flush=True,
                )


def cmd_wall(args: argparse.Namespace, tmp: Path) -> None:
    sha = head(args.repo)
    src = compare._clone(str(args.repo), args.work)
    compare._checkout(src, sha, None)
    base = [sys.executable, "-m", "recipes"]
    common = [
        "--recipe",
        "pg-quick",
        "--src",
        str(src),
        "--work",
        str(checkout_layout(args.work)[1]),
        "--state",
        str(tmp / "state"),
        "--sha",
        sha,
        "--ref",
        "compare",
        "--result",
        str(tmp / "result.json"),
    ]
    t0 = time.monotonic()
    subprocess.run(base + ["build", *common], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    t1 = time.monotonic()
    subprocess.run(base + ["bench", *common], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    t2 = time.monotonic()
    doc = run_record(json.loads((tmp / "result.json").read_text()))  # as the master stores it
    print(
        f"RESULT quick profile: build phase {t1 - t0:.1f} s (install cached), bench phase {t2 - t1:.1f} s, "
        f"status {doc['status']}, {len(doc['workloads'])} workloads"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True, type=Path)
    p.add_argument("--work", type=Path, default=compare.default_work_dir())
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("aa")
    a.add_argument("--samples", type=int, default=10)
    a.add_argument("--workloads", default="")
    i = sub.add_parser("inject")
    i.add_argument("--iterations", default="0,300,1000")
    i.add_argument("--samples", type=int, default=10)
    i.add_argument("--workloads", default="pgbench-ro-prepared-c1,instr-point-select")
    sub.add_parser("wall")
    p.add_argument("--keep", type=Path, help="keep the JSON reports (every raw sample) in this directory")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="pf-abnoise-") as tmp:
        {"aa": cmd_aa, "inject": cmd_inject, "wall": cmd_wall}[args.cmd](args, Path(tmp))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for f in Path(tmp).glob("*.json"):
                shutil.copy(f, args.keep / f.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
