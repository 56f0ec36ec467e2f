"""The search of ``perfci bisect`` and what it concludes, with no git, files, printing or processes.

Everything here takes and returns plain values, so the tests can drive a whole
search by hand. The IO edge (:mod:`perfci.bisect.search`) measures rounds and
feeds the decisions of :mod:`perfci.bisect.rules` in; this module keeps the
verdicts, says what to measure next, and what the verdicts add up to.

Conventions:
  * ``commits`` is the ordered list of candidates, oldest first, *excluding* GOOD
    and *including* BAD as its last element. Index -1 stands for GOOD.
  * Intervals in reports are percent changes of the raw metric (a throughput's
    slowdown is negative); decisions are taken on badness logs (+ = worse).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from statistics import median
from typing import Mapping, Sequence

from perfci.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE


class CommitVerdict(str, Enum):
    """What a bisect step found of one commit (not a case's :class:`perfci.verdict.Verdict`)."""

    GOOD = "good"
    BAD = "bad"
    UNSURE = "unsure"  # measured, but its budget ran out before it was told apart: not probed again
    SKIP = "skip"  # could not be built or measured


@dataclass(frozen=True)
class Samples:
    """The raw metric of one commit's runs that worked, and how many failed (for tables and plots)."""

    values: tuple[float, ...] = ()
    failures: int = 0

    @property
    def attempts(self) -> int:
        return len(self.values) + self.failures

    @property
    def median(self) -> float | None:
        return median(self.values) if self.values else None

    def plus(self, other: "Samples") -> "Samples":
        return Samples(self.values + other.values, self.failures + other.failures)


@dataclass(frozen=True)
class Interval:
    """A change in percent of the raw metric, with its interval (``confidence`` two-sided)."""

    estimate: float
    low: float
    high: float
    confidence: float = 0.95


def raw_interval(estimate: float, low: float, high: float, higher_is_better: bool, confidence: float) -> Interval:
    """Badness logs (+ = worse) as the raw metric's percent change, low <= high whatever the orientation."""
    sign = -1.0 if higher_is_better else 1.0
    values = [(math.exp(sign * x) - 1.0) * 100.0 for x in (estimate, low, high)]
    return Interval(values[0], min(values[1:]), max(values[1:]), confidence)


@dataclass(frozen=True)
class PairCheck:
    """A paired step: GOOD -> BAD before the search, parent -> culprit at its end.

    ``status`` is a :class:`perfci.bisect.rules.StepStatus` value; ``interval``
    the raw percent change of the later commit against the earlier.
    """

    status: str
    message: str
    interval: Interval | None = None
    rounds: int = 0
    failed_rounds: int = 0
    seconds: float = 0.0
    rounds_needed: int | None = None  # about how many rounds would resolve it, at the spread seen


@dataclass(frozen=True)
class StepRecord:
    """One commit as the report shows it: its runs, and the decision taken on them."""

    sha: str
    order: int  # position in history: 0 is GOOD, len(commits) is BAD
    subject: str
    samples: Samples
    verdict: CommitVerdict
    position: float | None = None  # where its runs sat on its bracket's lo (0) -> hi (1) step
    interval: Interval | None = None  # it against its bracket's midpoint, raw percent
    rounds: int = 0
    against: tuple[int, int] | None = None  # the bracket's orders (lo, hi) it was decided against
    seconds: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class SearchState:
    """Verdicts so far over ``commits`` (see the module docstring for the layout)."""

    commits: tuple[str, ...]
    verdicts: Mapping[str, CommitVerdict] = field(default_factory=dict)

    def with_verdict(self, sha: str, verdict: CommitVerdict) -> "SearchState":
        merged = dict(self.verdicts)
        merged[sha] = verdict
        return SearchState(self.commits, merged)

    @property
    def bounds(self) -> tuple[int, int]:
        """(index of the newest commit known good, index of the oldest known bad after it).

        The culprit lies in ``commits[lo + 1 : hi + 1]``. A good verdict newer than
        a bad one is a contradiction (see :attr:`contradictions`); the bad one wins
        for the upper bound and the lower bound stays below it.
        """
        hi = len(self.commits) - 1
        for i, sha in enumerate(self.commits):
            if self.verdicts.get(sha) == CommitVerdict.BAD:
                hi = i
                break
        lo = -1
        for i in range(hi - 1, -1, -1):
            if self.verdicts.get(self.commits[i]) == CommitVerdict.GOOD:
                lo = i
                break
        return lo, hi

    @property
    def candidates(self) -> tuple[str, ...]:
        lo, hi = self.bounds
        return self.commits[lo + 1: hi + 1]

    @property
    def open_commits(self) -> tuple[str, ...]:
        """Commits strictly inside the bracket that have no verdict yet (unsure and skipped are closed)."""
        lo, hi = self.bounds
        return tuple(sha for sha in self.commits[lo + 1: hi] if sha not in self.verdicts)

    @property
    def contradictions(self) -> tuple[str, ...]:
        """Commits called good that sit after the first bad one: some verdict is wrong."""
        _, hi = self.bounds
        return tuple(sha for sha in self.commits[hi + 1:] if self.verdicts.get(sha) == CommitVerdict.GOOD)

    @property
    def adjacent(self) -> bool:
        lo, hi = self.bounds
        return hi - lo == 1


def choose_next(state: SearchState, count: int = 1) -> tuple[str, ...]:
    """The commits to probe next, ``count`` at a time, cutting the bracket (count+1)-fold.

    Unsure and skipped commits are never proposed again; when a split point
    lands on one, the nearest open commit is taken instead, as ``git bisect
    skip`` does.

    Returns:
        Up to ``count`` distinct shas in commit order; empty when nothing is open.
    """
    pending = list(state.open_commits)
    if not pending:
        return ()
    count = max(1, min(count, len(pending)))
    lo, hi = state.bounds
    width = hi - lo
    index_of = {sha: i for i, sha in enumerate(state.commits)}
    chosen: list[str] = []
    for k in range(1, count + 1):
        target = lo + width * k / (count + 1)
        remaining = [sha for sha in pending if sha not in chosen]
        best = min(remaining, key=lambda sha: (abs(index_of[sha] - target), index_of[sha]))
        chosen.append(best)
    return tuple(sorted(chosen, key=index_of.__getitem__))


def steps_left(state: SearchState, jobs: int = 1) -> int:
    """Rounds of probes still expected, for the progress line's ETA (the culprit check counts one)."""
    open_commits = len(state.open_commits)
    if open_commits <= 0:
        return 1 if state.adjacent else 0
    return 1 + max(1, math.ceil(math.log(open_commits + 1) / math.log(jobs + 1)))


def best_guess(state: SearchState, leans: Mapping[str, float]) -> str:
    """The likeliest first bad commit when the search could not pin it.

    ``leans`` holds, for unsure commits, where their runs sat on their bracket
    (position: < 0.5 leans good, > 0.5 bad). The guess is the commit after the
    newest candidate that leans good, before the first that leans bad; with no
    leaning commits, the first bad bound itself.
    """
    lo, hi = state.bounds
    inside = state.commits[lo + 1: hi]
    if not any(sha in leans for sha in inside):
        return state.commits[hi]
    guess_index = hi
    last_good = lo
    for i, sha in enumerate(inside, start=lo + 1):
        lean = leans.get(sha)
        if lean is None:
            continue
        if lean > 0.5:
            guess_index = last_good + 1
            break
        last_good = i
    else:
        guess_index = last_good + 1
    return state.commits[min(guess_index, hi)]


# --------------------------------------------------------------------------- the conclusion


@dataclass(frozen=True)
class Conclusion:
    """What the verdicts add up to: ``status`` decides the exit code (see :class:`BisectResult`)."""

    status: str  # "culprit" | "undecided" | "all-skipped"
    culprit: str | None
    candidates: tuple[str, ...]
    best_guess: str | None
    message: str


def conclude(state: SearchState, culprit_check: PairCheck | None, skipped: Sequence[str] = (),
             leans: Mapping[str, float] | None = None, stopped: str = "") -> Conclusion:
    """Name a culprit only when everything that must hold for it does.

    Exit 0 needs: the bracket closed on two adjacent commits (the parent decided
    good, or GOOD itself, the culprit decided bad, or BAD itself, each by its
    own paired decision); no good verdict after the culprit; and the culprit's
    own step, measured paired against its parent, significant and wholly past
    ``--min-effect`` (``culprit_check.status == "real"``). Anything less is
    "undecided" (exit 3) with the candidate range and the best guess; a range
    whose every inner commit could not be built or measured is "all-skipped"
    (exit 2, as a bench that cannot run is an input problem).

    Args:
        state: the verdicts.
        culprit_check: the paired parent -> culprit step, when it was measured.
        skipped: commits that could not be built or measured (their verdict is SKIP).
        leans: positions of unsure commits, for the best guess.
        stopped: why the search stopped early (the total budget), if it did.
    """
    lo, hi = state.bounds
    candidates = state.candidates
    guess = best_guess(state, leans or {})
    contradictions = state.contradictions
    range_text = (f"{candidates[0][:12]}..{candidates[-1][:12]} ({len(candidates)} commits)"
                  if len(candidates) > 1 else candidates[0][:12])
    if contradictions:
        return Conclusion("undecided", None, candidates, guess,
                          f"contradictory verdicts: {', '.join(c[:12] for c in contradictions)} judged good after "
                          f"{state.commits[hi][:12]} judged bad; the slowdown is likely in {range_text}")
    if not state.adjacent:
        inner = state.commits[lo + 1: hi]
        if inner and all(sha in skipped for sha in inner):
            return Conclusion("all-skipped", None, candidates, guess,
                              f"every commit between the last good and the first bad one was skipped; the slowdown "
                              f"is in one of {len(candidates)} commits: {' '.join(c[:12] for c in candidates)}")
        why = stopped or "the commits left in it could not be told apart within their budget"
        return Conclusion("undecided", None, candidates, guess, f"the slowdown is in {range_text}: {why}")
    culprit = state.commits[hi]
    if culprit_check is None:
        return Conclusion("undecided", None, candidates, culprit,
                          f"the first bad commit is likely {culprit[:12]}, but its own step was not measured"
                          f"{': ' + stopped if stopped else ''}")
    if culprit_check.status != "real":
        return Conclusion("undecided", None, candidates, culprit,
                          f"the first bad commit is likely {culprit[:12]}, but its own step is not confirmed: "
                          f"{culprit_check.message}")
    return Conclusion("culprit", culprit, candidates, culprit, "")


@dataclass(frozen=True)
class BisectResult:
    """Everything a renderer needs; produced by the search, rendered by :mod:`report`."""

    status: str  # "culprit" | "undecided" | "all-skipped" | "no-difference" | "swapped"
    message: str
    good: StepRecord
    bad: StepRecord
    steps: tuple[StepRecord, ...] = ()
    commits_total: int = 0
    culprit: Mapping[str, str] | None = None  # sha, subject, author, date
    culprit_diffstat: str = ""
    candidates: tuple[str, ...] = ()
    best_guess: str | None = None
    baseline: PairCheck | None = None  # GOOD -> BAD, paired
    culprit_check: PairCheck | None = None  # parent -> the named (or likeliest) commit, paired
    advice: tuple[str, ...] = ()  # what would decide an undecided bisect
    metric: str = ""
    higher_is_better: bool = False
    min_effect_pct: float = 0.0
    bench_runs: int = 0  # bench invocations this session (cached rounds excluded)
    seconds: float = 0.0
    bisect_log: str = ""
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def step_interval(self) -> Interval | None:
        return self.baseline.interval if self.baseline else None

    @property
    def culprit_interval(self) -> Interval | None:
        return self.culprit_check.interval if self.culprit_check else None

    @property
    def exit_code(self) -> int:
        # Every candidate skipped is an input the bisect could not use; anything else
        # short of a confirmed culprit is undecided (exit 3), never a guess with exit 0.
        return {"culprit": EXIT_OK, "all-skipped": EXIT_USAGE}.get(self.status, EXIT_INCONCLUSIVE)
