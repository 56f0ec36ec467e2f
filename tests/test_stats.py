import math

import numpy as np
import pytest
import scipy.stats as ss
from scipy import special

from perfci import stats
from perfci.bisect.rules import SequentialRule, rounds_needed
from perfci.confirm.stopping import StoppingRule


@pytest.mark.parametrize("n1,n2", [(7, 7), (3, 5), (10, 4), (20, 20)])
def test_mwu_matches_scipy_exact(n1, n2):
    rng = np.random.default_rng(n1 * 100 + n2)
    for _ in range(20):
        x, y = rng.normal(size=n1), rng.normal(0.7, size=n2)
        ours = stats.mann_whitney(x, y)
        ref = ss.mannwhitneyu(y, x, method="exact")
        assert ours.method == "exact"
        assert ours.u == ref.statistic
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
@pytest.mark.parametrize("n1,n2", [(5, 5), (5, 10), (5, 20), (3, 7), (12, 9)])
def test_mwu_one_sided_exact_matches_scipy(n1, n2, alternative):
    rng = np.random.default_rng(n1 * 1000 + n2)
    for shift in (-1.0, 0.0, 0.4, 1.5):  # both tails, the middle, and full separation
        x, y = rng.normal(size=n1), rng.normal(shift, size=n2)
        ours = stats.mann_whitney(x, y, alternative=alternative)
        ref = ss.mannwhitneyu(y, x, alternative=alternative, method="exact")
        assert ours.method == "exact"
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_mwu_one_sided_tails_are_the_two_ends_of_one_distribution():
    x = [10.0, 10.1, 9.9, 10.05, 9.95]
    y = [10.5, 10.6, 10.4, 10.55, 10.45]
    greater = stats.mann_whitney(x, y, alternative="greater")
    less = stats.mann_whitney(x, y, alternative="less")
    # cur above base in all 25 pairs: the smallest one-sided p there is, and its complement.
    assert greater.p_value == pytest.approx(1 / math.comb(10, 5))
    assert less.p_value == pytest.approx(1.0)
    assert stats.mann_whitney(y, x, alternative="less").p_value == pytest.approx(greater.p_value)


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_mwu_asymptotic_matches_scipy_with_ties_and_large_samples(alternative):
    rng = np.random.default_rng(17)
    tied = ([1, 2, 2, 3, 3, 3, 4], [2, 3, 4, 4, 5, 5, 6])
    large = (rng.normal(size=70), rng.normal(0.3, size=80))  # above EXACT_MAX_N a side
    for x, y in (tied, tied[::-1], large, large[::-1]):
        ours = stats.mann_whitney(x, y, alternative=alternative)
        ref = ss.mannwhitneyu(y, x, alternative=alternative, method="asymptotic", use_continuity=True)
        assert ours.method == "normal"
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_mwu_unknown_alternative_is_a_caller_bug():
    with pytest.raises(ValueError, match="alternative"):
        stats.mann_whitney([1.0, 2.0], [3.0, 4.0], alternative="lower")


def test_mwu_with_ties_uses_normal_and_matches_scipy():
    x, y = [1, 2, 2, 3, 3, 3, 4], [2, 3, 4, 4, 5, 5, 6]
    ours = stats.mann_whitney(x, y)
    ref = ss.mannwhitneyu(y, x, method="asymptotic", use_continuity=True)
    assert ours.method == "normal"
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_all_equal_samples_are_not_significant():
    assert stats.mann_whitney([5.0] * 7, [5.0] * 7).p_value == 1.0


