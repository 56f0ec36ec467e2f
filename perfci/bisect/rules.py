"""The sequential decisions of ``perfci bisect``: rounds of paired runs in, a verdict or "not yet" out.

Pure: plain data in, frozen dataclasses out; :mod:`perfci.bisect.search` measures
the rounds. Why paired: on a machine whose speed jumps by +-20% between states
that last seconds, samples of two commits taken at different moments compare
the moments, not the commits. Every decision here is taken on *rounds*, a few
runs back to back, and on a contrast within each round, so the state that a
round ran in cancels:

* **A pair** (GOOD against BAD, a parent against its child): ``a b b a``, then
  ``b a a b``; ``d = (log b1 + log b2 - log a1 - log a2) / 2``. A drift linear
  across the round cancels exactly, and the alternation balances what is left.
* **A probe** ``m`` against its bracket ``lo``/``hi``: ``lo m m hi``, then
  ``hi m m lo``; ``t = log m1 + log m2 - log lo - log hi``. Like ``lo``, t is
  about ``-(log hi - log lo)``; like ``hi``, about ``+``. A linear drift cancels
  exactly here too, and each side takes two runs of the four, so a run far off
  moves t as much whichever it hits: t stays symmetric, which the interval assumes.
  Per run it is also a little better than ``lo m hi`` (variance 4 s^2 over 4 runs
  against 6 s^2 over 3).

Logs are *badness* logs (``-log`` for a higher-is-better metric), so + is worse.

Each decision is sequential. A pair (GOOD/BAD, the culprit check) looks at its
rounds at a few pre-set round counts (``min_rounds``, then about 25% more each
time) and stops once the interval of the mean contrast answers. Look ``k``
gets ``alpha / (k (k + 1))`` of the error, which sums to ``alpha`` over any
number of looks, so a decision may stop at any look, or at the end of its time
budget, and its chance of having looked wrong once stays within ``alpha``. The
interval is the 20% trimmed mean's (:func:`perfci.stats.trimmed_mean_interval`):
rounds that straddle a change of state, or carry one run far off, are cut from
it. A probe asks only which end of its bracket m is at, with a sequential
probability ratio test that may look after every round (:func:`decide_probe`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from itertools import takewhile
from typing import Sequence

from perfci.stats import Location, geometric_looks, open_share, trimmed_mean_interval
from perfci.verdict import confidence_text

# Roles in a round's runs, in the order they run; rounds alternate between the two orders.
PAIR_ORDERS = (("a", "b", "b", "a"), ("b", "a", "a", "b"))
PROBE_ORDERS = (("lo", "m", "m", "hi"), ("hi", "m", "m", "lo"))

Round = tuple[tuple[str, float | None], ...]  # (role, raw metric or None for a failed run), in run order


def pair_order(index: int) -> tuple[str, ...]:
    return PAIR_ORDERS[index % 2]


def probe_order(index: int) -> tuple[str, ...]:
    return PROBE_ORDERS[index % 2]


def badness(value: float | None, higher_is_better: bool) -> float | None:
    """log of the metric, negated for a throughput; None for a failed run or a value a log cannot take."""
    if value is None or not math.isfinite(value) or value <= 0.0:
        return None
    return -math.log(value) if higher_is_better else math.log(value)


def logs_by_role(rnd: Round, higher_is_better: bool) -> dict[str, list[float]] | None:
    out: dict[str, list[float]] = {}
    for role, value in rnd:
        b = badness(value, higher_is_better)
        if b is None:
            return None
        out.setdefault(role, []).append(b)
    return out


def pair_contrast(rnd: Round, higher_is_better: bool = False) -> float | None:
    """``mean log b - mean log a`` in one round (badness: + means b is worse); None if a run failed."""
    logs = logs_by_role(rnd, higher_is_better)
    if logs is None or not logs.get("a") or not logs.get("b"):
        return None
    return sum(logs["b"]) / len(logs["b"]) - sum(logs["a"]) / len(logs["a"])


def probe_contrast(rnd: Round, higher_is_better: bool = False) -> tuple[float, float] | None:
    """(t, the round's own lo -> hi step) of one probe round; None if a run failed.

    ``t = 2 (mean log m - mean(log lo, log hi))``: about ``-step`` when m is like
    lo, ``+step`` when it is like hi (see the module docstring).
    """
    logs = logs_by_role(rnd, higher_is_better)
    if logs is None or not all(logs.get(r) for r in ("lo", "m", "hi")):
        return None
    m = sum(logs["m"]) / len(logs["m"])
    lo = sum(logs["lo"]) / len(logs["lo"])
    hi = sum(logs["hi"]) / len(logs["hi"])
    return 2.0 * m - lo - hi, hi - lo


def failures(rounds: Sequence[Round], role: str) -> tuple[int, int]:
    """(runs that worked, runs that failed) of ``role`` over ``rounds``."""
    ok = bad = 0
    for rnd in rounds:
        for r, value in rnd:
            if r == role:
                if value is None or not math.isfinite(value) or value <= 0.0:
                    bad += 1
                else:
                    ok += 1
    return ok, bad


def unmeasurable(ok: int, bad: int) -> bool:
    """Too many failed runs to go on: two or more, and more than the runs that worked."""
    return bad >= 2 and bad > ok


# --------------------------------------------------------------------------- the sequential rule


@dataclass(frozen=True)
class SequentialRule:
    """When a decision looks at its rounds, and at what level.

    Looks come at ``min_rounds`` and then whenever the rounds have grown by
    ``growth`` (at least one more); look k spends ``alpha / (k (k + 1))``
    (:mod:`perfci.stats.spending`, which confirm's looks use too). A
    decision stopped by its budget between looks takes the next look's level,
    which no earlier look spent.
    """

    alpha: float = 0.01
    min_rounds: int = 3
    growth: float = 1.25
    probe_alpha: float = 0.001  # a probe's chance of the wrong answer (its bounds are e^+-ln(1/probe_alpha))
    early_share: float = 0.2  # of alpha, for the look at two rounds (:func:`early_look`); 0: no such look
    clear_ratio: float = 10.0  # a probe's step past this many runs' scatter is decided by a clear round; 0: never

    def __post_init__(self):
        if not 0.0 < self.alpha < 1.0 or not 0.0 < self.probe_alpha < 0.5:
            raise ValueError("alpha must be in (0, 1) and probe_alpha in (0, 0.5)")
        if self.min_rounds < 2:
            raise ValueError("a decision needs at least two rounds for an interval")

    def look_index(self, n: int) -> int:
        """How many looks come at or before ``n`` rounds (0 before the first)."""
        return sum(1 for _ in takewhile(lambda at: at <= n, geometric_looks(self.min_rounds, self.growth)))

    def is_look(self, n: int) -> bool:
        return n >= self.min_rounds and self.look_index(n) != self.look_index(n - 1)

    def level(self, k: int) -> float:
        """The two-sided error spent at look ``k`` (1-based); the early look's share comes off the top."""
        return open_share(k, of=self.alpha * (1.0 - self.early_share))

    @property
    def early_level(self) -> float:
        return self.alpha * self.early_share


@dataclass(frozen=True)
class Look:
    """A decision's interval at one look, in badness logs."""

    n: int  # rounds used (failed rounds left out)
    k: int  # look index (1-based)
    level: float  # the two-sided error this look spends
    location: Location

    @property
    def estimate(self) -> float:
        return self.location.estimate

    @property
    def low(self) -> float:
        return self.location.low

    @property
    def high(self) -> float:
        return self.location.high


def look(contrasts: Sequence[float], rule: SequentialRule, force: bool = False, since: int | None = None) -> Look | None:
    """The interval at this point, if it is a look (or ``force``: the budget is spent); else None.

    ``since`` is the count at the previous call (default: one round ago); rounds
    measured several at a time (one per ``--jobs`` slot) may pass a look point
    between two calls, and the look is then taken at once, with its own level.
    Always None below ``rule.min_rounds`` contrasts: a decision takes at least
    that many rounds, whatever its budget.
    """
    n = len(contrasts)
    if n < rule.min_rounds or n < 2:
        return None
    before = n - 1 if since is None else since
    if rule.look_index(n) > rule.look_index(before):
        k = rule.look_index(n)
    elif force:
        k = rule.look_index(n) + 1
    else:
        return None
    level = rule.level(k)
    return Look(n, k, level, trimmed_mean_interval(contrasts, 1.0 - level))


def early_look(rounds: Sequence[Round], rule: SequentialRule, higher_is_better: bool = False) -> Look | None:
    """A pair's look at its first two rounds (one ``a b b a``, one ``b a a b``): decisions sized by the evidence.

    Two rounds give the interval of :func:`look` one degree of freedom, so a step
    many times larger than the rounds' scatter (+20% with +-1% rounds) still
    waited for a third round, and a fourth look. But each round holds two runs of
    each side: their differences measure a run's own scatter (two degrees of
    freedom a round, four in all). The variance of a round's ``d`` is taken as
    the larger of that within-round estimate and the two rounds' own
    disagreement (``(d1 - d2)^2 / 2``), so a pattern the within-round runs hide
    (the middle runs of both rounds in another machine state) shows up as the
    two orders disagreeing; the interval is Student's with four degrees of
    freedom at ``rule.early_level``, which the later looks do not spend
    (:meth:`SequentialRule.level`). None when it is not two rounds of one run
    pair each, a run failed, or ``rule.early_share`` is 0.
    """
    from scipy import special  # lazy: scipy

    if rule.early_share <= 0.0 or len(rounds) != 2:
        return None
    parts = [_pair_parts(rnd, higher_is_better) for rnd in rounds]
    if any(p is None for p in parts):
        return None
    ds = [d for d, _ in parts]
    within = [w for _, ws in parts for w in ws]
    variance = max(sum(within) / len(within), (ds[0] - ds[1]) ** 2 / 2.0)
    se = math.sqrt(variance / 2.0)
    half = float(special.stdtrit(len(within), 1.0 - rule.early_level / 2.0)) * se  # a degree of freedom a pair of runs
    estimate = (ds[0] + ds[1]) / 2.0
    return Look(2, 0, rule.early_level, Location(estimate, estimate - half, estimate + half, 2, se))


def _pair_parts(rnd: Round, higher_is_better: bool) -> tuple[float, tuple[float, float]] | None:
    """A pair round's ``d`` and its two within-round variance estimates of one run (None unless 2 a + 2 b)."""
    logs = logs_by_role(rnd, higher_is_better)
    if logs is None or len(logs.get("a", ())) != 2 or len(logs.get("b", ())) != 2:
        return None
    (a1, a2), (b1, b2) = logs["a"], logs["b"]
    return (b1 + b2 - a1 - a2) / 2.0, ((a1 - a2) ** 2 / 2.0, (b1 - b2) ** 2 / 2.0)


def run_scatter(rounds: Sequence[Round], higher_is_better: bool = False) -> float | None:
    """One run's standard deviation (a log) from a pair's rounds; None under one usable round.

    As :func:`early_look` takes it: the larger of the within-round estimate (the
    two runs of each side in a round) and the rounds' own disagreement (a round's
    ``d`` has one run's variance), so a change of machine state between rounds,
    which the within-round runs hide, still counts.
    """
    parts = [p for p in (_pair_parts(rnd, higher_is_better) for rnd in rounds) if p is not None]
    if not parts:
        return None
    within = [w for _, ws in parts for w in ws]
    variance = sum(within) / len(within)
    ds = [d for d, _ in parts]
    if len(ds) >= 2:
        mean = sum(ds) / len(ds)
        variance = max(variance, sum((d - mean) ** 2 for d in ds) / (len(ds) - 1))
    return math.sqrt(variance)


def pct(log_value: float) -> float:
    """A badness log as a percent change (+ = worse)."""
    return (math.exp(log_value) - 1.0) * 100.0


def log_of_pct(percent: float) -> float:
    return math.log1p(percent / 100.0)


# --------------------------------------------------------------------------- the three decisions


class StepStatus(str, Enum):
    REAL = "real"  # significant and past the floor: bisect (for the endpoints) / name it (for the culprit)
    BELOW_FLOOR = "below-floor"  # resolved: no step past --min-effect
    SWAPPED = "swapped"  # the later commit is faster, past the floor
    UNRESOLVED = "unresolved"  # the budget ran out first
    OPEN = "open"  # measure more


@dataclass(frozen=True)
class StepDecision:
    status: StepStatus
    look: Look | None
    message: str = ""


def _interval_text(lk: Look) -> str:
    return (f"{pct(lk.estimate):+.2f}% [{pct(lk.low):+.2f}%, {pct(lk.high):+.2f}%] "
            f"({confidence_text(1 - lk.level)} interval, {lk.n} rounds)")


def decide_endpoints(lk: Look | None, min_effect_pct: float, final: bool = False) -> StepDecision:
    """GOOD -> BAD: a slowdown worth bisecting? ``lk`` is a look at the paired ``d`` of GOOD/BAD rounds.

    Real once the interval excludes 0 and its estimate is past the floor; no
    slowdown once the interval lies wholly below the floor (swapped when it lies
    below 0 with the estimate past minus the floor). The stricter test, the
    whole interval past the floor, is the culprit check's (:func:`decide_culprit`):
    here it would only cost rounds (the margin is the step, not the step less
    the floor: a 3% step over a 2% floor resolves ~9 times sooner), since a
    bisect of a step that is real but small ends undecided at its culprit check
    anyway. At the end of the budget (``final``) whatever is not real is "no
    slowdown" or "unresolved".
    """
    if lk is None:
        return StepDecision(StepStatus.UNRESOLVED if final else StepStatus.OPEN, None,
                            "too few rounds for an interval" if final else "")
    floor = log_of_pct(min_effect_pct)
    text = f"GOOD -> BAD {_interval_text(lk)}"
    if lk.low > 0.0 and lk.estimate > floor:
        return StepDecision(StepStatus.REAL, lk, text)
    if lk.high < 0.0 and lk.estimate < -floor:
        return StepDecision(StepStatus.SWAPPED, lk, f"{text}: BAD is faster than GOOD, the endpoints look swapped")
    # A speedup past the floor, not yet significant, measures on (within the budget) to say
    # "swapped" rather than only "no slowdown": both are exit 3, the first tells the user why.
    if lk.high < floor and (lk.estimate >= -floor or final):
        return StepDecision(StepStatus.BELOW_FLOOR, lk,
                            f"{text}: no slowdown past --min-effect {min_effect_pct:g}%")
    if not final:
        return StepDecision(StepStatus.OPEN, lk, text)
    if lk.low > 0.0:
        return StepDecision(StepStatus.BELOW_FLOOR, lk, f"{text}: real, but not past --min-effect "
                                                        f"{min_effect_pct:g}% within the budget")
    return StepDecision(StepStatus.UNRESOLVED, lk, f"{text}: no significant difference within the budget")


def decide_culprit(lk: Look | None, min_effect_pct: float, final: bool = False) -> StepDecision:
    """A parent -> culprit step: named only when the whole interval is past the floor.

    ``lk`` looks at the paired ``d`` of (parent, culprit) rounds. BELOW_FLOOR
    once the interval lies wholly below the floor (the step is not here);
    UNRESOLVED at the end of the budget otherwise.
    """
    if lk is None:
        return StepDecision(StepStatus.UNRESOLVED if final else StepStatus.OPEN, None,
                            "too few rounds for an interval" if final else "")
    floor = log_of_pct(min_effect_pct)
    text = f"step {_interval_text(lk)}"
    if lk.low > floor:
        return StepDecision(StepStatus.REAL, lk, text)
    if lk.high < floor:
        return StepDecision(StepStatus.BELOW_FLOOR, lk, f"{text}: not past --min-effect {min_effect_pct:g}%")
    if not final:
        return StepDecision(StepStatus.OPEN, lk, text)
    return StepDecision(StepStatus.UNRESOLVED, lk, f"{text}: not wholly past --min-effect {min_effect_pct:g}% "
                                                   f"within the budget")


def rounds_needed(contrasts: Sequence[float], margin: float, rule: SequentialRule, limit: int = 100_000) -> int | None:
    """About how many rounds would make the interval's half-width smaller than ``margin`` (a log).

    From the spread of the rounds so far; None when there is no spread to go
    on (under two rounds) or no margin (the effect sits on the boundary).
    """
    if len(contrasts) < 2 or margin <= 0.0:
        return None
    se = trimmed_mean_interval(contrasts, 0.5).spread
    if se == 0.0:
        return len(contrasts)
    spread = se * math.sqrt(len(contrasts))
    from scipy import special  # lazy: scipy

    for n in takewhile(lambda at: at < limit, geometric_looks(rule.min_rounds, rule.growth)):
        k = rule.look_index(n)
        g = math.floor(0.2 * n)
        df = max(1, n - 2 * g - 1)
        half = float(special.stdtrit(df, 1.0 - rule.level(max(k, 1)) / 2.0)) * spread / math.sqrt(n)
        if half < margin:
            return n
    return None
