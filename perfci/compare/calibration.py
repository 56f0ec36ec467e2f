"""``perfci calibrate``: re-derive a noise profile from A/A runs.

A client of compare: every pair of A/A runs (runs of the same code and suite) is
judged by :mod:`perfci.compare.verdicts` exactly as ``perfci compare`` judges it,
and what is left of each case after the common mode is noise. Its spread becomes
the floors of a :class:`perfci.compare.noise.NoiseProfile`.

The steps of :func:`calibrate`, in order: collect the residuals of every pair per
class (:func:`_collect_residuals`), a relative q99 per class
(:func:`_relative_q99`), the per-microsecond part for short kernels
(:func:`_floor_us`), and the profile itself (:func:`_assemble_profile`).

Pure: tables in, a :class:`Calibration` out; the CLI reads and writes the files.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from perfci.compare.comparison import CompareOptions
from perfci.compare.noise import NoiseProfile, in_transition_band, profile_for_arch
from perfci.compare.verdicts import pair_residuals, suite_common_mode
from perfci.errors import PerfciError
from perfci.model import ResultTable

# Why q99 x 1.25: a case is flagged when the *lower* end of its interval passes
# the floor, so the floor must sit above nearly all A/A residuals of 60 cases at
# once; 1.25 is the margin that kept simulated whole-suite A/A false alarms
# under 1% (benchmarks/compare_validation.py), with at least 5 runs.
CALIBRATE_QUANTILE = 0.99
CALIBRATE_MARGIN = 1.25
MIN_FLOOR_PCT = 0.5  # below this the floor is finer than any repeat interval is
# Cases at least this long set the relative floors, when a class has enough of
# them; the shorter cases' excess over those floors sets floor_us. On the H200
# the |residual| q99 of calm A/A pairs fell from 6.2% under 15 us to 2.4% at
# 100 us and over (benchmarks/results/h200-2026-11-29b).
LONG_US = 100.0
MIN_LONG_RESIDUALS = 20
# A floor above this lets any regression through: runs that far apart are not
# A/A runs of the same code, and a profile that says so is refused, read or written.
MAX_FLOOR_PCT = 100.0
MAX_FLOOR_US = 1e6

# A residual class: (clock mode, boundness). "clocked" residuals come from
# compare with clock normalization, and only from the cases it could normalize;
# "unclocked" ones from every case with normalization off. "band" cases sit in
# the transition band between memory- and compute-bound, "pure" ones outside it.
ResidualClass = tuple[str, str]
CLASSES: tuple[ResidualClass, ...] = (("clocked", "pure"), ("clocked", "band"),
                                      ("unclocked", "pure"), ("unclocked", "band"))


@dataclass(frozen=True)
class Calibration:
    profile: NoiseProfile
    n_runs: int
    n_pairs: int
    n_residuals: int
    q99_pct: dict  # "clocked"/"unclocked" x "pure"/"band" -> q99 of |residual| in percent
    max_suite_shift_pct: float
    n_disturbed: int = 0  # case pairs left out: one run's repeats scattered (compare's guard)
    floor_us: float = 0.0


def calibrate(tables: Sequence[ResultTable], arch: str | None = None, name: str | None = None) -> Calibration:
    """Re-derive a profile from A/A runs: several runs of the same code and suite.

    For every pair of runs, each case's log ratio is computed exactly as
    ``perfci compare`` does (with and without clock normalization, common mode
    removed). Pairs where one run's repeats of the case scattered (compare never
    judges those; see ``perfci.verdict.DisturbedRule``) are left out and counted.
    Each relative floor is ``CALIBRATE_MARGIN`` times the 99th percentile of
    the |residuals| of its class (pure vs transition band), taken over the cases
    of ``LONG_US`` or more when the class has ``MIN_LONG_RESIDUALS`` of them;
    then ``floor_us`` is the same margin times the 99th percentile of what the
    shorter cases exceed that floor by, in microseconds. The suite floor is the
    largest common-mode shift seen between two runs, with the same margin.
    Classes without data keep the built-in profile's value for the arch (a
    note in ``source`` names them).

    Args:
        tables: ResultTables of the A/A runs (at least 2; 5 or more advised).
        arch: the device arch; read from the rows when not given.
        name: the profile's name; the arch by default.
    Returns:
        A :class:`Calibration` whose ``profile`` can be saved as JSON.
    """
    if len(tables) < 2:
        raise PerfciError("calibrate needs at least two A/A runs of the same suite")
    if arch is None:
        archs = {r.arch for t in tables for r in t.rows if r.arch}
        arch = archs.pop() if len(archs) == 1 else ""
    residuals = _collect_residuals(tables, arch)
    relative = {cls: _relative_q99(residuals.pools[cls]) for cls in CLASSES}
    q99_pct = {f"{mode}_{bound}": (round(100.0 * math.expm1(q), 3) if q is not None else None)
               for (mode, bound), (q, _) in relative.items()}
    floor_us = _floor_us(residuals.pools, relative)
    profile = _assemble_profile(arch, name, len(tables), residuals, q99_pct, floor_us)
    check_profile(profile, "calibrate", advice="; these runs are not A/A runs of the same code "
                                                "on one quiet device")
    return Calibration(profile, len(tables), residuals.n_pairs, residuals.n_residuals, q99_pct,
                       round(100.0 * math.expm1(max(residuals.suite_shifts)), 3),
                       residuals.n_disturbed, floor_us)


@dataclass(frozen=True)
class _Residuals:
    """What every pair of A/A runs left after compare's normalization."""
    pools: dict[ResidualClass, list[tuple[float, float]]]  # (|log residual|, base time in us)
    suite_shifts: list[float]  # per pair: the larger common-mode shift (memory or compute), log
    n_pairs: int
    n_residuals: int  # case pairs, disturbed ones included
    n_disturbed: int  # case pairs left out of the pools


