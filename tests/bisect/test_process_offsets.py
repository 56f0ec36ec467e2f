"""A worker process's own offset must not become a culprit: rounds come from new processes.

Each process that serves a commit's runs gives them an offset of its own (its address layout,
allocator and thread pools, environment). Served by one process per commit for the whole session,
as bisect's warm workers did, the offset is a constant of the commit that no number of rounds
averages away; ``Slot.new_round`` starts every round's runs from new processes, so the offset is
round-to-round noise inside the interval. The simulation (:mod:`tests.bisect.simulate`) draws a
2% (log sd) offset per process on a quiet machine (1% scatter a run), GOOD .. BAD over eight commits.
"""
from __future__ import annotations

import random
from collections import Counter

from perfci.bisect.core import CommitVerdict, conclude
from perfci.bisect.trees import WarmSlot
from tests.bisect import simulate

TRIALS = 100


def _outcomes(step: float, renew: bool, seed: int = 11) -> Counter:
    rng = random.Random(seed)
    out: Counter = Counter()
    for _ in range(TRIALS):
        commits, levels = simulate.history(8, culprit=5, step=step)
        machine = simulate.Machine(random.Random(rng.random()), states=(1.0,), noise=0.01, outlier_rate=0.0,
                                   overhead_s=0.5)
        result, _, _ = simulate.run_search(commits, levels, [machine], process_sd=0.02, renew=renew,
                                           min_effect_pct=2.0, budget_s=300.0)
        if result.state is None:
            out[result.baseline.decision.status.value] += 1
            continue
        skipped = tuple(r.sha for r in result.steps if r.verdict == CommitVerdict.SKIP)
        c = conclude(result.state, result.culprit_check.check if result.culprit_check else None, skipped,
                     result.leans, result.stopped)
        out[f"{c.status} {c.culprit}"] += 1
    return out


def _named(out: Counter) -> int:
    return sum(n for what, n in out.items() if what.startswith("culprit"))


def test_one_process_per_commit_turns_its_offset_into_wrong_culprits():
    """The failure the renewal mends, shown by the same simulation: identical commits, one process each."""
    out = _outcomes(step=0.0, renew=False)
    assert _named(out) + out["swapped"] >= 0.3 * TRIALS, out


def test_new_processes_every_round_keep_identical_commits_quiet():
    out = _outcomes(step=0.0, renew=True)
    assert _named(out) == 0, out
    assert out["swapped"] <= 0.05 * TRIALS, out  # the endpoints' test at its own alpha


def test_new_processes_every_round_still_find_a_real_step():
    out = _outcomes(step=0.2, renew=True)
    assert out["culprit c05"] == TRIALS, out


class _Sides:
    def __init__(self):
        self.renewed = []

    def renew(self, upcoming=()):
        self.renewed.append(list(upcoming))


class _Trees:
    deadline = None

    def path(self, sha):
        return f"/trees/{sha}"


def test_a_warm_slot_renews_its_workers_at_every_round_starting_the_round_s_commits():
    sides = _Sides()
    slot = WarmSlot("slot0", trees=_Trees(), sides=sides)
    slot.new_round(["a", "b"])
    slot.new_round(["a", "m", "b"])
    assert sides.renewed == [[("a", "/trees/a"), ("b", "/trees/b")],
                             [("a", "/trees/a"), ("m", "/trees/m"), ("b", "/trees/b")]]
