"""The sequential rules of bisect on hand-made rounds: contrasts, looks, and the three decisions."""
from __future__ import annotations

import math
import random

import pytest

from perfci.bisect import probes, rules
from perfci.bisect.probes import ProbeStatus
from perfci.bisect.rules import SequentialRule, StepStatus
from perfci.stats import trimmed_mean_interval


def _pair_round(i: int, a: float, b: float, drift=lambda k: 1.0) -> rules.Round:
    levels = {"a": a, "b": b}
    return tuple((role, levels[role] * drift(k)) for k, role in enumerate(rules.pair_order(i)))


def _probe_round(i: int, lo: float, m: float, hi: float, drift=lambda k: 1.0) -> rules.Round:
    levels = {"lo": lo, "m": m, "hi": hi}
    return tuple((role, levels[role] * drift(k)) for k, role in enumerate(rules.probe_order(i)))


def test_a_drift_linear_across_a_round_cancels_in_both_contrasts():
    def drift(k):
        return math.exp(0.05 * k)  # 5% slower each run: far more than any step here

    steps = []
    for i in range(2):
        assert rules.pair_contrast(_pair_round(i, 10.0, 10.8, drift)) == pytest.approx(math.log(1.08))
        t, step = rules.probe_contrast(_probe_round(i, 10.0, 10.0, 10.8, drift))
        assert t == pytest.approx(-math.log(1.08))
        steps.append(step)
        t, _ = rules.probe_contrast(_probe_round(i, 10.0, 10.8, 10.8, drift))
        assert t == pytest.approx(math.log(1.08))
    # lo and hi sit at the ends of a probe round, so its own lo -> hi step carries the drift,
    # one way in a round and the other way in the next: two rounds average it out.
    assert sum(steps) / 2 == pytest.approx(math.log(1.08))


def test_higher_is_better_turns_a_falling_throughput_into_badness():
    rnd = _pair_round(0, 100.0, 92.0)
    assert rules.pair_contrast(rnd, higher_is_better=True) == pytest.approx(math.log(100 / 92))
    assert rules.pair_contrast(rnd) < 0


def test_a_failed_or_non_positive_run_voids_the_round_and_counts_against_its_commit():
    rnd = (("a", 10.0), ("b", None), ("b", 10.5), ("a", 10.1))
    assert rules.pair_contrast(rnd) is None
    assert rules.probe_contrast((("lo", 1.0), ("m", -3.0), ("m", 1.0), ("hi", 1.1))) is None
    rounds = [rnd, _pair_round(1, 10.0, 10.5)]
    assert rules.failures(rounds, "b") == (3, 1) and rules.failures(rounds, "a") == (4, 0)
    assert not rules.unmeasurable(3, 1) and rules.unmeasurable(1, 2) and not rules.unmeasurable(0, 1)


def test_looks_come_at_growing_counts_and_their_levels_sum_within_alpha():
    rule = SequentialRule(alpha=0.01, min_rounds=3)
    looks = [n for n in range(1, 400) if rule.is_look(n)]
    assert looks[:5] == [3, 4, 5, 7, 9]
    assert all(b > a for a, b in zip(looks, looks[1:]))
    assert sum(rule.level(k) for k in range(1, 10_000)) < 0.01
    assert rules.look([0.1, 0.2], rule) is None  # under min_rounds
    assert rules.look([0.1, 0.2, 0.15], rule).k == 1
    assert rules.look([0.1, 0.2, 0.15, 0.1, 0.2, 0.1], rule) is None  # 6 is not a look
    forced = rules.look([0.1, 0.2, 0.15, 0.1, 0.2, 0.1], rule, force=True)
    assert forced.k == rule.look_index(6) + 1  # a level no look has spent
    # Rounds measured several at a time (--jobs) may jump over a look point: it is taken then.
    assert rules.look([0.1] * 6 + [0.2], rule, since=4).k == rule.look_index(7)


