"""When a confirm session looks and stops: looks spending shares of alpha, answers, budgets, a cap.

Seeded simulated sessions (CPU-cheap); benchmarks/confirm_defaults.py has the full figures.
"""
import math

import numpy as np
import pytest

from perfci.confirm import analysis as A
from perfci.confirm.analysis import analyze_case
from perfci.confirm.stopping import StoppingRule, look, next_round_needed, out_of_reach
from tests.confirm.test_analysis import noisy_session


def run_rule(rng, n_cases, planted, rule, meas=0.01, run_sd=0.0, round_sd=0.02, focus_first=False, budget=40,
             reference=False):
    """One session to its stop, with ``budget`` rounds at most: (confirmation, rounds used)."""
    full = noisy_session(rng, n_cases, budget, planted, meas=meas, run_sd=run_sd, round_sd=round_sd)
    focus = [next(iter(full))] if focus_first else None
    ref = list(full)[1:] if reference else None
    for n in range(1, budget + 1):
        lk = look({k: v[:n] for k, v in full.items()}, rule, focus=focus, rounds_left=budget - n,
                  force=n == budget, reference=ref)
        if lk.stop:
            return lk.confirmation, n
    raise AssertionError("never stopped")


# --------------------------------------------------------------------------- the schedule


def test_open_looks_grow_and_their_shares_of_alpha_sum_to_at_most_one():
    rule = StoppingRule()
    assert rule.schedule(100) == (5, 8, 12, 18, 27, 41, 62, 93, 140)
    assert rule.n_looks is None and rule.max_rounds is None
    shares = [rule.share(k) for k in range(1, 2000)]
    assert shares[:3] == pytest.approx([1 / 2, 1 / 6, 1 / 12]) and sum(shares) < 1.0
    assert rule.look_alpha(5) == pytest.approx(0.025) and rule.look_confidence(8) == pytest.approx(1 - 0.05 / 6)
    # An analysis forced between looks (the budget ran out) spends the next look's share.
    assert rule.index(6) == rule.index(8) == 2 and rule.next_look(6) == 8 and not rule.is_look(6)


def test_an_end_fixes_the_looks_and_spreads_all_of_alpha_over_them_by_one_over_k():
    capped = StoppingRule(min_rounds=5, max_rounds=20)
    assert capped.schedule(100) == (5, 8, 12, 18, 20) and capped.n_looks == 5
    shares = [capped.share(k) for k in range(1, 6)]
    assert sum(shares) == pytest.approx(1.0) and shares == pytest.approx([1 / k / (137 / 60) for k in range(1, 6)])
    # The budget's end, planned at the first look from the cost so far: a 0.1 s bench affords ~850 rounds.
    planned = StoppingRule().planned(5, 845)
    assert planned.max_rounds == 850 and planned.n_looks == 14 and planned.schedule(10**6)[-2:] == (710, 850)
    assert 1 / planned.share(13) == pytest.approx(42, abs=0.5)  # 1/(k(k+1)) would give it 1/182
    assert StoppingRule(max_rounds=30).planned(5, 845).max_rounds == 30  # a cap stays when earlier
    assert StoppingRule().planned(1, 2).max_rounds == 5  # never before the first look
    one = StoppingRule(min_rounds=3, max_rounds=3)  # what the nightly's tests pass
    assert one.schedule(10) == (3,) and one.look_alpha(3) == pytest.approx(0.05)
    fixed = StoppingRule.spaced(5, 20, 4)  # the rule before time budgets
    assert fixed.looks == (5, 10, 15, 20) and (fixed.min_rounds, fixed.max_rounds) == (5, 20)
    assert fixed.look_alpha(7) == pytest.approx(0.0125) and fixed.look_confidence(20) == pytest.approx(0.9875)


def test_bad_rules_are_value_errors():
    for bad in (dict(looks=(10, 5)), dict(min_rounds=2), dict(min_rounds=5, max_rounds=4), dict(growth=1.0)):
        with pytest.raises(ValueError):
            StoppingRule(**bad)


