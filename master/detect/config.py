"""The farm's `[detection]` settings as frozen data: what is reported, kept and bisected.

The defaults here are the defaults of the pure detectors (``OfflineSettings``, ``OnlineSettings``,
``SteadySettings``, ``tracker.still_holds``, ``bisection.core.Policy``) and of ``perffarm.toml``; the farm reads
the section once (``master.settings.load_settings``) and passes a ``DetectionSettings`` down. Pure: imports
nothing, so every detector module can take its defaults from here.
"""

from __future__ import annotations

from dataclasses import dataclass

# The retrospective detector's level for reporting a change point in one series (``OfflineSettings.alpha``); the
# farm's keep_alpha may not be stricter than it (master.settings), or a borderline point would flap.
REPORT_ALPHA = 1e-4
# The smallest relative move of the median that is a change: retrospective points, the online gate and the
# steady-series rule all ignore smaller steps, and bisection confirms steady (instruction-count) ends from it.
MIN_EFFECT = 0.005
# Benjamini-Hochberg level across the farm's series for newly reported change points. With the retrospective
# detector's own per-series level (1e-4) it binds from 100 series on: a farm of m series admits a lone new
# point at p <= 0.01/m, and k points in one pass at p <= 0.01·k/m (docs/detection.md).
FDR = 0.01
# A reported point the detector stopped listing is withdrawn when its split is no longer significant at this
# level: looser than the level that reported it, so a borderline point does not flap.
KEEP_ALPHA = 1e-2
# The relative change a bisection's two ends must show before it searches (noisy ends; 1 %).
BISECT_MIN_EFFECT = 0.01
# Commits of a series each analysis pass re-detects, the newest ones; change points older than the window are
# settled and kept as stored (master.analysis). A pass's cost no longer grows with the history.
WINDOW = 1000
# The commits at a window's left edge settled with the older history (master.analysis), and the smallest window.
WINDOW_EDGE = 50
MIN_WINDOW = 4 * WINDOW_EDGE


@dataclass(frozen=True)
class DetectionSettings:
    """The effective `[detection]` section (see perffarm.toml for what each key changes)."""

    min_effect: float = MIN_EFFECT
    fdr: float = FDR
    keep_alpha: float = KEEP_ALPHA
    bisect_min_effect: float = BISECT_MIN_EFFECT
    window: int = WINDOW
