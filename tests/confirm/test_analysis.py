"""The statistics of ``perfci confirm``: exact numbers, the noise it must see through, and the stopping rule.

Everything seeded; the statistical claims are checked on a few hundred simulated
sessions (CPU-cheap), the full validation is benchmarks/confirm_validation.py.
"""
import math

import numpy as np
import pytest
import scipy.stats as ss

from perfci import stats
from perfci.confirm import analysis as A
from perfci.confirm.analysis import Round, StoppingRule, analyze, analyze_case, look, next_round_needed
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


def test_verdicts_and_the_suite_shift_are_the_shared_vocabulary():
    res = analyze(noisy_session(np.random.default_rng(3), 8, 6, planted={0: math.log(1.05)}))
    assert list(res.counts) == ["regressed", "improved", "unchanged", "inconclusive"]
    assert all(isinstance(c.verdict, Verdict) for c in res.cases)
    assert isinstance(res.suite, SuiteShift) and isinstance(res.suite.verdict, Verdict)
    off = analyze(noisy_session(np.random.default_rng(3), 8, 6), common_mode=False)
    assert off.suite.verdict == Verdict.NOT_JUDGED == "n/a" and off.suite.reason == "common mode off"


# --------------------------------------------------------------------------- what must cancel


def test_a_huge_shift_per_round_common_to_both_sides_changes_nothing():
    rng = np.random.default_rng(7)
    cases = noisy_session(rng, 8, 10, planted={0: math.log(1.03)})
    shifts = np.exp(rng.normal(0, 0.5, 10))  # rounds up to ~3x apart
    shifted = {k: [Round(tuple(v * s for v in r.base), tuple(v * s for v in r.cur)) for r, s in zip(rs, shifts)]
               for k, rs in cases.items()}
    for common_mode in (True, False):
        a = analyze(cases, common_mode=common_mode)
        b = analyze(shifted, common_mode=common_mode)
        for x, y in zip(a.cases, b.cases):
            assert x.verdict == y.verdict
            assert (x.ratio, x.ci_low, x.ci_high, x.p_value) == pytest.approx((y.ratio, y.ci_low, y.ci_high, y.p_value),
                                                                              rel=1e-9)


def test_a_linear_trend_across_each_round_cancels_in_abba_order():
    trend = [1.0, 1.01, 1.02, 1.03]  # runs 1..4 of a round, each 1% slower than the one before
    rounds = [Round((100 * trend[0], 100 * trend[3]), (100 * trend[1], 100 * trend[2]))] * 5
    assert A.paired_differences(rounds) == pytest.approx([0.0] * 5, abs=2e-4)


def test_the_common_mode_removes_run_drift_that_would_hide_three_percent():
    # Each run of the suite is 3% (sd) off, shared by all 20 cases; measurement noise 0.5%.
    rng = np.random.default_rng(11)
    found, width, covered = {True: 0, False: 0}, {True: [], False: []}, 0
    for _ in range(20):
        cases = noisy_session(rng, 20, 8, planted={0: math.log(1.03)}, meas=0.005, run_sd=0.03)
        key = next(iter(cases))
        for cm in found:
            c = analyze(cases, focus=[key], common_mode=cm).cases[0]
            assert c.common_mode == cm
            found[cm] += c.verdict == "regressed"
            width[cm].append(math.log(c.ci_high / c.ci_low))
            covered += cm and c.ci_low < 1.03 < c.ci_high
    assert found[True] == 20 and found[False] <= 12 and covered >= 17
    assert np.mean(width[False]) > 4 * np.mean(width[True])


def test_a_suite_wide_change_is_the_suite_s_verdict_not_every_case_s():
    rng = np.random.default_rng(12)
    cases = noisy_session(rng, 12, 12, planted={c: math.log(1.05) for c in range(12)}, meas=0.004, run_sd=0.003)
    res = analyze(cases)
    assert res.counts["unchanged"] == 12  # relative to the suite, nothing moved
    assert res.suite.verdict == "regressed" and res.suite.ratio == pytest.approx(1.05, abs=0.005)
    assert res.regressed
    assert all(c.raw_ratio == pytest.approx(1.05, abs=0.01) for c in res.cases)