def test_seven_vs_seven_reaches_bh_threshold_for_60_cases():
    # The design relies on this: a lone case fully separated at 7 vs 7 must pass
    # BH at alpha 0.05 among 60 tests (smallest rank threshold 0.05/60).
    p = stats.mann_whitney(np.arange(7.0), np.arange(7.0) + 100).p_value
    assert p == pytest.approx(2 / math.comb(14, 7))
    assert p == pytest.approx(stats.min_pvalue(7, 7), rel=1e-12)
    q = stats.benjamini_hochberg([p] + [0.5] * 59)
    assert q[0] <= 0.05
    # ...and one swapped pair (U = 1) is not enough.
    y = np.arange(7.0) + 100
    y[0] = 5.5
    p1 = stats.mann_whitney(np.arange(7.0), y).p_value
    assert stats.benjamini_hochberg([p1] + [0.5] * 59)[0] > 0.05


def test_bh_matches_scipy_and_ignores_nan():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=40) ** 3
    assert np.allclose(stats.benjamini_hochberg(p), ss.false_discovery_control(p))
    with_nan = np.concatenate([p, [np.nan, np.nan]])
    q = stats.benjamini_hochberg(with_nan)
    assert np.isnan(q[-2:]).all()
    assert np.allclose(q[:-2], ss.false_discovery_control(p))


def test_hodges_lehmann_recovers_shift_and_covers():
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(400):
        x, y = rng.normal(size=7), rng.normal(size=7) + 0.8
        s = stats.hodges_lehmann(x, y)
        assert s.confident and s.low <= s.estimate <= s.high
        covered += s.low <= 0.8 <= s.high
    # Moses intervals are conservative: coverage >= 95% up to sampling error.
    assert covered / 400 >= 0.93


def test_hodges_lehmann_too_few_samples_is_not_confident():
    s = stats.hodges_lehmann([1.0, 2.0], [3.0, 4.0])
    assert not s.confident
    assert (s.low, s.high) == (1.0, 3.0)


def test_bootstrap_is_seeded():
    x, y = [1.0, 1.1, 0.9, 1.05, 0.95], [1.2, 1.3, 1.25, 1.22, 1.28]
    a = stats.bootstrap_shift(x, y, seed=5)
    b = stats.bootstrap_shift(x, y, seed=5)
    assert a == b and a.low > 0


def test_common_mode_split_and_guards():
    rng = np.random.default_rng(0)
    e = np.array([0.0] * 10 + [1.0] * 10 + [0.5] * 4)
    r = 0.01 + 0.12 * e + rng.normal(0, 0.002, e.size)
    r[3] += 0.2  # one real regression must not move a median
    cm = stats.common_mode(r, e)
    assert cm.method == "split"
    assert cm.memory == pytest.approx(0.01, abs=0.003)
    assert cm.clock == pytest.approx(0.12, abs=0.004)
    assert stats.common_mode(r[:4], e[:4]).method == "none"
    pooled = stats.common_mode(r[10:20], e[10:20])
    assert pooled.method == "pooled" and pooled.clock == 0.0


def test_empty_side_is_a_caller_bug():
    with pytest.raises(ValueError):
        stats.mann_whitney([], [1.0])


# --------------------------------------------------------------------------- one sample (confirm)


def test_t_interval_matches_scipy_and_a_constant_sample_is_its_own_interval():
    x = np.array([0.03, 0.02, 0.04, 0.03, 0.035, 0.025])
    est = stats.t_interval(x, 0.95)
    lo, hi = ss.t.interval(0.95, x.size - 1, loc=x.mean(), scale=ss.sem(x))
    assert (est.low, est.high) == pytest.approx((lo, hi), rel=1e-12) and est.confident
    assert est.p_value == pytest.approx(ss.ttest_1samp(x, 0.0).pvalue, rel=1e-9)
    assert stats.t_interval([0.01, 0.01, 0.01], 0.95) == stats.Estimate(0.01, 0.01, 0.01, 0.0, True)
    with pytest.raises(ValueError):
        stats.t_interval([0.01], 0.95)
    with pytest.raises(ValueError):
        stats.one_sample(x, 0.95, "sign")


