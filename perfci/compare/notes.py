"""The notes under a comparison's verdicts: what compare could and could not take into account, in words.

Pure: the prepared case pairs, the common mode and the suite's verdict of
:func:`perfci.compare.verdicts.compare` in, one line per note out (clock
normalization, the common mode, Benjamini-Hochberg's reach, kernels whose own
clock moved, the noise profile).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from perfci import stats
from perfci.compare.comparison import CompareOptions
from perfci.compare.noise import NoiseProfile
from perfci.verdict import SuiteShift, Verdict


def comparison_notes(prepared: Sequence, cm: stats.CommonMode, suite: SuiteShift, profile: NoiseProfile,
                     opts: CompareOptions, threshold_only: bool, n_tested: int, arch: str) -> list[str]:
    """The notes of a comparison; PREPARED are compare's case pairs (``perfci.compare.verdicts._Prepared``)."""
    notes = []
    if threshold_only:
        notes.append("threshold-only verdicts: an input has one value per case (no repeats), "
                     "so no significance test was possible; only the floor decides")
    n_norm = sum(p.normalized and p.exponent > 0 for p in prepared)
    n_driven = sum(p.exponent > 0 for p in prepared)
    if not arch:
        notes.append("device arch unknown: cases cannot be classed compute- or memory-bound, "
                     "so nothing was clock-normalized")
    elif not opts.clock_normalize:
        notes.append("clock normalization off")
    elif n_driven and n_norm == 0:
        notes.append(f"no per-repeat clocks on both sides: {n_driven} clock-driven cases compared in "
                     f"time, floor widened to {profile.unclocked_floor_pct:g}% (profile {profile.name})")
    elif n_driven:
        notes.append(f"{n_norm} of {n_driven} clock-driven cases compared in cycles (time x clock); "
                     "memory-bound cases in time")
        weak = sum(p.normalized and p.exponent > 0 and not p.repeat_clocks for p in prepared)
        if weak:
            notes.append(f"{weak} of them with their repeats in time: the per-repeat clocks did not "
                         f"explain the repeats' spread (a clock read apart from the kernels, or flat), "
                         f"so only each run's median clock moved them")
    if cm.method == "none":
        if opts.common_mode:
            notes.append(f"only {cm.n_cases} comparable cases: no common mode estimated, each case "
                         "judged on its raw ratio with a floor wide enough for clock swings")
    else:
        what = "in cycles" if suite.clock_normalized else "in time"
        if suite.method == "split":
            line = (f"common mode ({what}): compute-bound cases {suite.compute_pct:+.1f}%, "
                    f"memory-bound {suite.memory_pct:+.1f}%")
        else:
            line = f"common mode ({what}): every case {suite.overall_pct:+.1f}%"
        if suite.verdict in (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.INCONCLUSIVE):
            size = f"{abs(suite.overall_pct):.0f}% {'slower' if suite.overall_pct > 0 else 'faster'}"
            if suite.clock_normalized and suite.verdict == Verdict.INCONCLUSIVE:
                line += (f" -- the suite runs {size} in cycles but {suite.time_pct:+.1f}% in time: the "
                         f"clock readings moved, not the kernels; check the clock source on both sides")
            elif suite.clock_normalized:
                line += (f" -- the suite runs {size}: not the core clock (clock-normalized): a driver, "
                         f"firmware or shared code change?")
            else:
                line += (f" -- the suite runs {size}: clocks, driver or a shared change? (no clock "
                         f"telemetry to tell them apart)")
        notes.append(line + "; cases are judged on their residual from it")
    if opts.fdr and n_tested:
        floor_p = stats.min_pvalue(*_typical_n(prepared))
        if floor_p > opts.alpha / n_tested:
            notes.append(f"with {n_tested} tested cases, a lone change needs p <= {opts.alpha / n_tested:.2g} "
                         f"after Benjamini-Hochberg, but {_typical_n(prepared)[0]} vs "
                         f"{_typical_n(prepared)[1]} repeats reach at best p = {floor_p:.2g}: add repeats")
    clocked = [p for p in prepared if p.own_clock is not None]
    if len(clocked) >= 3:
        device = float(np.median([p.own_clock for p in clocked]))
        for p in clocked:
            gap = p.own_clock - device
            if abs(gap) > math.log(1.05):
                notes.append(
                    f"{p.base.kernel} {p.base.shape} {p.base.dtype}: its own clock moved "
                    f"{100 * math.expm1(p.own_clock):+.0f}% against the device's {100 * math.expm1(device):+.0f}%"
                    f"; a kernel that draws more power runs at a lower clock under a power cap, so "
                    f"this is judged as part of its time")
    for p in prepared:
        if p.unreferenced:
            notes.append(f"{p.base.kernel} {p.base.shape} {p.base.dtype}: ran under a power limit and fewer "
                         f"than 3 cases had clocks to tell what the device's clock did, so its own clock "
                         f"({100 * math.expm1(p.own_clock or 0.0):+.0f}%) was divided out; a kernel that draws "
                         f"more power slows its own clock, which this hides: compare more cases")
    per_us = f", each plus {profile.floor_us:g} us / base time" if profile.floor_us else ""
    notes.append(f"noise profile {profile.name}: floor {profile.floor_pct:g}% with clocks, "
                 f"{profile.unclocked_floor_pct:g}% without{per_us} ({profile.source})"
                 if opts.min_effect_pct is None else f"floor set by --min-effect: {opts.min_effect_pct:g}%")
    return notes


def _typical_n(prepared: Sequence) -> tuple[int, int]:
    """The median count of repeats a side (base, cur)."""
    if not prepared:
        return (0, 0)
    return (int(np.median([p.lb.size for p in prepared])), int(np.median([p.lc.size for p in prepared])))
