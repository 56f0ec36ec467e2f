"""Outliers at the endpoints and in the range (issue 10, item 3).

In-process trials run the session's own decisions (``search.search``) over the
simulated bench of ``simulate.py``; the end-to-end ones run ``python -m perfci
bisect`` on a synthetic repository whose bench plants the same outliers.
``benchmarks/bisect_outliers.py`` is the full-size version of both.
"""
from __future__ import annotations

import random
from collections import Counter

from perfci import git as perfci_git
from perfci.bisect.core import Verdict
from perfci.bisect.session import GitMarks
from tests.bisect import simulate
from tests.bisect.clihelp import parse_json, perfci
from tests.bisect.synth import endpoint_outliers, git, make_history, snapshot

N_COMMITS = 48
STEP = 0.08


def _outcome(trial: simulate.Trial) -> str:
    if trial.status != "culprit":
        return trial.status
    return "right" if trial.right else "wrong"


def _trials(count: int, seed: int, **scenario) -> Counter:
    tally: Counter = Counter()
    for t in range(count):
        rng = random.Random(seed * 1000 + t)
        culprit = rng.randrange(2, N_COMMITS + 1)
        planted = endpoint_outliers(rng, N_COMMITS, **scenario.pop("planted", {})) if "planted" in scenario else None
        trial = simulate.bisect(N_COMMITS, culprit, STEP, rng, planted=planted, **scenario)
        tally[_outcome(trial)] += 1
        tally["runs"] += trial.bench_runs
    return tally


def test_one_outlier_at_each_endpoint_never_reads_as_no_difference():
    """The issue's validation, smaller: an 8% step, one run 30% off at each endpoint, towards the other.

    At five runs a side that is p = 0.27 and, before the baselines were adaptive,
    "no significant difference" (exit 3) in every trial.
    """
    for direction in ("toward", "random"):
        tally = Counter()
        for t in range(150):
            rng = random.Random(31_000 + t)
            culprit = rng.randrange(2, N_COMMITS + 1)
            planted = endpoint_outliers(rng, N_COMMITS, 1, 0.3, direction)
            tally[_outcome(simulate.bisect(N_COMMITS, culprit, STEP, rng, planted=planted))] += 1
        assert tally["no-difference"] == 0 and tally["wrong"] == 0, (direction, tally)
        assert tally["right"] >= 147, (direction, tally)


def test_bad_whose_median_stands_on_outliers_is_never_named_itself():
    """Three of BAD's five runs 30% high: every commit after the step sat below mid-gap.

    Before the fix each of them was called good and the bisect named BAD itself,
    exit 0. Now the first commit like neither endpoint sends the search back to
    GOOD and BAD for more runs.
    """
    tally = Counter()
    for t in range(40):
        rng = random.Random(7_000 + t)
        culprit = rng.randrange(2, N_COMMITS)  # never BAD itself
        planted = {f"c{N_COMMITS:02d}": {0: 1.3, 1: 1.3, 2: 1.3}}
        trial = simulate.bisect(N_COMMITS, culprit, STEP, rng, planted=planted)
        tally["named BAD" if trial.found == N_COMMITS else _outcome(trial)] += 1
        tally["BAD measured again"] += trial.endpoint_runs >= 20
    # Without the fix: 30 of these 40 named BAD itself and 10 skipped every candidate.
    assert tally["named BAD"] == 0 and tally["wrong"] == 0, tally
    assert tally["right"] == tally["BAD measured again"] == 40, tally


def test_two_jobs_go_back_to_the_endpoints_too():
    for t in range(20):
        rng = random.Random(9_000 + t)
        culprit = rng.randrange(2, N_COMMITS)
        trial = simulate.bisect(N_COMMITS, culprit, STEP, rng, jobs=2,
                                planted={f"c{N_COMMITS:02d}": {0: 1.3, 1: 1.3, 2: 1.3}})
        assert trial.right and trial.endpoint_runs >= 20, trial


