"""The statistics of ``perfci confirm``: exact numbers, the noise it must see through, a declared reference.

Everything seeded; the statistical claims are checked on a few hundred simulated
sessions (CPU-cheap), the full validation is benchmarks/confirm_validation.py and
benchmarks/confirm_defaults.py. The stopping rule: test_stopping.py.
"""
import math

import numpy as np
import pytest
import scipy.stats as ss

from perfci import stats
from perfci.confirm import analysis as A
from perfci.confirm.analysis import NO_REFERENCE, Round, analyze, analyze_case
from perfci.verdict import SuiteShift, Verdict


def ratio_rounds(ratios, base=100.0):
    """Rounds whose paired difference is exactly log(ratio): base (b, b), cur (b r, b r)."""
    return [Round((base, base), (base * r, base * r)) for r in ratios]


def noisy_session(rng, n_cases, n_rounds, planted=None, meas=0.01, run_sd=0.0, round_sd=0.0):
    """ABBA rounds: lognormal measurement noise, a factor per run shared by all cases, a level per round."""
    planted = planted or {}
    runs = rng.normal(0, run_sd, 4 * n_rounds) + np.repeat(rng.normal(0, round_sd, n_rounds), 4)
    cur = np.tile([False, True, True, False], n_rounds)
    cases = {}
    for c in range(n_cases):
        logs = math.log(20.0 + c) + runs + rng.normal(0, meas, 4 * n_rounds) + cur * planted.get(c, 0.0)
        v = np.exp(logs)
        cases[(f"k{c}", "64x64x64", "bf16")] = [Round((v[4 * r], v[4 * r + 3]), (v[4 * r + 1], v[4 * r + 2]))
                                              for r in range(n_rounds)]
    return cases


# --------------------------------------------------------------------------- exact numbers


