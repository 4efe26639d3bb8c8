"""Shared pytest setup: the checkout root on sys.path and a per-test artifacts directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def artifacts_dir(request: pytest.FixtureRequest) -> Path:
    """A directory kept after the run (screenshots, logs) named after the test."""
    path = ARTIFACTS / request.node.name.replace("/", "_")
    path.mkdir(parents=True, exist_ok=True)
    return path


INTEGRATION = ROOT / "tests" / "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:  # noqa: ARG001
    """Every test under tests/integration/ is `integration`, so `make test-unit` never starts a real process."""
    for item in items:
        if INTEGRATION in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)
