"""A probe's decision in ``perfci bisect``: is commit m like its bracket's lo (good) or its hi (bad)?

Pure, like :mod:`perfci.bisect.rules`, whose rounds it reads (``lo m m hi``,
then ``hi m m lo``; see that module for why). Two ways to an answer: a
sequential probability ratio test over the rounds (:func:`decide_probe`), and,
before that test may stop, a round clear enough to answer alone
(:func:`clear_probe`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from perfci.bisect.rules import Round, SequentialRule, logs_by_role, pct
from perfci.stats import Location, robust_spread, trimmed_mean_interval


class ProbeStatus(str, Enum):
    GOOD = "good"
    BAD = "bad"
    UNSURE = "unsure"  # the budget ran out before the evidence reached either bound
    OPEN = "open"


@dataclass(frozen=True)
class ProbeDecision:
    status: ProbeStatus
    evidence: float | None = None  # log likelihood ratio, + for "like hi" (bad)
    interval: Location | None = None  # mean t with a 95% interval, for the report
    position: float | None = None  # where m sits on lo (0) -> hi (1), from the same rounds
    message: str = ""


WINSOR_K = 3.0  # rounds beyond median +- 3 robust sd are pulled in to that edge before the ratio


def probe_evidence(ts: Sequence[float], step: float) -> float:
    """Log likelihood ratio of "mean t = +step" (m like hi) against "mean t = -step" (m like lo).

    Gaussian rounds with their variance unknown and profiled out, the same under
    both: ``(n / 2) ln(sum (t + step)^2 / sum (t - step)^2)``. From five rounds on,
    each t is first winsorized to the median +- 3 robust sd (1.4826 MAD): a round
    that straddles a change of the machine's state, or carries one run 50% off,
    would otherwise swell both sums and hold the ratio near 1 for dozens of
    rounds. On the simulated machine of tests/bisect/simulate.py, when this was
    chosen (500:1 bounds, 600 probes each), it took an 8% probe from 19 rounds
    to 7 and a 3% one from 125 to 17, with no wrong call either way; 2 robust
    sd instead of 3 was faster still but wrong 3-5 times in 1,000 under load.
    """
    n = len(ts)
    if n >= 5:
        centre = sorted(ts)[n // 2] if n % 2 else 0.5 * (sorted(ts)[n // 2 - 1] + sorted(ts)[n // 2])
        spread = robust_spread(ts)
        if spread > 0.0:
            lo, hi = centre - WINSOR_K * spread, centre + WINSOR_K * spread
            ts = [min(max(t, lo), hi) for t in ts]
    plus = sum((t + step) ** 2 for t in ts)
    minus = sum((t - step) ** 2 for t in ts)
    if minus == 0.0:
        return math.inf
    if plus == 0.0:
        return -math.inf
    return 0.5 * n * math.log(plus / minus)


def probe_step(contrasts: Sequence[tuple[float, float]], expected: float, floor: float) -> float:
    """The step the probe's two hypotheses stand apart by (a log): ``expected``, unless the bracket's
    own rounds show it smaller (a 90% upper bound of their lo -> hi step, not below ``floor``).

    Too large a step makes a wrong call likelier (the error is about
    ``alpha ** (true / assumed)``); too small one only costs rounds. The caller
    passes 3/4 of GOOD -> BAD for ``expected``; a bracket inside a history with
    more than one step is smaller than that, and its own rounds say so.
    """
    steps = [d for _, d in contrasts]
    if len(steps) < 3:
        return expected
    upper = trimmed_mean_interval(steps, 0.8).high
    return min(expected, max(floor, upper))


@dataclass(frozen=True)
class ProbeScale:
    """What a probe's rounds are read against, from the GOOD -> BAD rounds (badness logs).

    ``step``: the step the ratio test's two answers stand apart by (:func:`probe_step`);
    ``full``: GOOD -> BAD's own estimate; ``run_sd``: one run's scatter there
    (:func:`run_scatter`), None when unknown.
    """

    step: float
    full: float | None = None
    run_sd: float | None = None


CLEAR_AT = 0.25  # a clear round puts m within this share of the bracket's step of one end


def clear_probe(rounds: Sequence[Round], scale: ProbeScale, rule: SequentialRule,
                higher_is_better: bool = False) -> ProbeDecision | None:
    """A probe decided by its first round(s) alone, when the step dwarfs the scatter; else None.

    The ratio test of :func:`decide_probe` takes at least ``rule.min_rounds``
    rounds, and its evidence grows by at most ``ln((1 + s/a)^2 / (1 - s/a)^2) / 2``
    a round however clean they are (``a`` the assumed step, ``s`` the true one),
    so a +27% step with +-1% runs took four rounds a probe on the H200. Here every
    round so far must be *clear*: the step (GOOD -> BAD) is at least
    ``rule.clear_ratio`` times one run's scatter (the larger of the endpoints'
    and the round's own two m runs'), the round's own lo -> hi step is within
    2/3 and 3/2 of it (a change of machine state inside the round, or a bracket
    that holds part of the step, shows as a round whose step disagrees), and m
    sits within ``CLEAR_AT`` of the step of one end, the same end in each round.
    For m truly at one end to read within ``CLEAR_AT`` of the other, its ``t``
    (standard deviation two runs') would have to be off by ``1.5`` steps: at the
    ratio 10, 7.5 standard deviations. The culprit check still holds the named
    step to its own interval.
    """
    if rule.clear_ratio <= 0.0 or scale.run_sd is None or scale.full is None or scale.full <= 0.0 or not rounds:
        return None
    sides, positions = set(), []
    for rnd in rounds:
        logs = logs_by_role(rnd, higher_is_better)
        if logs is None or len(logs.get("m", ())) != 2 or len(logs.get("lo", ())) != 1 or len(logs.get("hi", ())) != 1:
            return None
        (m1, m2), lo, hi = logs["m"], logs["lo"][0], logs["hi"][0]
        own = hi - lo
        run_sd = max(scale.run_sd, abs(m1 - m2) / math.sqrt(2.0))
        if not (2.0 / 3.0 <= own / scale.full <= 1.5) or scale.full < rule.clear_ratio * run_sd:
            return None
        position = 0.5 * (1.0 + (m1 + m2 - lo - hi) / own)
        if position <= CLEAR_AT:
            sides.add(ProbeStatus.GOOD)
        elif position >= 1.0 - CLEAR_AT:
            sides.add(ProbeStatus.BAD)
        else:
            return None
        positions.append(position)
    if len(sides) != 1:
        return None
    position = sum(positions) / len(positions)
    text = (f"{len(rounds)} clear round{'s' if len(rounds) > 1 else ''} at {position:.2f} of the bracket's step "
            f"(step {pct(scale.full):.1f}%, >= {rule.clear_ratio:g}x a run's scatter of "
            f"{pct(scale.run_sd):.2f}%)")
    return ProbeDecision(sides.pop(), None, None, position, text)


def decide_probe(contrasts: Sequence[tuple[float, float]], rule: SequentialRule, expected_step: float,
                 floor: float, final: bool = False) -> ProbeDecision:
    """Is m like lo (good) or like hi (bad)? ``contrasts`` are the (t, step) of its rounds.

    A sequential probability ratio test (Wald) between the two answers a
    bisect allows: under one step, m sits at lo's level (mean t = -step) or at
    hi's (+step). It stops once the likelihood ratio passes ``1 / probe_alpha``
    either way (after ``rule.min_rounds``), and the chance of the wrong answer
    stays about ``probe_alpha`` whenever it stops. Asking only "which end?", not
    "is it different from the middle?", is what makes it cheap: on real probe
    rounds from a small CPU machine under other jobs' load (a run's time scattered
    by +-12%), an 8% step took 57 rounds a probe this way and 172 for the
    sequential interval of the mean t to leave 0, at about the same error
    (``benchmarks/bisect_drift.py --probe-rules``, docs/bisect.md). A commit in
    the middle (a partial step) gets one answer or the other; the culprit check
    at the end holds the named step to its own interval.
    """
    ts = [t for t, _ in contrasts]
    position = _position(contrasts)
    interval = trimmed_mean_interval(ts, 0.95) if len(ts) >= 2 else None
    if len(ts) < rule.min_rounds:
        status = ProbeStatus.UNSURE if final else ProbeStatus.OPEN
        return ProbeDecision(status, None, interval, position, "too few rounds" if final else "")
    step = probe_step(contrasts, expected_step, floor)
    evidence = probe_evidence(ts, step)
    bound = math.log(1.0 / rule.probe_alpha)
    where = "" if position is None else f" at {position:.2f} of the bracket's step"
    text = f"{len(ts)} rounds{where}, likelihood ratio e^{evidence:+.1f} for bad (bounds e^+-{bound:.1f}, " \
           f"step {pct(step):.2f}%)"
    if evidence >= bound:
        return ProbeDecision(ProbeStatus.BAD, evidence, interval, position, text)
    if evidence <= -bound:
        return ProbeDecision(ProbeStatus.GOOD, evidence, interval, position, text)
    if final:
        return ProbeDecision(ProbeStatus.UNSURE, evidence, interval, position, f"{text}: undecided within the budget")
    return ProbeDecision(ProbeStatus.OPEN, evidence, interval, position, text)


def _position(contrasts: Sequence[tuple[float, float]]) -> float | None:
    """0.5 (1 + mean t / mean step): 0 at lo's level, 1 at hi's."""
    if not contrasts:
        return None
    step = sum(s for _, s in contrasts) / len(contrasts)
    if step <= 0.0:
        return None
    return 0.5 * (1.0 + sum(t for t, _ in contrasts) / len(contrasts) / step)
