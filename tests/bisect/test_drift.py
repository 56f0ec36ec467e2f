"""Bisect on a drifting machine: paired rounds hold where unpaired samples fail, and no wrong exit 0.

In-process, over ``simulate.Machine``: speed states (x0.85, x1, x1.2) lasting
about two seconds, 1.5% scatter a run, 3% of runs 30-100% slow, on a simulated
clock. Seeded, so nothing here depends on how fast this machine runs today.
"""
from __future__ import annotations

import random
import statistics
from collections import Counter

from perfci.bisect import rules
from perfci.bisect.core import CommitVerdict, conclude
from perfci.bisect.search import Measurer, ProbeOutcome
from perfci.stats import mann_whitney
from tests.bisect import simulate

N_COMMITS = 48


def _unpaired(machine: simulate.Machine, good: float, bad: float, runs: int = 10) -> str:
    """The unpaired way: GOOD's runs, then BAD's, a rank test and the medians' change."""
    a = [machine.value(good) for _ in range(runs)]
    b = [machine.value(bad) for _ in range(runs)]
    change = statistics.median(b) / statistics.median(a) - 1.0
    if mann_whitney(a, b, alternative="greater").p_value < 0.01 and change > 0.02:
        return "slower"
    if mann_whitney(b, a, alternative="greater").p_value < 0.01 and change < -0.02:
        return "faster"
    return "no difference"


def _paired(machine: simulate.Machine, good: float, bad: float) -> str:
    ds: list[float] = []
    rule = rules.SequentialRule()
    while len(ds) < 400:
        order = rules.pair_order(len(ds))
        ds.append(rules.pair_contrast(tuple((r, machine.value(good if r == "a" else bad)) for r in order)))
        decision = rules.decide_endpoints(rules.look(ds, rule), 2.0)
        if decision.status != rules.StepStatus.OPEN:
            return {"real": "slower", "swapped": "faster"}.get(decision.status.value, "no difference")
    return "no difference"


def test_unpaired_samples_fail_on_the_drifting_machine_where_paired_rounds_hold():
    tally = {(how, step): Counter() for how in ("unpaired", "paired") for step in (0.08, 0.0)}
    for t in range(200):
        for step in (0.08, 0.0):
            tally["unpaired", step][_unpaired(simulate.Machine(random.Random(t)), 30.0, 30.0 * (1 + step))] += 1
            tally["paired", step][_paired(simulate.Machine(random.Random(t)), 30.0, 30.0 * (1 + step))] += 1
    # Unpaired: a real 8% step missed or reversed in a fifth of the trials (45 of 200), a false one in one in ten.
    assert tally["unpaired", 0.08]["slower"] <= 175, tally
    assert tally["unpaired", 0.0]["slower"] + tally["unpaired", 0.0]["faster"] >= 8, tally
    # Paired, on the same machines: every step seen, no false one.
    assert tally["paired", 0.08]["slower"] == 200, tally
    assert tally["paired", 0.0]["no difference"] == 200, tally


def _tally(step: float, trials: int, seed: int, **kwargs) -> tuple[Counter, list[simulate.Trial]]:
    tally: Counter = Counter()
    seen = []
    for t in range(trials):
        rng = random.Random(seed * 1000 + t)
        culprit = rng.randrange(2, N_COMMITS + 1)
        trial = simulate.bisect(N_COMMITS, culprit, step, rng, **kwargs)
        seen.append(trial)
        if trial.right:
            tally["right"] += 1
        elif trial.wrong:
            tally["wrong"] += 1
        else:
            tally[f"{trial.status}, range {'holds' if trial.range_holds_culprit else 'misses'}"] += 1
    return tally, seen


def test_an_8pct_step_on_the_drifting_machine_is_found_and_never_misnamed():
    tally, _ = _tally(0.08, 60, seed=1)
    assert tally["wrong"] == 0 and tally["right"] >= 59, tally


def test_a_3pct_step_is_never_misnamed_and_an_undecided_range_holds_it():
    tally, trials = _tally(0.03, 40, seed=2, machine=dict(noise=0.03, outlier_rate=0.05), budget_s=60.0)
    assert tally["wrong"] == 0, tally
    undecided = [t for t in trials if t.status == "undecided"]
    assert all(t.range_holds_culprit for t in undecided), tally


def test_two_slots_pair_within_each_and_find_the_step():
    # Slot 1's machine runs 10% slower than slot 0's (simulate.bisect): a pair across slots would read it as a step.
    tally, _ = _tally(0.08, 25, seed=3, jobs=2)
    assert tally["wrong"] == 0 and tally["right"] >= 24, tally


def test_steps_below_the_floor_each_never_give_a_culprit():
    """Two 1.5% steps: GOOD -> BAD is 3%, but no single commit's step is past the 2% floor."""
    for t in range(15):
        rng = random.Random(4000 + t)
        first = rng.randrange(2, N_COMMITS - 5)
        trial = simulate.bisect(N_COMMITS, first, 0.015, rng, extra_steps={first + 4: 0.015}, budget_s=60.0)
        assert trial.status != "culprit", trial


