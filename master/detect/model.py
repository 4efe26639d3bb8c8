"""Typed records shared by the change-detection core: series input, directions, change points."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from master.detect.direction import Direction as Direction  # where the detectors and the farm import it from
from master.detect.direction import Kind


@dataclass(frozen=True)
class Series:
    """Raw samples of one series in first-parent commit order; every sample of every commit is kept.

    ``values`` holds all samples flattened; ``offsets`` has ``len(commits) + 1`` entries and the samples
    of commit ``i`` are ``values[offsets[i]:offsets[i + 1]]``.
    """

    commits: tuple[str, ...]
    values: np.ndarray = field(repr=False)
    offsets: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.offsets) != len(self.commits) + 1:
            raise ValueError("offsets must have one entry more than commits")
        if len(self.commits) and int(self.offsets[-1]) != len(self.values):
            raise ValueError("offsets must end at len(values)")
        if np.any(np.diff(self.offsets) < 1):
            raise ValueError("every commit needs at least one sample")
        if not np.all(np.isfinite(self.values)):
            raise ValueError("values must be finite")

    @classmethod
    def from_samples(cls, samples: Sequence[Sequence[float] | float], commits: Sequence[str] | None = None) -> Series:
        """Build from one sequence of samples (or one scalar) per commit; commits default to '0', '1', ..."""
        groups = [np.atleast_1d(np.asarray(s, dtype=float)) for s in samples]
        sizes = np.array([len(g) for g in groups], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        values = np.concatenate(groups) if groups else np.zeros(0)
        names = tuple(commits) if commits is not None else tuple(str(i) for i in range(len(groups)))
        if len(names) != len(groups):
            raise ValueError("need one commit name per group of samples")
        return cls(commits=names, values=values, offsets=offsets)

    def __len__(self) -> int:
        return len(self.commits)

    @property
    def counts(self) -> np.ndarray:
        """Number of samples per commit."""
        return np.diff(self.offsets)

    def commit_medians(self) -> np.ndarray:
        """Median of each commit's samples (vectorised: one sort for the whole series)."""
        counts = self.counts
        if len(counts) and int(counts.min()) == int(counts.max()):
            # Same number of samples everywhere (the usual case): one partition of a (commits, k) view.
            return np.median(self.values.reshape(len(counts), int(counts[0])), axis=1)
        owner = np.repeat(np.arange(len(counts)), counts)
        ordered = self.values[np.lexsort((self.values, owner))]
        starts = self.offsets[:-1]
        return (ordered[starts + (counts - 1) // 2] + ordered[starts + counts // 2]) / 2.0

    def samples(self, start: int, stop: int) -> np.ndarray:
        """All samples of commits ``start`` .. ``stop - 1``."""
        return self.values[self.offsets[start] : self.offsets[stop]]

    def window(self, start: int, stop: int) -> Series:
        """Commits ``start`` .. ``stop - 1`` as a series of their own."""
        offsets = self.offsets[start : stop + 1]
        return Series(self.commits[start:stop], self.values[offsets[0] : offsets[-1]], offsets - offsets[0])

    def head(self, n_commits: int) -> Series:
        """The first ``n_commits`` commits, as the series looked when they were the newest."""
        end = int(self.offsets[n_commits])
        return Series(self.commits[:n_commits], self.values[:end], self.offsets[: n_commits + 1])


@dataclass(frozen=True)
class ChangePoint:
    """A detected shift: ``index`` is the first commit after the change; ``ratio`` is after/before medians."""

    commit: str
    index: int
    ratio: float
    kind: Kind
    pvalue: float
    ci_low: float = math.nan
    ci_high: float = math.nan

    def to_json(self) -> dict[str, object]:
        """The CLI/JSON shape: commit, index, ratio, kind, pvalue."""
        return {
            "commit": self.commit,
            "index": self.index,
            "ratio": round(float(self.ratio), 6),
            "kind": self.kind.value,
            "pvalue": float(f"{self.pvalue:.3g}"),
        }
