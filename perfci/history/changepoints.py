"""Change points in one case's nightly series: binary segmentation with a rank test.

Pure: a sequence of nightly medians in, frozen results out.

How, and why this way
---------------------
* **One value per night.** The repeats of one night share that night's clocks
  and placement, so they are not independent evidence about a level; testing
  them as if they were would call every night-to-night wobble a change. Each
  night contributes its median.
* **The split.** For every split of a segment into a left part of k nights and
  a right part (both at least ``min_segment`` long), the Mann-Whitney rank sum
  of the left part, standardized; the split with the largest |z| is the
  candidate. Ranks make one wild night count as one rank, not as its size.
* **Its significance: a permutation test of the maximum.** The best of many
  splits is large even in a flat series, so its p-value comes from the same
  maximum over the same splits in shuffled copies of the segment (``permutations``
  of them, seeded, so a check is reproducible). This is the control E-divisive
  (Otava) uses too.
* **Binary segmentation.** A significant split whose medians differ by at least
  ``min_change_pct`` is kept, and both sides are searched again.
* **Minimum segment length** (3 nights): a single spike cannot be a segment of
  its own, so it never becomes a pair of change points.
* **Short histories** (fewer than ``2 x min_segment`` nights) are not searched at
  all, and the result says so; a change is never claimed from too few nights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class ChangeOptions:
    alpha: float = 0.01  # per series: a flat series shows a change with probability ~alpha
    min_segment: int = 3  # nights on each side of a change
    min_change_pct: float = 1.0  # a smaller shift of the medians is not reported
    permutations: int = 999
    seed: int = 0


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first night of the new level (position in the series)
    before: float  # median of the nightly values of the segment before it
    after: float  # ... and of the segment from it on
    p_value: float  # permutation p-value of the split when it was found

    @property
    def ratio(self) -> float:
        return self.after / self.before


@dataclass(frozen=True)
class Detection:
    n: int  # nights in the series
    changes: tuple[ChangePoint, ...]
    too_short: bool  # fewer nights than two minimum segments: nothing was searched

    def note(self, opts: ChangeOptions) -> str:
        if self.too_short:
            return (f"{self.n} night(s): too short to find a change (needs {2 * opts.min_segment}, "
                    f"{opts.min_segment} on each side)")
        return ""


def _midranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size)
    sorted_x = x[order]
    i = 0
    while i < x.size:
        j = i
        while j + 1 < x.size and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1.0  # ties share their mean rank
        i = j + 1
    return ranks


def split_scores(ranks: np.ndarray, min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """(left sizes k, |z| of the left part's rank sum) for every allowed split.

    ``ranks`` may be 2-D (one row per permutation); the scores then have one row each.
    """
    n = ranks.shape[-1]
    ks = np.arange(min_segment, n - min_segment + 1)
    sums = np.cumsum(ranks, axis=-1)[..., ks - 1]
    mean = ks * (n + 1) / 2.0
    sd = np.sqrt(ks * (n - ks) * (n + 1) / 12.0)
    return ks, np.abs(sums - mean) / sd


def _best_split(x: np.ndarray, opts: ChangeOptions, rng: np.random.Generator) -> tuple[int, float]:
    ranks = _midranks(x)
    ks, z = split_scores(ranks, opts.min_segment)
    best = int(np.argmax(z))
    shuffled = rng.permuted(np.tile(ranks, (opts.permutations, 1)), axis=1)
    _, zp = split_scores(shuffled, opts.min_segment)
    exceed = int(np.sum(zp.max(axis=1) >= z[best] - 1e-9))
    return int(ks[best]), (1 + exceed) / (opts.permutations + 1)


def detect(values: Sequence[float], options: ChangeOptions | None = None) -> Detection:
    """Change points of a series of positive nightly values (times), oldest first."""
    opts = options or ChangeOptions()
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n < 2 * opts.min_segment:
        return Detection(n, (), True)
    rng = np.random.default_rng(opts.seed)
    found: list[tuple[int, float]] = []
    stack = [(0, n)]
    while stack:
        lo, hi = stack.pop()
        if hi - lo < 2 * opts.min_segment:
            continue
        k, p = _best_split(x[lo:hi], opts, rng)
        if p > opts.alpha:
            continue
        left, right = float(np.median(x[lo:lo + k])), float(np.median(x[lo + k:hi]))
        if abs(math.log(right / left)) < math.log1p(opts.min_change_pct / 100.0):
            continue
        found.append((lo + k, p))
        stack.extend([(lo + k, hi), (lo, lo + k)])
    found.sort()
    # Before/after are the final segments around each change, not the segment it was found in.
    bounds = [0] + [i for i, _ in found] + [n]
    changes = tuple(ChangePoint(i, float(np.median(x[bounds[j]:i])), float(np.median(x[i:bounds[j + 2]])), p)
                    for j, (i, p) in enumerate(found))
    return Detection(n, changes, False)


def segments(n: int, changes: Sequence[ChangePoint]) -> list[tuple[int, int]]:
    """[start, end) of each level between change points."""
    bounds = [0] + [c.index for c in changes] + [n]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
