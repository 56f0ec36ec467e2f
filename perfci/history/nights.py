"""What one night of one case is worth: its level, that level's own variance, and each run's suite-wide shift.

Pure numbers in and out; shared by ``history check`` (:mod:`perfci.history.changepoints`)
and ``compare STORE CUR`` (:mod:`perfci.compare.pooled`).

* **A night's level** is the mean of its fastest half of repeats (log time),
  not their median. Interference only ever slows a kernel down, so a night's
  slow repeats carry its disturbances and its fast ones its speed. On the H200
  the median of 7 repeats is the less steady choice twice over: large
  power-capped GEMMs have 2-3 of 7 repeats 2-12% slow, so the median sits on
  that tail whenever one more repeat lands there; small cuBLAS GEMMs alternate
  between two speeds 5-8% apart, 4 against 3, so the median jumps between them
  from night to night. The mean of the fastest 3 of 7 moves with neither.
* **Its variance** from its own repeats, by a seeded bootstrap (the same repeats
  always give the same answer): a night whose repeats span two speeds cannot
  pin its level down, whatever a few other nights happened to show.
* **A night in the judged space** (:func:`judged_night`): compare's clock rule
  for one night. Log time plus ``e * log(clock)``, ``e`` the case's clock
  exponent (1 compute-bound: cycles; 0 memory-bound: time), with per-repeat
  clocks only where they narrow the night's repeats, else the whole night moved
  by its median clock; a power-limited night by the run's device clock, not its own.
* **A run's suite-wide shift**, per case: compare's common mode (medians,
  split compute-/memory-bound), or ``affine``: ``a + c*exponent + b/us`` fitted
  robustly (Huber, from the median). A run's launch and placement move short
  kernels by a roughly fixed *time* (on the H200's decode suite one run was
  1.3-2% faster below 15 us and unmoved above 40 us), which a single
  fraction leaves in them as their own noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from perfci import stats

LEVELS = ("fast", "median")
MODES = ("affine", "median")
SHORT_US = 50.0  # a per-run shift of ~0.2 us is >= 0.4% of a case this short: the b/us term needs such cases
BOOTSTRAP = 200  # resamples for a night level's variance


def night_level(log_repeats: Sequence[float], how: str = "fast") -> float:
    """A night's level from its repeats (log times): the mean of its fastest half (at least one), or the median."""
    x = np.sort(np.asarray(log_repeats, dtype=float))
    if x.size == 0:
        raise ValueError("a night needs at least one repeat")
    if how == "median":
        return float(np.median(x))
    return float(np.mean(x[:max(1, x.size // 2)]))


# What a night's level is in: cycles (each repeat moved by its own clock), time with the night's
# level moved by its median clock (its repeats' clocks did not explain their scatter), or time.
CYCLES, LEVEL_IN_CYCLES, TIME = "cycles", "time, levels in cycles", "time"


@dataclass(frozen=True)
class JudgedNight:
    """One night of one case in the space it is judged in (logs)."""

    values: tuple[float, ...]  # its repeats: log time + exponent * log clock
    level: float  # night_level of VALUES
    space: str  # CYCLES, LEVEL_IN_CYCLES or TIME
    log_clock: float | None  # the log clock its level was moved by; None in TIME


def _log_clocks(clocks_mhz: Sequence[float | None]) -> list[float]:
    return [math.log(c) for c in clocks_mhz if c is not None and math.isfinite(c) and c > 0]


def night_clock(clocks_mhz: Sequence[float | None], *, limited: bool = False,
                run_clock_mhz: float | None = None) -> float | None:
    """The log clock a night's level moves by: its repeats' median clock, or under a power limit the run's."""
    if limited:
        ok = run_clock_mhz is not None and math.isfinite(run_clock_mhz) and run_clock_mhz > 0
        return math.log(run_clock_mhz) if ok else None  # type: ignore[arg-type]
    valid = _log_clocks(clocks_mhz)
    return float(np.median(valid)) if valid else None


def judged_night(log_repeats: Sequence[float], clocks_mhz: Sequence[float | None], exponent: float | None, *,
                 limited: bool = False, run_clock_mhz: float | None = None,
                 per_repeat: bool | None = None) -> JudgedNight:
    """A night's repeats and level in cycles, as far as its clocks allow; in time otherwise.

    CLOCKS_MHZ: per repeat (None, NaN or <= 0 where not read). EXPONENT: the
    case's clock exponent; None (unknown) or 0 keeps it in time. LIMITED: most
    repeats ran power- or thermal-capped; then the level moves by RUN_CLOCK_MHZ
    (the device's clock that run), never by the kernel's own, which a
    power-hungry change lowers (no run clock: time). PER_REPEAT: whether each
    repeat is moved by its own clock; None decides from this night alone (see
    :func:`repeat_clocks_narrow`, which decides over many nights, more surely).
    """
    r = np.asarray(log_repeats, dtype=float)
    valid = _log_clocks(clocks_mhz)
    level_clock = night_clock(clocks_mhz, limited=limited, run_clock_mhz=run_clock_mhz)
    if not exponent or level_clock is None or r.size == 0:
        return JudgedNight(tuple(r.tolist()), night_level(r) if r.size else math.nan, TIME, None)
    e = float(exponent)
    moved = r + e * level_clock
    if per_repeat is not False and len(valid) == r.size == len(clocks_mhz):
        c = np.asarray(valid)
        each = moved + e * (c - np.median(c))
        # Per-repeat clocks only where they explain the repeats' scatter: a clock read
        # badly, or flat while the times scatter, would add its own noise (compare's rule).
        if per_repeat or stats.robust_spread(each) <= stats.robust_spread(r) * (1.0 + 1e-9):
            return JudgedNight(tuple(each.tolist()), night_level(each), CYCLES, level_clock)
    return JudgedNight(tuple(moved.tolist()), night_level(moved), LEVEL_IN_CYCLES, level_clock)


def repeat_clocks_narrow(nights: Sequence[tuple[Sequence[float], Sequence[float | None]]],
                         exponent: float) -> bool | None:
    """Whether per-repeat clocks narrow the repeats of these nights ((log repeats, clocks MHz) each).

    Compare's rule pooled over nights: the mean robust spread of each night's
    repeats moved by their own clocks against that in time. Seven repeats are
    too few to decide it one night at a time (a MAD of 7 is uncertain by ~40%),
    and a wrong choice either keeps a per-repeat clock jitter or adds a read
    error. None when no night has a clock for every repeat.
    """
    with_clocks, in_time = [], []
    for log_repeats, clocks in nights:
        r = np.asarray(log_repeats, dtype=float)
        valid = _log_clocks(clocks)
        if r.size >= 2 and len(valid) == r.size == len(clocks):
            c = np.asarray(valid)
            with_clocks.append(stats.robust_spread(r + exponent * c))
            in_time.append(stats.robust_spread(r))
    if not with_clocks:
        return None
    return float(np.mean(with_clocks)) <= float(np.mean(in_time)) * (1.0 + 1e-9)


def successive_spread(levels: Sequence[float]) -> float:
    """Robust sd of a series of nightly levels from one night to the next (0 with fewer than 3).

    From the successive differences (their MAD, / sqrt 2), so a step between
    two nights moves it by one difference of many: it measures the nights'
    noise, not their trend.
    """
    d = np.diff(np.asarray(levels, dtype=float))
    if d.size < 2:
        return 0.0
    return stats.mad_spread(d) / math.sqrt(2.0)


def level_var(log_repeats: Sequence[float], how: str = "fast") -> float:
    """Variance of a night's level as its own repeats let it vary (0 for one repeat).

    ``fast``: a seeded bootstrap of the fastest-half mean. ``median``: the
    median's asymptotic ``(pi/2) s^2 / n``, ``s`` the robust spread (as before 2026-12).
    """
    x = np.asarray(log_repeats, dtype=float)
    n = x.size
    if n < 2:
        return 0.0
    if how == "median":
        return (math.pi / 2.0) * stats.robust_spread(x) ** 2 / n
    draws = np.sort(x[np.random.default_rng(n).integers(0, n, (BOOTSTRAP, n))], axis=1)
    return float(np.var(np.mean(draws[:, :max(1, n // 2)], axis=1)))


def mode_offsets(devs: Sequence[float], exps: Sequence[float], log_us: Sequence[float], how: str,
                 min_cases: int) -> np.ndarray:
    """Each case's share of its run's suite-wide shift (log), from the cases' deviations DEVS.

    EXPS are the cases' clock exponents, LOG_US their log durations. ``median``:
    compare's common mode. ``affine``: the Huber fit of ``a`` (+ ``c*exponent``
    when the suite has >= 4 compute- and 4 memory-bound cases) (+ ``b/us`` when
    it has ``min_cases`` cases under :data:`SHORT_US` and durations over a factor
    3). Fewer than ``min_cases`` cases: no shift.
    """
    d = np.asarray(devs, dtype=float)
    if how == "median":
        cm = stats.common_mode(d, exps, min_cases=min_cases)
        return np.asarray([cm.at(e) if cm.method != "none" else 0.0 for e in exps])
    if d.size < min_cases:
        return np.zeros(d.size)
    return stats.huber_fit(stats.shift_design(exps, log_us, min_cases, SHORT_US), d)
