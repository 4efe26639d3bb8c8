"""The coverage figure of the default per-commit profile, before and after the operation suite (docs/coverage.md).

    .venv/bin/python -m tests.benchmarks.pg_coverage --repo R [--work W] [--json OUT]

Builds R's head (cached after the first time) and runs pg-quick's instruction workloads through the runner, as a
worker's bench phase runs them (the wall-clock workloads exercise the same code as the instr-* ones and add nothing
a profile could show). The result's `coverage` member (recipes/pg/coverage.py) holds the figure of every
instruction workload together and of each group's: the oltp group is the three instr-* workloads, all the
profile counted before the operation suite, so one run gives both. Prints the share of backend functions, the
areas, and which of the named functions (recipes/pg/coverage-functions.json) each exercises.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from master import compare  # noqa: E402
from recipes.api import checkout_layout  # noqa: E402
from recipes.pg import coverage  # noqa: E402
from recipes.pg.profile import WORKLOAD_KINDS, load_profile, workloads  # noqa: E402
from recipes.record import run_record  # noqa: E402

BEFORE = "oltp"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "perffarm" / "coverage")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sha = subprocess.run(["git", "-C", str(args.repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    sha = sha.strip()
    src = compare._clone(str(args.repo), args.work)
    compare._checkout(src, sha, None)
    state = args.work / "state"
    state.mkdir(parents=True, exist_ok=True)
    names = [w.name for w in workloads(load_profile("quick")) if WORKLOAD_KINDS[w.kind].phase == "instructions"]
    common = ["--recipe", "pg-quick", "--src", str(src), "--work", str(checkout_layout(args.work)[1])]
    common += ["--state", str(state), "--sha", sha, "--ref", "compare", "--result", str(state / "result.json")]
    options = [f"workloads={','.join(names)}", f"pgdata=/dev/shm/perffarm-coverage-{os.getuid()}"]
    for o in options:
        common += ["--option", o]
    runner = [sys.executable, "-m", "recipes"]
    subprocess.run([*runner, "build", *common], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*runner, "bench", *common], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    doc = run_record(json.loads((state / "result.json").read_text()))["coverage"]
    after, before = doc["groups"][coverage.ALL], doc["groups"][BEFORE]

    def share(pair: list[int]) -> str:
        return f"{pair[0]:,} of {pair[1]:,} ({pair[0] / max(pair[1], 1):.1%})"

    print(f"rule: a function holding at least {doc['rule']:.2%} of an instruction workload's instructions")
    print(f"backend functions exercised: before {share(before['functions'])}, after {share(after['functions'])}")
    listed = doc["listed"]
    print(
        f"named functions exercised: before {len(before['listed'])} of {listed} "
        f"({len(before['listed']) / listed:.0%}), after {len(after['listed'])} of {listed} "
        f"({len(after['listed']) / listed:.0%})"
    )
    print(f"\n{'area':<22} {'functions':>9} {'before':>16} {'after':>16}")
    for area, pair in sorted(after["areas"].items(), key=lambda kv: (-kv[1][1], kv[0])):
        old = before["areas"].get(area, [0, pair[1]])
        print(f"{area:<22} {pair[1]:>9,} {old[0]:>7,} {old[0] / pair[1]:>7.1%} {pair[0]:>7,} {pair[0] / pair[1]:>7.1%}")
    print(f"\n{'category':<18} {'function':<26} before after")
    for category, fns in coverage.listed_by_category().items():
        for fn in fns:
            print(f"{category:<18} {fn:<26} {'yes' if fn in before['listed'] else 'no':<6} "
                  f"{'yes' if fn in after['listed'] else 'no'}")  # fmt: skip
    print(f"\ncommand: {' '.join([sys.executable, '-m', 'tests.benchmarks.pg_coverage', *sys.argv[1:]])}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
