"""When a ``perfci confirm`` session looks at its rounds, and when it stops: on an answer, or out of time.

Pure, like :mod:`perfci.confirm.analysis`. A fixed number of rounds is the wrong
budget: a 0.1 s CPU bench with a real +3% step ended ``inconclusive`` at the old
20 rounds (10 s) and was ``regressed`` at round 43, while on a GPU 20 rounds of
a whole suite can take half an hour. So a session stops when every case is
decided, or when its time (``perfci confirm --budget``) is spent, or earlier
when the time left cannot decide any case still open.

Looking often inflates error rates, so decisions come only at looks, each with
its own share of alpha and an interval to match (``1 - (1 - confidence) *
share``): however the session stops, the chance that any look's interval
missed stays <= 1 - confidence. The looks grow geometrically (rounds 5, 8, 12,
18, 27, 41, 62, ...: ``growth`` 1.5). With an end (``max_rounds``: a cap, or
the rounds the budget allows, planned at the first look by
:meth:`StoppingRule.planned` from the cost of the rounds so far) the schedule
stops there and look ``k`` of ``K`` spends ``(1/k) / (1 + 1/2 + ... + 1/K)`` of
alpha: the early looks, where an easy case is decided, get more, and the late
ones, where a case near the floor is decided or the budget ends, are not
starved (a 0.1 s CPU bench plans 14 looks: its 13th at 1/42 of alpha, where
``1/(k(k+1))`` would give it 1/182 and need ~1.8 times the rounds for the same
interval). With no end, look ``k`` spends ``1 / (k (k + 1))``, shares that sum
to 1 however many looks come. A budget that runs out between looks forces an
analysis that spends the next look's share (the looks after it never happen).
The rule before time budgets, four even looks from 5 to 20 at ``alpha / 4``
each (Bonferroni), is :meth:`StoppingRule.fixed`. The shares and the looks'
schedule are :mod:`perfci.stats.spending`'s, which bisect's decisions use too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Mapping

import numpy as np

from perfci.confirm.analysis import (MIN_ROUNDS, CaseConfirmation, Confirmation, RoundSeq, analyze, decided,
                                     verdict_counts, with_broken)
from perfci.confirm.flips import with_config_flips
from perfci.stats import geometric_looks, open_share, planned_share
from perfci.verdict import Verdict


@dataclass(frozen=True)
class StoppingRule:
    """Where the looks are and what each spends.

    ``looks`` given: exactly those, ``alpha / len(looks)`` each (``min_rounds``
    and ``max_rounds`` follow from them). Else looks from ``min_rounds`` on,
    each ``growth`` times the last, up to ``max_rounds`` (None: no end)."""

    min_rounds: int = 5
    max_rounds: int | None = None
    growth: float = 1.5
    looks: tuple[int, ...] | None = None
    alpha: float = 0.05
    confidence: float = 0.95
    min_effect_pct: float = 1.0
    method: str = "t"

    def __post_init__(self):
        if self.looks is not None:
            looks = tuple(self.looks)
            if not looks or list(looks) != sorted(set(looks)) or looks[0] < MIN_ROUNDS:
                raise ValueError(f"looks must be increasing round counts >= {MIN_ROUNDS}, not {looks}")
            object.__setattr__(self, "looks", looks)
            object.__setattr__(self, "min_rounds", looks[0])
            object.__setattr__(self, "max_rounds", looks[-1])
        if self.min_rounds < MIN_ROUNDS:
            raise ValueError(f"min_rounds must be >= {MIN_ROUNDS}, not {self.min_rounds}")
        if self.max_rounds is not None and self.max_rounds < self.min_rounds:
            raise ValueError(f"max_rounds {self.max_rounds} < min_rounds {self.min_rounds}")
        if not self.growth > 1.0:
            raise ValueError(f"growth must be > 1, not {self.growth}")

    @classmethod
    def fixed(cls, looks: Iterable[int], **kw) -> "StoppingRule":
        """Exactly these looks, alpha split evenly among them (Bonferroni)."""
        return cls(looks=tuple(looks), **kw)

    def planned(self, rounds: int, rounds_left: int) -> "StoppingRule":
        """This rule ending where the budget does: ``rounds`` done, about ``rounds_left`` more
        affordable (at the cost per round so far). Called once, at the first look, so the
        shares are fixed before any is spent; a cap already set stays if it is earlier."""
        if self.looks is not None:
            return self
        end = max(self.min_rounds, rounds + rounds_left)
        return replace(self, max_rounds=end if self.max_rounds is None else min(self.max_rounds, end))

    @classmethod
    def spaced(cls, min_rounds: int = 5, max_rounds: int = 20, n_looks: int = 4, **kw) -> "StoppingRule":
        """``n_looks`` fixed looks evenly spaced from ``min_rounds`` to ``max_rounds``."""
        n = max(1, min(n_looks, max_rounds - min_rounds + 1))
        return cls.fixed(sorted({int(round(x)) for x in np.linspace(min_rounds, max_rounds, n)}), **kw)

    # ----------------------------------------------------------------------- the schedule

    def _schedule(self) -> Iterator[int]:
        if self.looks is not None:
            yield from self.looks
            return
        yield from geometric_looks(self.min_rounds, self.growth, self.max_rounds)

    def schedule(self, upto: int) -> tuple[int, ...]:
        """The looks at or before round ``upto``, and the first one after it (if any)."""
        out = []
        for n in self._schedule():
            out.append(n)
            if n > upto:
                break
        return tuple(out)

    @property
    def n_looks(self) -> int | None:
        """How many looks a session can have; None: no end."""
        return None if self.max_rounds is None else len(self.schedule(self.max_rounds))

    def index(self, rounds: int) -> int:
        """1-based: the look that an analysis after ``rounds`` rounds is (the next one when between looks)."""
        looks = self.schedule(rounds)
        return next((i for i, n in enumerate(looks, 1) if n >= rounds), len(looks))

    def is_look(self, rounds: int) -> bool:
        return rounds in self.schedule(rounds)

    def next_look(self, rounds: int) -> int:
        looks = self.schedule(rounds)
        return next((n for n in looks if n > rounds), looks[-1])

    def share(self, k: int) -> float:
        """The share of alpha that look ``k`` spends."""
        if self.looks is not None:
            return 1.0 / len(self.looks)
        total = self.n_looks
        return open_share(k) if total is None else planned_share(k, total)

    def look_alpha(self, rounds: int) -> float:
        return self.alpha * self.share(self.index(rounds))

    def look_confidence(self, rounds: int) -> float:
        return 1.0 - (1.0 - self.confidence) * self.share(self.index(rounds))


@dataclass(frozen=True)
class Look:
    rounds: int  # rounds completed (the longest case)
    at_look: bool  # a decision point: one of the rule's looks, the last round, or forced
    stop: bool
    reason: str
    confirmation: Confirmation | None  # the analysis at the look's levels; None between looks


def settled(case: CaseConfirmation) -> bool:
    """A case needs no more rounds: decided, or a config flip (its sides launched different configs of one
    source; each side keeps its choice for the session, so more rounds would only measure the two choices)."""
    return decided(case) or case.verdict in (Verdict.CONFIG_FLIP, Verdict.BROKEN)


def look(cases: Mapping[Iterable[str], RoundSeq], rule: StoppingRule, *, higher_is_better: bool = False,
         focus: Iterable[Iterable[str]] | None = None, force: bool = False, rounds_left: int | None = None,
         earlier: Confirmation | None = None, first_rows: Mapping | None = None,
         broken: Mapping[tuple, str] | None = None, **analyze_kw) -> Look:
    """After a round: stop or go on, and at a look the analysis to report.

    ``force``: analyse and stop now (the budget ran out). ``rounds_left``: how
    many more rounds the budget allows (None: no budget); at a look where no
    undecided case could be decided by then, the session stops.
    ``earlier``: the previous look's analysis; a case it decided keeps that
    decision here (:func:`keep_decided`), so a session may stop measuring it
    (:func:`pending`). ``first_rows``: side -> {case: ResultRow} of each side's first
    run (``--suite``); a case whose sides launched different configs of one source
    is ``config-flip`` at the look (:func:`perfci.confirm.flips.with_config_flips`)
    and settled: confirm's budget is not spent on an autotuner's race. ``broken``: case -> why, the
    cases measured on one side and never on the other (:func:`perfci.confirm.analysis.with_broken`),
    settled as ``broken``. Each look's interval has its own share of alpha whichever
    cases are still open, so the chance that any decision was taken on an
    interval that missed stays within alpha: the same bound as the session's.
    ``analyze_kw`` go to :func:`perfci.confirm.analysis.analyze` (``reference``, ``min_cases``)."""
    n = max((len(v) for v in cases.values()), default=0)
    capped = rule.max_rounds is not None and n >= rule.max_rounds
    if not force and not capped and not rule.is_look(n):
        why = f"{n} < {rule.min_rounds} rounds" if n < rule.min_rounds else f"next look at {rule.next_look(n)}"
        return Look(n, False, False, why, None)
    conf = analyze(cases, rule.min_effect_pct, rule.look_alpha(n), rule.look_confidence(n),
                   higher_is_better=higher_is_better, method=rule.method, focus=focus, **analyze_kw)
    if first_rows:
        conf = with_config_flips(conf, first_rows)
    conf = keep_decided(with_broken(conf, broken or {}), earlier)
    undecided = [c for c in conf.cases if not settled(c)]
    if force:
        return Look(n, True, True, f"budget spent; {len(undecided)} undecided", conf)
    if capped:
        return Look(n, True, True, f"last look, at {rule.max_rounds} rounds; {len(undecided)} undecided", conf)
    if not undecided:
        return Look(n, True, True, "every case decided", conf)
    if rounds_left is not None:
        end = n + rounds_left if rule.max_rounds is None else min(n + rounds_left, rule.max_rounds)
        if all(out_of_reach(c, rule, end) for c in undecided):
            return Look(n, True, True, f"{len(undecided)} undecided, and the budget's {end - n} more rounds "
                                       f"could not decide them", conf)
    return Look(n, True, False, f"{len(undecided)} undecided; next look at {rule.next_look(n)}", conf)


def keep_decided(conf: Confirmation, earlier: Confirmation | None) -> Confirmation:
    """``conf`` with each case that ``earlier`` (a previous look) decided, as it was decided there."""
    if earlier is None:
        return conf
    kept = {tuple(c.key): c for c in earlier.cases if settled(c)}
    cases = tuple(kept.get(tuple(c.key), c) for c in conf.cases)
    return replace(conf, cases=cases, counts=verdict_counts(cases))


def pending(conf: Confirmation | None) -> frozenset[tuple] | None:
    """The cases a look left unsettled (what the next rounds need to measure); None before the first look."""
    if conf is None:
        return None
    return frozenset(tuple(c.key) for c in conf.cases if not settled(c))


def out_of_reach(case: CaseConfirmation, rule: StoppingRule, end: int) -> bool:
    """No value near the case's estimate could be decided at round ``end``.

    Each interval (the judged one and, for ``unchanged``, the raw one) is narrowed
    as it would be at ``end``: the spread as now, ``1/sqrt(rounds)``, the
    t quantile of that look's level. Values within one standard error of the
    estimate are tried; one that lies within the narrowed half-width ``h`` of
    ±floor stays undecided. So the session stops early only for cases pinned
    near the floor (a true change of about ``min_effect_pct``) when the time
    left is short; a wide interval, or a long budget, keeps it going."""
    if case.ratio is None or case.ci_low is None or case.rounds < 2 or end <= case.rounds:
        return end <= case.rounds
    from scipy import special  # lazy: scipy

    floor = math.log1p(case.min_effect_pct / 100.0)
    now = float(special.stdtrit(case.rounds - 1, 0.5 + case.confidence / 2.0))
    then = float(special.stdtrit(end - 1, 1.0 - (1.0 - rule.look_confidence(end)) / 2.0))

    def narrowed(low: float, high: float) -> float:
        return (math.log(high) - math.log(low)) / 2.0 * math.sqrt(case.rounds / end) * then / now

    est = math.log(case.ratio)
    se = (math.log(case.ci_high) - math.log(case.ci_low)) / 2.0 / now
    lo, hi = est - se, est + se
    h = narrowed(case.ci_low, case.ci_high)
    h_same = max(h, narrowed(case.raw_ci_low, case.raw_ci_high)) if case.raw_ci_low is not None else h
    if hi > floor + h or lo < -floor - h:
        return False  # a value past the floor by more than h: regressed / improved is reachable
    inner = floor - h_same
    return inner <= 0 or hi <= -inner or lo >= inner


def next_round_needed(cases: Mapping[Iterable[str], RoundSeq], rule: StoppingRule, **look_kw) -> bool:
    """True while the session should measure another round (see :func:`look`)."""
    return not look(cases, rule, **look_kw).stop