class _WrongOnce(Measurer):
    """A Measurer whose probe of one commit answers "bad" whatever its rounds say: a misjudged neighbour."""

    def __init__(self, *args, liar: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.liar = liar

    def measure_probe(self, slot, lo, m, hi, budget_s, step) -> ProbeOutcome:
        out = super().measure_probe(slot, lo, m, hi, budget_s, step)
        if m != self.liar:
            return out
        from dataclasses import replace

        return ProbeOutcome(CommitVerdict.BAD, replace(out.record, verdict=CommitVerdict.BAD))


def test_a_wrong_but_adjacent_culprit_is_caught_by_its_own_step_and_ends_in_exit_3(monkeypatch):
    """The issue's case: a docs-only commit three before the real one named with exit 0.

    Here the probe of that commit is forced to "bad", as a misjudged neighbour
    would be; the bracket then closes somewhere below it, where no commit has a
    step, and the step there, paired against its parent, holds 0: undecided,
    exit 3, never a culprit.
    """
    from perfci.bisect import search as search_module

    culprit = 27
    commits, levels = simulate.history(N_COMMITS, culprit, 0.08)
    liar = commits[culprit - 4]  # c24: probed first, a docs-only commit
    monkeypatch.setattr(search_module, "Measurer", Measurer)  # the real class stays the base
    machines = [simulate.Machine(random.Random(11))]
    from pathlib import Path

    from perfci.bisect.cache import Cache
    from perfci.bisect.search import BisectConfig, search

    cfg = BisectConfig(Path("."), simulate.GOOD, commits[-1], bench=None, budget_s=120.0)
    order = {simulate.GOOD: 0, **{sha: i for i, sha in enumerate(commits, start=1)}}
    measurer = _WrongOnce(cfg, Cache(None), order, {}, clock=lambda: machines[0].clock, liar=liar)
    slots = [simulate.SimSlot("slot0", machines[0], levels)]
    out = search(cfg, slots, simulate.GOOD, commits[-1], commits, measurer, simulate._Quiet())
    # Below the liar the bracket (GOOD, c24) has no step at all; the probes inside it can
    # only guess, and wherever they close it, the step between the two ends is about 0.
    assert out.state.adjacent and out.state.bounds[1] <= commits.index(liar)
    c = conclude(out.state, out.culprit_check.check, (), out.leans, out.stopped)
    assert c.status == "undecided" and c.culprit is None
    check = out.culprit_check.check
    assert check.status in ("below-floor", "unresolved") and check.interval.low < 2.0 and check.interval.high > 0


class _UnsureAt(Measurer):
    """A Measurer whose probe of one commit ends unsure, as a budget too short for its noise leaves it."""

    def __init__(self, *args, unsure: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.unsure = unsure

    def measure_probe(self, slot, lo, m, hi, budget_s, step) -> ProbeOutcome:
        out = super().measure_probe(slot, lo, m, hi, budget_s, step)
        if m != self.unsure:
            return out
        from dataclasses import replace

        return ProbeOutcome(CommitVerdict.UNSURE, replace(out.record, verdict=CommitVerdict.UNSURE), 0.8)


def test_a_probe_that_stays_unsure_stops_the_search_with_a_range_and_advice():
    from pathlib import Path

    from perfci.bisect.cache import Cache
    from perfci.bisect.result import to_result
    from perfci.bisect.search import BisectConfig, search

    commits, levels = simulate.history(N_COMMITS, 30, 0.08)
    machine = simulate.Machine(random.Random(5))
    cfg = BisectConfig(Path("."), simulate.GOOD, commits[-1], bench=None, budget_s=60.0)
    order = {simulate.GOOD: 0, **{sha: i for i, sha in enumerate(commits, start=1)}}
    unsure = commits[35]  # the second probe, after c24 is found good
    measurer = _UnsureAt(cfg, Cache(None), order, {}, clock=lambda: machine.clock, unsure=unsure)
    out = search(cfg, [simulate.SimSlot("slot0", machine, levels)], simulate.GOOD, commits[-1], commits, measurer,
                 simulate._Quiet())
    # Its neighbours would be as hard to tell apart: the search stops instead of spending a budget on each.
    assert [r.sha for r in out.steps] == [commits[23], unsure]
    assert out.stopped.startswith("a probe stayed unsure") and out.culprit_check is None
    result = to_result(cfg, out, simulate.GOOD, commits[-1], commits, measurer, lambda sha: ({}, ""))
    assert result.status == "undecided" and result.exit_code == 3
    assert result.candidates == tuple(commits[24:])  # after the good c24, up to BAD: holds c30
    assert result.best_guess == commits[24]  # before c36, which leans bad
    assert any("--budget" in a for a in result.advice) and any("quieter machine" in a for a in result.advice)