def test_the_trimmed_interval_is_the_t_interval_without_trimming_and_shrugs_off_one_wild_round():
    from scipy import stats

    x = [0.08, 0.05, 0.11, 0.07, 0.09, 0.06, 0.10, 0.08]
    plain = trimmed_mean_interval(x, 0.95, trim=0.0)
    low, high = stats.t.interval(0.95, len(x) - 1, loc=sum(x) / len(x), scale=stats.sem(x))
    assert plain.low == pytest.approx(low) and plain.high == pytest.approx(high)
    wild = trimmed_mean_interval(x + [-1.5], 0.99)
    assert wild.low > 0.0  # a plain t-interval of the same nine values spans 0
    assert trimmed_mean_interval(x + [-1.5], 0.99, trim=0.0).low < 0.0


def _look(values, level=0.01):
    from perfci.stats import Location

    return rules.Look(len(values), 1, level, trimmed_mean_interval(values, 1 - level)) if len(values) > 1 else \
        rules.Look(1, 1, level, Location(values[0], values[0], values[0], 1, 0.0))


def test_endpoint_decisions():
    lg = rules.log_of_pct
    assert rules.decide_endpoints(_look([lg(8.0), lg(7.5), lg(8.5), lg(8.1)]), 2.0).status == StepStatus.REAL
    assert rules.decide_endpoints(_look([lg(0.1), lg(-0.2), lg(0.3), lg(0.0)]), 2.0).status == StepStatus.BELOW_FLOOR
    swapped = rules.decide_endpoints(_look([lg(-8.0), lg(-7.5), lg(-8.5), lg(-8.1)]), 2.0)
    assert swapped.status == StepStatus.SWAPPED and "swapped" in swapped.message
    wide = _look([lg(9.0), lg(-4.0), lg(12.0), lg(-1.0)])
    assert rules.decide_endpoints(wide, 2.0).status == StepStatus.OPEN
    assert rules.decide_endpoints(wide, 2.0, final=True).status == StepStatus.UNRESOLVED
    assert rules.decide_endpoints(None, 2.0).status == StepStatus.OPEN


def test_the_culprit_is_confirmed_only_when_its_whole_interval_is_past_the_floor():
    lg = rules.log_of_pct
    assert rules.decide_culprit(_look([lg(8.0), lg(7.5), lg(8.5), lg(8.1)]), 2.0).status == StepStatus.REAL
    # Significant (the interval leaves 0) but not wholly past 2%: never confirmed, at any budget.
    near = _look([lg(2.5), lg(0.9), lg(3.1), lg(2.0), lg(1.4), lg(2.9)], level=0.05)
    assert near.low > 0.0 and near.low < lg(2.0)
    assert rules.decide_culprit(near, 2.0).status == StepStatus.OPEN
    assert rules.decide_culprit(near, 2.0, final=True).status == StepStatus.UNRESOLVED
    # The issue's wrong culprit: a docs-only commit whose own step read -1.8% .. +14.6%.
    issue = _look([lg(-1.8), lg(14.6), lg(6.0), lg(5.5)])
    assert issue.low < 0.0 < issue.high
    assert rules.decide_culprit(issue, 2.0, final=True).status == StepStatus.UNRESOLVED
    assert rules.decide_culprit(_look([lg(0.2), lg(-0.1), lg(0.1)]), 2.0).status == StepStatus.BELOW_FLOOR


def test_probe_evidence_points_to_the_nearer_end_and_a_wild_round_only_slows_it():
    step = math.log(1.08)
    like_lo = [-step + d for d in (0.01, -0.02, 0.015, -0.01, 0.0, 0.02, -0.015)]
    assert probes.probe_evidence(like_lo, step) < 0 < probes.probe_evidence([-t for t in like_lo], step)
    wild = like_lo + [2.0]
    assert probes.probe_evidence(wild, step) < 0  # winsorized: still points to lo


