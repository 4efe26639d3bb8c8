"""Shared pytest setup: the checkout root on sys.path and a per-test artifacts directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from tests import pg_support

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def artifacts_dir(request: pytest.FixtureRequest) -> Path:
    """A directory kept after the run (screenshots, logs) named after the test."""
    path = ARTIFACTS / request.node.name.replace("/", "_")
    path.mkdir(parents=True, exist_ok=True)
    return path


INTEGRATION = ROOT / "tests" / "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:  # noqa: ARG001
    """Every test under tests/integration/ is `integration`, so `make test-unit` never starts a real process.

    The `slow` files (real PostgreSQL, the longest files by far) are put first, so the workers of
    `pytest -n 3 --dist loadfile --no-loadscope-reorder` (scripts/run-tests.sh) start them at once and the short
    files fill in behind them; among them, the files with the most tests come first (`run_order`)."""
    for item in items:
        if INTEGRATION in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
    items[:] = run_order(items)


def run_order(items: list[pytest.Item]) -> list[pytest.Item]:
    """The `slow` files first, those with the most tests before the others; then the rest, in collection order.

    pytest-xdist runs a test only once it knows the next one, so a worker whose file has two tests or fewer left is
    given the next file at once (xdist's LoadScopeScheduling). Put first, test_pg_farm.py (one 11-minute test)
    took test_postgres_recipes.py (14 tests, 11 minutes) along with it: one worker ran 22 minutes of the 23-minute
    suite while the other two finished early. With the files of many tests first, each worker starts one slow file,
    and the one-test file goes to the first worker down to two tests: the one whose slow file has the fewest
    (tests/unit/test_suite_order.py drives xdist's scheduler with the suite's durations)."""
    counts: dict[Path, int] = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
    return sorted(items, key=lambda item: (0, -counts[item.path]) if item.get_closest_marker("slow") else (1, 0))


# ---------------------------------------------------------------------------------------------- shared PostgreSQL
# Built once per run and shared by every file (tests/pg_support.py): ask for `pg15` or `pg_releases` by name.
@pytest.fixture(scope="session")
def pg15(tmp_path_factory: pytest.TempPathFactory) -> pg_support.Pg:
    """PostgreSQL 15.18 built from Debian's source package at the head of scripts/pg-source-repo.sh's repository."""
    from tests import pg_support  # imported here: the unit tier never loads the recipes' build code

    return pg_support.pg15(tmp_path_factory)


@pytest.fixture(scope="session")
def pg_releases(tmp_path_factory: pytest.TempPathFactory) -> pg_support.Releases:
    """13.16 (autoconf) and 18.6 (meson) built from Debian's source packages, tagged in one repository."""
    from tests import pg_support

    return pg_support.releases(tmp_path_factory)
