"""benchmarks/history_validation.py part 4 (team-like suites): its draws and its two rules."""
from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# benchmarks/ is no package: load the script by its path, registered first since its dataclasses look it up.
_spec = importlib.util.spec_from_file_location("benchmarks_history_validation",
                                               ROOT / "benchmarks" / "history_validation.py")
hv = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hv
_spec.loader.exec_module(hv)


@pytest.mark.parametrize("suite", ["decode", "prefill"])
def test_draws_are_small_suites_of_cases_ok_on_every_night_of_the_draw(suite):
    nights = hv.stored_nights(suite)
    draws = hv.draw_team_suites(suite, nights, 40, np.random.default_rng(3))
    for d in draws:
        assert d.tonight not in d.store and len(set(d.store)) == max(hv.TEAM_KS)
        per_family = Counter(key[0] for key in d.keys)
        assert set(per_family) == set(d.families)
        # prefill has only 3 families with 2 or more cases; decode 5 (4 on a draw with n2, which lacks gemv)
        assert len(d.families) in ((3,) if suite == "prefill" else (3, 4))
        assert all(2 <= n <= 3 for n in per_family.values())
        for i in (d.tonight, *d.store):
            ok = {r.key for r in nights[i][1].rows if r.status == "ok"}
            assert d.keys <= ok, (nights[i][0], d.keys - ok)
    assert len({d.keys for d in draws}) > 30  # draws differ
    again = hv.draw_team_suites(suite, nights, 40, np.random.default_rng(3))
    assert again == draws  # seeded


def test_every_drawn_case_is_judged_at_every_k_and_every_plant_is_counted():
    tally = hv.TeamTally()
    draws = hv.team_suite_runs("decode", 3, hv.TEAM_RULES[:1], tally)
    rule = hv.TEAM_RULES[0][0]
    for k in hv.TEAM_KS:
        assert sum(tally.aa[("decode", rule, k)].values()) == sum(len(d.keys) for d in draws)
        assert tally.nights[("decode", rule, k)][0] == 3
        planted = sum(v[0] for (s, r, kk, _), v in tally.plant.items() if (s, r, kk) == ("decode", rule, k))
        assert planted == sum(len(d.keys) for d in draws)  # each drawn family planted once, all its cases judged
    table = hv.team_k_table(tally, 2, hv.TEAM_RULES[:1])
    assert len(table) == 3 and "| decode | before (profile floor) | 3 |" in table[2]


def test_the_two_rules_differ_only_in_the_small_families_floor():
    before, today = hv.team_options(False), hv.team_options(True)
    assert before.prior.suite_floor is None and today.prior.suite_floor == 0.95
    assert replace(before, prior=replace(before.prior, suite_floor=0.95)) == today