def test_signed_rank_matches_scipy_and_the_walsh_interval_has_the_table_s_critical_value():
    rng = np.random.default_rng(1)
    for n in (6, 9, 14, 25):
        x = rng.normal(0.3, 1.0, n)
        assert stats.signed_rank(x, 0.95).p_value == pytest.approx(ss.wilcoxon(x, method="exact").pvalue, rel=1e-9)
    # n = 8 at 95% two-sided: critical T = 3 (tables), so the interval is [W(4), W(33)] of the 36 Walsh averages.
    x = np.array([0.8, -0.3, 1.9, 0.4, 1.1, 2.5, -0.9, 0.6])
    walsh = np.sort([(x[i] + x[j]) / 2 for i in range(8) for j in range(i, 8)])
    est = stats.signed_rank(x, 0.95)
    assert (est.low, est.high, est.confident) == (walsh[3], walsh[32], True)
    assert est.estimate == pytest.approx(np.median(walsh))
    # Five rounds can never reach 95% with ranks (2 / 2**5 > 0.05): the range, not confident.
    assert not stats.signed_rank(x[:5], 0.95).confident


def test_signed_rank_with_ties_and_zeros_uses_the_corrected_normal_approximation():
    x = np.array([0.0, 1.0, 1.0, -2.0, 3.0, 3.0, 3.0, 4.0])
    nz = x[x != 0]
    ranks = ss.rankdata(np.abs(nz))
    t_plus, m = ranks[nz > 0].sum(), nz.size
    _, cnt = np.unique(np.abs(nz), return_counts=True)
    var = m * (m + 1) * (2 * m + 1) / 24 - (cnt**3 - cnt).sum() / 48
    z = (abs(t_plus - m * (m + 1) / 4) - 0.5) / math.sqrt(var)
    assert stats.signed_rank(x, 0.95).p_value == pytest.approx(2 * ss.norm.sf(z))


def test_t_estimate_is_the_two_sided_t_test_and_interval_of_an_estimate_and_its_se():
    est = stats.t_estimate(0.03, 0.01, 4.5, 0.95)
    crit = ss.t.ppf(0.975, 4.5)
    assert (est.low, est.high) == pytest.approx((0.03 - crit * 0.01, 0.03 + crit * 0.01), rel=1e-12)
    assert est.p_value == pytest.approx(2 * ss.t.sf(3.0, 4.5), rel=1e-12)
    assert stats.t_estimate(-0.03, 0.01, 4.5, 0.95).p_value == est.p_value


# --------------------------------------------------------------------------- robust spread and regression


def test_the_mad_spread_is_the_sd_of_normal_noise_and_one_wild_value_cannot_move_it():
    x = np.random.default_rng(7).normal(0.0, 0.02, 2001)
    assert stats.mad_spread(x) == pytest.approx(0.02, rel=0.08)
    wild = x.copy()
    wild[0] = 50.0
    assert stats.mad_spread(wild) == pytest.approx(stats.mad_spread(x), rel=0.03)  # one rank, not 50
    assert np.std(wild) > 1.0  # where a standard deviation follows the wild value
    assert stats.robust_spread([0.3]) == 0.0 and stats.robust_spread(x) == stats.mad_spread(x)


def test_huber_fit_recovers_a_line_through_outliers():
    x = np.linspace(0.0, 1.0, 40)
    y = 1.0 + 2.0 * x
    y[[3, 17, 30]] += 5.0
    fit = stats.huber_fit(np.column_stack([np.ones_like(x), x]), y)
    assert np.allclose(np.delete(fit, [3, 17, 30]), np.delete(1.0 + 2.0 * x, [3, 17, 30]), atol=0.02)


