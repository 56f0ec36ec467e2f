"""Which space a case's nights are judged in: cycles where its clock explains their spread, time otherwise.

Pure: a :class:`perfci.history.model.CaseSeries` in, a frozen
:class:`JudgedSeries` out. ``history check``, the trend plots and the report
all read a case's nights from here, so they agree on every number.

The rule is compare's (:mod:`perfci.compare.verdicts`), carried from one pair of
runs to a series of nights:

1. **Each night** is put in cycles as far as its clocks allow
   (:func:`perfci.history.nights.judged_night`): log time plus ``e * log(clock)``,
   ``e`` the case's clock exponent (:func:`perfci.roofline.clock_exponent`: 1
   compute-bound, 0 memory-bound, partial in between); per-repeat clocks where they
   narrow the repeats (decided over all the case's nights at once), else each
   night moved by its median clock; a power-limited night by the run's device
   clock, never the kernel's own.
2. **The exponent**: the roofline's, or one fitted to the case's own nights
   (:func:`fitted_exponent`) where they show one; whichever leaves the smaller
   nightly spread. The roofline's comes from datasheet peaks, and a kernel's
   real clock sensitivity sits off it: 0.1 off under a ±14% swing leaves a 1.4%
   swing in cycles, a third of a 4% step.
3. **Then the case as a whole** is judged in cycles only when that cuts its
   night-to-night spread by :data:`MARGIN` or more against time: the robust
   spread of successive nightly levels
   (:func:`perfci.history.nights.successive_spread`, which a step barely
   moves) in both spaces. Within one run compare may trust the clock; across
   nights it must not by default: nights are different processes, and on the
   H200 the device clocks of different processes carried a per-process reading
   error of up to 12% while their times were right. Where the clock really
   swings (gfx950: ±14% from night to night) cycles win by far; where it is
   read wrong, time does.
4. **Nights without clocks** inside a case judged in cycles (none recorded, or
   NaN) are placed where their time allows, nearest their neighbours
   (:func:`_place`); a case needs clocks on at least half of its nights (and 3)
   to be judged in cycles at all.

Levels in cycles are quoted as microseconds at the case's reference clock (the
median of its nights' clocks), so before/after, plots and reports stay in µs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from perfci import stats
from perfci.history.model import CaseSeries, Point, power_limited
from perfci.history.nights import (CYCLES, LEVEL_IN_CYCLES, TIME, JudgedNight, judged_night, night_clock,
                                   repeat_clocks_narrow, successive_spread)

RULES = ("auto", "time")  # auto: cycles where the clock explains the spread; time: every case in time
MIN_CLOCKED = 3  # nights with clocks a case needs before it can be judged in cycles
MIN_FIT_PAIRS = 8  # pairs of consecutive clocked nights before a case's own exponent is fitted
FIT_SE = 3.0  # a fitted exponent must lie this many standard errors above 0
# Cycles must cut the nightly spread by this share: a robust spread of ~30 nights is itself
# uncertain by about a fifth, and a clock that explains less than that is not worth its reading errors.
MARGIN = 0.2


@dataclass(frozen=True)
class JudgedSeries:
    """A case's nights in the space it is judged in (logs of µs; cycles quoted at ``reference_mhz``)."""

    levels: tuple[float, ...]  # each night's level
    values: tuple[tuple[float, ...], ...]  # each night's repeats, in the same space
    space: str  # CYCLES, LEVEL_IN_CYCLES or TIME (perfci.history.nights)
    exponent: float | None  # the clock exponent the levels use (the roofline's or fitted); None: unknown
    reference_mhz: float | None  # the clock cycles are quoted at; None in time
    spread_time: float  # successive_spread of the levels in time (log)
    spread_cycles: float | None  # ... in cycles; None when not computed (no clock, or no exponent)
    clocked_nights: int  # nights whose level a clock moved
    reason: str  # one line: why this space
    roofline_exponent: float | None = None  # what the roofline says (exponent may be fitted to the nights)
    placed: tuple[int, ...] = ()  # nights without a clock, placed in cycles by _place (in cycles only)

    @property
    def in_cycles(self) -> bool:
        return self.space != TIME

    @property
    def levels_us(self) -> np.ndarray:
        return np.exp(np.asarray(self.levels, dtype=float))


