import json
from dataclasses import replace

import pytest

from perfci import noise
from perfci.errors import PerfciError
from perfci.simulate import SimConfig, simulate_runs, without_clocks


def test_clock_exponent_classes():
    # bf16 on gfx950: ridge ~312 FLOP/B. Decode GEMV is memory-bound, a big
    # prefill GEMM compute-bound, M=256 in between.
    e = lambda m: noise.clock_exponent("gfx950", "bf16", m, 4096, 4096, 2, 2)  # noqa: E731
    assert e(1) == 0.0 and e(8192) == 1.0 and 0.0 < e(256) < 1.0
    assert noise.clock_exponent("unknown", "bf16", 8, 8, 8, 2, 2) is None
    assert noise.clock_exponent("gfx950", "bf16", None, 8, 8, 2, 2) is None


def test_h200_ridge_point():
    from perfci.roofline import ridge_flop_per_byte

    assert ridge_flop_per_byte("sm_90", "bf16") == pytest.approx(183, abs=2)


def test_builtin_profiles_are_ordered_sensibly():
    g950, g942 = noise.BUILTIN_PROFILES["gfx950"], noise.BUILTIN_PROFILES["gfx942"]
    for p in noise.BUILTIN_PROFILES.values():
        assert p.unclocked_floor_pct >= p.floor_pct and p.band_floor_pct >= p.floor_pct
    assert g950.clock_swing_pct > g942.clock_swing_pct
    assert g950.band_floor_pct > g942.band_floor_pct
    assert "H200 A/A" in noise.BUILTIN_PROFILES["sm_90"].source
    # ±14%: two runs at the opposite ends differ by 1.14/0.86.
    assert g950.swing_floor() == pytest.approx(0.2818, abs=1e-3)


def test_calibrate_recovers_wider_floors_for_wider_swings():
    cfg = SimConfig()
    wide = noise.calibrate(simulate_runs(cfg, seed=1, count=6)).profile
    narrow = noise.calibrate(simulate_runs(replace(cfg, clock_swing=0.02), seed=1, count=6)).profile
    assert wide.arch == "gfx950"
    assert wide.band_floor_pct > narrow.band_floor_pct
    assert 0.5 <= wide.floor_pct <= 5.0


def test_calibrate_without_clocks_says_so():
    runs = [without_clocks(t) for t in simulate_runs(SimConfig(), seed=2, count=4)]
    cal = noise.calibrate(runs)
    assert cal.q99_pct["clocked_pure"] is None
    assert "no data for clocked_pure" in cal.profile.source


def test_calibrate_needs_two_runs():
    with pytest.raises(PerfciError):
        noise.calibrate(simulate_runs(SimConfig(), seed=2, count=1))


def test_profile_json_round_trip_and_errors(tmp_path):
    p = noise.BUILTIN_PROFILES["gfx942"]
    f = tmp_path / "p.json"
    f.write_text(noise.profile_to_json(p, {"runs": 3}))
    assert noise.load_profile(str(f)) == p
    assert noise.load_profile("gfx950") is noise.BUILTIN_PROFILES["gfx950"]
    bad = json.loads(f.read_text())
    bad["floor_pct"] = "two"
    f.write_text(json.dumps(bad))
    with pytest.raises(PerfciError, match="floor_pct"):
        noise.load_profile(str(f))
    with pytest.raises(PerfciError, match="neither a built-in"):
        noise.load_profile(str(tmp_path / "nope.json"))