def test_the_biweight_gives_a_case_that_moved_by_itself_no_weight_where_huber_keeps_some():
    x = np.column_stack([np.ones(30)])
    y = np.random.default_rng(3).normal(0.0, 0.005, 30)
    y[:6] += 0.05  # six cases moved by 5%, ten times their own spread
    scale = np.full(30, 0.005)
    huber = stats.huber_coefficients(x, y)
    biweight = stats.biweight_coefficients(x, y, scale, huber)
    alone = stats.biweight_coefficients(x[6:], y[6:], scale[6:], huber)  # the 24 others without the six
    assert biweight[0] == pytest.approx(alone[0], abs=1e-9)
    assert huber[0] > biweight[0] + 0.001  # Huber's bounded weight still leans towards the six


def test_the_shift_design_adds_the_exponent_and_1_over_us_only_where_the_suite_can_fit_them():
    exps, us = np.array([0.0] * 4 + [1.0] * 4), np.array([5.0, 10.0, 20.0, 400.0] * 2)
    assert stats.shift_design(exps, np.log(us), 6, 50.0).shape == (8, 3)
    assert stats.shift_design(exps, np.log(us), 7, 50.0).shape == (8, 2)  # 6 short cases, 7 wanted
    assert stats.shift_design(np.zeros(8), np.log(us), 6, 50.0).shape == (8, 2)  # no compute-bound cases


# --------------------------------------------------------------------------- the moderated variance


def test_a_moderated_variance_lies_between_its_own_and_the_prior_weighted_by_their_degrees_of_freedom():
    s2, df = stats.moderated_variance(4e-4, 2, 1e-4, 6.0, None)
    assert s2 == pytest.approx((6.0 * 1e-4 + 2 * 4e-4) / 8.0) and df == 8.0
    assert stats.moderated_variance(4e-4, 2, 1e-4, math.inf, None)[0] == 1e-4  # every case alike
    # The own bound: never below the 95% lower confidence bound of the case's own variance.
    bounded, _ = stats.moderated_variance(4e-2, 2, 1e-6, 1e4, 0.95)
    assert bounded == pytest.approx(2 * 4e-2 / ss.chi2.ppf(0.95, 2))


def test_limma_weighs_a_prior_by_how_little_the_cases_variances_scatter():
    rng = np.random.default_rng(11)
    dfs = np.full(200, 2)
    alike = 1e-4 * rng.chisquare(2, 200) / 2  # one true variance: scatter from 2 df alone
    d0, intercept, slope = stats.limma_fit(dfs, alike, np.zeros(200), cap=1e6)
    assert d0 > 50 and slope == 0.0 and math.exp(intercept) == pytest.approx(1e-4, rel=0.25)
    apart = alike * np.exp(rng.normal(0.0, 1.5, 200))  # true variances 4x apart and more
    assert stats.limma_fit(dfs, apart, np.zeros(200), cap=1e6)[0] < 10
    assert stats.limma_fit(dfs, alike, np.zeros(200), cap=8.0)[0] == 8.0


def test_trigamma_inverse_inverts_trigamma():
    for y in (0.3, 1.0, 4.0, 50.0):
        assert stats.trigamma_inverse(float(special.polygamma(1, y))) == pytest.approx(y, rel=1e-6)


# --------------------------------------------------------------------------- a proportion


def test_wilson_is_sound_at_the_edges():
    low, high = stats.wilson(0, 3)
    assert low == 0.0 and 0.5 < high < 0.6  # 0 of 3 does not mean never
    low, high = stats.wilson(3, 3)
    assert 0.4 < low < 0.5 and high == 1.0
    assert stats.wilson(0, 0) == (None, None)
    low, high = stats.wilson(30, 100)
    assert low < 0.3 < high and high - low < 0.2

def test_median_is_numpys_median_exactly():
    rng = np.random.default_rng(7)
    for n in range(1, 80):
        for scale in (1e-9, 1.0, 1e9):
            x = rng.normal(size=n) * scale
            assert stats.median(x) == float(np.median(x))
            assert stats.median(list(x)) == float(np.median(x))
    ties = np.array([3.0, 1.0, 3.0, 1.0])
    assert stats.median(ties) == float(np.median(ties)) == 2.0
    assert math.isnan(stats.median([1.0, math.nan, 2.0]))
    assert stats.median([math.inf, -math.inf, 1.0]) == float(np.median([math.inf, -math.inf, 1.0]))
    with pytest.raises(ValueError):
        stats.median([])


