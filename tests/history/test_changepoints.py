"""Change points: a step is found where it is, a spike and a flat series give none, short says so."""
import numpy as np
import pytest

from perfci import stats
from perfci.history.changepoints import ChangeOptions, _midranks, detect, split_scores


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


def test_the_split_statistic_is_the_mann_whitney_rank_sum():
    x = np.array([5.0, 3.0, 9.0, 9.0, 1.0, 7.0, 2.0, 8.0])
    ks, z = split_scores(_midranks(x), 2)
    n = x.size
    for k, zk in zip(ks, z):
        u = stats.mann_whitney(x[k:], x[:k]).u  # pairs where the left part is larger, ties 1/2
        w = u + k * (k + 1) / 2.0
        assert zk == pytest.approx(abs(w - k * (n + 1) / 2) / np.sqrt(k * (n - k) * (n + 1) / 12))


def test_detection_is_reproducible():
    x = series(step_at=14, step=1.02, sd=0.008, seed=9)
    assert detect(x) == detect(x)