def _collect_residuals(tables: Sequence[ResultTable], arch: str) -> _Residuals:
    """Step 1: every pair of runs through compare; each case's residual into its class."""
    pools: dict[ResidualClass, list[tuple[float, float]]] = {cls: [] for cls in CLASSES}
    suite_shifts: list[float] = []
    n_pairs = n_res = n_disturbed = 0
    for a, b in itertools.combinations(tables, 2):
        n_pairs += 1
        for mode, opts in (("clocked", CompareOptions(arch=arch or None)),
                           ("unclocked", CompareOptions(arch=arch or None, clock_normalize=False))):
            residuals = pair_residuals(a, b, arch, opts)
            if residuals and all(r.log_shift == 0.0 for r in residuals):
                raise PerfciError(f"calibrate: {a.path} and {b.path} hold the same "
                                  f"numbers; A/A needs separate runs")
            for r in residuals:
                if mode == "clocked" and not r.clocked:
                    continue
                # The unclocked pass sees every case once, so it alone does the counting.
                n_res += mode == "unclocked"
                if r.disturbed:
                    n_disturbed += mode == "unclocked"
                    continue
                bound = "band" if in_transition_band(r.exponent) else "pure"
                pools[(mode, bound)].append((abs(r.log_shift), r.base_us))
        suite_shifts.append(_suite_shift(a, b, arch))
    if not n_res:
        raise PerfciError("calibrate: the runs share no case that is ok in both")
    if n_disturbed == n_res:
        raise PerfciError(f"calibrate: every one of the {n_res} case pairs had a run whose repeats "
                          f"scattered; measure again on a quieter machine")
    return _Residuals(pools, suite_shifts, n_pairs, n_res, n_disturbed)


def _suite_shift(a: ResultTable, b: ResultTable, arch: str) -> float:
    """The larger of the memory- and compute-side common-mode shifts of one pair, log."""
    cm = suite_common_mode(a, b, arch, CompareOptions(arch=arch or None))
    return max(abs(cm.memory), abs(cm.memory + cm.clock))


def check_profile(profile: NoiseProfile, where: str, advice: str = "") -> NoiseProfile:
    """``profile``, if every floor is a finite percentage of at most :data:`MAX_FLOOR_PCT`.

    Raises:
        PerfciError: naming the first floor that is not (and ``advice`` after it).
    """
    floors = {"floor_pct": profile.floor_pct, "unclocked_floor_pct": profile.unclocked_floor_pct,
              "band_floor_pct": profile.band_floor_pct,
              "unclocked_band_floor_pct": profile.unclocked_band_floor_pct,
              "suite_floor_pct": profile.suite_floor_pct}
    for key, value in floors.items():
        if not (math.isfinite(value) and 0 <= value <= MAX_FLOOR_PCT):
            raise PerfciError(f"{where}: {key} {value:.3g}% is not a floor between 0 and "
                              f"{MAX_FLOOR_PCT:g}%{advice}")
    if not (math.isfinite(profile.clock_swing_pct) and 0 <= profile.clock_swing_pct < 100):
        raise PerfciError(f"{where}: clock_swing_pct {profile.clock_swing_pct:.3g}% must be below 100%")
    if not (math.isfinite(profile.floor_us) and 0 <= profile.floor_us <= MAX_FLOOR_US):
        raise PerfciError(f"{where}: floor_us {profile.floor_us:.3g} us is not between 0 and "
                          f"{MAX_FLOOR_US:g}{advice}")
    return profile