def test_cases_chosen_because_they_moved_are_judged_absolutely_without_the_common_mode():
    # What perfci nightly confirms: compare's flags, most of them one shared change. On a 2-GPU H200
    # (benchmarks/results/h200-2026-12-01/group-prefill-and-stages), 4 of 6 cases ran ~20% faster and 2 ~2% slower:
    # relative to the suite, the fast ones read unchanged and the others regressed +27%, and the
    # suite shift (a signed-rank test) could not be decided at 4 rounds.
    rng = np.random.default_rng(13)
    planted = {c: math.log(1.20) for c in range(7)}
    cases = noisy_session(rng, 9, 5, planted=planted, meas=0.004, run_sd=0.003)
    relative = analyze(cases)
    assert relative.counts["regressed"] == 0 and relative.counts["improved"] == 2  # the two unmoved cases
    assert relative.suite.verdict == "inconclusive"
    absolute = analyze(cases, common_mode=False)
    assert absolute.suite.verdict == "n/a" and absolute.counts["regressed"] == 7 and absolute.counts["improved"] == 0
    assert all(c.ratio == pytest.approx(1.20, abs=0.01) for c in absolute.cases[:7])
    assert all(c.ratio == pytest.approx(1.0, abs=0.01) for c in absolute.cases[7:])


def test_one_changed_case_does_not_move_the_others():
    # Median polish: a +20% case must not shift the suite's run factors (it did by ~0.08% before).
    rng = np.random.default_rng(13)
    bias = []
    for _ in range(40):
        cases = noisy_session(rng, 20, 10, planted={0: math.log(1.2)}, meas=0.008)
        res = analyze(cases)
        bias.append(np.mean([math.log(c.ratio) for c in res.cases[1:]]))
        assert res.cases[0].verdict == "regressed"
    assert abs(np.mean(bias)) < 0.0003


def test_a_case_is_not_judged_against_run_factors_it_is_part_of():
    # In a 6-case suite a case's own noise is a sixth of each run's median: judged against
    # it, the 95% intervals covered 94.0% of A/A cases; leaving the case out holds 95%.
    rng = np.random.default_rng(21)
    covered = [c.ci_low <= 1.0 <= c.ci_high for _ in range(400)
               for c in analyze(noisy_session(rng, 6, 8, meas=0.01)).cases]
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
    res = analyze(holed, focus=[key]).cases[0]
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
    with pytest.raises(ValueError, match="looks"):
        StoppingRule(looks=(10, 5))


# --------------------------------------------------------------------------- across cases


def test_benjamini_hochberg_across_cases_can_withhold_a_verdict_one_case_alone_would_get():
    shape = np.array([-1.5, -0.5, 0.0, 0.5, 1.5])
    strong = ratio_rounds(np.exp(math.log(1.03) + 0.012 * shape))  # alone: p 0.008, interval from +1.3%
    alone = analyze_case(strong, 1.0)
    assert alone.verdict == "regressed" and 0.007 < alone.p_value < 0.009 and alone.ci_low > 1.012
    rng = np.random.default_rng(3)
    nulls = {(f"null{i}",): ratio_rounds(np.exp(rng.normal(0, 0.03, 5))) for i in range(9)}
    res = analyze({("strong",): strong, **nulls}, 1.0, common_mode=False)
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


# --------------------------------------------------------------------------- the claims, on seeded sessions


def run_rule(rng, n_cases, planted, rule, meas=0.01, run_sd=0.0, round_sd=0.02, focus_first=False):
    full = noisy_session(rng, n_cases, rule.max_rounds, planted, meas=meas, run_sd=run_sd, round_sd=round_sd)
    focus = [next(iter(full))] if focus_first else None
    for n in range(1, rule.max_rounds + 1):
        lk = look({k: v[:n] for k, v in full.items()}, rule, focus=focus)
        if lk.stop:
            return lk.confirmation, n
    raise AssertionError("never stopped")