def test_probe_decisions_stop_at_the_bounds_and_otherwise_wait_or_end_unsure():
    rule = SequentialRule(probe_alpha=0.001)
    step = math.log(1.08)
    rng = random.Random(4)
    rounds = [(-step + rng.gauss(0, 0.02), step + rng.gauss(0, 0.02)) for _ in range(6)]
    decided = probes.decide_probe(rounds, rule, step, math.log(1.02))
    assert decided.status == ProbeStatus.GOOD and decided.evidence <= -math.log(1000)
    assert decided.position == pytest.approx(0.0, abs=0.3)
    bad = probes.decide_probe([(-t, s) for t, s in rounds], rule, step, math.log(1.02))
    assert bad.status == ProbeStatus.BAD and bad.position == pytest.approx(1.0, abs=0.3)
    middle = [(rng.gauss(0, 0.2), step + rng.gauss(0, 0.02)) for _ in range(4)]
    assert probes.decide_probe(middle, rule, step, math.log(1.02)).status == ProbeStatus.OPEN
    assert probes.decide_probe(middle, rule, step, math.log(1.02), final=True).status == ProbeStatus.UNSURE
    assert probes.decide_probe(rounds[:2], rule, step, math.log(1.02)).status == ProbeStatus.OPEN  # under 3 rounds


def test_a_bracket_whose_own_rounds_show_a_smaller_step_shrinks_the_assumed_one():
    floor = math.log(1.02)
    rounds = [(0.0, math.log(1.03) + d) for d in (0.002, -0.001, 0.0, 0.001, -0.002, 0.001)]
    assumed = probes.probe_step(rounds, math.log(1.08), floor)
    assert floor <= assumed < math.log(1.04)
    assert probes.probe_step(rounds[:2], math.log(1.08), floor) == math.log(1.08)  # too few to say


def test_rounds_needed_grows_as_the_margin_shrinks():
    rng = random.Random(1)
    d = [0.05 + rng.gauss(0, 0.1) for _ in range(30)]
    rule = SequentialRule()
    wide, narrow = rules.rounds_needed(d, 0.03, rule), rules.rounds_needed(d, 0.01, rule)
    assert wide is not None and narrow is not None and narrow > 4 * wide
    assert rules.rounds_needed(d, 0.0, rule) is None and rules.rounds_needed(d[:1], 0.03, rule) is None


def _pair_rounds(a: float, b: float, noise: tuple[float, ...]) -> list:
    """Two rounds, abba then baab, with each run's own factor from ``noise`` (8 values)."""
    orders = (("a", "b", "b", "a"), ("b", "a", "a", "b"))
    runs = iter(noise)
    return [tuple((role, (a if role == "a" else b) * math.exp(next(runs))) for role in order) for order in orders]


def test_a_step_many_times_its_scatter_is_decided_at_two_rounds():
    rule = SequentialRule()
    rounds = _pair_rounds(100.0, 120.0, (0.004, -0.003, 0.005, -0.002, 0.001, 0.003, -0.004, 0.002))
    lk = rules.early_look(rounds, rule)
    assert lk is not None and lk.n == 2 and lk.level == pytest.approx(rule.alpha * rule.early_share)
    assert rules.decide_endpoints(lk, 2.0).status == rules.StepStatus.REAL
    assert rules.decide_culprit(lk, 2.0).status == rules.StepStatus.REAL


def test_two_rounds_of_a_drifting_machine_decide_nothing():
    rule = SequentialRule()
    rounds = _pair_rounds(100.0, 108.0, (0.12, -0.08, 0.1, -0.15, 0.05, 0.11, -0.09, 0.02))
    lk = rules.early_look(rounds, rule)
    assert lk is not None
    assert rules.decide_endpoints(lk, 2.0).status == rules.StepStatus.OPEN


def test_middle_runs_in_another_state_are_caught_by_the_two_orders_disagreeing():
    # A machine 20% slower for the two middle runs of each round: within each round the two runs of a
    # side agree exactly, so the within-round scatter alone would read a 20% step from identical commits.
    rule = SequentialRule()
    rounds = _pair_rounds(100.0, 100.0, (0.0, 0.2, 0.2, 0.0, 0.0, 0.2, 0.2, 0.0))
    lk = rules.early_look(rounds, rule)
    assert lk is not None and lk.low < 0.0 < lk.high
    assert rules.decide_endpoints(lk, 2.0).status != rules.StepStatus.REAL


