"""A night's level, its own variance, and a run's suite-wide shift (perfci/history/nights.py)."""
import numpy as np
import pytest

from perfci.history.nights import level_var, mode_offsets, night_level


def test_the_level_ignores_a_slow_tail_that_moves_the_median():
    tight = np.log([100.0, 100.1, 99.9, 100.05, 100.0, 99.95, 100.1])
    tail = tight.copy()
    tail[[1, 3, 5, 6]] += np.log(1.05)  # four of seven disturbed: the median now sits on the tail
    assert np.median(tail) - np.median(tight) > 0.04
    assert abs(night_level(tail) - night_level(tight)) < 0.001
    assert night_level(tail, "median") == pytest.approx(float(np.median(tail)))
    with pytest.raises(ValueError):
        night_level([])


def test_a_night_mixing_two_speeds_pins_its_level_down_less_than_a_tight_one():
    rng = np.random.default_rng(0)
    tight = np.log(100.0) + rng.normal(0.0, 0.002, 7)
    mixed = tight + np.log(np.array([1.0, 1.06, 1.0, 1.06, 1.06, 1.0, 1.06]))
    assert level_var(mixed) > 20 * level_var(tight)
    assert level_var(mixed) == level_var(mixed)  # seeded: the same repeats give the same answer
    assert level_var(np.log([5.0])) == 0.0


def _suite(seed=1, a=0.004, b_us=-0.15, n=60):
    rng = np.random.default_rng(seed)
    us = np.exp(rng.uniform(np.log(7.0), np.log(400.0), n))
    devs = a + np.log1p(b_us / us) + rng.normal(0.0, 0.001, n)
    return us, devs


def test_the_affine_mode_takes_a_fixed_time_out_of_short_kernels_where_a_median_cannot():
    us, devs = _suite()
    devs[0] += 0.10  # one case really moved: it must not pull the fit
    exps = np.zeros(us.size)
    affine = mode_offsets(devs, exps, np.log(us), "affine", 6)
    median = mode_offsets(devs, exps, np.log(us), "median", 6)
    res_affine, res_median = (devs - affine)[1:], (devs - median)[1:]
    assert np.std(res_affine) < 0.002 < np.std(res_median)
    assert (devs - affine)[0] == pytest.approx(0.10, abs=0.005)


def test_the_affine_mode_is_a_robust_constant_without_short_kernels_or_enough_cases():
    us, devs = _suite(b_us=0.0)
    us = us + 200.0  # all over 200 us: no b/us term
    off = mode_offsets(devs, np.zeros(us.size), np.log(us), "affine", 6)
    assert np.ptp(off) < 1e-12 and off[0] == pytest.approx(0.004, abs=0.001)
    assert not np.any(mode_offsets(devs[:5], np.zeros(5), np.log(us[:5]), "affine", 6))


