"""Outlier runs at the endpoints and in the range: paired rounds and trimmed intervals take them in stride.

In-process trials run the session's own decisions (``search.search``) over the
simulated bench of ``simulate.py`` with a quiet machine (1% scatter, no states)
and planted outliers; the end-to-end ones run ``python -m perfci bisect`` on a
synthetic repository whose bench plants the same outliers.
``benchmarks/bisect_outliers.py`` is the full-size version of both.
"""
from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.bisect import simulate
from tests.bisect.clihelp import parse_json, perfci
from tests.bisect.synth import endpoint_outliers, snapshot

N_COMMITS = 48
STEP = 0.08


def _outcome(trial: simulate.Trial) -> str:
    if trial.status not in ("culprit",):
        return trial.status
    return "right" if trial.right else "wrong"


def test_one_outlier_at_each_endpoint_never_reads_as_no_difference():
    """One run 30% off at each endpoint, towards the other: five unpaired runs a side read p = 0.27."""
    for direction in ("toward", "random"):
        tally = Counter()
        for t in range(60):
            rng = random.Random(31_000 + t)
            culprit = rng.randrange(2, N_COMMITS + 1)
            planted = endpoint_outliers(rng, N_COMMITS, 1, 0.3, direction)
            tally[_outcome(simulate.bisect(N_COMMITS, culprit, STEP, rng, planted=planted, noise=0.01))] += 1
        assert tally["no-difference"] == 0 and tally["wrong"] == 0, (direction, tally)
        assert tally["right"] == 60, (direction, tally)


def test_bad_whose_first_runs_are_outliers_is_never_named_itself():
    """Three of BAD's first five runs 30% high: the unpaired bisect named BAD itself in 30 of 40 such trials."""
    tally = Counter()
    for t in range(40):
        rng = random.Random(7_000 + t)
        culprit = rng.randrange(2, N_COMMITS)  # never BAD itself
        planted = {f"c{N_COMMITS:02d}": {0: 1.3, 1: 1.3, 2: 1.3}}
        trial = simulate.bisect(N_COMMITS, culprit, STEP, rng, planted=planted, noise=0.01)
        tally["named BAD" if trial.found == N_COMMITS else _outcome(trial)] += 1
    assert tally["named BAD"] == 0 and tally["wrong"] == 0 and tally["right"] == 40, tally


def test_no_step_with_outliers_at_bad_is_no_difference():
    planted = {f"c{N_COMMITS:02d}": {0: 1.3, 1: 1.3, 2: 1.3, 3: 1.03, 4: 1.03}}
    trial = simulate.bisect(N_COMMITS, 5, 0.0, random.Random(3), planted=planted, noise=0.01)
    assert trial.status == "no-difference", trial


def test_outliers_anywhere_do_not_make_wrong_culprits():
    """Any run 10% likely to be 30% slow: contaminated rounds are trimmed, not trusted."""
    tally = Counter()
    for t in range(80):
        rng = random.Random(5_000 + t)
        culprit = rng.randrange(2, N_COMMITS + 1)
        trial = simulate.bisect(N_COMMITS, culprit, STEP, rng, noise=0.01, outlier_rate=0.1, outlier_sign=1)
        tally[_outcome(trial)] += 1
    assert tally["wrong"] == 0 and tally["right"] >= 79, tally


# --------------------------------------------------------------------------- end to end


def _plant(runs_at: dict[str, dict[int, float]]) -> dict:
    return {"BENCH_OUTLIER_AT": ",".join(f"{sha}:{k}:{f}" for sha, runs in runs_at.items() for k, f in runs.items())}


@pytest.mark.slow  # a whole bisect in git, one process per bench run: ~25 s on a loaded 2-core machine
def test_end_to_end_outliers_at_both_endpoints(history_factory, counter):
    h = history_factory(n_commits=24, culprit_index=9, step=STEP)  # dirty tree
    before = snapshot(h.path)
    env = dict(counter.env, **_plant({h.good: {2: 1.3}, h.bad: {0: 1.3, 1: 1.3, 4: 0.7}}))
    result = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = parse_json(result.stdout)
    assert report["culprit"]["sha"] == h.culprit != h.bad
    assert report["culprit_check"]["status"] == "real" and report["culprit_interval"]["low_pct"] > 2.0
    assert snapshot(h.path) == before