def _log_repeats(point: Point) -> np.ndarray:
    return np.log(np.asarray(point.repeats_us or (point.median_us,), dtype=float))


def _pct(log_sd: float) -> str:
    return f"{100.0 * math.expm1(log_sd):.2f}%"


def fitted_exponent(log_levels: Sequence[float], log_clocks: Sequence[float | None]) -> float | None:
    """How far a case's nightly levels follow its nights' clocks, fitted on its own nights (0..1).

    A Huber fit of night-to-night changes of the level on those of the clock:
    differences, so a step between two nights is one outlier the fit discounts,
    not a trend it must explain. ``None`` with fewer than :data:`MIN_FIT_PAIRS`
    pairs of consecutive clocked nights, clocks that never moved, or a slope
    within :data:`FIT_SE` standard errors of 0.
    """
    dy, dx = [], []
    for i in range(1, len(log_levels)):
        a, b = log_clocks[i - 1], log_clocks[i]
        if a is not None and b is not None:
            dy.append(log_levels[i] - log_levels[i - 1])
            dx.append(b - a)
    x = np.asarray(dx)
    if x.size < MIN_FIT_PAIRS or float(np.ptp(x)) <= 0:
        return None
    design = np.column_stack([np.ones_like(x), x])
    beta = stats.huber_coefficients(design, np.asarray(dy))
    slope = -float(beta[1])
    # Only an exponent the nights show: one within FIT_SE standard errors of 0 is noise fitted
    # (on a memory-bound case, 0.02 "explained" a fifth of the spread of 30 nights by chance).
    se = stats.robust_spread(np.asarray(dy) - design @ beta) / (float(np.std(x)) * math.sqrt(x.size))
    if slope <= FIT_SE * se:
        return None
    # Time never grows faster than 1/clock: cycles are the most a clock can explain.
    return min(1.0, slope)


def _in_cycles(series: CaseSeries, e: float, ref: float, timed: list[JudgedNight]) -> tuple[list, list, list]:
    """(nights, levels, values) of SERIES at exponent E, quoted at log clock REF (unclocked: :func:`_place`)."""
    per_repeat = repeat_clocks_narrow([(_log_repeats(p), p.sclk_mhz) for p in series.points], e)
    nights = [judged_night(_log_repeats(p), p.sclk_mhz, e, limited=power_limited(p.throttled),
                           run_clock_mhz=p.run_clock_mhz, per_repeat=per_repeat) for p in series.points]
    levels = [n.level - e * ref if n.log_clock is not None else math.nan for n in nights]
    clocks = [n.log_clock for n in nights if n.log_clock is not None]
    levels = _place(levels, [t.level for t in timed], e * (min(clocks) - ref), e * (max(clocks) - ref))
    values = [tuple((np.asarray(n.values) - e * ref).tolist()) if n.log_clock is not None
              else tuple((np.asarray(timed[i].values) + levels[i] - timed[i].level).tolist())
              for i, n in enumerate(nights)]
    return nights, levels, values


def _place(levels: list[float], time_levels: list[float], low: float, high: float,
           half_window: int = 2) -> list[float]:
    """Each night without a clock (NaN in LEVELS) placed in cycles: nearest its neighbours, within what its time allows.

    Its level in cycles is its level in time moved by some clock the case has
    run at, so it lies in [time + LOW, time + HIGH] (the clocks seen, relative to
    the reference). Of that range, it takes the point nearest the median of the
    clocked nights around it (HALF_WINDOW on each side, or the nearest ones):
    taken at the reference clock instead, a ±14% swing left a spike that cost
    6 of 100 found steps in the simulation (benchmarks/history_clock_validation.py).
    So a night without a clock cannot become a spike of its own.
    """
    known = [i for i, v in enumerate(levels) if not math.isnan(v)]
    out = list(levels)
    for i, v in enumerate(levels):
        if not math.isnan(v):
            continue
        near = [levels[j] for j in known if abs(j - i) <= half_window]
        if not near:
            before = [j for j in known if j < i][-1:]
            after = [j for j in known if j > i][:1]
            near = [levels[j] for j in before + after]
        guess = float(np.median(near))
        out[i] = min(max(guess, time_levels[i] + low), time_levels[i] + high)
    return out


