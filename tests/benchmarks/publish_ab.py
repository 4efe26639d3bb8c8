"""Cold (or warm) full publishes of two source trees, alternated in one run (the machine is shared: A and B see
the same load), e.g. the merge base against this checkout:

    git archive main | tar -x -C /tmp/base   # the tree to compare with
    .venv/bin/python -m tests.benchmarks.publish_ab --a /tmp/base --b . --runs 5

Each publish runs in a fresh interpreter with its tree first on sys.path, into an output directory of its own,
after deleting that site and the publish cache and evicting the results DB from the OS page cache (cold, as in
tests/benchmarks/site_figures.py). With --warm nothing is deleted or evicted: each tree first publishes once
(untimed), then every run finds its own live site to hard-link from and the caches as the last publish left them.
Prints wall and CPU seconds (both processes) per run and the medians, with the load average before and after.
The results DB is the one site_figures builds (--work, --series, --commits).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# runs inside the tree under test: its own master.publish, the same results DB
_ONE = """
import json, os, shutil, sys
from pathlib import Path
from master.publish import publish_all
from master.publish.writer import wait_for_cleanup
from master.settings import load_settings
work, out, jobs, cold = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "cold"
settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(work)})
for p in (out, out.parent / f".{out.name}.versions", work / "publish-cache.sqlite") if cold else ():
    if p.is_symlink() or p.is_file():
        p.unlink()
    elif p.exists():
        shutil.rmtree(p)
for p in (settings.results_db, Path(str(settings.results_db) + "-wal")) if cold else ():  # site_figures.evict
    if p.exists():
        fd = os.open(p, os.O_RDONLY)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
t = os.times()
report = publish_all(settings, out, jobs=jobs)
u = os.times()
wait_for_cleanup()
cpu = (u.user + u.system + u.children_user + u.children_system) - (
    t.user + t.system + t.children_user + t.children_system)
print(json.dumps({"wall": report.seconds, "cpu": cpu, "files": report.files_written}))
"""


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one(tree: Path, work: Path, out: Path, jobs: int, cold: bool = True) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFFARM_")}
    env["PYTHONPATH"] = str(tree)
    proc = subprocess.run(
        [sys.executable, "-c", _ONE, str(work), str(out), str(jobs), "cold" if cold else "warm"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True, help="source tree A (e.g. the merge base)")
    ap.add_argument("--b", type=Path, default=Path("."), help="source tree B (default: this checkout)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/perffarm-site-figures"))
    ap.add_argument("--series", type=int, default=100)
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, choices=(1, 2), default=2)
    ap.add_argument("--warm", action="store_true", help="keep each tree's live site, the caches and the page cache")
    args = ap.parse_args(argv)
    work = (args.work / f"{args.series}x{args.commits}").resolve()
    if not (work / "results.sqlite").exists():
        print(f"no results DB in {work}: run tests.benchmarks.site_figures with the same --work first", file=sys.stderr)
        return 1
    trees = {"A": args.a.resolve(), "B": args.b.resolve()}
    got: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    print(
        f"{'warm' if args.warm else 'cold'} full publish, {args.series} x {args.commits}, jobs={args.jobs}; "
        f"A={trees['A']} B={trees['B']}"
    )
    print(f"load average before: {load()}", flush=True)
    if args.warm:  # a live site of its own for each tree to build on
        for name in ("A", "B"):
            one(trees[name], work, work / f"site-ab-{name}", args.jobs, cold=False)
    for i in range(args.runs):
        for name in ("A", "B") if i % 2 == 0 else ("B", "A"):  # alternate who goes first
            r = one(trees[name], work, work / f"site-ab-{name}", args.jobs, cold=not args.warm)
            got[name].append(r)
            print(
                f"  run {i + 1} {name}: {r['wall']:6.2f} s wall, {r['cpu']:6.2f} s CPU, {r['files']} files "
                f"(load {load()})",
                flush=True,
            )
    for name in ("A", "B"):
        walls = [r["wall"] for r in got[name]]
        print(
            f"{name}: median {statistics.median(walls):.2f} s wall (min {min(walls):.2f}, max {max(walls):.2f}), "
            f"median {statistics.median(r['cpu'] for r in got[name]):.2f} s CPU"
        )
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
