"""perfci.confirm.session: the order of the runs within a round; what one bench run leaves, and when it is stopped."""
from __future__ import annotations

import math
import time
from itertools import islice
from pathlib import Path

import pytest

from perfci.benchcmd import BenchSpec, Deadline
from perfci.benchmetric import MetricSpec
from perfci.confirm.session import ABBA, BAAB, ConfirmConfig, Side, _measure, round_orders
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
    (values, why), seconds = _run_once(tmp_path, f"sleep 3334 & echo $! > pid; cp {RESULTS} r.csv")
    assert why == "" and values
    assert seconds < 10.0
    assert wait_until_dead(int((tmp_path / "pid").read_text()), timeout=1.0)


def test_a_run_that_wrote_its_results_then_hung_is_a_failed_run(tmp_path):
    (values, why), seconds = _run_once(tmp_path, f"cp {RESULTS} r.csv; sleep 3334", timeout=0.5)
    assert values == {} and why == "bench timed out after 0.5s"
    assert seconds < 15.0


def test_the_budget_s_end_stops_a_run_in_flight(tmp_path):
    end = Deadline(time.monotonic() + 0.5, "--budget 4 s")
    (values, why), seconds = _run_once(tmp_path, "sleep 3334", deadline=end)
    assert values == {} and why == "bench stopped after 0.5s: the --budget 4 s ran out"
    assert seconds < 15.0
    (values, why), _ = _run_once(tmp_path, "true", deadline=Deadline(time.monotonic() - 1, "--budget 4 s"))
    assert values == {} and why == "not run: the --budget 4 s ran out"