def test_no_early_look_on_a_failed_run_three_rounds_or_when_switched_off():
    rule = SequentialRule()
    rounds = _pair_rounds(100.0, 120.0, (0.0,) * 8)
    failed = [rounds[0], (("b", None), ("a", 100.0), ("a", 100.0), ("b", 120.0))]
    assert rules.early_look(failed, rule) is None
    assert rules.early_look(rounds + rounds[:1], rule) is None
    assert rules.early_look(rounds, SequentialRule(early_share=0.0)) is None
    # the later looks spend what the early one does not: alpha in all
    total = rule.early_level + sum(rule.level(k) for k in range(1, 10_000))
    assert total == pytest.approx(rule.alpha, rel=1e-3)


def _scale(full_pct: float, run_sd: float | None) -> probes.ProbeScale:
    full = math.log1p(full_pct / 100.0)
    return probes.ProbeScale(0.75 * full, full, run_sd)


def test_a_clear_round_decides_a_probe_whose_step_dwarfs_the_scatter():
    rule = SequentialRule()
    scale = _scale(27.0, 0.01)
    like_lo = [_probe_round(0, 100.0, 100.5, 127.0)]
    like_hi = [_probe_round(0, 100.0, 126.0, 127.0)]
    good, bad = probes.clear_probe(like_lo, scale, rule), probes.clear_probe(like_hi, scale, rule)
    assert good is not None and good.status == ProbeStatus.GOOD and good.position < 0.1
    assert bad is not None and bad.status == ProbeStatus.BAD and bad.position > 0.9
    assert "1 clear round" in good.message
    # the ratio test alone could not have stopped here: it takes rule.min_rounds rounds
    c = rules.probe_contrast(like_lo[0])
    assert probes.decide_probe([c], rule, scale.step, math.log(1.02)).status == ProbeStatus.OPEN


def test_no_clear_round_when_the_scatter_is_large_or_unknown_or_the_rule_is_off():
    rule = SequentialRule()
    rnd = [_probe_round(0, 100.0, 100.5, 127.0)]
    assert probes.clear_probe(rnd, _scale(27.0, 0.03), rule) is None  # 27% is < 10x a 3% run scatter
    assert probes.clear_probe(rnd, _scale(27.0, None), rule) is None
    assert probes.clear_probe(rnd, _scale(27.0, 0.01), SequentialRule(clear_ratio=0.0)) is None
    # the round's own two m runs disagree by 6%: its own scatter, not the endpoints', is what counts
    split = [(("lo", 100.0), ("m", 97.0), ("m", 103.0), ("hi", 127.0))]
    assert probes.clear_probe(split, _scale(27.0, 0.005), rule) is None


def test_no_clear_round_when_the_round_disagrees_with_the_step_or_sits_in_the_middle():
    rule = SequentialRule()
    scale = _scale(27.0, 0.005)
    # a machine 20% slower from the second run on: hi reads +52%, twice the step: not a clear round
    slower = [(("lo", 100.0), ("m", 120.0), ("m", 120.0), ("hi", 152.0))]
    assert probes.clear_probe(slower, scale, rule) is None
    # half the step (a bracket that holds part of it, or a commit with part of it)
    assert probes.clear_probe([_probe_round(0, 100.0, 113.0, 127.0)], scale, rule) is None
    # two rounds that point to different ends
    mixed = [_probe_round(0, 100.0, 100.5, 127.0), _probe_round(1, 100.0, 126.0, 127.0)]
    assert probes.clear_probe(mixed, scale, rule) is None


def test_run_scatter_takes_the_larger_of_within_round_and_between_rounds():
    quiet = _pair_rounds(100.0, 120.0, (0.004, -0.003, 0.005, -0.002, 0.001, 0.003, -0.004, 0.002))
    sd = rules.run_scatter(quiet)
    assert sd is not None and 0.001 < sd < 0.01
    # the middle runs of both rounds in another state: the runs of a side agree, the rounds do not
    states = _pair_rounds(100.0, 100.0, (0.0, 0.2, 0.2, 0.0, 0.0, 0.2, 0.2, 0.0))
    assert rules.run_scatter(states) > 0.1
    assert rules.run_scatter([]) is None
