"""Noise profiles as pure data: clock exponents, floors, and the JSON conversions.

Reading a profile file is tested with the other inputs (test_inputs.py),
deriving one from A/A runs in test_calibration.py.
"""
import json
from dataclasses import replace

import pytest

from perfci.compare import noise
from perfci.errors import PerfciError


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


def test_profile_json_round_trip():
    p = noise.BUILTIN_PROFILES["gfx942"]
    data = json.loads(noise.profile_to_json(p, {"runs": 3}))
    assert data["calibration"] == {"runs": 3}
    assert noise.profile_from_dict(data, "p.json") == p


@pytest.mark.parametrize("change,message", [
    (lambda d: d.update(floor_pct="two"), "key 'floor_pct' must be a number >= 0, got 'two'"),
    (lambda d: d.update(floor_pct=-1), "key 'floor_pct' must be a number >= 0, got -1"),
    (lambda d: d.update(floor_pct=True), "key 'floor_pct' must be a number >= 0, got True"),
    (lambda d: d.update(name=3), "key 'name' must be a string"),
    (lambda d: d.pop("suite_floor_pct"), "key 'suite_floor_pct' is missing"),
])
def test_profile_from_dict_names_the_source_and_the_bad_key(change, message):
    data = json.loads(noise.profile_to_json(noise.BUILTIN_PROFILES["gfx942"]))
    change(data)
    with pytest.raises(PerfciError) as err:
        noise.profile_from_dict(data, "p.json")
    assert str(err.value) == f"p.json: {message}"


def test_profile_from_dict_wants_an_object():
    with pytest.raises(PerfciError, match="p.json: a noise profile must be a JSON object"):
        noise.profile_from_dict([1, 2], "p.json")


def test_profile_written_before_floor_us_still_converts():
    data = json.loads(noise.profile_to_json(noise.BUILTIN_PROFILES["gfx950"]))
    del data["floor_us"]
    assert noise.profile_from_dict(data, "old.json").floor_us == 0.0


def test_transition_band_is_strictly_between_memory_and_compute_bound():
    assert [noise.in_transition_band(e) for e in (None, 0.0, 0.3, 1.0)] == [False, False, True, False]
    p = noise.BUILTIN_PROFILES["gfx950"]
    assert p.floor_for(0.3, True) == p.band_floor_pct and p.floor_for(1.0, True) == p.floor_pct
    assert p.floor_for(0.3, False) == p.unclocked_band_floor_pct


def test_floor_us_adds_a_share_of_the_base_time():
    p = replace(noise.BUILTIN_PROFILES["gfx942"], floor_us=0.5)
    assert p.floor_for(1.0, True, 10.0) == pytest.approx(p.floor_pct + 5.0)
    assert p.floor_for(1.0, True, 1000.0) == pytest.approx(p.floor_pct + 0.05)
    assert p.floor_for(1.0, True) == p.floor_pct  # no base time: relative only
    assert noise.BUILTIN_PROFILES["gfx942"].floor_for(1.0, True, 10.0) == p.floor_pct