def test_a_hand_made_case_has_the_t_interval_of_its_paired_log_differences():
    ratios = [1.03, 1.02, 1.04, 1.03, 1.035, 1.025]
    res = analyze_case(ratio_rounds(ratios), min_effect_pct=1.0, confidence=0.95)
    d = np.log(ratios)
    se = d.std(ddof=1) / math.sqrt(d.size)
    half = ss.t.ppf(0.975, d.size - 1) * se
    assert res.verdict == "regressed"
    assert res.ratio == pytest.approx(math.exp(d.mean()), rel=1e-12)
    assert res.ci_low == pytest.approx(math.exp(d.mean() - half), rel=1e-12)
    assert res.ci_high == pytest.approx(math.exp(d.mean() + half), rel=1e-12)
    assert res.p_value == pytest.approx(ss.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
    # By hand: mean log 0.029539 (ratio 1.02998), sd 0.006865, se 0.0028027, t(5) 2.5706, half 0.0072046.
    assert (round(res.ratio, 4), round(res.ci_low, 4), round(res.ci_high, 4)) == (1.0300, 1.0226, 1.0374)
    assert (res.rounds, res.rounds_total, res.n_base, res.n_cur) == (6, 6, 12, 12)
    assert res.spread_pct == pytest.approx(100 * d.std(ddof=1))


def test_within_a_round_the_sides_are_averaged_in_logs_before_the_difference():
    rounds = [Round((100.0, 104.0), (103.0, 107.0))] * 2 + [Round((100.0, 100.0), (102.0, 102.0))]
    d = A.paired_differences(rounds)
    first = (math.log(103) + math.log(107)) / 2 - (math.log(100) + math.log(104)) / 2
    assert d == pytest.approx([first, first, math.log(1.02)])


def test_verdicts_and_the_reference_shift_are_the_shared_vocabulary():
    cases = noisy_session(np.random.default_rng(3), 8, 6, planted={0: math.log(1.05)})
    res = analyze(cases, reference=list(cases)[4:])
    assert list(res.counts) == ["regressed", "improved", "unchanged", "inconclusive"]
    assert all(isinstance(c.verdict, Verdict) for c in res.cases)
    assert isinstance(res.suite, SuiteShift) and isinstance(res.suite.verdict, Verdict)
    assert res.reference_used and res.reference == tuple(list(cases)[4:]) and res.suite.n_cases == 4
    off = analyze(noisy_session(np.random.default_rng(3), 8, 6))
    assert off.suite.verdict == Verdict.NOT_JUDGED == "n/a" and off.suite.reason == NO_REFERENCE
    assert not off.reference_used and not any(c.common_mode for c in off.cases)


# --------------------------------------------------------------------------- what must cancel


def test_a_huge_shift_per_round_common_to_both_sides_changes_nothing():
    rng = np.random.default_rng(7)
    cases = noisy_session(rng, 8, 10, planted={0: math.log(1.03)})
    shifts = np.exp(rng.normal(0, 0.5, 10))  # rounds up to ~3x apart
    shifted = {k: [Round(tuple(v * s for v in r.base), tuple(v * s for v in r.cur)) for r, s in zip(rs, shifts)]
               for k, rs in cases.items()}
    for reference in (list(cases)[2:], None):
        a = analyze(cases, reference=reference)
        b = analyze(shifted, reference=reference)
        for x, y in zip(a.cases, b.cases):
            assert x.verdict == y.verdict
            assert (x.ratio, x.ci_low, x.ci_high, x.p_value) == pytest.approx((y.ratio, y.ci_low, y.ci_high, y.p_value),
                                                                              rel=1e-9)


def test_a_linear_trend_across_each_round_cancels_in_abba_order():
    trend = [1.0, 1.01, 1.02, 1.03]  # runs 1..4 of a round, each 1% slower than the one before
    rounds = [Round((100 * trend[0], 100 * trend[3]), (100 * trend[1], 100 * trend[2]))] * 5
    assert A.paired_differences(rounds) == pytest.approx([0.0] * 5, abs=2e-4)


def test_a_reference_removes_run_drift_that_would_hide_three_percent():
    # Each run of the suite is 3% (sd) off, shared by all 20 cases; measurement noise 0.5%.
    rng = np.random.default_rng(11)
    found, width, covered = {True: 0, False: 0}, {True: [], False: []}, 0
    for _ in range(20):
        cases = noisy_session(rng, 20, 8, planted={0: math.log(1.03)}, meas=0.005, run_sd=0.03)
        key = next(iter(cases))
        for cm in found:
            res = analyze(cases, focus=[key], reference=list(cases)[1:] if cm else None)
            c = res.cases[0]
            # Only a reference whose own change is decided (regressed / improved) is dropped: a merely
            # significant shift under 3% run drift is as often the drift, which the case's raw rounds share.
            assert c.common_mode == res.reference_used == (cm and not res.suite.reason.startswith("the reference moved"))
            found[cm] += c.verdict == "regressed"
            width[cm].append(math.log(c.ci_high / c.ci_low))
            covered += c.common_mode and c.ci_low < 1.03 < c.ci_high
            # One estimate per interval: the judged ratio is the reference-relative one, the raw one is apart.
            assert c.ci_low <= c.ratio <= c.ci_high and c.raw_ci_low <= c.raw_ratio <= c.raw_ci_high
    assert found[True] == 20 and found[False] <= 12 and covered >= 17
    assert np.median(width[False]) > 4 * np.median(width[True])


def test_a_change_every_case_shares_is_every_case_s_verdict():
    # Taken as the run drift of the whole suite (the rule before a declared reference), it read
    # `unchanged` on all twelve. Judged on their own, or with the moved cases as the reference
    # (which then says it moved), every case is regressed.
    rng = np.random.default_rng(12)
    cases = noisy_session(rng, 12, 12, planted={c: math.log(1.05) for c in range(12)}, meas=0.004, run_sd=0.003)
    for reference in (None, list(cases)):
        res = analyze(cases, reference=reference)
        assert res.counts["regressed"] == 12 and res.regressed and not res.reference_used
        assert all(c.ratio == pytest.approx(1.05, abs=0.01) for c in res.cases)
    moved = analyze(cases, reference=list(cases)).suite
    assert moved.verdict == "regressed" and moved.ratio == pytest.approx(1.05, abs=0.005)
    assert moved.reason.startswith("the reference moved") and "each case judged on its own" in moved.reason


def test_a_change_most_cases_share_is_found_by_default_and_against_an_untouched_reference():
    # What perfci nightly confirms: compare's flags, most of them one shared change. On a 2-GPU H200
    # (benchmarks/results/h200-2026-12-01/group-prefill-and-stages), 4 of 6 cases ran ~20% faster and 2 ~2% slower:
    # relative to the suite (the rule before a declared reference), the fast ones read unchanged and
    # the others regressed +27%.
    rng = np.random.default_rng(13)
    planted = {c: math.log(1.20) for c in range(7)}
    cases = noisy_session(rng, 9, 5, planted=planted, meas=0.004, run_sd=0.003)
    keys = list(cases)
    absolute = analyze(cases)
    assert absolute.suite.verdict == "n/a" and absolute.counts["regressed"] == 7 and absolute.counts["improved"] == 0
    assert all(c.ratio == pytest.approx(1.20, abs=0.01) for c in absolute.cases[:7])
    assert all(c.ratio == pytest.approx(1.0, abs=0.01) for c in absolute.cases[7:])
    untouched = analyze(cases, reference=keys[7:])
    assert untouched.reference_used and untouched.counts["regressed"] == 7 and untouched.counts["improved"] == 0
    # Every case as the reference: its median moved +20%, which says so, and each case is judged alone.
    everyone = analyze(cases, reference=keys)
    assert not everyone.reference_used and everyone.counts["regressed"] == 7 and everyone.counts["improved"] == 0


def test_one_changed_case_does_not_move_the_others():
    # Median polish: a +20% case must not shift the suite's run factors (it did by ~0.08% before).
    rng = np.random.default_rng(13)
    bias = []
    for _ in range(40):
        cases = noisy_session(rng, 20, 10, planted={0: math.log(1.2)}, meas=0.008)
        res = analyze(cases, reference=list(cases))
        assert res.reference_used
        bias.append(np.mean([math.log(c.ratio) for c in res.cases[1:]]))
        assert res.cases[0].verdict == "regressed"
    assert abs(np.mean(bias)) < 0.0003


def test_a_case_is_not_judged_against_run_factors_it_is_part_of():
    # In a 6-case suite a case's own noise is a sixth of each run's median: judged against
    # it, the 95% intervals covered 94.0% of A/A cases; leaving the case out holds 95%.
    rng = np.random.default_rng(21)
    sessions = [noisy_session(rng, 6, 8, meas=0.01) for _ in range(400)]
    covered = [c.ci_low <= 1.0 <= c.ci_high for cases in sessions for c in analyze(cases, reference=list(cases)).cases]
    assert np.mean(covered) >= 0.95


# --------------------------------------------------------------------------- orientation, gaps, too little


def test_higher_is_better_turns_a_throughput_drop_into_a_regression():
    times = ratio_rounds([1.03, 1.02, 1.04, 1.03, 1.035, 1.025])
    tput = [Round(tuple(1e6 / v for v in r.base), tuple(1e6 / v for v in r.cur)) for r in times]
    as_time = analyze_case(times, 1.0)
    as_tput = analyze_case(tput, 1.0, higher_is_better=True)
    assert as_tput.verdict == as_time.verdict == "regressed"
    assert as_tput.ratio == pytest.approx(1 / as_time.ratio)
    assert (as_tput.ci_low, as_tput.ci_high) == pytest.approx((1 / as_time.ci_high, 1 / as_time.ci_low))
    assert as_tput.ci_low < as_tput.ratio < as_tput.ci_high < 1
    # The same numbers read as lower-is-better are an improvement.
    assert analyze_case(tput, 1.0).verdict == "improved"


def test_missing_values_keep_their_position_and_a_one_sided_round_is_skipped():
    rounds = ratio_rounds([1.03, 1.02, 1.04, 1.03, 1.035, 1.025])
    rounds[1] = Round((100.0, None), (102.0, float("nan")))  # one run failed on each side: still paired
    rounds[2] = Round((None, None), (104.0, 104.0))  # base failed twice: nothing to pair with
    rounds.append(([], []))  # a round in which this case was not measured (plain tuples work too)
    res = analyze_case(rounds, 1.0)
    assert (res.rounds, res.rounds_total, res.n_base, res.n_cur) == (5, 7, 9, 9)
    assert A.paired_differences(rounds) == pytest.approx(np.log([1.03, 1.02, 1.03, 1.035, 1.025]))
    assert res.verdict == "regressed"


def test_missing_values_in_a_suite_are_judged_with_the_run_factors_of_their_own_runs():
    rng = np.random.default_rng(14)
    cases = noisy_session(rng, 10, 8, planted={0: math.log(1.04)}, meas=0.004, run_sd=0.03)
    key = next(iter(cases))
    holed = dict(cases)
    holed[key] = [Round((r.base[0], None), r.cur) if i % 2 else r for i, r in enumerate(cases[key])]
    res = analyze(holed, focus=[key], reference=list(cases)[1:]).cases[0]
    assert res.verdict == "regressed" and res.n_base == 12
    assert res.ci_low > 1.02  # the run drift (3%) stayed out: the other base run's factor was not used


def test_too_few_rounds_is_inconclusive_whatever_the_values():
    res = analyze_case(ratio_rounds([1.5, 1.5]), 1.0)
    assert res.verdict == "inconclusive" and res.reason.startswith("too few rounds")
    assert res.ratio is None and res.p_value is None
    # Ranks at 98.75% (4 looks) need 8 rounds: at 5 they are inconclusive however clear the data.
    clear = analyze_case(ratio_rounds([1.10, 1.11, 1.12, 1.10, 1.11]), 1.0, 0.9875, method="wilcoxon")
    assert clear.verdict == "inconclusive" and "cannot reach" in clear.reason


def test_unchanged_needs_the_whole_interval_inside_the_floor():
    tight = analyze_case(ratio_rounds([1.001, 0.999, 1.002, 0.998, 1.0, 1.001]), 1.0)
    wide = analyze_case(ratio_rounds([1.02, 0.98, 1.03, 0.97, 1.0, 1.01]), 1.0)
    assert tight.verdict == "unchanged"
    assert wide.verdict == "inconclusive" and wide.reason.startswith("not significant")


def test_a_deterministic_metric_is_decided_by_its_value():
    assert analyze_case(ratio_rounds([1.05] * 4), 1.0).verdict == "regressed"
    assert analyze_case(ratio_rounds([1.0] * 4), 1.0).verdict == "unchanged"


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="> 0"):
        analyze_case([Round((1.0, 0.0), (1.0, 1.0))] * 3, 1.0)
    with pytest.raises(ValueError, match="method"):
        analyze_case(ratio_rounds([1.0] * 3), 1.0, method="z")
    with pytest.raises(ValueError, match="focus"):
        analyze({("a",): ratio_rounds([1.0] * 3)}, focus=[("b",)])
    with pytest.raises(ValueError, match="reference"):
        analyze({("a",): ratio_rounds([1.0] * 3)}, reference=[("b",)])


