"""Noise profiles: how far apart two runs of *unchanged* code land, per device.

The repeats inside one run share that run's clocks, driver state and memory
placement, so their spread says nothing about the run-to-run noise that a
nightly CI sees. A profile supplies that missing piece as an **effect floor**:
a case is only called regressed when its interval lies beyond the floor.

Profiles live in :data:`BUILTIN_PROFILES` below (edit the numbers in place) or in
a JSON file written by ``perfci calibrate``; ``load_profile`` takes either a
name or a path. :func:`calibrate` re-derives a profile from A/A runs (several
runs of the same code), so the numbers here are leads until real runs replace
them.

This module is pure except :func:`load_profile` / :func:`profile_to_json`,
which touch a file or a string.
"""
from __future__ import annotations

from perfci.roofline import ridge_flop_per_byte

import json
import math
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

from perfci.errors import PerfciError


def clock_exponent(arch: str, dtype: str, m: int | None, n: int | None, k: int | None,
                   elem_bytes: float, out_bytes: float) -> float | None:
    """How strongly a case's time follows the core clock: 1 compute-bound, 0 memory-bound.

    Arithmetic intensity 2MNK / bytes against the arch's ridge point: at or above
    2^1.5 ≈ 2.8x the ridge the case is compute-bound (time ∝ 1/clock, so it is
    compared in cycles); at or below ridge / 2.8 it is memory-bound (the core
    clock does not set its time, so it is not scaled). The band is that wide
    because achieved peaks sit below datasheet ones by different amounts for
    compute and memory, which moves each kernel's real ridge. In between, where a kernel is
    partly limited by both, the exponent rises linearly in log(intensity) —
    scaling those cases fully or not at all would leave half a clock swing in
    them either way. ``None`` when the arch or the shape is unknown.
    """
    ridge = ridge_flop_per_byte(arch, dtype)
    if ridge is None or not (m and n and k):
        return None
    nbytes = (m * k + k * n) * elem_bytes + m * n * out_bytes
    ai = 2.0 * m * n * k / nbytes
    x = math.log2(ai / ridge)
    return min(1.0, max(0.0, (x + BAND_OCTAVES) / (2.0 * BAND_OCTAVES)))


# Half-width, in octaves of arithmetic intensity, of the band around the ridge
# where a kernel is limited by both compute and memory.
BAND_OCTAVES = 1.5
# Clock exponents strictly inside (BAND_LOW, BAND_HIGH) are "transition band".
BAND_LOW, BAND_HIGH = 0.0, 1.0


@dataclass(frozen=True)
class NoiseProfile:
    """Run-to-run noise of one device kind, as effect floors in percent.

    floor_pct: residual floor for cases compared with per-repeat clocks on both
        sides (compute-bound in cycles) and after the common mode is removed.
    unclocked_floor_pct: the same when clocks were not recorded: the common mode
        still removes most of a clock swing.
    band_floor_pct, unclocked_band_floor_pct: the floors for cases in the
        transition band between memory- and compute-bound (clock exponent
        strictly between 0 and 1). Their time follows the clock along a
        curve, not a power law, since the bottleneck itself moves with the clock,
        so no normalization removes a large swing from them completely.
    clock_swing_pct: half-width of a run's clock swing (±). Used when neither
        clocks nor a common mode are available (few cases): two runs at the
        opposite ends differ by (1+w)/(1-w).
    suite_floor_pct: a suite-wide (common-mode) shift beyond this is reported as
        a suite-wide regression/improvement.
    floor_us: an absolute part added to every floor, as a share of the case's
        base time: short kernels move by a roughly fixed fraction of a
        microsecond between runs (launch and placement effects), so their
        relative noise grows as they shrink. 0 = relative floors only.
    """

    name: str
    arch: str
    floor_pct: float
    unclocked_floor_pct: float
    band_floor_pct: float
    unclocked_band_floor_pct: float
    clock_swing_pct: float
    suite_floor_pct: float
    source: str = ""
    floor_us: float = 0.0

    def floor_for(self, exponent: float | None, clocked: bool, base_us: float | None = None) -> float:
        """Floor in percent for a case of this clock exponent and base time."""
        band = exponent is not None and BAND_LOW < exponent < BAND_HIGH
        if clocked:
            pct = self.band_floor_pct if band else self.floor_pct
        else:
            pct = self.unclocked_band_floor_pct if band else self.unclocked_floor_pct
        if self.floor_us and base_us:
            pct += 100.0 * self.floor_us / base_us
        return pct

    def swing_floor(self) -> float:
        """Log ratio two runs can differ by from clock swing alone."""
        w = self.clock_swing_pct / 100.0
        return math.log((1.0 + w) / (1.0 - w)) if w < 1 else math.inf


