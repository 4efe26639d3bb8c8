"""The suite's file order under pytest-xdist's own file scheduler (scripts/run-tests.sh: `-n 3 --dist loadfile`).

xdist's LoadScopeScheduling is driven here by a clock of test durations, not by real workers: the tests are stand-ins
with a path and a marker (tests/conftest.py orders nothing else), their durations the 2026-11-27 clean-clone
suite's (junit.xml), rounded. A worker's files and its finishing time are what the scheduler decides.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.conftest import INTEGRATION, run_order

# file -> (slow, test durations in seconds): the four real-PostgreSQL files, in collection (alphabetical) order
SLOW = {
    "test_pg_farm.py": [650],  # test (e): one long test
    "test_pg_operations.py": [78, 36, 26],
    "test_pg_releases.py": [390, 40, 46, 5],
    "test_postgres_recipes.py": [140, 5, 80, 117, 87, 23, 5, 47, 5, 5, 138, 17, 21, 3],
}
OTHERS = {f"test_farm_{i:02d}.py": [30, 20, 10] for i in range(31)}  # the other 1,860 s of the suite, in short files


@dataclass
class Item:
    """What the ordering reads of a collected test: its file and whether it is `slow`."""

    path: Path
    name: str
    seconds: float
    slow: bool
    markers: list[str] = field(default_factory=list)

    @property
    def nodeid(self) -> str:
        return f"{self.path.relative_to(INTEGRATION.parent.parent)}::{self.name}"

    def get_closest_marker(self, name: str) -> object | None:
        return name if name == "slow" and self.slow else None


@dataclass(eq=False)
class Worker:
    """xdist's side of a worker: the test indices it was sent, in order."""

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


def schedule(items: list[Item], workers: int) -> dict[str, tuple[float, list[str]]]:
    """Each worker's finishing time and files when xdist's loadfile scheduler hands out `items` in their order."""
    ids = [i.nodeid for i in items]
    config = SimpleNamespace(
        getvalue=lambda _name: [f"{workers}*popen"], option=SimpleNamespace(loadscopereorder=False)
    )
    sched = LoadScopeScheduling(config, log=SimpleNamespace(loadscopesched=lambda *_: None))  # type: ignore[arg-type]
    nodes = [Worker(f"gw{n}") for n in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
        sched.add_node_collection(node, ids)  # type: ignore[arg-type]
    sched.schedule()
    done = {node.name: 0 for node in nodes}  # how many of its sent tests each worker has run
    clock: list[tuple[float, str]] = [(items[node.sent[0]].seconds, node.name) for node in nodes if node.sent]
    by_name = {node.name: node for node in nodes}
    finished: dict[str, float] = {}
    while clock:
        now, name = heapq.heappop(clock)
        node = by_name[name]
        sched.mark_test_complete(node, node.sent[done[name]])  # type: ignore[arg-type]
        done[name] += 1
        if done[name] < len(node.sent):
            heapq.heappush(clock, (now + items[node.sent[done[name]]].seconds, name))
        else:
            finished[name] = now
    assert sum(done.values()) == len(items)
    return {
        node.name: (finished.get(node.name, 0.0), list(dict.fromkeys(items[i].path.name for i in node.sent)))
        for node in nodes
    }


def collected() -> list[Item]:
    files = {**SLOW, **OTHERS}
    return [Item(INTEGRATION / f, f"test_{n}", s, f in SLOW) for f in sorted(files) for n, s in enumerate(files[f])]


@pytest.mark.parametrize("workers", [3, 2])
def test_the_longest_slow_files_start_on_different_workers_and_the_workers_end_together(workers: int) -> None:
    items = collected()
    ordered = run_order(items)  # type: ignore[arg-type]
    assert sorted(ordered, key=lambda i: i.nodeid) == sorted(items, key=lambda i: i.nodeid)  # nothing lost
    assert {i.path.name for i in ordered[: sum(len(t) for t in SLOW.values())]} == set(SLOW)  # the slow files first
    plan = schedule(ordered, workers)  # type: ignore[arg-type]
    owner = {f: w for w, (_, files) in plan.items() for f in files}
    # test (e) alone is 650 s; test_postgres_recipes.py 690 s: on one worker they were 1,340 s of a 1,360-s suite
    assert owner["test_pg_farm.py"] != owner["test_postgres_recipes.py"], plan
    total = sum(i.seconds for i in items)
    slowest = max(t for t, _ in plan.values())
    assert slowest <= total / workers * 1.03, (round(total / workers), plan)