# --------------------------------------------------------------------------- across cases


def test_benjamini_hochberg_across_cases_can_withhold_a_verdict_one_case_alone_would_get():
    shape = np.array([-1.5, -0.5, 0.0, 0.5, 1.5])
    strong = ratio_rounds(np.exp(math.log(1.03) + 0.012 * shape))  # alone: p 0.008, interval from +1.3%
    alone = analyze_case(strong, 1.0)
    assert alone.verdict == "regressed" and 0.007 < alone.p_value < 0.009 and alone.ci_low > 1.012
    rng = np.random.default_rng(3)
    nulls = {(f"null{i}",): ratio_rounds(np.exp(rng.normal(0, 0.03, 5))) for i in range(9)}
    res = analyze({("strong",): strong, **nulls}, 1.0)
    first = res.case(("strong",))
    ps = [c.p_value for c in res.cases]
    assert [c.q_value for c in res.cases] == pytest.approx(list(stats.benjamini_hochberg(ps)))
    assert first.p_value == pytest.approx(alone.p_value)
    assert first.q_value > 0.05 and first.verdict == "inconclusive"
    assert res.suite.verdict == "n/a"


def test_counts_and_the_gate_summary():
    rng = np.random.default_rng(4)
    cases = noisy_session(rng, 10, 10, planted={0: math.log(1.05), 1: math.log(0.95)}, meas=0.003)
    res = analyze(cases)
    assert res.case(("k0", "64x64x64", "bf16")).verdict == "regressed"
    assert res.case(("k1", "64x64x64", "bf16")).verdict == "improved"
    assert res.counts == {"regressed": 1, "improved": 1, "unchanged": 8, "inconclusive": 0}
    assert res.regressed and not res.inconclusive


