"""Change points: a step is found where it is, a spike and a flat series give none, short says so."""
import numpy as np
import pytest

from perfci.history.changepoints import ChangeOptions, clip_spikes, detect, levels, night_level, split_scores


def series(n=30, sd=0.006, seed=0, step_at=None, step=1.03):
    x = 100.0 * np.exp(np.random.default_rng(seed).normal(0.0, sd, n))
    if step_at is not None:
        x[step_at:] *= step
    return x


@pytest.mark.parametrize("at", [4, 15, 25])
def test_a_three_percent_step_is_found_at_its_night(at):
    d = detect(series(step_at=at))
    assert len(d.changes) == 1, d
    (c,) = d.changes
    assert abs(c.index - at) <= 1
    assert 1.02 < c.ratio < 1.04 and c.p_value <= 0.01
    assert c.before < c.after


def test_two_steps_are_both_found_and_before_after_come_from_the_final_segments():
    x = series(n=40, seed=3, step_at=12)
    x[27:] /= 1.06
    d = detect(x)
    assert [c.index for c in d.changes] == [12, 27]
    assert d.changes[1].ratio == pytest.approx(d.changes[1].after / d.changes[1].before)
    assert d.changes[1].ratio < 0.96


def test_a_flat_series_with_a_wild_spike_has_no_change():
    for seed in range(5):
        x = series(seed=seed)
        x[11] *= 3.0  # one disturbed night
        x[12] *= 0.7
        assert detect(x).changes == (), seed


def test_flat_series_rarely_show_a_change():
    # alpha 0.01 per series: 200 flat series should give at most a handful.
    hits = sum(bool(detect(series(seed=s)).changes) for s in range(200))
    assert hits <= 6


def test_a_short_history_says_so_and_never_claims_a_change():
    x = [100, 100, 100, 130, 130]  # a big jump, but 5 nights < 2 x 3
    d = detect(x)
    assert d.too_short and d.changes == ()
    assert "too short" in d.note(ChangeOptions())
    assert not detect(series(n=6)).too_short


def test_small_shifts_are_not_reported_and_segments_are_at_least_min_segment():
    assert detect(series(step_at=15, step=1.004, sd=0.0005)).changes == ()  # real, but under 1%
    d = detect(series(step_at=2, step=1.10), ChangeOptions(min_segment=3))
    assert all(c.index >= 3 for c in d.changes)


def test_the_split_statistic_is_the_standardized_difference_of_means():
    y = np.log([5.0, 3.0, 9.0, 9.0, 1.0, 7.0, 2.0, 8.0])
    ks, z = split_scores(y, 2)
    assert list(ks) == [2, 3, 4, 5, 6]
    sd = np.std(y, ddof=1)
    for k, zk in zip(ks, z):
        left, right = y[:k], y[k:]
        assert zk == pytest.approx(abs(left.mean() - right.mean()) / (sd * np.sqrt(1 / k + 1 / right.size)))
    # Rows are scored independently (the permutation test scores many shuffles at once).
    both = np.vstack([y, y[::-1]])
    assert np.allclose(split_scores(both, 2)[1], [z, split_scores(y[::-1], 2)[1]])


def test_a_nights_level_is_the_mean_of_its_fastest_half():
    reps = np.log([10.0, 10.2, 10.1, 13.0, 12.0, 10.05, 11.0])  # three slow repeats: a disturbed tail
    assert night_level(reps) == pytest.approx(np.mean(np.log([10.0, 10.05, 10.1])))
    assert night_level(np.log([7.0])) == pytest.approx(np.log(7.0))
    # Two speeds 7% apart, 4 against 3 or 3 against 4: the median jumps, the level does not move by as much.
    fast_major = np.log([1.0, 1.07, 1.0, 1.07, 1.0, 1.07, 1.0])
    slow_major = np.log([1.07, 1.0, 1.07, 1.0, 1.07, 1.0, 1.07])
    assert abs(np.median(slow_major) - np.median(fast_major)) == pytest.approx(np.log(1.07))
    assert night_level(slow_major) == night_level(fast_major) == pytest.approx(0.0)


def test_levels_use_the_repeats_where_a_night_has_them():
    y = levels([10.0, 20.0], [[9.0, 11.0, 30.0], []])
    assert y == pytest.approx(np.log([9.0, 20.0]))
    with pytest.raises(ValueError):
        levels([1.0, 2.0], [[1.0]])


def _disturbed_nights(seed, at=14, n=30):
    rng = np.random.default_rng(seed)
    reps = []
    for i in range(n):
        r = 100.0 * (1.03 if i >= at else 1.0) * np.exp(rng.normal(0.0, 0.002, 7))
        slow = rng.choice(7, size=int(rng.integers(2, 5)), replace=False)  # 2-4 of 7 disturbed,
        r[slow] *= 1.0 + rng.uniform(0.02, 0.12, slow.size)  # as on a power-capped GEMM
        reps.append(r)
    return [float(np.median(r)) for r in reps], reps


def test_a_step_hidden_by_slow_repeats_is_found_from_the_repeats():
    wrong_from_medians = 0
    for seed in range(6):
        meds, reps = _disturbed_nights(seed)
        d = detect(meds, repeats=reps)
        assert [c.index for c in d.changes] == [14], seed
        assert d.changes[0].ratio == pytest.approx(1.03, abs=0.004)
        # The medians alone: nights with 4 slow repeats sit on the tail and blur the step.
        m = detect(meds).changes
        wrong_from_medians += [c.index for c in m] != [14] or abs(m[0].ratio - 1.03) > 0.004
    assert wrong_from_medians >= 3


def test_one_wild_night_is_pulled_to_its_neighbours_but_a_step_is_kept():
    y = np.log(series(sd=0.004, seed=2))
    y[10] += 0.5
    clipped = clip_spikes(y, 3.0)
    assert clipped[10] < y[10] - 0.4 and np.count_nonzero(clipped != y) <= 3
    step = np.log(series(sd=0.004, seed=2, step_at=15))
    assert np.count_nonzero(clip_spikes(step, 3.0) != step) <= 3


def test_detection_is_reproducible():
    x = series(step_at=14, step=1.02, sd=0.008, seed=9)
    assert detect(x) == detect(x)
