"""perfci.confirm.session: the order of the runs within a round; what one bench run leaves, and when it is stopped."""
from __future__ import annotations

import math
import time
from itertools import islice
from pathlib import Path

import pytest

from perfci.benchcmd import BenchSpec, Deadline
from perfci.benchmetric import MetricSpec
from perfci.confirm.session import ABBA, BAAB, ConfirmConfig, Side, _build, _measure, round_orders
from perfci.errors import PerfciError
from perfci.measure.sides import SideRun
from tests.proc_util import wait_until_dead


def test_rounds_alternate_abba_and_baab_so_no_run_position_favours_a_side():
    orders = list(islice(round_orders("a b"), 200))
    assert set(orders) == {ABBA, BAAB}
    assert all({orders[i], orders[i + 1]} == {ABBA, BAAB} for i in range(0, 200, 2))  # one of each per pair
    assert orders != [ABBA, BAAB] * 100 and orders != [BAAB, ABBA] * 100  # drawn, not a fixed rhythm
    assert list(islice(round_orders("a b"), 200)) == orders  # seeded: the same session, the same order
    # a machine that favours run positions 2 and 3 by 6% (as one did, loaded by a job of its own rhythm):
    # ABBA alone reads it as CUR 6% faster; the drawn orders cancel it exactly over each pair
    slow = {0: 1.03, 1: 0.97, 2: 0.97, 3: 1.03}
    def d(order):
        logs = {"base": [], "cur": []}
        for i, side in enumerate(order):
            logs[side].append(math.log(slow[i]))
        return sum(logs["cur"]) / 2 - sum(logs["base"]) / 2
    assert d(ABBA) == pytest.approx(math.log(0.97) - math.log(1.03))
    assert sum(d(o) for o in orders) == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------- one bench run's process group

RESULTS = Path(__file__).resolve().parents[1] / "data" / "compare" / "base.csv"


def _run_once(tmp_path: Path, line: str, timeout: float = 60.0, deadline: Deadline | None = None):
    cfg = ConfirmConfig(tmp_path, "a", "b", BenchSpec((line,), None, MetricSpec(), timeout), results_path="r.csv")
    started = time.monotonic()
    out = _measure(cfg, Side("base", "a", "0" * 40, tmp_path), deadline)
    return out, time.monotonic() - started


def test_a_run_s_background_child_is_killed_and_the_round_does_not_wait_for_it(tmp_path):
    run, seconds = _run_once(tmp_path, f"sleep 3334 & echo $! > pid; cp {RESULTS} r.csv")
    assert run.why_not == "" and run.values
    assert seconds < 10.0
    assert wait_until_dead(int((tmp_path / "pid").read_text()), timeout=1.0)


def test_a_run_that_wrote_its_results_then_hung_is_a_failed_run(tmp_path):
    run, seconds = _run_once(tmp_path, f"cp {RESULTS} r.csv; sleep 3334", timeout=0.5)
    assert run.values == {} and run.why_not == "bench timed out after 0.5s"
    assert seconds < 15.0


def test_the_budget_s_end_stops_a_run_in_flight(tmp_path):
    end = Deadline(time.monotonic() + 0.5, "--budget 4 s")
    run, seconds = _run_once(tmp_path, "sleep 3334", deadline=end)
    assert run.values == {} and run.why_not == "bench stopped after 0.5s: the --budget 4 s ran out"
    assert seconds < 15.0
    run, _ = _run_once(tmp_path, "true", deadline=Deadline(time.monotonic() - 1, "--budget 4 s"))
    assert run.values == {} and run.why_not == "not run: the --budget 4 s ran out"


# --------------------------------------------------------------------------- a build's limits


def test_a_build_still_going_at_its_limit_ends_confirm_in_one_line(tmp_path):
    cfg = ConfirmConfig(tmp_path, "a", "b", BenchSpec(("true",), "sleep 30", MetricSpec(), build_timeout=1.0))
    started = time.monotonic()
    with pytest.raises(PerfciError) as err:
        _build(cfg, Side("base", "a", "0" * 40, tmp_path))
    assert err.value.message == ("the build 'sleep 30' at base a (000000000000) did not finish in 1 s "
                                 "(--build-timeout)")
    assert time.monotonic() - started < 15.0  # not the build's 30 s


# --------------------------------------------------------------------------- rounds after a look


