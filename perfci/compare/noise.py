"""Noise profiles: how far apart two runs of *unchanged* code land, per device.

The repeats inside one run share that run's clocks, driver state and memory
placement, so their spread says nothing about the run-to-run noise that a
nightly CI sees. A profile supplies that missing piece as an **effect floor**:
a case is only called regressed when its interval lies beyond the floor.

Profiles live in :data:`BUILTIN_PROFILES` below (edit the numbers in place) or in
a JSON file written by ``perfci calibrate``; :func:`perfci.compare.inputs.read_profile`
takes either a name or a path. :func:`perfci.compare.calibration.calibrate`
re-derives a profile from A/A runs (several runs of the same code), so the
numbers here are leads until real runs replace them.

Pure: :func:`profile_from_dict` and :func:`profile_to_json` convert between a
profile and its JSON form; reading and writing the file happen at the edges
(:mod:`perfci.compare.inputs`, :mod:`perfci.compare.cli`).
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, fields

from perfci.errors import PerfciError
# The clock rule lives at the top layer so history can use it without importing compare.
from perfci.roofline import BAND_HIGH, BAND_LOW, BAND_OCTAVES, clock_exponent, in_transition_band  # noqa: F401


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
        band = in_transition_band(exponent)
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
    # `perfci calibrate` on 12 simulated A/A runs (perfci.compare.simulate defaults: ±14%
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
    # sm_90 (H200): `perfci calibrate` over three A/A nights on an H200
    # (2026-11-29: the committed baselines, then the same code twice more;
    # benchmarks/results/h200-2026-11-29b/aa-nights): 315 case pairs, 12 of them from
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
    # pipeline, not kernel speed. `perfci calibrate` over three smoke runs on a
    # 2-vCPU CI runner (2026-11-29, one of them beside another CPU-heavy job)
    # gave 1.25 x q99 |residual| = 75%: only a gross change is a verdict here.
    "cpu": NoiseProfile("cpu", "cpu", floor_pct=75.0, unclocked_floor_pct=75.0,
                        band_floor_pct=75.0, unclocked_band_floor_pct=75.0,
                        clock_swing_pct=5.0, suite_floor_pct=75.0,
                        source="perfci calibrate, 3 smoke runs on a 2-vCPU CI runner (interpreter)"),
    # Unknown device (FlyDSL CSVs and pytest-benchmark JSON carry no arch):
    # as wide as the widest arch we run on.
    "generic": NoiseProfile("generic", "", floor_pct=3.0, unclocked_floor_pct=4.0,
                            band_floor_pct=7.0, unclocked_band_floor_pct=7.0,
                            clock_swing_pct=14.0, suite_floor_pct=5.0,
                            source="conservative default for an unknown device"),
}


def profile_for_arch(arch: str) -> NoiseProfile:
    return BUILTIN_PROFILES.get(arch, BUILTIN_PROFILES["generic"])


def profile_from_dict(data: object, where: str) -> NoiseProfile:
    """A profile from its parsed JSON; ``where`` names the source in each error."""
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
    """The JSON text ``perfci calibrate`` writes; ``extra`` goes under "calibration"."""
    data = asdict(profile)
    if extra:
        data["calibration"] = extra
    return json.dumps(data, indent=2) + "\n"
