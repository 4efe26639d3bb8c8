"""Change-detection statistics core: pure Python (numpy/scipy), no Buildbot or Twisted imports."""

from __future__ import annotations

from master.detect.model import ChangePoint, Direction, Kind, Series
from master.detect.offline import OfflineSettings, detect
from master.detect.online import GateResult, OnlineSettings, Tier, gate

__all__ = [
    "ChangePoint",
    "Direction",
    "GateResult",
    "Kind",
    "OfflineSettings",
    "OnlineSettings",
    "Series",
    "Tier",
    "detect",
    "gate",
]
