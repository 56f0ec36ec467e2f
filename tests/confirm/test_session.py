"""perfci.confirm.session: the order of the runs within a round."""
from __future__ import annotations

import math
from itertools import islice

import pytest

from perfci.confirm.session import ABBA, BAAB, round_orders


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
