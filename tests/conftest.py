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

    The `slow` tests (real PostgreSQL builds, the longest files by far) are put first: under
    `pytest -n 2 --dist loadfile --no-loadscope-reorder` (scripts/run-tests.sh) the workers start them at once and
    the short files fill in behind them."""
    for item in items:
        if INTEGRATION in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow") else 1)


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
