"""How `make test`'s pytest-xdist workers share the suite: each worker's files and finishing time.

    .venv/bin/python -m tests.benchmarks.suite_schedule [--junit test-artifacts/junit.xml] [--workers 3]

Drives pytest-xdist's own loadfile scheduler (LoadScopeScheduling, as scripts/run-tests.sh runs it: `--dist loadfile
--no-loadscope-reorder`) with a clock of the durations a finished run wrote to its junit.xml, on the collection
order of this checkout (tests/conftest.py's `run_order`) and on the order before 2026-11-27 (slow files first,
alphabetically). A worker's files and end are what the scheduler decides; a test takes the seconds it took in that
run (setup and teardown included), so a run under other load ends at other times: compare orders on one junit.xml.
"""

from __future__ import annotations

import argparse
import heapq
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from xdist.scheduler import LoadScopeScheduling

ROOT = Path(__file__).resolve().parents[2]


@dataclass(eq=False)
class Worker:
    """xdist's side of a worker (a WorkerController): the test indices it was sent, in order."""

    name: str
    sent: list[int] = field(default_factory=list)
    shutting_down: bool = False

    @property
    def gateway(self) -> SimpleNamespace:  # named in xdist's report of differing collections
        return SimpleNamespace(id=self.name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def schedule(ids: Sequence[str], seconds: Sequence[float], workers: int) -> dict[str, tuple[float, list[str]]]:
    """Each worker's finishing time and files (in the order it ran them) when xdist's loadfile scheduler hands out
    the tests `ids`, in that order, and test i takes seconds[i]."""
    config = SimpleNamespace(
        getvalue=lambda _name: [f"{workers}*popen"], option=SimpleNamespace(loadscopereorder=False)
    )
    sched = LoadScopeScheduling(config, log=SimpleNamespace(loadscopesched=lambda *_: None))  # type: ignore[arg-type]
    nodes = [Worker(f"gw{n}") for n in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
        sched.add_node_collection(node, list(ids))  # type: ignore[arg-type]
    sched.schedule()
    done = {node.name: 0 for node in nodes}  # how many of its sent tests each worker has run
    clock = [(seconds[node.sent[0]], node.name) for node in nodes if node.sent]
    heapq.heapify(clock)
    by_name = {node.name: node for node in nodes}
    finished: dict[str, float] = {}
    while clock:
        now, name = heapq.heappop(clock)
        node = by_name[name]
        sched.mark_test_complete(node, node.sent[done[name]])  # type: ignore[arg-type]
        done[name] += 1
        if done[name] < len(node.sent):
            heapq.heappush(clock, (now + seconds[node.sent[done[name]]], name))
        else:
            finished[name] = now
    if sum(done.values()) != len(ids):
        raise RuntimeError(f"the scheduler ran {sum(done.values())} of {len(ids)} tests")
    return {
        node.name: (finished.get(node.name, 0.0), list(dict.fromkeys(ids[i].split("::")[0] for i in node.sent)))
        for node in nodes
    }


def durations(junit: Path) -> dict[str, float]:
    """nodeid -> seconds of a junit.xml written by pytest (classname tests.integration.test_x, name test_y[p])."""
    out = {}
    for case in ET.parse(junit).iter("testcase"):
        cls = case.get("classname", "")
        out[f"{cls.replace('.', '/')}.py::{case.get('name')}"] = float(case.get("time") or 0)
    return out


def collect(*args: str) -> list[str]:
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *args]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in proc.stdout.splitlines() if "::" in line]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--junit", default=str(ROOT / "test-artifacts" / "junit.xml"))
    p.add_argument("--workers", type=int, default=3)
    args = p.parse_args(argv)
    took = durations(Path(args.junit))
    ids = collect()
    slow = set(collect("-m", "slow"))
    # tests/conftest.py until 2026-11-27: the slow files first, in collection (alphabetical) order
    before = sorted(ids, key=lambda i: (0, i.split("::")[0]) if i in slow else (1, ""))
    missing = [i for i in ids if i not in took]
    total = sum(took.get(i, 0.0) for i in ids)
    print(f"{len(ids)} tests, {total:.0f} s in {args.junit} ({len(missing)} not in it: 0 s each)")
    for label, order in (("this checkout's order", ids), ("slow files first, alphabetically", before)):
        plan = schedule(order, [took.get(i, 0.0) for i in order], args.workers)
        ends = [t for t, _ in plan.values()]
        print(f"\n{label}: last worker ends at {max(ends):.0f} s (an even split: {total / args.workers:.0f} s)")
        for name, (end, files) in plan.items():
            print(
                f"  {name} {end:6.0f} s  {', '.join(Path(f).name for f in files[:3])}{' …' if len(files) > 3 else ''}"
            )
    print(f"\n(.venv/bin/python -m tests.benchmarks.suite_schedule --junit {args.junit} --workers {args.workers})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