def test_bad_is_measured_again_before_it_is_named_itself():
    """No step at all; BAD's first five runs: three 30% high and two that happened to land high.

    The baselines pass (p = 0.004) and every commit is rightly called good, none of
    them unlike GOOD. Before the fix that named BAD itself, exit 0. Now BAD is
    measured again before it can be named, and GOOD and BAD are the same: exit 3.
    """
    planted = {f"c{N_COMMITS:02d}": {0: 1.3, 1: 1.3, 2: 1.3, 3: 1.03, 4: 1.03}}
    trial = simulate.bisect(N_COMMITS, 5, 0.0, random.Random(3), planted=planted)
    assert trial.status == "no-difference" and trial.endpoint_runs >= 20, trial


def test_git_bisect_is_told_again_when_a_verdict_changes(tmp_path):
    h = make_history(tmp_path / "repo", 6, 3)
    git(h.path, "bisect", "start", "--no-checkout", h.bad, h.good)
    marks = GitMarks(perfci_git.open_repo(h.path), False, h.good, h.bad)
    c1, c2, c4 = h.commits[0], h.commits[1], h.commits[3]
    marks([(c4, Verdict.BAD), (c1, Verdict.GOOD)])
    head = git(h.path, "rev-parse", "HEAD")
    marks([(c4, Verdict.BAD), (c1, Verdict.GOOD), (c2, Verdict.GOOD)])  # a new verdict: appended
    assert git(h.path, "bisect", "log").count("git bisect ") == 4  # start + three marks
    marks([(c4, Verdict.GOOD), (c1, Verdict.GOOD), (c2, Verdict.GOOD)])  # c4 judged again: the log restarts
    log = git(h.path, "bisect", "log")
    assert f"git bisect good {c4}" in log and f"git bisect bad {c4}" not in log
    assert log.count("git bisect ") == 4
    assert git(h.path, "rev-parse", "HEAD") == head  # --no-checkout: nothing moved
    git(h.path, "bisect", "reset")


def test_outliers_anywhere_do_not_make_wrong_culprits():
    """Any run 10% likely to be 30% slow: majority-contaminated endpoints and commits happen."""
    tally = _trials(300, seed=5, outlier_rate=0.1, outlier_sign=1)
    assert tally["wrong"] == 0, tally
    assert tally["no-difference"] <= 3 and tally["right"] >= 290, tally


def test_clean_steps_pay_little_for_it():
    """No outliers: the adaptive stages should rarely fire (before: 38 runs a trial here)."""
    tally = _trials(200, seed=9)
    assert tally["right"] == 200
    assert tally["runs"] / 200 < 40.5, tally


# --------------------------------------------------------------------------- end to end


def _plant(h, runs_at: dict[str, dict[int, float]]) -> dict:
    return {"BENCH_OUTLIER_AT": ",".join(f"{sha}:{k}:{f}" for sha, runs in runs_at.items() for k, f in runs.items())}


def test_end_to_end_one_outlier_a_side_bisects_instead_of_exit_3(history_factory, counter):
    h = history_factory(n_commits=24, culprit_index=9, step=STEP)  # dirty tree
    before = snapshot(h.path)
    env = dict(counter.env, **_plant(h, {h.good: {2: 1.3}, h.bad: {4: 0.7}}))
    result = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = parse_json(result.stdout)
    assert report["culprit"]["sha"] == h.culprit
    assert "not yet significant" in result.stderr and "measuring GOOD and BAD 10 times each" in result.stderr
    assert len(report["good"]["samples"]) >= 10 and len(report["bad"]["samples"]) >= 10
    assert snapshot(h.path) == before


def test_end_to_end_bad_with_three_outliers_is_not_named_the_culprit(history_factory, counter):
    """The issue's worst outcome, replayed: exit 0 naming BAD itself, with the step at commit 9 of 24."""
    h = history_factory(n_commits=24, culprit_index=9, step=STEP)
    before = snapshot(h.path)
    env = dict(counter.env, **_plant(h, {h.bad: {0: 1.3, 1: 1.3, 2: 1.3}}))
    result = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = parse_json(result.stdout)
    assert report["culprit"]["sha"] == h.culprit != h.bad
    assert "is like neither endpoint" in result.stderr
    assert snapshot(h.path) == before
