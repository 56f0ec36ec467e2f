import json
from dataclasses import replace

import pytest

from perfci.compare import noise
from perfci.errors import PerfciError
from perfci.compare.simulate import SimConfig, simulate_runs, without_clocks


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


def test_floor_us_adds_a_share_of_the_base_time():
    p = replace(noise.BUILTIN_PROFILES["gfx942"], floor_us=0.5)
    assert p.floor_for(1.0, True, 10.0) == pytest.approx(p.floor_pct + 5.0)
    assert p.floor_for(1.0, True, 1000.0) == pytest.approx(p.floor_pct + 0.05)
    assert p.floor_for(1.0, True) == p.floor_pct  # no base time: relative only
    assert noise.BUILTIN_PROFILES["gfx942"].floor_for(1.0, True, 10.0) == p.floor_pct


def test_profile_files_written_before_floor_us_still_load(tmp_path):
    data = json.loads(noise.profile_to_json(noise.BUILTIN_PROFILES["gfx950"]))
    del data["floor_us"]
    f = tmp_path / "old.json"
    f.write_text(json.dumps(data))
    assert noise.load_profile(str(f)).floor_us == 0.0


def _aa_runs(count, seed, short_jitter_us=0.0, disturb=None):
    """A/A runs of 40 long (500 us) and 40 short (10 us) memory-bound cases.

    Every case moves run to run by ~1% (lognormal); the short ones also by
    `short_jitter_us` of absolute noise. `disturb=(run, case)` scatters that
    run's repeats of that case by ±30%.
    """
    import numpy as np

    from perfci.model import ResultRow, ResultTable

    rng = np.random.default_rng(seed)
    shapes = [(1, 4096 + 64 * i, 4096) for i in range(80)]  # GEMV: memory-bound
    base_us = [500.0] * 40 + [10.0] * 40
    runs = []
    for r in range(count):
        rows = []
        for i, ((m, n, k), t) in enumerate(zip(shapes, base_us)):
            level = t * np.exp(rng.normal(0, 0.01)) + (rng.normal(0, short_jitter_us) if t < 100 else 0.0)
            reps = level * np.exp(rng.normal(0, 0.003, 7))
            if disturb == (r, i):
                reps = level * np.exp(rng.uniform(-0.3, 0.3, 7))
            rows.append(ResultRow(kernel="gemv", shape=f"{m}x{n}x{k}", dtype="bf16", status="ok",
                                  m=m, n=n, k=k, median_us=float(np.median(reps)),
                                  repeats_us=tuple(float(x) for x in reps), arch="gfx942"))
        runs.append(ResultTable(path=f"aa{r}.csv", format="perfci", rows=tuple(rows)))
    return runs


def test_calibrate_puts_short_kernels_extra_noise_into_floor_us():
    quiet = noise.calibrate(_aa_runs(5, seed=3)).profile
    jittery = noise.calibrate(_aa_runs(5, seed=3, short_jitter_us=0.3)).profile
    # The long cases set the relative floor either way; the short ones' extra
    # ~0.3 us becomes the absolute part.
    assert jittery.floor_pct == pytest.approx(quiet.floor_pct, rel=0.35)
    assert jittery.floor_us > 0.5 and jittery.floor_us > 5 * quiet.floor_us
    assert "us" in jittery.source


def test_calibrate_leaves_out_disturbed_runs_and_counts_them():
    cal = noise.calibrate(_aa_runs(3, seed=4, disturb=(1, 5)))
    # case 5 of run 1 is in two of the three pairs
    assert cal.n_disturbed == 2
    assert "2 from a disturbed run left out" in cal.profile.source


def test_calibrate_refuses_two_copies_of_one_run():
    runs = _aa_runs(1, seed=5)
    copy = replace(runs[0], path="elsewhere/aa0.csv")
    with pytest.raises(PerfciError, match="same numbers"):
        noise.calibrate([runs[0], copy])