# --------------------------------------------------------------------------- looks and stops


def test_the_session_decides_only_at_its_looks_and_stops_on_an_answer():
    rule = StoppingRule()
    rng = np.random.default_rng(5)
    cases = noisy_session(rng, 1, 20, {0: math.log(1.10)}, meas=0.005)
    cut = lambda n: {k: v[:n] for k, v in cases.items()}  # noqa: E731
    early = look(cut(4), rule)
    assert not early.stop and early.confirmation is None and "4 < 5" in early.reason
    between = look(cut(7), rule)
    assert not between.stop and not between.at_look and "next look at 8" in between.reason
    at5 = look(cut(5), rule)
    assert at5.stop and at5.reason == "every case decided" and at5.confirmation.cases[0].verdict == "regressed"
    assert at5.confirmation.confidence == pytest.approx(0.975) and at5.confirmation.alpha == 0.025
    assert next_round_needed(cut(7), rule) and not next_round_needed(cut(5), rule)
    forced = look(cut(7), rule, force=True)
    assert forced.stop and forced.at_look and forced.confirmation.rounds == 7 and "budget spent" in forced.reason
    assert forced.confirmation.alpha == pytest.approx(0.05 / 6)  # look 2's share
    capped = look(noisy_session(rng, 1, 20, {}, meas=0.03), StoppingRule(max_rounds=20))
    assert capped.stop and "last look, at 20 rounds" in capped.reason


def test_a_case_pinned_to_the_floor_ends_the_session_when_the_budget_cannot_separate_them():
    # A true change of exactly the floor: its interval straddles +1% however long the session
    # runs. With a budget of 10 more rounds, a tight interval at +1% is out of reach, and the
    # session stops at the look instead of spending its budget; with 10,000 more it goes on.
    rounds = [A.Round((100.0, 100.0), (101.0 * f, 101.0 * f)) for f in (1.002, 0.998) * 9]
    rule = StoppingRule()
    seen = look({("c",): rounds}, rule, rounds_left=10)
    case = seen.confirmation.cases[0]
    assert case.verdict == "inconclusive" and seen.stop and "could not decide" in seen.reason
    assert out_of_reach(case, rule, 28) and not out_of_reach(case, rule, 10_000)
    assert not look({("c",): rounds}, rule, rounds_left=10_000).stop
    # An A/A case at 3% noise per round needs ~400 rounds to show it stays within +-1%: with 1,000
    # more rounds the session goes on; with 30 it stops at the look instead of spending them in vain.
    noisy = {("w",): noisy_session(np.random.default_rng(6), 1, 5, {}, meas=0.03)[("k0", "64x64x64", "bf16")]}
    assert not look(noisy, rule, rounds_left=1000).stop
    assert look(noisy, rule, rounds_left=30).stop


def test_out_of_reach_reads_the_raw_interval_for_unchanged():
    # Relative to the reference the case is at 0 +- 0.2%, but its raw interval is +-3%: unchanged
    # needs both inside the floor, so at a budget that cannot narrow the raw one it is out of reach.
    case = A.CaseConfirmation(("c",), A.Verdict.INCONCLUSIVE, "", ratio=1.0, ci_low=0.998, ci_high=1.002,
                              raw_ratio=1.0, raw_ci_low=0.97, raw_ci_high=1.03, rounds=8, min_effect_pct=1.0,
                              confidence=0.99, common_mode=True)
    rule = StoppingRule()
    assert out_of_reach(case, rule, 12) and not out_of_reach(case, rule, 2000)


# --------------------------------------------------------------------------- the claims, on seeded sessions