def judge(series: CaseSeries, rule: str = "auto") -> JudgedSeries:
    """SERIES's nightly levels in cycles or in time, by the rule in this module's docstring.

    RULE ``time`` keeps every case in time (the check as it was before it knew clocks).
    """
    if rule not in RULES:
        raise ValueError(f"space rule {rule!r}: one of {', '.join(RULES)}")
    timed = [judged_night(_log_repeats(p), (), None) for p in series.points]
    t_levels = [n.level for n in timed]
    spread_time = successive_spread(t_levels)
    roof = series.exponent

    def in_time(reason: str, spread_cycles: float | None = None, clocked: int = 0) -> JudgedSeries:
        return JudgedSeries(tuple(t_levels), tuple(n.values for n in timed), TIME, roof, None,
                            spread_time, spread_cycles, clocked, reason, roof)

    if rule == "time":
        return in_time("judged in time (--space time)")
    clocks = [night_clock(p.sclk_mhz, limited=power_limited(p.throttled), run_clock_mhz=p.run_clock_mhz)
              for p in series.points]
    n, clocked = len(clocks), sum(c is not None for c in clocks)
    if clocked < max(MIN_CLOCKED, math.ceil(n / 2)):
        return in_time(f"time: clocks on {clocked} of {n} night(s), too few to judge it in cycles", clocked=clocked)
    ref = float(np.median([c for c in clocks if c is not None]))
    fitted = fitted_exponent(t_levels, clocks)
    best = None
    for e in dict.fromkeys(x for x in (roof, fitted) if x):  # the roofline's exponent, then the fitted one
        nights, levels, values = _in_cycles(series, e, ref, timed)
        spread = successive_spread(levels)
        if best is None or spread < best[0]:
            best = (spread, e, nights, levels, values)
    if best is None or not best[0] < (1.0 - MARGIN) * spread_time:
        if roof == 0:
            why = "memory-bound, the core clock does not set its time"
        elif roof is None:
            why = "its clock exponent is unknown (no roofline numbers for this device, or no shape)"
        else:
            why = "its clocks do not explain the nightly spread (clocks of different processes can be read wrong)"
        measured = (f"; {_pct(best[0])} in cycles at exponent {best[1]:.2f}, {_pct(spread_time)} in time"
                    if best is not None else "")
        return in_time(f"time: {why}{measured}", None if best is None else best[0], clocked)
    spread_cycles, e, nights, levels, values = best
    per_repeat = sum(night.space == CYCLES for night in nights)
    space = CYCLES if per_repeat * 2 >= clocked else LEVEL_IN_CYCLES
    source = ("the roofline's" if e == roof else "fitted to its nights" + (f"; the roofline says {roof:.2f}"
                                                                          if roof is not None else ""))
    missing = n - clocked
    reason = (f"{space}: the clock explains the nightly spread ({_pct(spread_cycles)} in cycles, "
              f"{_pct(spread_time)} in time); clock exponent {e:.2f} ({source}), quoted in µs at "
              f"{math.exp(ref):.0f} MHz" + (f"; {missing} night(s) without clocks placed within their time's range, "
                                            f"nearest their neighbours" if missing else ""))
    placed = tuple(i for i, c in enumerate(clocks) if c is None)
    return JudgedSeries(tuple(levels), tuple(values), space, e, math.exp(ref), spread_time, spread_cycles,
                        clocked, reason, roof, placed)


def space_counts(judged: list[JudgedSeries] | tuple[JudgedSeries, ...]) -> dict[str, int]:
    """How many cases were judged in each space, in a fixed order (for summaries)."""
    return {s: sum(j.space == s for j in judged) for s in (CYCLES, LEVEL_IN_CYCLES, TIME)}
