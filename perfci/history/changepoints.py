"""Change points in one case's nightly series: binary segmentation with a permutation test.

Pure: a sequence of nightly values (and, where known, each night's repeats) in,
frozen results out.

How, and why this way
---------------------
* **One level per night.** The repeats of one night share that night's clocks
  and placement, so they are not independent evidence about a level; testing
  them as if they were would call every night-to-night wobble a change. Each
  night contributes one value: with its repeats, its level (the mean of its
  fastest half, in log time: :mod:`perfci.history.nights` says why), else the
  value given (the median). ``history check`` passes levels in the space the
  case is judged in (:mod:`perfci.history.clockspace`: cycles where its clock
  explains its nightly spread) to :func:`detect_levels`.
* **Spikes are pulled in first.** A night further than ``clip_sd`` robust
  standard deviations from the running median of its five neighbours is
  clipped to that distance. The running median follows a step (two nights on
  the old level and three on the new still give the new one) but not a single
  wild night; the standard deviation comes from the nights' successive
  differences, which one step barely moves.
* **The split.** For every split of a segment into a left part of k nights and
  a right part (both at least ``min_segment`` long), the difference of the
  parts' means, standardized: ``(mean_L - mean_R) / (sd * sqrt(1/k + 1/(n-k)))``.
  Its largest |z| is the likelihood-ratio choice of one change in a Gaussian
  series, so the candidate is also the best-placed split; a rank sum (as before
  2026-12) lost a third of the 3% steps on real H200 nights (see
  docs/history.md).
* **Its significance: a permutation test of the maximum.** The best of many
  splits is large even in a flat series, so its p-value comes from the same
  maximum over the same splits in shuffled copies of the segment (``permutations``
  of them, seeded, so a check is reproducible). This is the control E-divisive
  (Otava) uses too.
* **Binary segmentation.** A significant split whose levels (medians of the
  nightly levels on either side) differ by at least ``min_change_pct`` is kept,
  and both sides are searched again.
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

from perfci.history.nights import night_level, successive_spread


@dataclass(frozen=True)
class ChangeOptions:
    alpha: float = 0.01  # per series: a flat series shows a change with probability ~alpha
    min_segment: int = 3  # nights on each side of a change
    min_change_pct: float = 1.0  # a smaller shift of the levels is not reported
    permutations: int = 999
    seed: int = 0
    clip_sd: float = 3.0  # a night this many sd from its neighbours' running median is pulled in (0: off)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first night of the new level (position in the series)
    before: float  # level of the segment before it: the median of its nights' levels (a time)
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


def levels(values: Sequence[float], repeats: Sequence[Sequence[float]] | None = None) -> np.ndarray:
    """Log level of each night: :func:`night_level` of its repeats where it has any, else log(value)."""
    out = np.log(np.asarray(values, dtype=float))
    if repeats is not None:
        if len(repeats) != out.size:
            raise ValueError(f"{len(repeats)} nights of repeats for {out.size} values")
        out = np.asarray([night_level(np.log(np.asarray(r, dtype=float))) if len(r) else v
                          for r, v in zip(repeats, out)])
    return out


def clip_spikes(y: np.ndarray, clip_sd: float, half_window: int = 2) -> np.ndarray:
    """Pull each night to within CLIP_SD robust sd of the running median of its neighbourhood."""
    if clip_sd <= 0 or y.size < 3:
        return y
    sd = successive_spread(y)
    if sd <= 0:
        return y
    n = y.size
    run = np.asarray([np.median(y[max(0, i - half_window):i + half_window + 1]) for i in range(n)])
    return np.clip(y, run - clip_sd * sd, run + clip_sd * sd)


def split_scores(y: np.ndarray, min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """(left sizes k, |z| of the standardized difference of the two parts' means) for every allowed split.

    ``y`` may be 2-D (one row per permutation); the scores then have one row each.
    """
    n = y.shape[-1]
    ks = np.arange(min_segment, n - min_segment + 1)
    total = np.sum(y, axis=-1, keepdims=True)
    left = np.cumsum(y, axis=-1)[..., ks - 1]
    diff = left / ks - (total - left) / (n - ks)
    sd = np.std(y, axis=-1, ddof=1, keepdims=True)  # the same for every split and every shuffle
    z = np.abs(diff) / (np.maximum(sd, 1e-300) * np.sqrt(1.0 / ks + 1.0 / (n - ks)))
    return ks, np.where(sd > 0, z, 0.0)


def _best_split(y: np.ndarray, opts: ChangeOptions, rng: np.random.Generator) -> tuple[int, float]:
    ks, z = split_scores(y, opts.min_segment)
    best = int(np.argmax(z))
    shuffled = rng.permuted(np.tile(y, (opts.permutations, 1)), axis=1)
    _, zp = split_scores(shuffled, opts.min_segment)
    exceed = int(np.sum(zp.max(axis=1) >= z[best] - 1e-9))
    return int(ks[best]), (1 + exceed) / (opts.permutations + 1)


def detect(values: Sequence[float], options: ChangeOptions | None = None,
           repeats: Sequence[Sequence[float]] | None = None) -> Detection:
    """Change points of a series of positive nightly values (times), oldest first.

    REPEATS, when given, are each night's repeat times: the night's level is
    then :func:`night_level` of them (``values`` only for a night without any).
    """
    return detect_levels(levels(values, repeats), options)


def detect_levels(log_levels: Sequence[float], options: ChangeOptions | None = None) -> Detection:
    """Change points of a series of nightly log levels, oldest first (before/after: exp of their medians).

    The levels may be in any space that is a log time up to a constant: log
    time, or cycles quoted as time at a reference clock
    (:mod:`perfci.history.clockspace`).
    """
    opts = options or ChangeOptions()
    y = np.asarray(log_levels, dtype=float)
    n = int(y.size)
    if n < 2 * opts.min_segment:
        return Detection(n, (), True)
    tested = clip_spikes(y, opts.clip_sd)
    rng = np.random.default_rng(opts.seed)
    found: list[tuple[int, float]] = []
    stack = [(0, n)]
    while stack:
        lo, hi = stack.pop()
        if hi - lo < 2 * opts.min_segment:
            continue
        k, p = _best_split(tested[lo:hi], opts, rng)
        if p > opts.alpha:
            continue
        left, right = float(np.median(y[lo:lo + k])), float(np.median(y[lo + k:hi]))
        if abs(right - left) < math.log1p(opts.min_change_pct / 100.0):
            continue
        found.append((lo + k, p))
        stack.extend([(lo + k, hi), (lo, lo + k)])
    found.sort()
    # Before/after are the final segments around each change, not the segment it was found in.
    bounds = [0] + [i for i, _ in found] + [n]
    changes = tuple(ChangePoint(i, math.exp(float(np.median(y[bounds[j]:i]))),
                                math.exp(float(np.median(y[i:bounds[j + 2]]))), p)
                    for j, (i, p) in enumerate(found))
    return Detection(n, changes, False)


def segments(n: int, changes: Sequence[ChangePoint]) -> list[tuple[int, int]]:
    """[start, end) of each level between change points."""
    bounds = [0] + [c.index for c in changes] + [n]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
