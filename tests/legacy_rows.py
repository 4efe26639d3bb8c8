"""Samples a results database may hold from before the validator checked them by what their metric can be (issue
#26 item 4): a throughput of 0 or -5, 1e-300 next to 1e300. The master refuses them now, so a test that needs such
rows (an old database that every reader must survive) stores them as the master did then: through the same ingest,
with the sample check of that time (every sample a finite number of magnitude at most 1e300)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import pytest

from recipes import result


def _check_before_26(samples: list[Any], path: str, unit: str = "", direction: str = "") -> None:
    for k, v in enumerate(samples):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > 1e300:
            raise result.ResultError(f"{path}[{k}]: expected a finite number of magnitude at most 1e300, got {v!r}")


@contextlib.contextmanager
def validator_before_26() -> Iterator[None]:
    """Within: recipes.result validates samples as it did before issue #26 (what an old database was filled with)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(result, "_samples", _check_before_26)
        yield
