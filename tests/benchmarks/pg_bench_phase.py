"""The cost of the default per-commit bench phase: pg-quick with paired throughput, as a worker runs it.

    .venv/bin/python -m tests.benchmarks.pg_bench_phase --repo R [--tree T] [--work W] [--unpaired]

Runs the runner of the perffarm tree T (default: this checkout; give another commit's tree, e.g. one made with
`git archive <commit> | tar -x -C T`, to measure the profile before a change) on R's head: the build phase (once,
then cached) and one bench phase with `reference=` R's HEAD~2 (paired throughput, as the farm's quick builders run
it), or with --unpaired the commit alone. Prints the bench phase's wall time, the CPU seconds of the runner and its
children (pgbench, valgrind; not the servers, which pg_ctl detaches), the time the instruction counts took (from
the runner's log) and the load average before and after: on a shared box the wall time is as much the
neighbours' as the profile's. Data directories go to a tmpfs root of their own, so a run sweeps nobody else's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from master import compare  # noqa: E402
from recipes.api import checkout_layout  # noqa: E402
from recipes.record import run_record  # noqa: E402

STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] ", re.M)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def seconds(line: str) -> int:
    m = STAMP.match(line)
    assert m is not None
    h, mi, s = (int(x) for x in m.groups())
    return h * 3600 + mi * 60 + s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the perffarm tree whose runner and profile run")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "perffarm" / "bench-phase")
    ap.add_argument("--reference", default="HEAD~2")
    ap.add_argument("--unpaired", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sha, reference = git(args.repo, "rev-parse", "HEAD"), git(args.repo, "rev-parse", f"{args.reference}^{{commit}}")
    src = compare._clone(str(args.repo), args.work)
    compare._checkout(src, sha, None)
    state = args.work / f"state-{os.getpid()}"
    state.mkdir(parents=True, exist_ok=True)
    pgdata = Path("/dev/shm") / f"perffarm-bench-phase-{os.getuid()}"
    options = [f"pgdata={pgdata}"] + ([] if args.unpaired else [f"reference={reference}"])
    common = ["--recipe", "pg-quick", "--src", str(src), "--work", str(checkout_layout(args.work)[1])]
    common += ["--state", str(state), "--sha", sha, "--ref", "compare", "--result", str(state / "result.json")]
    for o in options:
        common += ["--option", o]
    runner = [sys.executable, "-m", "recipes"]
    subprocess.run([*runner, "build", *common], cwd=args.tree, check=True, stdout=subprocess.DEVNULL)
    load_before = os.getloadavg()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run([*runner, "bench", *common], cwd=args.tree, capture_output=True, text=True)
    wall = time.monotonic() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-2000:], file=sys.stderr)
        return 1
    log = proc.stdout.splitlines()
    valgrind = [seconds(ln) for ln in log if "$ valgrind " in ln]
    # "bench done in" before one pair of phases for runs and jobs, "bench of the run of <sha> done in" since
    done = [seconds(ln) for ln in log if STAMP.match(ln) and re.search(r"\bbench\b.* done in ", ln)]
    instr = (done[-1] - valgrind[0]) % 86400 if valgrind and done else 0
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    doc = run_record(json.loads((state / "result.json").read_text()))  # as the master stores it
    figures = {
        "tree": str(args.tree),
        "paired": not args.unpaired,
        "bench_wall_s": round(wall, 1),
        "runner_cpu_s": round(cpu, 1),
        "instruction_phase_wall_s": instr,
        "valgrind_runs": len(valgrind),
        "workloads": len(doc["workloads"]),
        "load_before": round(load_before[0], 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
    print(
        f"RESULT pg-quick bench phase ({'paired' if not args.unpaired else 'unpaired'}, tree {args.tree}): "
        f"{wall:.0f} s wall ({wall / 60:.1f} min), runner+children CPU {cpu:.0f} s, instruction counts {instr} s "
        f"in {len(valgrind)} valgrind runs, {len(doc['workloads'])} result workloads; load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(f"command: {' '.join([sys.executable, '-m', 'tests.benchmarks.pg_bench_phase', *sys.argv[1:]])}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