def test_rounds_after_a_look_measure_only_the_cases_it_left_open():
    import random
    from types import SimpleNamespace

    from perfci.confirm.session import _rounds, decider

    a, b = ("tiled", "1024x1024x1024", "fp16"), ("tuned", "64x4096x4096", "fp16")
    suite = SimpleNamespace(cases=[SimpleNamespace(key=a), SimpleNamespace(key=b)])
    cfg = SimpleNamespace(min_rounds=5, max_rounds=None, alpha=0.05, min_effect_pct=1.0, suite=suite,
                          reference=None, higher_is_better=False, budget_s=None)
    sides = (Side("base", "HEAD~1", "1" * 40, Path(".")), Side("cur", "HEAD", "2" * 40, Path(".")))
    rng = random.Random(3)
    asked: list[frozenset | None] = []

    def measure(side, keys):
        asked.append(keys)
        step = {a: 1.10, b: 1.012}
        out = {k: 20.0 * (step[k] if side.name == "cur" else 1.0) * math.exp(rng.gauss(0, 0.01))
               for k in (a, b) if keys is None or k in keys}
        return SideRun(out)

    notes = []
    judgement, rounds = _rounds(cfg, sides, SimpleNamespace(note=notes.append), decider(cfg), measure)
    assert asked[:20] == [None] * 20  # five rounds of every case, up to the first look
    assert asked[20:] and set(asked[20:]) == {frozenset({b})}  # then only the case still open
    verdicts = {c.key: c.verdict for c in judgement.cases}
    assert verdicts[a] == "regressed" and next(c for c in judgement.cases if c.key == a).rounds == 5
    assert rounds.completed == len(asked) // 4


def _first_round(budget_s: float, measure):
    """``_rounds`` of one case over BASE and CUR with ``budget_s``, ``measure`` standing for the bench."""
    from types import SimpleNamespace

    from perfci.confirm.session import _rounds, decider

    cfg = SimpleNamespace(min_rounds=5, max_rounds=None, alpha=0.05, min_effect_pct=1.0, suite=None,
                          reference=None, higher_is_better=False, budget_s=budget_s)
    sides = (Side("base", "HEAD~1", "1" * 40, Path(".")), Side("cur", "HEAD", "2" * 40, Path(".")))
    return _rounds(cfg, sides, SimpleNamespace(note=lambda _: None), decider(cfg), measure)


KEY = ("tiled", "1024x1024x1024", "fp16")


def test_a_budget_that_ends_inside_the_first_round_is_undecided_not_a_broken_bench():
    # The budget's end stopped CUR's runs before any finished: a forced look (inconclusive), not
    # a broken case, which would read as the commit's failure in a night.
    def measure(side, keys):
        time.sleep(0.02)
        return SideRun({KEY: 20.0}) if side.name == "base" else SideRun({}, "not run: the --budget 0.05 s ran out")

    judgement, rounds = _first_round(0.05, measure)
    assert rounds.completed == 1
    assert [c.verdict for c in judgement.cases] == ["inconclusive"]


def test_a_side_that_fails_its_first_round_is_broken_with_its_reason_and_ends_the_session():
    def measure(side, keys):
        return SideRun({KEY: 20.0}) if side.name == "base" else SideRun({}, "exited 1: no such file")

    judgement, rounds = _first_round(600.0, measure)
    assert rounds.completed == 1  # nothing left to measure: the answer is now
    (case,) = judgement.cases
    assert case.verdict == "broken" and judgement.broken and not judgement.regressed
    assert case.reason == "fails at CUR, measured at BASE: exited 1: no such file"


def test_a_broken_side_is_broken_even_when_the_other_side_s_runs_outlast_the_budget():
    # BASE's runs alone are longer than the budget; CUR fails at once, on its own (not the budget's end):
    # broken at CUR, whatever the clock says.
    def measure(side, keys):
        if side.name == "base":
            time.sleep(0.06)
            return SideRun({KEY: 20.0})
        return SideRun({}, "bench exited 1: ModuleNotFoundError: No module named 'kernels'")

    judgement, _ = _first_round(0.05, measure)
    assert [c.verdict for c in judgement.cases] == ["broken"]
    assert "ModuleNotFoundError" in judgement.cases[0].reason


