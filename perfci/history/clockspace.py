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
   narrow the night's repeats, else the night moved by its median clock; a
   power-limited night by the run's device clock, never the kernel's own.
2. **Then the case as a whole** is judged in cycles only when that explains its
   night-to-night spread better than time does: the robust spread of successive
   nightly levels (:func:`perfci.history.nights.successive_spread`, which a step
   barely moves) is compared in both spaces. Within one run compare may trust
   the clock; across nights it must not by default: nights are different
   processes, and on the H200 the device clocks of different processes carried
   a per-process reading error of up to 12% while their times were right. Where
   the clock really swings (gfx950: ±14% from night to night) cycles win by far;
   where it is read wrong, time does.
3. **Nights without clocks** inside a case judged in cycles are taken at the
   case's median clock (their level in time, unbiased, with the clock's swing
   left in); a case needs clocks on at least half of its nights (and 3) to be
   judged in cycles at all.

Levels in cycles are quoted as microseconds at the case's reference clock (the
median of its nights' clocks), so before/after, plots and reports stay in µs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perfci.history.model import CaseSeries, Point, power_limited
from perfci.history.nights import CYCLES, LEVEL_IN_CYCLES, TIME, judged_night, successive_spread

RULES = ("auto", "time")  # auto: cycles where the clock explains the spread; time: every case in time
MIN_CLOCKED = 3  # nights with clocks a case needs before it can be judged in cycles


@dataclass(frozen=True)
class JudgedSeries:
    """A case's nights in the space it is judged in (logs of µs; cycles quoted at ``reference_mhz``)."""

    levels: tuple[float, ...]  # each night's level
    values: tuple[tuple[float, ...], ...]  # each night's repeats, in the same space
    space: str  # CYCLES, LEVEL_IN_CYCLES or TIME (perfci.history.nights)
    exponent: float | None  # the case's clock exponent; None: unknown
    reference_mhz: float | None  # the clock cycles are quoted at; None in time
    spread_time: float  # successive_spread of the levels in time (log)
    spread_cycles: float | None  # ... in cycles; None when not computed (no clock, or no exponent)
    clocked_nights: int  # nights whose level a clock moved
    reason: str  # one line: why this space

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


def judge(series: CaseSeries, rule: str = "auto") -> JudgedSeries:
    """SERIES's nightly levels in cycles or in time, by the rule in this module's docstring.

    RULE ``time`` keeps every case in time (the check as it was before it knew clocks).
    """
    if rule not in RULES:
        raise ValueError(f"space rule {rule!r}: one of {', '.join(RULES)}")
    timed = [judged_night(_log_repeats(p), (), None) for p in series.points]
    t_levels = [n.level for n in timed]
    spread_time = successive_spread(t_levels)

    def in_time(reason: str, spread_cycles: float | None = None, clocked: int = 0) -> JudgedSeries:
        return JudgedSeries(tuple(t_levels), tuple(n.values for n in timed), TIME, series.exponent, None,
                            spread_time, spread_cycles, clocked, reason)

    e = series.exponent
    if rule == "time":
        return in_time("judged in time (--space time)")
    if e is None:
        return in_time("time: its clock exponent is unknown (no roofline numbers for this device, or no shape)")
    if e == 0:
        return in_time("time: memory-bound, the core clock does not set its time")
    nights = [judged_night(_log_repeats(p), p.sclk_mhz, e, limited=power_limited(p.throttled),
                           run_clock_mhz=p.run_clock_mhz) for p in series.points]
    clocks = [n.log_clock for n in nights if n.log_clock is not None]
    n = len(nights)
    if len(clocks) < max(MIN_CLOCKED, math.ceil(n / 2)):
        return in_time(f"time: clocks on {len(clocks)} of {n} night(s), too few to judge it in cycles",
                       clocked=len(clocks))
    ref = float(np.median(clocks))
    # A night without a clock stays in time: as if at the reference clock.
    values = [tuple((np.asarray(night.values) - e * ref).tolist()) if night.log_clock is not None else timed[i].values
              for i, night in enumerate(nights)]
    levels = [night.level - e * ref if night.log_clock is not None else t_levels[i]
              for i, night in enumerate(nights)]
    spread_cycles = successive_spread(levels)
    if not spread_cycles < spread_time:
        return in_time(f"time: its clocks do not explain the nightly spread ({_pct(spread_cycles)} in cycles, "
                       f"{_pct(spread_time)} in time; clocks of different processes can be read wrong)",
                       spread_cycles, len(clocks))
    per_repeat = sum(night.space == CYCLES for night in nights)
    space = CYCLES if per_repeat * 2 >= len(clocks) else LEVEL_IN_CYCLES
    missing = n - len(clocks)
    reason = (f"{space}: the clock explains the nightly spread ({_pct(spread_cycles)} in cycles, "
              f"{_pct(spread_time)} in time); clock exponent {e:.2f}, quoted in µs at {math.exp(ref):.0f} MHz"
              + (f"; {missing} night(s) without clocks taken at that clock" if missing else ""))
    return JudgedSeries(tuple(levels), tuple(values), space, e, math.exp(ref), spread_time, spread_cycles,
                        len(clocks), reason)


def space_counts(judged: list[JudgedSeries] | tuple[JudgedSeries, ...]) -> dict[str, int]:
    """How many cases were judged in each space, in a fixed order (for summaries)."""
    return {s: sum(j.space == s for j in judged) for s in (CYCLES, LEVEL_IN_CYCLES, TIME)}
