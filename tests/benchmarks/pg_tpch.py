"""The analytic queries (tpch-*) on installs of several releases: instructions per query, and plans (docs/releases.md).

    .venv/bin/python -m tests.benchmarks.pg_tpch PREFIX [PREFIX ...] [--samples 2] [--json OUT]

Each PREFIX is an install (its bin/postgres; `perffarm compare --work W` and the release tests keep theirs under
W/work/installs/). For each, the quick profile's `tpch` entry runs through the farm's own bench loop
(recipes.pg.profile.run_bench: pgbench's load, the data set, the plans, `--samples` callgrind runs), in a private
tmpfs root. Prints every query's count per release and its ratio to the first release, and the queries whose plan
differs between releases, with what changed (recipes/pg/plans.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from recipes.api import Context  # noqa: E402
from recipes.pg.build import Install  # noqa: E402
from recipes.pg.plans import summary  # noqa: E402
from recipes.pg.profile import load_profile, plans_file, run_bench  # noqa: E402


def measure(prefix: Path, samples: int, work: Path) -> tuple[str, dict[str, list[float]], dict[str, str]]:
    out = subprocess.run([str(prefix / "bin" / "postgres"), "--version"], capture_output=True, text=True, check=True)
    version = out.stdout.split()[-1]
    install = Install(prefix, "0" * 40, int(version.split(".")[0]), version, "reused")
    opts = {
        "workloads": "tpch",
        "instruction_samples": str(samples),
        "coverage": "0",
        "pgdata": f"/dev/shm/perffarm-tpch-{os.getuid()}" if Path("/dev/shm").is_dir() else str(work / "pgdata"),
    }
    ctx = Context(work / "src", work / "work", work / "state", "0" * 40, "tpch", opts)
    ctx.state_dir.mkdir(parents=True, exist_ok=True)
    results = run_bench(ctx, load_profile("quick"), {"run": install}, threads=2, count_instructions={"run"})
    counts = {w.name: list(w.metrics[0].samples) for w in results["run"]}
    return version, counts, json.loads(plans_file(ctx, "run").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefixes", nargs="+", type=Path)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    found = []
    for prefix in args.prefixes:
        with tempfile.TemporaryDirectory(prefix="pf-tpch-") as tmp:
            found.append(measure(prefix.resolve(), args.samples, Path(tmp)))
    names = [v for v, _, _ in found]
    base = found[0][1]
    print(f"\n{'query':<10} {names[0] + ' (M)':>14} " + " ".join(f"{v + '/' + names[0]:>14}" for v in names[1:]))
    for w in sorted(base):
        ratios = " ".join(f"{c[w][0] / base[w][0]:>14.4f}" for _, c, _ in found[1:])
        print(f"{w:<10} {base[w][0] / 1e6:>14.2f} {ratios}")
    for v, c, _ in found[1:]:
        geo = math.exp(sum(math.log(c[w][0] / base[w][0]) for w in base) / len(base))
        print(f"geometric mean {v}/{names[0]}: {geo:.4f}")
    for w in sorted(base):
        shapes = [p[w] for _, _, p in found]
        if len(set(shapes)) > 1:
            steps = [
                f"{names[i]}→{names[i + 1]}: {summary(shapes[i], shapes[i + 1])}"
                for i in range(len(shapes) - 1)
                if shapes[i] != shapes[i + 1]
            ]
            print(f"plan differs: {w}: " + "; ".join(steps))
    spread = [w for w in base for _, c, _ in found if max(c[w]) != min(c[w])]
    print(f"samples that differ within a release: {len(spread)}")
    print(f"command: {' '.join([sys.executable, '-m', 'tests.benchmarks.pg_tpch', *sys.argv[1:]])}")
    if args.json:
        doc = {v: {"counts": c, "plans": p} for v, c, p in found}
        args.json.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
