"""The suite's file order under pytest-xdist's own file scheduler (scripts/run-tests.sh: `-n 3 --dist loadfile`).

xdist's LoadScopeScheduling is driven by a clock of test durations, not by real workers
(tests/benchmarks/suite_schedule.py, which does the same for a real run's junit.xml): the tests are stand-ins with a
path and a marker (tests/conftest.py reads nothing else), their durations those of the clean-clone suite of
2026-11-27 before the two quick-profile tests became one (junit.xml), rounded. A worker's files and its finishing
time are what the scheduler decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.benchmarks.suite_schedule import schedule
from tests.conftest import INTEGRATION, run_order

# file -> its tests' durations in seconds: the four real-PostgreSQL files, in collection (alphabetical) order
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

    @property
    def nodeid(self) -> str:
        return f"{self.path.relative_to(INTEGRATION.parent.parent)}::{self.name}"

    def get_closest_marker(self, name: str) -> object | None:
        return name if name == "slow" and self.slow else None


def collected() -> list[Item]:
    files = {**SLOW, **OTHERS}
    return [Item(INTEGRATION / f, f"test_{n}", s, f in SLOW) for f in sorted(files) for n, s in enumerate(files[f])]


@pytest.mark.parametrize("workers", [3, 2])
def test_the_longest_slow_files_start_on_different_workers_and_the_workers_end_together(workers: int) -> None:
    items = collected()
    ordered = run_order(items)  # type: ignore[arg-type]
    assert sorted(ordered, key=lambda i: i.nodeid) == sorted(items, key=lambda i: i.nodeid)  # nothing lost
    assert {i.path.name for i in ordered[: sum(len(t) for t in SLOW.values())]} == set(SLOW)  # the slow files first
    plan = schedule([i.nodeid for i in ordered], [i.seconds for i in ordered], workers)
    owner = {Path(f).name: w for w, (_, files) in plan.items() for f in files}
    # test (e) alone is 650 s; test_postgres_recipes.py 690 s: on one worker they were 1,340 s of a 1,360-s suite
    assert owner["test_pg_farm.py"] != owner["test_postgres_recipes.py"], plan
    total = sum(i.seconds for i in items)
    slowest = max(t for t, _ in plan.values())
    assert slowest <= total / workers * 1.03, (round(total / workers), plan)