# --------------------------------------------------------------------------- a declared reference


def test_a_reference_that_absorbed_a_change_never_makes_a_case_unchanged():
    # The reference moved with the case (+2.5%) under 3% run drift: its own interval is too wide
    # to say it moved, so the case, relative to it, reads ~0 with a tight interval. Its raw paired
    # interval still reaches past the floor, so it is inconclusive, never unchanged.
    rng = np.random.default_rng(31)
    guarded = 0
    for _ in range(30):
        cases = noisy_session(rng, 4, 6, planted={c: math.log(1.025) for c in range(4)}, meas=0.002, run_sd=0.03)
        keys = list(cases)
        res = analyze(cases, reference=keys[1:], focus=keys[:1])
        case = res.cases[0]
        assert case.verdict != "unchanged"
        if res.reference_used and case.ci_low > 0.99 and case.ci_high < 1.01:
            guarded += 1
            assert case.verdict == "inconclusive" and "raw paired interval" in case.reason
            assert case.raw_ci_low < 0.99 or case.raw_ci_high > 1.01
            assert case.raw_ci_low <= case.raw_ratio <= case.raw_ci_high
    assert guarded >= 20  # the guard, not luck, kept these from unchanged (25 of 30 here)


def test_a_reference_that_moved_on_a_quiet_machine_is_said_and_not_used():
    rng = np.random.default_rng(32)
    cases = noisy_session(rng, 6, 6, planted={4: math.log(0.97), 5: math.log(0.97)}, meas=0.003)
    keys = list(cases)
    res = analyze(cases, reference=keys[4:])
    assert not res.reference_used and res.suite.verdict == "improved"
    assert res.suite.reason.startswith("the reference moved (significant, interval below the floor)")
    assert res.counts["unchanged"] == 4 and res.counts["improved"] == 2  # each case on its own
    assert not any(c.common_mode for c in res.cases)
    used = analyze(cases, reference=keys[:2])
    assert used.reference_used and used.suite.verdict == "unchanged"
    assert [c.verdict for c in used.cases] == ["unchanged"] * 4 + ["improved"] * 2


def test_a_lone_reference_case_is_judged_on_its_own_and_the_others_against_it():
    rng = np.random.default_rng(33)
    cases = noisy_session(rng, 3, 8, planted={0: math.log(1.04)}, meas=0.003, run_sd=0.02)
    keys = list(cases)
    res = analyze(cases, reference=keys[2:])
    lone = res.case(keys[2])
    assert res.reference_used and not lone.common_mode and lone.ratio == lone.raw_ratio
    assert all(res.case(k).common_mode for k in keys[:2])
    assert res.case(keys[0]).verdict == "regressed"
    # Relative to the reference the case's interval is narrower than its own under 2% run drift.
    alone = analyze(cases).case(keys[0])
    assert res.case(keys[0]).ci_high / res.case(keys[0]).ci_low < alone.ci_high / alone.ci_low
