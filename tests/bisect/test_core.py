"""The search state and what the verdicts add up to, on plain data."""
from __future__ import annotations

import math

import pytest

from perfci.bisect.core import (
    BisectResult,
    CommitVerdict,
    Interval,
    PairCheck,
    Samples,
    SearchState,
    StepRecord,
    best_guess,
    choose_next,
    conclude,
    raw_interval,
    steps_left,
)
from perfci.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE

COMMITS = tuple(f"c{i:02d}" for i in range(1, 11))  # c10 is BAD


def _state(**verdicts) -> SearchState:
    return SearchState(COMMITS, {"c10": CommitVerdict.BAD, **{k: CommitVerdict(v) for k, v in verdicts.items()}})


CONFIRMED = PairCheck("real", "step +8.0% [+5.1%, +11.0%]", Interval(8.0, 5.1, 11.0, 0.99), 12)


def test_bounds_candidates_and_adjacency():
    s = _state(c03="good", c07="bad")
    assert s.bounds == (2, 6) and s.candidates == COMMITS[3:7] and not s.adjacent
    assert s.open_commits == COMMITS[3:6]
    s = s.with_verdict("c04", CommitVerdict.UNSURE).with_verdict("c05", CommitVerdict.SKIP)
    assert s.open_commits == ("c06",)  # unsure and skipped commits are never probed again
    assert _state(c06="good", c07="bad").adjacent


def test_choose_next_halves_the_bracket_and_splits_it_for_jobs():
    s = _state()
    assert choose_next(s) == ("c05",)
    assert choose_next(s, 2) == ("c03", "c07")
    assert choose_next(_state(c05="unsure")) in (("c04",), ("c06",))
    assert choose_next(_state(c09="good")) == ()


def test_steps_left_counts_the_culprit_check():
    assert steps_left(_state(c09="good")) == 1
    assert steps_left(_state(), jobs=1) > steps_left(_state(), jobs=4) >= 2


def test_a_good_verdict_after_the_first_bad_is_a_contradiction():
    s = _state(c04="bad", c06="good")
    assert s.bounds == (-1, 3) and s.contradictions == ("c06",)


def test_best_guess_follows_the_leaning_of_unsure_commits():
    s = _state(c02="good", c08="bad", c04="unsure", c06="unsure")
    assert best_guess(s, {"c04": 0.3, "c06": 0.8}) == "c05"  # after the one that leans good
    assert best_guess(s, {"c04": 0.7, "c06": 0.9}) == "c03"
    assert best_guess(s, {"c04": 0.1, "c06": 0.2}) == "c07"
    assert best_guess(s, {}) == "c08"


def test_conclude_names_a_culprit_only_with_its_own_step_confirmed():
    adjacent = _state(c06="good", c07="bad")
    named = conclude(adjacent, CONFIRMED)
    assert named.status == "culprit" and named.culprit == "c07"
    for status, message in (("unresolved", "step +6.2% [-1.8%, +14.6%]: not wholly past --min-effect 2%"),
                            ("below-floor", "step +0.3% [-0.9%, +1.5%]: not past --min-effect 2%")):
        # The wrong culprit: adjacent verdicts, but the commit's own step interval holds 0.
        c = conclude(adjacent, PairCheck(status, message, Interval(6.2, -1.8, 14.6, 0.99), 9))
        assert c.status == "undecided" and c.culprit is None and c.best_guess == "c07", status
        assert "not confirmed" in c.message and message in c.message
    unmeasured = conclude(adjacent, None, stopped="the total budget (--total-budget 60 s) ran out")
    assert unmeasured.status == "undecided" and "--total-budget" in unmeasured.message


def test_conclude_refuses_a_culprit_with_a_contradiction_even_when_its_step_is_confirmed():
    c = conclude(_state(c06="good", c07="bad", c09="good"), CONFIRMED)
    assert c.status == "undecided" and "contradictory" in c.message


def test_conclude_names_the_range_when_commits_stay_unsure_or_cannot_run():
    unsure = conclude(_state(c03="good", c07="bad", c05="unsure"), None,
                      stopped="a probe stayed unsure within its budget")
    assert unsure.status == "undecided" and unsure.candidates == COMMITS[3:7]
    assert "c04..c07" in unsure.message.replace("(4 commits)", "").replace(" ", "") or "c04" in unsure.message
    broken = conclude(_state(c03="good", c06="bad", c04="skip", c05="skip"), None, skipped=("c04", "c05"))
    assert broken.status == "all-skipped" and broken.candidates == ("c04", "c05", "c06")


def test_exit_codes_by_status():
    record = StepRecord("a" * 40, 0, "", Samples(), CommitVerdict.GOOD)
    for status, code in (("culprit", EXIT_OK), ("undecided", EXIT_INCONCLUSIVE), ("no-difference", EXIT_INCONCLUSIVE),
                         ("swapped", EXIT_INCONCLUSIVE), ("all-skipped", EXIT_USAGE)):
        assert BisectResult(status, "", record, record).exit_code == code


def test_raw_interval_keeps_a_throughputs_natural_sign():
    lower_better = raw_interval(math.log(1.08), math.log(1.05), math.log(1.11), False, 0.99)
    assert lower_better.estimate == pytest.approx(8.0) and lower_better.low == pytest.approx(5.0)
    throughput = raw_interval(math.log(1.08), math.log(1.05), math.log(1.11), True, 0.99)
    assert throughput.estimate == pytest.approx(100 / 1.08 - 100)
    assert throughput.low < throughput.estimate < throughput.high < 0