def test_a_planted_three_percent_at_one_percent_noise_is_found_and_a_a_stays_quiet():
    rule = StoppingRule()
    rng = np.random.default_rng(2026)
    found = [run_rule(rng, 1, {0: math.log(1.03)}, rule)[0].cases[0].verdict for _ in range(300)]
    quiet = [run_rule(rng, 1, {}, rule)[0].cases[0].verdict for _ in range(300)]
    assert found.count("regressed") / 300 >= 0.95
    assert sum(v in ("regressed", "improved") for v in quiet) / 300 <= 0.01


def test_in_a_drifting_suite_three_percent_on_one_case_is_found_against_a_reference_and_nothing_else_is():
    rule = StoppingRule()
    rng = np.random.default_rng(77)
    hits = false = 0
    for _ in range(40):
        conf, _ = run_rule(rng, 20, {0: math.log(1.03)}, rule, meas=0.008, run_sd=0.02, reference=True)
        hits += conf.cases[0].verdict == "regressed"
        false += sum(c.verdict in ("regressed", "improved") for c in conf.cases[1:])
    assert hits >= 38 and false == 0
    # Judging only the case compare flagged (the others are the reference) stops at the first look.
    stops = [run_rule(rng, 20, {0: math.log(1.03)}, rule, meas=0.008, run_sd=0.02, focus_first=True,
                      reference=True)[1] for _ in range(20)]
    assert np.median(stops) == 5


def test_deciding_at_every_round_without_the_shares_would_break_the_interval_s_promise():
    # Why each look spends only its share of alpha: a true +1% (exactly the floor) peeked at with
    # nominal 95% intervals after every round from 5 to 20 is called regressed far more often
    # than with the rule's looks.
    rng = np.random.default_rng(8)
    rule = StoppingRule(max_rounds=20)
    peek = by_rule = 0
    for _ in range(300):
        full = noisy_session(rng, 1, 20, {0: math.log(1.01)}, meas=0.01)
        rounds = full[next(iter(full))]
        peeked = next((v for n in range(5, 21) if (v := analyze_case(rounds[:n], 1.0, 0.95).verdict)
                       in A.DECIDED), "inconclusive")
        ruled = next(lk.confirmation for n in range(1, 21) if (lk := look({"c": rounds[:n]}, rule)).stop)
        peek += peeked == "regressed"
        by_rule += ruled.cases[0].verdict == "regressed"
    # At the floor each look's one-sided error is at most its share of 2.5%, 2.5% in all; peeking: ~10%.
    assert by_rule <= 9 and peek >= 2.5 * by_rule and peek >= 24


def test_a_case_decided_at_a_look_keeps_it_and_the_rounds_after_measure_only_the_open_ones():
    from perfci.confirm.analysis import Round
    from perfci.confirm.stopping import pending

    rng = np.random.default_rng(11)
    cases = noisy_session(rng, 2, 12, {0: math.log(1.10), 1: math.log(1.012)}, meas=0.01)
    rule = StoppingRule()
    first = look({k: v[:5] for k, v in cases.items()}, rule)
    k0, k1 = list(cases)
    verdicts = {c.key: c.verdict for c in first.confirmation.cases}
    assert verdicts[k0] == "regressed" and verdicts[k1] == "inconclusive" and not first.stop
    assert pending(first.confirmation) == {k1}
    # rounds 6-8 measured only the open case: the decided one has failed-run placeholders there
    gone = Round((None, None), (None, None))
    later = {k0: cases[k0][:5] + [gone] * 3, k1: cases[k1][:8]}
    unsettled = look(later, rule)  # the decided case re-judged at look 2's stricter level on 5 rounds
    kept = look(later, rule, earlier=first.confirmation)
    case0 = next(c for c in kept.confirmation.cases if c.key == k0)
    assert case0 == first.confirmation.cases[0] and case0.rounds == 5
    assert kept.confirmation.counts["regressed"] >= 1
    # without the earlier look the same five rounds are judged again at look 2's level: another answer
    rejudged = next(c for c in unsettled.confirmation.cases if c.key == k0)
    assert rejudged.confidence > case0.confidence and rejudged != case0
    assert pending(None) is None