def _relative_q99(values: list[tuple[float, float]]) -> tuple[float | None, bool]:
    """Step 2: q99 of one class's |residual| (log), and whether the long cases alone gave it.

    Short kernels move by a roughly fixed fraction of a microsecond, which the
    relative floor should not absorb: when the class has ``MIN_LONG_RESIDUALS``
    cases of ``LONG_US`` or more (and shorter ones besides), those long cases
    set it. ``None`` when the class has no data.
    """
    if not values:
        return None, False
    long = [v for v, us in values if us >= LONG_US]
    if len(long) >= MIN_LONG_RESIDUALS and len(long) < len(values):
        return float(np.quantile(long, CALIBRATE_QUANTILE)), True
    return float(np.quantile([v for v, _ in values], CALIBRATE_QUANTILE)), False


def _floor_us(pools: dict[ResidualClass, list[tuple[float, float]]],
              relative: dict[ResidualClass, tuple[float | None, bool]]) -> float:
    """Step 3: the absolute part of every floor, in us: what short cases exceed the relative floor by.

    Taken from the clock mode compare will mostly use (clocked when any case
    could be normalized), and only from classes whose relative floor the long
    cases set; 0 when there are none.
    """
    mode = "clocked" if pools[("clocked", "pure")] or pools[("clocked", "band")] else "unclocked"
    excess_us = [max(0.0, v - relative[(mode, bound)][0]) * us
                 for bound in ("pure", "band") if relative[(mode, bound)][1]
                 for v, us in pools[(mode, bound)] if us < LONG_US]
    if not excess_us:
        return 0.0
    return round(CALIBRATE_MARGIN * float(np.quantile(excess_us, CALIBRATE_QUANTILE)), 3)


def _class_floor(q99_pct: dict[str, float | None], key: str, fallback: float) -> float:
    """One class's floor in percent: the margin over its q99, or ``fallback`` without data."""
    q = q99_pct[key]
    return round(max(MIN_FLOOR_PCT, q * CALIBRATE_MARGIN), 2) if q is not None else fallback


def _assemble_profile(arch: str, name: str | None, n_runs: int, residuals: _Residuals,
                      q99_pct: dict[str, float | None], floor_us: float) -> NoiseProfile:
    """Step 4: the floors, ordered as compare expects them, and a source that says how.

    A class without data falls back to its unclocked twin, then to the built-in
    profile of the arch. Without clocks and near the ridge a floor is never
    tighter than with clocks and off the ridge, and the suite floor never tighter
    than a case's.
    """
    builtin = profile_for_arch(arch)
    f_pure = _class_floor(q99_pct, "clocked_pure", _class_floor(q99_pct, "unclocked_pure", builtin.floor_pct))
    f_upure = max(f_pure, _class_floor(q99_pct, "unclocked_pure", builtin.unclocked_floor_pct))
    f_band = max(f_pure, _class_floor(q99_pct, "clocked_band",
                                      _class_floor(q99_pct, "unclocked_band", builtin.band_floor_pct)))
    f_uband = max(f_band, _class_floor(q99_pct, "unclocked_band", builtin.unclocked_band_floor_pct))
    suite_pct = round(max(MIN_FLOOR_PCT, 100.0 * math.expm1(max(residuals.suite_shifts)) * CALIBRATE_MARGIN,
                          f_pure), 2)
    missing = [k for k, v in q99_pct.items() if v is None]
    return NoiseProfile(
        name=name or (arch or "calibrated"), arch=arch,
        floor_pct=f_pure, unclocked_floor_pct=f_upure,
        band_floor_pct=f_band, unclocked_band_floor_pct=f_uband,
        clock_swing_pct=builtin.clock_swing_pct, suite_floor_pct=suite_pct,
        source=(f"perfci calibrate: {n_runs} A/A runs, {residuals.n_pairs} pairs, {residuals.n_residuals} residuals"
                + (f" ({residuals.n_disturbed} from a disturbed run left out)" if residuals.n_disturbed else "")
                + f"; floor = {CALIBRATE_MARGIN} x q{int(CALIBRATE_QUANTILE * 100)} |residual|"
                + (f" of cases >= {LONG_US:g} us, plus {floor_us:g} us" if floor_us else "")
                + (f"; no data for {', '.join(missing)} (fallback values)" if missing else "")),
        floor_us=floor_us,
    )