def test_a_bench_that_fails_on_both_sides_is_refused():
    def measure(side, keys):
        return SideRun({}, "exited 127: command not found")

    with pytest.raises(PerfciError, match="the bench failed at both BASE and CUR"):
        _first_round(600.0, measure)


def test_a_budget_that_ran_out_before_either_side_was_measured_is_said_not_judged():
    def measure(side, keys):
        time.sleep(0.02)
        return SideRun({}, "not run: the --budget 0.05 s ran out")

    with pytest.raises(PerfciError, match="the budget ran out before either side was measured"):
        _first_round(0.05, measure)


OTHER = ("tuned", "64x4096x4096", "fp16")


def _suite_rounds(measure, renew=lambda: None, budget_s=None):
    from types import SimpleNamespace

    from perfci.confirm.session import _rounds, decider

    suite = SimpleNamespace(cases=[SimpleNamespace(key=KEY), SimpleNamespace(key=OTHER)])
    cfg = SimpleNamespace(min_rounds=5, max_rounds=None, alpha=0.05, min_effect_pct=1.0, suite=suite,
                          reference=None, higher_is_better=False, budget_s=budget_s)
    sides = (Side("base", "HEAD~1", "1" * 40, Path(".")), Side("cur", "HEAD", "2" * 40, Path(".")))
    return _rounds(cfg, sides, SimpleNamespace(note=lambda _: None), decider(cfg), measure, renew=renew)


@pytest.mark.parametrize("why", ["error Segmentation fault (signal 11)", "fail max abs error 3.2 > tol 0.01",
                                 "timeout no result after 60 s; killed"])
def test_a_case_that_fails_at_one_side_only_is_broken_and_not_measured_again(why):
    import random

    rng = random.Random(5)
    asked: list[frozenset | None] = []

    def measure(side, keys):
        asked.append(keys)
        values = {k: 20.0 * math.exp(rng.gauss(0, 0.003)) for k in (KEY, OTHER) if keys is None or k in keys}
        if side.name == "cur" and KEY in values:
            del values[KEY]
            return SideRun(values, "", {KEY: why})
        return SideRun(values)

    judgement, rounds = _suite_rounds(measure)
    verdicts = {c.key: c for c in judgement.cases}
    assert verdicts[KEY].verdict == "broken" and verdicts[KEY].reason == f"fails at CUR, measured at BASE: {why}"
    assert verdicts[OTHER].verdict == "unchanged"
    assert asked[:4] == [None] * 4 and all(keys == frozenset({OTHER}) for keys in asked[4:])
    assert judgement.broken


def test_a_case_the_budget_stopped_at_one_side_is_not_broken():
    def measure(side, keys):
        if side.name == "cur":
            return SideRun({OTHER: 20.0}, "", {KEY: "timeout no result after the --budget 9 s ran out; killed"})
        return SideRun({KEY: 20.0, OTHER: 20.0})

    judgement, rounds = _suite_rounds(measure, budget_s=9.0)
    assert "broken" not in {c.verdict for c in judgement.cases}


def test_every_round_after_the_first_measures_from_new_workers():
    renewed: list[int] = []
    rounds_seen: list[int] = []

    def measure(side, keys):
        rounds_seen.append(len(renewed))
        return SideRun({KEY: 20.0 * (1.0 + 0.001 * len(rounds_seen) % 3), OTHER: 20.0})

    _, rounds = _suite_rounds(measure, renew=lambda: renewed.append(1))
    assert len(renewed) == rounds.completed - 1
    # the four runs of round r all come after r - 1 renewals: a round's runs share its workers, no more
    assert rounds_seen == [r for r in range(rounds.completed) for _ in range(4)]


def test_the_first_round_s_one_time_costs_are_not_the_price_of_every_round():
    from perfci.confirm.session import rounds_left

    # the H200's standalone confirm: an 84 s first round (compile, autotune) of a 100 s budget
    assert rounds_left(100.0, 84.0, 1, 84.0) == (84.0, 1)  # unknown yet: one more round to learn it
    assert rounds_left(100.0, 96.0, 2, 84.0) == (12.0, 0)
    assert rounds_left(300.0, 96.0, 2, 84.0) == (12.0, 17)  # later rounds' 12 s, not the mean's 48 s
    assert rounds_left(100.0, 101.0, 1, 101.0)[1] == 0  # the budget is gone: no round
    assert rounds_left(None, 50.0, 3, 30.0) == (10.0, None)