BUILTIN_PROFILES: dict[str, NoiseProfile] = {
    # gfx950 (MI355X): nightly runners swing ±14% in clock between runs. LEADS:
    # `noise.calibrate` on 12 simulated A/A runs (perfci.compare.simulate defaults: ±14%
    # swing, 1.5% repeat clock jitter, 0.4% per-case run noise) gave q99 |residual|
    # 1.6% pure / 5.6% band with clocks, 2.1% / 6.3% without; x1.25 margin.
    # Without clocks the suite's split common mode absorbs the swing; with too
    # few cases for it, the floor widens to the full swing (swing_floor, ~33%).
    # Re-derive with `perfci calibrate` on real A/A runs.
    "gfx950": NoiseProfile("gfx950", "gfx950", floor_pct=2.0, unclocked_floor_pct=2.6,
                           band_floor_pct=7.0, unclocked_band_floor_pct=7.8,
                           clock_swing_pct=14.0, suite_floor_pct=3.4,
                           source="lead from simulated A/A runs (±14% run clock swing); re-derive with perfci calibrate"),
    # gfx942 (MI300X): clocks swing less (±6% is the working assumption, not yet
    # measured), so the band floors are tighter. LEADS from the same simulation
    # at ±6% (q99 1.6% / 2.7% with clocks, 2.3% / 3.4% without).
    "gfx942": NoiseProfile("gfx942", "gfx942", floor_pct=2.0, unclocked_floor_pct=2.9,
                           band_floor_pct=3.5, unclocked_band_floor_pct=4.3,
                           clock_swing_pct=6.0, suite_floor_pct=3.4,
                           source="lead from simulated A/A runs (±6% run clock swing); re-derive with perfci calibrate"),
    # sm_90 (H200): `perfci calibrate` over three A/A nights on the lent H200
    # (2026-11-29: the committed baselines, then the same code twice more;
    # benchmarks/results/h200-2026-11-29b/call3): 315 case pairs, 12 of them from
    # a disturbed run left out. Cases of 100 us and more: q99 |residual| 4.3% in
    # cycles, so 5.36%; shorter ones exceed that by at most 0.15 us, so 0.19 us is
    # added as a share of the base time (a 9 us decode case: 7.5%). Band classes
    # had no data (the suites' shapes sit far from the H200's ridge) and keep
    # the earlier hand-set values. Check: python benchmarks/h200_aa_validation.py
    "sm_90": NoiseProfile("sm_90", "sm_90", floor_pct=5.36, unclocked_floor_pct=5.36,
                          band_floor_pct=6.0, unclocked_band_floor_pct=7.0,
                          clock_swing_pct=5.0, suite_floor_pct=5.36,
                          source="perfci calibrate: 3 H200 A/A nights, 315 case pairs (12 disturbed left out); "
                                 "1.25 x q99 |residual| of cases >= 100 us, plus 0.189 us",
                          floor_us=0.189),
    # The CPU runs the smoke suite through the Triton interpreter: it proves the
    # pipeline, not kernel speed. `perfci calibrate` over three smoke runs on the
    # 2-core CI machine (2026-11-29, one of them beside another CPU-heavy job)
    # gave 1.25 x q99 |residual| = 75%: only a gross change is a verdict here.
    "cpu": NoiseProfile("cpu", "cpu", floor_pct=75.0, unclocked_floor_pct=75.0,
                        band_floor_pct=75.0, unclocked_band_floor_pct=75.0,
                        clock_swing_pct=5.0, suite_floor_pct=75.0,
                        source="perfci calibrate, 3 smoke runs on the 2-core CI machine (interpreter)"),
    # Unknown device (FlyDSL CSVs and pytest-benchmark JSON carry no arch):
    # as wide as the widest arch we run on.
    "generic": NoiseProfile("generic", "", floor_pct=3.0, unclocked_floor_pct=4.0,
                            band_floor_pct=7.0, unclocked_band_floor_pct=7.0,
                            clock_swing_pct=14.0, suite_floor_pct=5.0,
                            source="conservative default for an unknown device"),
}