def test_a_planted_three_percent_at_one_percent_noise_is_found_and_a_a_stays_quiet():
    rule = StoppingRule()
    rng = np.random.default_rng(2026)
    found = [run_rule(rng, 1, {0: math.log(1.03)}, rule)[0].cases[0].verdict for _ in range(300)]
    quiet = [run_rule(rng, 1, {}, rule)[0].cases[0].verdict for _ in range(300)]
    assert found.count("regressed") / 300 >= 0.95
    assert sum(v in ("regressed", "improved") for v in quiet) / 300 <= 0.01


def test_in_a_drifting_suite_three_percent_on_one_case_is_found_and_nothing_else_is():
    rule = StoppingRule()
    rng = np.random.default_rng(77)
    hits = false = 0
    for _ in range(40):
        conf, _ = run_rule(rng, 20, {0: math.log(1.03)}, rule, meas=0.008, run_sd=0.02)
        hits += conf.cases[0].verdict == "regressed"
        false += sum(c.verdict in ("regressed", "improved") for c in conf.cases[1:])
    assert hits >= 38 and false == 0
    # Judging only the case compare flagged (the others find the run factors) stops at the first look.
    stops = [run_rule(rng, 20, {0: math.log(1.03)}, rule, meas=0.008, run_sd=0.02, focus_first=True)[1]
             for _ in range(20)]
    assert np.median(stops) == 5


def test_the_stopping_rule_decides_only_at_its_looks():
    rule = StoppingRule(looks=(5, 10, 15, 20))
    assert (rule.min_rounds, rule.max_rounds, rule.look_alpha) == (5, 20, 0.0125)
    assert rule.look_confidence == pytest.approx(0.9875)
    assert StoppingRule.spaced(5, 20, 4).looks == (5, 10, 15, 20)
    rng = np.random.default_rng(5)
    cases = noisy_session(rng, 1, 20, {0: math.log(1.10)}, meas=0.005)
    cut = lambda n: {k: v[:n] for k, v in cases.items()}  # noqa: E731
    early = look(cut(4), rule)
    assert not early.stop and early.confirmation is None and "4 < 5" in early.reason
    between = look(cut(7), rule)
    assert not between.stop and not between.at_look and "next look at 10" in between.reason
    at5 = look(cut(5), rule)
    assert at5.stop and at5.confirmation.cases[0].verdict == "regressed"
    assert at5.confirmation.confidence == pytest.approx(0.9875) and at5.confirmation.alpha == 0.0125
    assert next_round_needed(cut(7), rule) and not next_round_needed(cut(5), rule)
    forced = look(cut(7), rule, force=True)
    assert forced.stop and forced.at_look and forced.confirmation.rounds == 7
    quiet = noisy_session(rng, 1, 20, {}, meas=0.03)
    last = look(quiet, rule)
    assert last.stop and "max rounds" in last.reason


def test_deciding_at_every_round_without_the_split_would_break_the_interval_s_promise():
    # Why the looks carry alpha / K: a true +1% (exactly the floor) peeked at with
    # nominal 95% intervals after every round from 5 to 20 is called regressed far
    # more often than with the rule.
    rng = np.random.default_rng(8)
    rule = StoppingRule()
    peek = by_rule = 0
    for _ in range(300):
        full = noisy_session(rng, 1, 20, {0: math.log(1.01)}, meas=0.01)
        rounds = full[next(iter(full))]
        peeked = next((v for n in range(5, 21) if (v := analyze_case(rounds[:n], 1.0, 0.95).verdict)
                       in A.DECIDED), "inconclusive")
        ruled = next(lk.confirmation for n in range(1, 21) if (lk := look({"c": rounds[:n]}, rule)).stop)
        peek += peeked == "regressed"
        by_rule += ruled.cases[0].verdict == "regressed"
    # At the floor a look's one-sided error is 0.625%, so at most 2.5% over 4 looks; peeking: ~10%.
    assert by_rule <= 9 and peek >= 2.5 * by_rule and peek >= 24
