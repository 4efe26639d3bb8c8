"""Labelled synthetic benchmark series that look like pgbench/sysbench results per commit.

Every series is drawn from a seeded numpy Generator, so a (category, seed) pair always gives the same
series and labels. Noise: CV 0.5-5 %, normal, right-skewed (lognormal), bimodal (a slow mode hit by a
fraction of runs) or heavy-tailed (Student t3), plus outlier samples and whole outlier runs. Changes:
steps of 1-20 % both ways, short-lived regressions that get fixed, slow drift made of many small steps
(labelled as one episode), and series with no change at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NOISES = ("normal", "skewed", "bimodal", "heavy")


@dataclass(frozen=True)
class Episode:
    """A labelled change: ``index`` is the first commit after it; a drift spans ``index``..``last``."""

    index: int
    ratio: float
    last: int = -1
    steps: tuple[int, ...] = ()

    @property
    def is_drift(self) -> bool:
        """Whether this is a slow drift made of several small steps."""
        return len(self.steps) > 1


@dataclass(frozen=True)
class Labelled:
    """One synthetic series: ``samples[i]`` are the raw samples of commit ``i``."""

    name: str
    samples: list[np.ndarray] = field(repr=False)
    episodes: tuple[Episode, ...]
    samples_per_commit: int
    cv: float
    noise: str

    @property
    def n(self) -> int:
        """Number of commits."""
        return len(self.samples)

    def commit_medians(self) -> np.ndarray:
        """One value per commit, the input single-value detectors (Otava, MongoDB) get."""
        return np.array([float(np.median(s)) for s in self.samples])


def _noise(rng: np.random.Generator, kind: str, cv: float, shape: tuple[int, ...]) -> np.ndarray:
    """Multiplicative noise with median ~1 and spread ~cv."""
    if kind == "normal":
        return 1.0 + cv * rng.standard_normal(shape)
    if kind == "skewed":
        # Right-skewed throughput: most runs near the top, a long tail of slow runs.
        return 1.0 - cv * (rng.lognormal(0.0, 0.8, shape) - 1.0) / 1.1
    if kind == "bimodal":
        slow = rng.random(shape) < rng.uniform(0.15, 0.4)
        return 1.0 + cv * 0.5 * rng.standard_normal(shape) - slow * cv * rng.uniform(1.5, 3.0)
    if kind == "heavy":
        return 1.0 + cv * 0.7 * rng.standard_t(3, shape)
    raise ValueError(f"unknown noise {kind!r}")


def _positions(rng: np.random.Generator, n: int, count: int, gap: int, edge: int) -> list[int]:
    """``count`` change positions at least ``gap`` apart and ``edge`` from both ends."""
    for _ in range(1000):
        pos = np.sort(rng.integers(edge, n - edge, size=count))
        if count == 0 or (np.all(np.diff(pos) >= gap)):
            return [int(p) for p in pos]
    return []


def make_series(
    rng: np.random.Generator,
    name: str,
    n: int = 300,
    k: int = 1,
    snr: tuple[float, float] = (3.0, 12.0),
    n_changes: tuple[int, int] = (1, 4),
    drift_prob: float = 0.15,
    temp_prob: float = 0.15,
    outlier_rate: float = 0.01,
    cv_range: tuple[float, float] = (0.005, 0.05),
    noise: str | None = None,
) -> Labelled:
    """One labelled series; step sizes are drawn as a per-commit signal-to-noise ratio, kept in 1-20 %."""
    cv = float(np.exp(rng.uniform(np.log(cv_range[0]), np.log(cv_range[1]))))
    noise = noise or NOISES[int(rng.integers(len(NOISES)))]
    level = np.ones(n)
    episodes: list[Episode] = []
    count = int(rng.integers(n_changes[0], n_changes[1] + 1))
    positions = _positions(rng, n, count, gap=30, edge=15)

    def step_size() -> float:
        rel = float(rng.uniform(*snr)) * cv / np.sqrt(k)
        rel = float(np.clip(rel, 0.01, 0.20))
        return rel if rng.random() < 0.5 else -rel

    for pos in positions:
        kind = rng.random()
        if kind < drift_prob and pos + 40 < n - 10:
            nsteps = int(rng.integers(4, 9))
            total = abs(step_size()) * rng.uniform(1.0, 2.0)
            total = min(max(total, 0.02), 0.20) * (1 if rng.random() < 0.5 else -1)
            gaps = rng.integers(2, 6, size=nsteps - 1)
            steps = [pos] + [int(pos + g) for g in np.cumsum(gaps)]
            factor = (1.0 + total) ** (1.0 / nsteps)
            for s in steps:
                level[s:] *= factor
            episodes.append(Episode(pos, (1.0 + total), last=steps[-1], steps=tuple(steps)))
        elif kind < drift_prob + temp_prob and pos + 25 < n - 10:
            rel = step_size()
            length = int(rng.integers(6, 20))
            level[pos : pos + length] *= 1.0 + rel
            episodes.append(Episode(pos, 1.0 + rel, last=pos))
            episodes.append(Episode(pos + length, 1.0 / (1.0 + rel), last=pos + length))
        else:
            rel = step_size()
            level[pos:] *= 1.0 + rel
            episodes.append(Episode(pos, 1.0 + rel, last=pos))
    base = float(np.exp(rng.uniform(np.log(500), np.log(50000))))
    values = base * level[:, None] * _noise(rng, noise, cv, (n, k))
    # Outlier samples (a stalled run, a cron job) and, rarely, a whole bad commit run.
    mask = rng.random((n, k)) < outlier_rate
    values[mask] *= np.where(
        rng.random(mask.sum()) < 0.7, rng.uniform(0.4, 0.85, mask.sum()), rng.uniform(1.2, 1.6, mask.sum())
    )
    for i in np.flatnonzero(rng.random(n) < outlier_rate / 3):
        values[i] *= rng.uniform(0.6, 0.85)
    episodes.sort(key=lambda e: e.index)
    return Labelled(name, [values[i] for i in range(n)], tuple(episodes), k, cv, noise)


@dataclass(frozen=True)
class Suite:
    """Named groups of labelled series for one seed set."""

    groups: dict[str, list[Labelled]]


def build_suite(seed: int, scale: float = 1.0) -> Suite:
    """All evaluation groups for one seed; ``scale`` shrinks the counts for quick runs."""
    rng = np.random.default_rng(seed)

    def count(c: int) -> int:
        return max(2, int(round(c * scale)))

    groups: dict[str, list[Labelled]] = {}
    groups["hard-1"] = [
        make_series(rng, f"hard1-{i}", k=1, snr=(2.5, 4.0), n_changes=(1, 3), drift_prob=0.0, temp_prob=0.0)
        for i in range(count(60))
    ]
    groups["easy-1"] = [
        make_series(rng, f"easy1-{i}", k=1, snr=(4.0, 12.0), noise="normal", outlier_rate=0.0, drift_prob=0.0)
        for i in range(count(40))
    ]
    groups["mixed-1"] = [make_series(rng, f"mixed1-{i}", k=1) for i in range(count(40))]
    groups["mixed-5"] = [make_series(rng, f"mixed5-{i}", k=5) for i in range(count(40))]
    groups["null"] = [
        make_series(rng, f"null-{i}", k=1 if i % 2 == 0 else 5, n_changes=(0, 0)) for i in range(count(120))
    ]
    groups["step3-cv2-k5"] = [
        make_series(
            rng,
            f"step3-{i}",
            k=5,
            snr=(3.0 * np.sqrt(5) / 2.0,) * 2,
            n_changes=(1, 1),
            drift_prob=0.0,
            temp_prob=0.0,
            cv_range=(0.02, 0.02),
            noise="normal",
            outlier_rate=0.0,
        )
        for i in range(count(100))
    ]
    return Suite(groups)