def profile_for_arch(arch: str) -> NoiseProfile:
    return BUILTIN_PROFILES.get(arch, BUILTIN_PROFILES["generic"])


def load_profile(name_or_path: str) -> NoiseProfile:
    """A built-in profile by name, or a JSON file written by ``perfci calibrate``."""
    if name_or_path in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[name_or_path]
    path = Path(name_or_path)
    if not path.exists():
        raise PerfciError(f"--noise-profile {name_or_path}: neither a built-in profile "
                          f"({', '.join(BUILTIN_PROFILES)}) nor an existing file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise PerfciError(f"{path}: cannot read the noise profile ({err})") from None
    except json.JSONDecodeError as err:
        raise PerfciError(f"{path}: line {err.lineno}, column {err.colno}: not valid JSON ({err.msg})") from None
    return profile_from_dict(data, str(path))


def profile_from_dict(data: object, where: str) -> NoiseProfile:
    if not isinstance(data, dict):
        raise PerfciError(f"{where}: a noise profile must be a JSON object")
    values: dict[str, object] = {}
    for f in fields(NoiseProfile):
        if f.name not in data:
            if f.default is not MISSING:  # keys added later: older profile files stay valid
                values[f.name] = f.default
                continue
            raise PerfciError(f"{where}: key '{f.name}' is missing")
        v = data[f.name]
        if f.name in ("name", "arch", "source"):
            if not isinstance(v, str):
                raise PerfciError(f"{where}: key '{f.name}' must be a string")
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise PerfciError(f"{where}: key '{f.name}' must be a number >= 0, got {v!r}")
            v = float(v)
        values[f.name] = v
    return NoiseProfile(**values)  # type: ignore[arg-type]


def profile_to_json(profile: NoiseProfile, extra: dict | None = None) -> str:
    data = asdict(profile)
    if extra:
        data["calibration"] = extra
    return json.dumps(data, indent=2) + "\n"


# --------------------------------------------------------------------------- calibrate

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


def calibrate(tables: Sequence, arch: str | None = None, name: str | None = None) -> Calibration:
    """Re-derive a profile from A/A runs: several runs of the same code and suite.

    For every pair of runs, each case's log ratio is computed exactly as
    ``perfci compare`` does (with and without clock normalization, common mode
    removed). Pairs where one run's repeats of the case scattered (compare never
    judges those; see ``perfci.compare.verdicts._disturbed_side``) are left out and counted.
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
    Returns:
        A :class:`Calibration` whose ``profile`` can be saved as JSON.
    """
    import numpy as np

    from perfci.compare.verdicts import CompareOptions, pair_residuals

    if len(tables) < 2:
        raise PerfciError("calibrate needs at least two A/A runs of the same suite")
    if arch is None:
        archs = {r.arch for t in tables for r in t.rows if r.arch}
        arch = archs.pop() if len(archs) == 1 else ""
    builtin = profile_for_arch(arch)
    # (|log residual|, base time in us) per class
    pools: dict[tuple[str, str], list[tuple[float, float]]] = {
        (c, b): [] for c in ("clocked", "unclocked") for b in ("pure", "band")}
    suite: list[float] = []
    n_pairs = n_res = n_disturbed = 0
    for i in range(len(tables)):
        for j in range(i + 1, len(tables)):
            n_pairs += 1
            for mode, opts in (("clocked", CompareOptions(arch=arch or None)),
                               ("unclocked", CompareOptions(arch=arch or None, clock_normalize=False))):
                residuals = pair_residuals(tables[i], tables[j], arch, opts)
                if residuals and all(r.log_shift == 0.0 for r in residuals):
                    raise PerfciError(f"calibrate: {tables[i].path} and {tables[j].path} hold the same "
                                      f"numbers; A/A needs separate runs")
                for r in residuals:
                    if mode == "clocked" and not r.clocked:
                        continue
                    n_res += mode == "unclocked"
                    if r.disturbed:
                        n_disturbed += mode == "unclocked"
                        continue
                    band = r.exponent is not None and BAND_LOW < r.exponent < BAND_HIGH
                    pools[(mode, "band" if band else "pure")].append((abs(r.log_shift), r.base_us))
            suite.append(_suite_shift(tables[i], tables[j], arch))
    if not n_res:
        raise PerfciError("calibrate: the runs share no case that is ok in both")
    if n_disturbed == n_res:
        raise PerfciError(f"calibrate: every one of the {n_res} case pairs had a run whose repeats "
                          f"scattered; measure again on a quieter machine")

    def relative_q(values: list[tuple[float, float]]) -> tuple[float | None, bool]:
        """q99 of |residual| (log), and whether it came from the long cases alone."""
        if not values:
            return None, False
        long = [v for v, us in values if us >= LONG_US]
        if len(long) >= MIN_LONG_RESIDUALS and len(long) < len(values):
            return float(np.quantile(long, CALIBRATE_QUANTILE)), True
        return float(np.quantile([v for v, _ in values], CALIBRATE_QUANTILE)), False

    rel = {key: relative_q(v) for key, v in pools.items()}
    q99 = {f"{c}_{b}": (round(100.0 * math.expm1(rel[(c, b)][0]), 3) if rel[(c, b)][0] is not None else None)
           for (c, b) in pools}

    # The absolute part, from the short cases of the mode compare will mostly use.
    mode = "clocked" if pools[("clocked", "pure")] or pools[("clocked", "band")] else "unclocked"
    excess_us = [max(0.0, v - rel[(mode, b)][0]) * us
                 for b in ("pure", "band") if rel[(mode, b)][1]
                 for v, us in pools[(mode, b)] if us < LONG_US]
    floor_us = round(CALIBRATE_MARGIN * float(np.quantile(excess_us, CALIBRATE_QUANTILE)), 3) if excess_us else 0.0

    def floor(key: str, fallback: float) -> float:
        q = q99[key]
        return round(max(MIN_FLOOR_PCT, q * CALIBRATE_MARGIN), 2) if q is not None else fallback

    f_pure = floor("clocked_pure", floor("unclocked_pure", builtin.floor_pct))
    f_upure = max(f_pure, floor("unclocked_pure", builtin.unclocked_floor_pct))
    f_band = max(f_pure, floor("clocked_band", floor("unclocked_band", builtin.band_floor_pct)))
    f_uband = max(f_band, floor("unclocked_band", builtin.unclocked_band_floor_pct))
    suite_pct = round(max(MIN_FLOOR_PCT, 100.0 * math.expm1(max(suite)) * CALIBRATE_MARGIN, f_pure), 2)
    missing = [k for k, v in q99.items() if v is None]
    profile = NoiseProfile(
        name=name or (arch or "calibrated"), arch=arch,
        floor_pct=f_pure, unclocked_floor_pct=f_upure,
        band_floor_pct=f_band, unclocked_band_floor_pct=f_uband,
        clock_swing_pct=builtin.clock_swing_pct, suite_floor_pct=suite_pct,
        source=(f"perfci calibrate: {len(tables)} A/A runs, {n_pairs} pairs, {n_res} residuals"
                + (f" ({n_disturbed} from a disturbed run left out)" if n_disturbed else "")
                + f"; floor = {CALIBRATE_MARGIN} x q{int(CALIBRATE_QUANTILE * 100)} |residual|"
                + (f" of cases >= {LONG_US:g} us, plus {floor_us:g} us" if floor_us else "")
                + (f"; no data for {', '.join(missing)} (fallback values)" if missing else "")),
        floor_us=floor_us,
    )
    return Calibration(profile, len(tables), n_pairs, n_res, q99,
                       round(100.0 * math.expm1(max(suite)), 3), n_disturbed, floor_us)


def _suite_shift(a, b, arch: str) -> float:
    from perfci.compare.verdicts import CompareOptions, suite_common_mode

    cm = suite_common_mode(a, b, arch, CompareOptions(arch=arch or None))
    return max(abs(cm.memory), abs(cm.memory + cm.clock))