# --------------------------------------------------------------------------- alpha spending


def test_the_open_ended_shares_telescope_to_what_is_spent_so_far():
    for looks in (1, 2, 5, 40):
        assert math.fsum(stats.open_share(k) for k in range(1, looks + 1)) == pytest.approx(1 - 1 / (looks + 1))
    assert stats.open_share(3, of=0.008) == pytest.approx(0.008 / 12)


def test_the_planned_shares_sum_to_one_falling_as_1_over_k_and_a_look_past_the_last_takes_the_last_share():
    for looks in (1, 4, 14):
        shares = [stats.planned_share(k, looks) for k in range(1, looks + 1)]
        assert math.fsum(shares) == pytest.approx(1.0)
        assert shares[0] / shares[-1] == pytest.approx(looks)
        assert stats.planned_share(looks + 3, looks) == shares[-1]
    # the late looks are not starved: look 13 of 14 gets 1/42 of alpha, not 1/182
    assert 1 / stats.planned_share(13, 14) == pytest.approx(42.0, abs=0.5)
    assert 1 / stats.open_share(13) == 182


def test_the_looks_grow_geometrically_by_at_least_one_round_and_end_at_the_end():
    assert list(stats.geometric_looks(5, 1.5, 100)) == [5, 8, 12, 18, 27, 41, 62, 93, 100]
    assert list(stats.geometric_looks(3, 1.01, 7)) == [3, 4, 5, 6, 7]
    assert list(stats.geometric_looks(20, 1.5, 20)) == [20]
    endless = stats.geometric_looks(3, 1.25)
    assert [next(endless) for _ in range(6)] == [3, 4, 5, 7, 9, 12]


# What bisect's SequentialRule and confirm's StoppingRule computed before their shares and looks
# moved to perfci.stats.spending, hard-coded from that code's output: the move changes no number.
# bisect: (level(k) for k = 1..8, the round counts that are looks up to 60, look_index at
# 0, 2, 3, 4, 5, 10, 30, 60). confirm: (schedule(100), n_looks, share(k) for k = 1..n_looks + 1
# (1..9 with no end), then look_alpha and look_confidence at rounds 5, 6, 8, 30, 100).
BISECT_DEFAULT = ((0.004, 0.0013333333333333333, 0.0006666666666666666, 0.0004, 0.0002666666666666667,
                   0.00019047619047619048, 0.00014285714285714287, 0.00011111111111111112),
                  (3, 4, 5, 7, 9, 12, 15, 19, 24, 30, 38, 48, 60), (0, 0, 1, 2, 3, 5, 10, 13))
BISECT_OTHER = ((0.025, 0.008333333333333333, 0.004166666666666667, 0.0025, 0.0016666666666666668,
                 0.0011904761904761906, 0.0008928571428571429, 0.0006944444444444445),
                (2, 3, 5, 8, 12, 18, 27, 41), (0, 1, 2, 2, 3, 4, 7, 8))
BISECT_ROUNDS_NEEDED = (12, 118, 2712)
CONFIRM_OPEN = ((5, 8, 12, 18, 27, 41, 62, 93, 140), None,
                (0.5, 0.16666666666666666, 0.08333333333333333, 0.05, 0.03333333333333333, 0.023809523809523808,
                 0.017857142857142856, 0.013888888888888888, 0.011111111111111112),
                (0.025, 0.008333333333333333, 0.008333333333333333, 0.0011904761904761906, 0.0005555555555555556),
                (0.975, 0.9916666666666667, 0.9916666666666667, 0.9988095238095238, 0.9994444444444445))
