"""--total-budget's end in the middle of a probe: the commit is unsure, never skipped, and nothing it stopped is cached.

A run the budget stopped says nothing about the commit. Counted as a failed run it made the probe's
commit a skip (as if it could not run) and, cached, made a rerun with more time refuse the commit
(two failed runs and none that worked: unmeasurable). In-process, over the simulated machine of
simulate.py, whose slot says what a warm worker or a bench command says once the budget is out.
"""
from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from perfci.benchcmd import RunOutcome
from perfci.bisect.cache import Cache
from perfci.bisect.core import CommitVerdict
from perfci.bisect.search import BisectConfig, Measurer, search
from tests.bisect import simulate

TOTAL_S = 1.5


@dataclass
class BudgetSlot(simulate.SimSlot):
    """A slot whose runs stop once the simulated clock has passed the total budget."""

    def run(self, sha: str) -> RunOutcome:
        if self.machine.clock >= TOTAL_S:
            return RunOutcome(None, f"not run: the --total-budget {TOTAL_S:g} s ran out")
        return super().run(sha)


def test_a_probe_cut_by_the_total_budget_is_unsure_not_skipped_and_not_cached(tmp_path):
    commits, levels = simulate.history(48, culprit=30, step=0.3)
    machine = simulate.Machine(random.Random(7), states=(1.0,), noise=0.01, outlier_rate=0.0, overhead_s=0.05)
    cfg = BisectConfig(Path("."), simulate.GOOD, commits[-1], bench=None, jobs=1, min_effect_pct=2.0,
                       budget_s=300.0, total_budget_s=TOTAL_S)
    order = {simulate.GOOD: 0, **{sha: i for i, sha in enumerate(commits, start=1)}}
    cache = Cache(tmp_path / "cache.json")
    measurer = Measurer(cfg, cache, order, {}, clock=lambda: machine.clock)
    slot = BudgetSlot("slot0", machine, levels, runs=Counter())
    out = search(cfg, [slot], simulate.GOOD, commits[-1], commits, measurer, simulate._Quiet())

    assert out.state is not None  # GOOD against BAD was decided inside the budget
    assert out.steps and not any(step.verdict == CommitVerdict.SKIP for step in out.steps), out.steps
    cut = out.steps[-1]  # the probe the budget's end caught: unsure, with why
    assert cut.verdict == CommitVerdict.UNSURE and "the --total-budget 1.5 s ran out" in cut.reason, cut
    assert out.stopped == "the total budget (--total-budget 1.5 s) ran out"
    cached = json.loads((tmp_path / "cache.json").read_text())["entries"]
    values = [value for entry in cached.values() for rnd in entry.get("rounds", ()) for _, value in rnd]
    assert values and None not in values  # every cached run is a measurement
