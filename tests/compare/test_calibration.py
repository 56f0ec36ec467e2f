"""perfci calibrate's derivation: a noise profile from A/A runs, and each of its steps."""
import math
from dataclasses import replace

import numpy as np
import pytest

from perfci.compare import calibration
from perfci.compare.calibration import CLASSES, _assemble_profile, _floor_us, _relative_q99, _Residuals, calibrate
from perfci.compare.noise import BUILTIN_PROFILES
from perfci.compare.simulate import SimConfig, simulate_runs, without_clocks
from perfci.errors import PerfciError
from perfci.model import ResultRow, ResultTable


def test_calibrate_recovers_wider_floors_for_wider_swings():
    cfg = SimConfig()
    wide = calibrate(simulate_runs(cfg, seed=1, count=6)).profile
    narrow = calibrate(simulate_runs(replace(cfg, clock_swing=0.02), seed=1, count=6)).profile
    assert wide.arch == "gfx950"
    assert wide.band_floor_pct > narrow.band_floor_pct
    assert 0.5 <= wide.floor_pct <= 5.0


def test_calibrate_without_clocks_says_so():
    runs = [without_clocks(t) for t in simulate_runs(SimConfig(), seed=2, count=4)]
    cal = calibrate(runs)
    assert cal.q99_pct["clocked_pure"] is None
    assert "no data for clocked_pure" in cal.profile.source


def test_calibrate_needs_two_runs():
    with pytest.raises(PerfciError, match="at least two A/A runs"):
        calibrate(simulate_runs(SimConfig(), seed=2, count=1))


def _aa_runs(count, seed, short_jitter_us=0.0, disturb=None):
    """A/A runs of 40 long (500 us) and 40 short (10 us) memory-bound cases.

    Every case moves run to run by ~1% (lognormal); the short ones also by
    `short_jitter_us` of absolute noise. `disturb=(run, case)` scatters that
    run's repeats of that case by ±30%.
    """
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
    quiet = calibrate(_aa_runs(5, seed=3)).profile
    jittery = calibrate(_aa_runs(5, seed=3, short_jitter_us=0.3)).profile
    # The long cases set the relative floor either way; the short ones' extra
    # ~0.3 us becomes the absolute part.
    assert jittery.floor_pct == pytest.approx(quiet.floor_pct, rel=0.35)
    assert jittery.floor_us > 0.5 and jittery.floor_us > 5 * quiet.floor_us
    assert "us" in jittery.source


def test_calibrate_leaves_out_disturbed_runs_and_counts_them():
    cal = calibrate(_aa_runs(3, seed=4, disturb=(1, 5)))
    # case 5 of run 1 is in two of the three pairs
    assert cal.n_disturbed == 2
    assert "2 from a disturbed run left out" in cal.profile.source


def test_calibrate_refuses_two_copies_of_one_run():
    runs = _aa_runs(1, seed=5)
    copy = replace(runs[0], path="elsewhere/aa0.csv")
    with pytest.raises(PerfciError, match="same numbers"):
        calibrate([runs[0], copy])


def test_calibrate_refuses_runs_without_a_shared_ok_case():
    a, b = _aa_runs(2, seed=6)
    renamed = replace(b, rows=tuple(replace(r, kernel="other") for r in b.rows))
    with pytest.raises(PerfciError, match="share no case that is ok in both"):
        calibrate([a, renamed])


# --------------------------------------------------------------------------- the steps

LONG, SHORT = 500.0, 10.0  # us: either side of calibration.LONG_US


def test_relative_q99_takes_the_long_cases_when_there_are_enough_of_them():
    enough = calibration.MIN_LONG_RESIDUALS
    assert _relative_q99([]) == (None, False)
    # Enough long cases, and short ones besides: the short ones' 5% does not count.
    assert _relative_q99([(0.01, LONG)] * enough + [(0.05, SHORT)] * 5) == (pytest.approx(0.01), True)
    # One long case too few: every case counts, and the short ones lift the q99.
    q, long_only = _relative_q99([(0.01, LONG)] * (enough - 1) + [(0.05, SHORT)] * 5)
    assert not long_only and q == pytest.approx(0.05)
    # Long cases only: nothing was left out.
    assert _relative_q99([(0.01, LONG)] * (enough + 5)) == (pytest.approx(0.01), False)