CONFIRM_PLANNED = ((5, 8, 12, 18, 27, 41, 62, 93, 100), 9,
                   (0.3534857623790153, 0.17674288118950765, 0.11782858745967177, 0.08837144059475383,
                    0.07069715247580306, 0.058914293729835886, 0.05049796605414504, 0.04418572029737691,
                    0.03927619581989059, 0.03927619581989059),
                   (0.017674288118950766, 0.008837144059475383, 0.008837144059475383, 0.0029457146864917943,
                    0.00196380979099453),
                   (0.9823257118810492, 0.9911628559405246, 0.9911628559405246, 0.9970542853135081,
                    0.9980361902090055))
CONFIRM_CAPPED = ((3, 4, 5, 7, 9, 12, 15, 19, 20), 9,
                  (0.3534857623790153, 0.17674288118950765, 0.11782858745967177, 0.08837144059475383,
                   0.07069715247580306, 0.058914293729835886, 0.05049796605414504, 0.04418572029737691,
                   0.03927619581989059, 0.03927619581989059),
                  (0.0011782858745967178, 0.0008837144059475382, 0.0007069715247580307, 0.00039276195819890595,
                   0.00039276195819890595),
                  (0.9941085706270164, 0.9955814279702623, 0.9964651423762099, 0.9980361902090055,
                   0.9980361902090055))
CONFIRM_FIXED = ((5, 10, 15, 20), 4, (0.25, 0.25, 0.25, 0.25, 0.25), (0.0125, 0.0125, 0.0125, 0.0125, 0.0125),
                 (0.9875, 0.9875, 0.9875, 0.9875, 0.9875))
CONFIRM_CAPPED_WIDE = ((3, 6, 12, 20), 4,
                       (0.4800000000000001, 0.24000000000000005, 0.16, 0.12000000000000002, 0.12000000000000002),
                       (0.0024000000000000007, 0.0024000000000000007, 0.0016, 0.0012000000000000003,
                        0.0012000000000000003),
                       (0.988, 0.988, 0.992, 0.994, 0.994))


def _bisect_numbers(rule):
    return (tuple(rule.level(k) for k in range(1, 9)), tuple(n for n in range(61) if rule.is_look(n)),
            tuple(rule.look_index(n) for n in (0, 2, 3, 4, 5, 10, 30, 60)))


def _confirm_numbers(rule):
    last = rule.n_looks or 8
    return (rule.schedule(100), rule.n_looks, tuple(rule.share(k) for k in range(1, last + 2)),
            tuple(rule.look_alpha(r) for r in (5, 6, 8, 30, 100)),
            tuple(rule.look_confidence(r) for r in (5, 6, 8, 30, 100)))


def test_bisects_levels_and_looks_are_the_numbers_from_before_the_shared_schedule():
    assert _bisect_numbers(SequentialRule()) == BISECT_DEFAULT
    assert _bisect_numbers(SequentialRule(alpha=0.05, min_rounds=2, growth=1.5, early_share=0.0)) == BISECT_OTHER
    assert tuple(rounds_needed([0.01, 0.03, -0.02, 0.02], margin, SequentialRule())
                 for margin in (0.05, 0.01, 0.002)) == BISECT_ROUNDS_NEEDED


def test_confirms_shares_and_looks_are_the_numbers_from_before_the_shared_schedule():
    assert _confirm_numbers(StoppingRule()) == CONFIRM_OPEN
    assert _confirm_numbers(StoppingRule().planned(5, 95)) == CONFIRM_PLANNED
    assert _confirm_numbers(StoppingRule(min_rounds=3, max_rounds=20, growth=1.25, alpha=0.01)) == CONFIRM_CAPPED
    assert _confirm_numbers(StoppingRule.spaced(5, 20, 4)) == CONFIRM_FIXED
    assert _confirm_numbers(StoppingRule(min_rounds=3, max_rounds=20, growth=2.0, alpha=0.01)) == CONFIRM_CAPPED_WIDE