def _pools(**classes):
    pools = {cls: [] for cls in CLASSES}
    for key, values in classes.items():
        pools[tuple(key.split("_"))] = values
    return pools


def test_floor_us_is_the_margin_over_what_short_cases_exceed_the_relative_floor_by():
    # Short cases move 5% where the long ones move 1%: 4% of 10 us = 0.4 us, x 1.25.
    values = [(0.01, LONG)] * calibration.MIN_LONG_RESIDUALS + [(0.05, SHORT)] * 10
    for pools in (_pools(clocked_pure=values), _pools(unclocked_pure=values)):
        relative = {cls: _relative_q99(pools[cls]) for cls in CLASSES}
        assert _floor_us(pools, relative) == pytest.approx(0.5)
    # Too few long cases to set the relative floor alone: no absolute part.
    few = _pools(clocked_pure=values[1:])
    assert _floor_us(few, {cls: _relative_q99(few[cls]) for cls in CLASSES}) == 0.0


def test_assembled_profile_falls_back_class_by_class_and_keeps_floors_ordered():
    builtin = BUILTIN_PROFILES["gfx942"]  # 2.0 / 2.9 / 3.5 / 4.3, swing 6%
    residuals = _Residuals(pools=_pools(), suite_shifts=[math.log(1.02)], n_pairs=3, n_residuals=30,
                           n_disturbed=0)
    q99 = {"clocked_pure": None, "clocked_band": None, "unclocked_pure": 3.0, "unclocked_band": None}
    p = _assemble_profile("gfx942", None, 3, residuals, q99, floor_us=0.0)
    assert p.floor_pct == 3.75  # no clocked data: the unclocked class's 1.25 x 3.0
    assert p.unclocked_floor_pct == 3.75
    assert p.band_floor_pct == 3.75  # the built-in 3.5 would sit below the off-ridge floor
    assert p.unclocked_band_floor_pct == builtin.unclocked_band_floor_pct
    assert p.suite_floor_pct == 3.75  # 1.25 x 2% = 2.5%, but never below a case's floor
    assert (p.name, p.arch, p.clock_swing_pct, p.floor_us) == ("gfx942", "gfx942", builtin.clock_swing_pct, 0.0)
    assert p.source == ("perfci calibrate: 3 A/A runs, 3 pairs, 30 residuals; floor = 1.25 x q99 |residual|; "
                        "no data for clocked_pure, clocked_band, unclocked_band (fallback values)")


def test_assembled_floor_is_never_finer_than_the_minimum():
    residuals = _Residuals(pools=_pools(), suite_shifts=[0.0], n_pairs=1, n_residuals=10, n_disturbed=1)
    q99 = {"clocked_pure": 0.1, "clocked_band": 0.1, "unclocked_pure": 0.1, "unclocked_band": 0.1}
    p = _assemble_profile("", "quiet", 2, residuals, q99, floor_us=0.25)
    assert p.floor_pct == p.suite_floor_pct == calibration.MIN_FLOOR_PCT
    assert p.name == "quiet" and p.floor_us == 0.25
    assert "(1 from a disturbed run left out)" in p.source and "plus 0.25 us" in p.source


def test_calibrate_refuses_a_floor_no_regression_could_cross():
    # Half the cases 1000x slower in the second run: not A/A runs of one code, and the
    # floor they imply (thousands of percent) would let any regression through.
    a, b = _aa_runs(2, seed=7)
    slow = replace(b, rows=tuple(replace(r, median_us=r.median_us * 1000,
                                         repeats_us=tuple(x * 1000 for x in r.repeats_us)) if i % 2 else r
                                 for i, r in enumerate(b.rows)))
    with pytest.raises(PerfciError, match=r"^calibrate: \w+ [\d.e+]+% is not a floor between 0 and 100%; "
                                          r"these runs are not A/A runs"):
        calibrate([a, slow])
    calibrate([a, b])  # the same runs without the change give a profile
