"""The decisions of ``perfci bisect``, with no git, files, printing or processes.

Everything here takes and returns plain values, so the tests can drive a whole
search by hand. The IO edge (:mod:`perfci.bisect.session`) measures commits and
feeds the numbers in; this module says what they mean and what to measure next.

Conventions:
  * ``commits`` is the ordered list of candidates, oldest first, *excluding* GOOD
    and *including* BAD as its last element. Index -1 stands for GOOD.
  * Metrics are oriented so that lower is better; callers negate
    higher-is-better metrics once at the edge (see :func:`oriented`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from statistics import median
from typing import Mapping, Sequence

from perfci.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE
from perfci.stats import hodges_lehmann, mann_whitney


class Verdict(str, Enum):
    GOOD = "good"
    BAD = "bad"
    UNSURE = "unsure"  # measured, but between the bands: take more samples
    SKIP = "skip"  # could not be built or measured, or stayed unsure


@dataclass(frozen=True)
class Samples:
    """What one commit produced: the metric of each run that worked, and how many failed."""

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
class Classification:
    """One commit's verdict against the GOOD and BAD samples.

    ``position`` is where the commit's median sits on the GOOD (0) -> BAD (1) gap;
    ``p_value`` is the one-sided Mann-Whitney p that backs the verdict (the test
    against the *opposite* endpoint), so ``1 - p_value`` is the verdict's confidence.
    """

    verdict: Verdict
    position: float | None = None
    p_value: float | None = None
    reason: str = ""
    # The commit is like neither endpoint: significantly (p < alpha) and by more than
    # --min-effect away from the one its median is nearer to. See :func:`classify`.
    doubts_endpoints: bool = False


@dataclass(frozen=True)
class BaselineCheck:
    """Is GOOD -> BAD a real slowdown worth bisecting?"""

    real: bool
    swapped: bool  # GOOD is significantly *worse* than BAD
    p_value: float
    effect_pct: float  # (median BAD - median GOOD) / |median GOOD|, in oriented units
    message: str
    # Not decided yet: measure each endpoint this many times (cached runs count), then
    # check again. 0 once the answer stands. See :func:`check_baselines`.
    more: int = 0


@dataclass(frozen=True)
class Interval:
    """A shift in percent of the earlier side's median, with its 95% interval."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class SearchState:
    """Verdicts so far over ``commits`` (see the module docstring for the layout)."""

    commits: tuple[str, ...]
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)

    def with_verdict(self, sha: str, verdict: Verdict) -> "SearchState":
        merged = dict(self.verdicts)
        merged[sha] = verdict
        return SearchState(self.commits, merged)

    @property
    def bounds(self) -> tuple[int, int]:
        """(index of the newest commit known good, index of the oldest known bad after it).

        The culprit lies in ``commits[lo + 1 : hi + 1]``. A good verdict newer than
        a bad one is a contradiction of noisy measurements; the bad one wins for
        the upper bound and the lower bound stays below it, so the search keeps a
        non-empty range instead of failing.
        """
        hi = len(self.commits) - 1
        for i, sha in enumerate(self.commits):
            if self.verdicts.get(sha) == Verdict.BAD:
                hi = i
                break
        lo = -1
        for i in range(hi - 1, -1, -1):
            if self.verdicts.get(self.commits[i]) == Verdict.GOOD:
                lo = i
                break
        return lo, hi

    @property
    def candidates(self) -> tuple[str, ...]:
        lo, hi = self.bounds
        return self.commits[lo + 1 : hi + 1]

    @property
    def unmeasured(self) -> tuple[str, ...]:
        """Commits in range that still need a verdict (the first bad is known bad already)."""
        lo, hi = self.bounds
        return tuple(
            sha for sha in self.commits[lo + 1 : hi] if self.verdicts.get(sha) not in (Verdict.SKIP,)
        )

    @property
    def done(self) -> bool:
        return not self.unmeasured

    @property
    def culprit(self) -> str | None:
        """The first bad commit, once every commit between it and the last good one is settled."""
        lo, hi = self.bounds
        if hi - lo == 1:
            return self.commits[hi]
        return None


def oriented(value: float, higher_is_better: bool) -> float:
    """Map a metric so that lower is always better (throughput -> negative throughput)."""
    return -value if higher_is_better else value


def _p_greater(lower: Sequence[float], higher: Sequence[float]) -> float:
    """One-sided Mann-Whitney p that ``higher`` tends to be larger than ``lower``."""
    return mann_whitney(lower, higher, alternative="greater").p_value


def check_baselines(good: Samples, bad: Samples, min_effect_pct: float, alpha: float = 0.01,
                    max_repeats: int = 0) -> BaselineCheck:
    """Decide whether GOOD -> BAD is a real slowdown: significant *and* larger than the floor.

    The check is adaptive. When the medians are apart by more than ``min_effect_pct``
    (either way) but the rank test is not yet significant, the answer is "measure
    more", not "no difference": ``more`` is the number of runs each endpoint should have next
    (doubling the smaller side's attempts, capped at ``max_repeats``), and the caller
    measures and asks again. One outlier among five runs a side is enough to hold
    an 8% step at p = 0.075 (U = 20 of 25), and one at each end, each towards the
    other, at p = 0.27; with 10 runs a side the same outliers leave p < 0.01. A
    flat pair (medians within the floor) is answered at once, and so is a pair
    that is significant either way, so a clean step costs no extra runs.

    Args:
        good, bad: oriented samples (lower is better) of the two endpoints.
        min_effect_pct: the smallest slowdown, in percent of GOOD's median, worth a bisect.
        alpha: one-sided Mann-Whitney level. 0.01 needs at least 4 clean samples a side,
            which the default of 5 repeats gives.
        max_repeats: the most runs an endpoint may get; 0 (the default) never asks for more.

    Returns:
        A :class:`BaselineCheck` whose ``message`` states the numbers either way;
        ``more > 0`` means undecided (``real`` and ``swapped`` are both False then).
    """
    if len(good.values) < 2 or len(bad.values) < 2:
        raise ValueError("need at least two samples at each endpoint")
    g, b = median(good.values), median(bad.values)
    effect = (b - g) / abs(g) * 100.0 if g else math.inf
    p_slower = _p_greater(good.values, bad.values)
    p_faster = _p_greater(bad.values, good.values)
    numbers = (
        f"GOOD median {g:.6g} (n={len(good.values)}), BAD median {b:.6g} (n={len(bad.values)}), "
        f"change {effect:+.2f}%"
    )
    if p_faster < alpha and effect < -min_effect_pct:
        return BaselineCheck(False, True, p_faster, effect,
                             f"GOOD is slower than BAD ({numbers}, p={p_faster:.3g}): the endpoints look swapped")
    if p_slower >= alpha:
        # The medians are apart past the floor, either way, and the ranks do not (yet) say
        # so: a few runs far off at one endpoint (or a real step not yet shown). Downwards
        # too: three of GOOD's five runs 30% high made an 8% step read -16%, p = 0.5.
        unsettled = effect > min_effect_pct or (effect < -min_effect_pct and p_faster >= alpha)
        more = next_repeats(min(good.attempts, bad.attempts), max_repeats) if unsettled else 0
        if more:
            return BaselineCheck(False, False, p_slower, effect,
                                 f"not yet significant ({numbers}, p={p_slower:.3g} >= {alpha}): "
                                 f"measuring GOOD and BAD {more} times each", more=more)
        return BaselineCheck(False, False, p_slower, effect,
                             f"no significant difference between GOOD and BAD ({numbers}, p={p_slower:.3g} >= {alpha})")
    if effect < min_effect_pct:
        return BaselineCheck(False, False, p_slower, effect,
                             f"the difference is real but below --min-effect {min_effect_pct:g}% ({numbers})")
    return BaselineCheck(True, False, p_slower, effect, f"{numbers}, p={p_slower:.3g}")


# Positions on the GOOD -> BAD gap where "apart from both endpoints" means an
# intermediate value; outside it, the nearer endpoint's verdict stands.
BETWEEN_BAND = (0.25, 0.75)


def classify(samples: Samples, good: Samples, bad: Samples, alpha: float = 0.05,
             alpha_between: float = 0.01, min_effect_pct: float = 2.0) -> Classification:
    """Good, bad or unsure: which endpoint does this commit look like?

    The rule needs two things to agree. The commit's median must sit on one side
    of the midpoint of the GOOD -> BAD gap (a position near 0.5 is exactly what a
    noisy measurement of either would rarely produce), and its samples must be
    significantly different from the *other* endpoint (one-sided Mann-Whitney at
    ``alpha``) but not from both at ``alpha_between``. Otherwise it is ``UNSURE``, and the
    caller doubles its samples. With five samples a side the smallest one-sided
    p is 1/252, so a clean 5% step over 1% noise is decided on the first round.

    Every verdict rests on the endpoints' samples standing for their levels; a
    few outliers at an endpoint can break that. ``doubts_endpoints`` is set when
    the commit is like *neither* endpoint: its samples differ significantly (at
    ``alpha``) and by more than ``min_effect_pct`` of GOOD's median from the
    endpoint its median is nearer to. Under the step that a bisect looks for, a
    commit is like one endpoint or the other, so this says that an endpoint's
    median may be off (or that the commit is a partial slowdown). The verdict is
    left as the rule above gives it; the caller asks :func:`endpoint_repeats`
    whether to measure the endpoints more and classify again, and once they
    cannot grow, :func:`settle` makes such a verdict unsure.

    Why (issue 10, reproduced on the synthetic bench): BAD measured 10.77, 10.79,
    13.97, 14.00, 14.11 (three runs 30% off). Its median made the gap 40% instead of 8%, every commit after the
    step sat at ~20% of it, below the midpoint and significantly below BAD's
    outliers, and was called good, up to the last one: the bisect named BAD
    itself as the culprit and exited 0. Those commits were also 7-9% above GOOD
    at p = 0.004, which is what ``doubts_endpoints`` looks at; five more runs of
    BAD put its median back at its level.

    Args:
        samples, good, bad: oriented samples (lower is better).
        alpha: level of the one-sided test against the opposite endpoint.
        alpha_between: level at which "different from both endpoints" makes it unsure.
        min_effect_pct: how far, in percent of GOOD's median, a commit must sit from
            its nearer endpoint before it casts doubt on it (``--min-effect``).
    """
    if len(samples.values) < 2:
        return Classification(Verdict.SKIP, reason=f"only {len(samples.values)} of {samples.attempts} runs worked")
    if samples.failures > len(samples.values):
        return Classification(Verdict.SKIP, reason=f"{samples.failures} of {samples.attempts} runs failed")
    g, b = median(good.values), median(bad.values)
    gap = b - g
    if gap <= 0:
        raise ValueError("classify needs BAD slower than GOOD")
    x = median(samples.values)
    position = (x - g) / gap
    # Significantly away from *both* endpoints is an intermediate value (a partial
    # slowdown, or a noisy burst): neither verdict is safe. The strict level keeps
    # a commit equal to its endpoint from landing here more than ~1% of the time.
    p_above_good = _p_greater(good.values, samples.values)
    p_below_bad = _p_greater(samples.values, bad.values)
    # Only inside the middle of the gap: with its samples doubled, a commit equal
    # to BAD soon tells itself apart from BAD's five samples when those happened
    # to land high, and an unbounded rule would then skip the culprit.
    between = (p_above_good < alpha_between and p_below_bad < alpha_between
               and BETWEEN_BAND[0] < position < BETWEEN_BAND[1])
    # Beyond an endpoint by its median (by more than the floor) but not by its ranks:
    # the median stands on a few runs far off. Three of five runs 30% high put a commit
    # at "335% of the gap" while its two other runs sat at GOOD's level; called bad on
    # its median, it was named the culprit. More runs of it settle which it is.
    if position > 1.0 or position < 0.0:
        side, edge = ("BAD", b) if position > 1.0 else ("GOOD", g)
        p_beyond = _p_greater(bad.values, samples.values) if position > 1.0 else _p_greater(samples.values,
                                                                                          good.values)
        # Relative to the endpoint it is beyond: past a 5x step, 1% above BAD is 1%, not 5%.
        beyond_pct = abs(x - edge) / abs(edge) * 100.0 if edge else math.inf
        if beyond_pct > min_effect_pct and p_beyond >= alpha:
            return Classification(Verdict.UNSURE, position, p_beyond,
                                  f"at {position:.0%} of the gap: its median is {beyond_pct:.1f}% beyond {side}, "
                                  f"its runs are not (p={p_beyond:.2g})")
    # Like neither endpoint: away from the nearer one, significantly and by more than
    # the floor. Under a single step that takes an endpoint whose median is off.
    name, near, p_near = ("GOOD", g, p_above_good) if position < 0.5 else ("BAD", b, p_below_bad)
    off_pct = abs(x - near) / abs(near) * 100.0 if near else math.inf
    doubt = p_near < alpha and off_pct > min_effect_pct
    note = f"; like neither: {off_pct:.1f}% from {name} (p={p_near:.2g})" if doubt else ""
    if position < 0.5:
        p = p_below_bad
        if p < alpha and not between:
            return Classification(Verdict.GOOD, position, p,
                                  f"at {position:.0%} of the gap, below BAD (p={p:.2g}){note}", doubt)
    else:
        p = p_above_good
        if p < alpha and not between:
            return Classification(Verdict.BAD, position, p,
                                  f"at {position:.0%} of the gap, above GOOD (p={p:.2g}){note}", doubt)
    why = "apart from both GOOD and BAD" if between else f"not separated (p={p:.2g})"
    return Classification(Verdict.UNSURE, position, p, f"at {position:.0%} of the gap, {why}{note}", doubt)


def endpoint_repeats(c: Classification, good: Samples, bad: Samples, max_repeats: int) -> int:
    """Runs each endpoint should have before ``c`` is used; 0: use ``c`` as it is.

    A commit that doubts the endpoints (see :func:`classify`) doubles both
    endpoints' samples (the smaller side's attempts, cached runs counting), up to
    ``max_repeats``; the caller then classifies the commit again against them.
    Past that, :func:`settle` decides. The endpoints' samples are shared by every
    verdict, so the extra runs are paid once per bisect (the caller judges the
    commits measured so far again against them, from their cached runs).
    """
    if not c.doubts_endpoints:
        return 0
    return next_repeats(min(good.attempts, bad.attempts), max_repeats)


def confirm_repeats(state: SearchState, good: Samples, bad: Samples, repeats: int, max_repeats: int) -> int:
    """Runs each endpoint should have before BAD itself is named the culprit; 0: name it.

    BAD is never measured as a step: that it is slow rests on its baseline runs
    alone. Three of its five runs 30% high, with no step anywhere, were enough to
    call every commit good against it and name BAD, exit 0. So before that
    answer the endpoints are measured again once (doubled, capped at
    ``max_repeats``), unless they already were, and every verdict is judged again.
    """
    if state.culprit is None or state.culprit != state.commits[-1]:
        return 0
    have = min(good.attempts, bad.attempts)
    if have >= 2 * repeats:
        return 0
    return next_repeats(have, max_repeats)


def settle(c: Classification, good: Samples, bad: Samples, max_repeats: int) -> Classification:
    """The classification to act on: a commit still like neither endpoint at ``max_repeats`` is unsure.

    Once the endpoints cannot grow, a commit that doubts them is either a partial
    slowdown or up against an endpoint whose median still stands on outliers
    (ten of twenty runs 30% off happens when three runs in ten are). Neither
    verdict is safe, as in the "apart from both" band: it is unsure, so its own
    runs are doubled and it is skipped if that does not settle it. A skip costs
    at worst an exit 2 that names the candidates, where a wrong verdict costs a
    wrong culprit.
    """
    if not c.doubts_endpoints or c.verdict not in (Verdict.GOOD, Verdict.BAD):
        return c
    if endpoint_repeats(c, good, bad, max_repeats):
        return c  # the caller measures the endpoints more first
    n = min(good.attempts, bad.attempts)
    return Classification(Verdict.UNSURE, c.position, c.p_value,
                          f"{c.reason}, with {n} runs of each endpoint", True)


def next_repeats(current: int, max_repeats: int) -> int:
    """How many samples an unsure commit should have next: double, capped; 0 means give up."""
    if current >= max_repeats:
        return 0
    return min(max(current * 2, current + 1), max_repeats)


def choose_next(state: SearchState, count: int = 1) -> tuple[str, ...]:
    """The commits to measure next, ``count`` at a time, cutting the range (count+1)-fold.

    Skipped commits are never proposed again; when a split point lands on one,
    the nearest unmeasured commit is taken instead, as ``git bisect skip`` does.

    Args:
        state: verdicts so far.
        count: how many commits can be measured at once (``--jobs``).

    Returns:
        Up to ``count`` distinct shas in commit order; empty when the search is done.
    """
    pending = [sha for sha in state.unmeasured if sha not in state.verdicts]
    if not pending:
        return ()
    count = max(1, min(count, len(pending)))
    lo, hi = state.bounds
    width = hi - lo  # positions lo+1 .. hi-1 are open
    index_of = {sha: i for i, sha in enumerate(state.commits)}
    chosen: list[str] = []
    for k in range(1, count + 1):
        target = lo + width * k / (count + 1)
        remaining = [sha for sha in pending if sha not in chosen]
        best = min(remaining, key=lambda sha: (abs(index_of[sha] - target), index_of[sha]))
        chosen.append(best)
    return tuple(sorted(chosen, key=index_of.__getitem__))


def steps_left(state: SearchState, jobs: int = 1) -> int:
    """Rounds of measurement still expected, for the progress line's ETA."""
    open_commits = len(state.unmeasured)
    if open_commits <= 0:
        return 0
    return max(1, math.ceil(math.log(open_commits + 1) / math.log(jobs + 1)))


def shift_pct(before: Sequence[float], after: Sequence[float], confidence: float = 0.95) -> Interval:
    """Shift from ``before`` to ``after`` in percent of ``before``'s median, with its Moses interval.

    The Hodges-Lehmann estimate (median of all pairwise differences) is the shift
    the Mann-Whitney test measures, and its interval comes from the same null
    distribution, so the number and the verdicts agree. It is deterministic, so
    a report is reproducible from its samples. With too few samples for the
    level, the interval is the full range of pairwise differences.
    """
    if not before or not after:
        raise ValueError("need samples on both sides")
    scale = abs(median(before)) or 1.0  # a zero median has no percent; show the raw shift
    shift = hodges_lehmann(before, after, confidence=confidence)
    return Interval(shift.estimate / scale * 100.0, shift.low / scale * 100.0, shift.high / scale * 100.0)


def verdict_confidence(classifications: Sequence[Classification]) -> float:
    """Chance that every decisive verdict was right, treating each ``1 - p`` as independent.

    A rough but conservative summary: the culprit is right if all the good/bad
    calls on the way to it were right.
    """
    confidence = 1.0
    for c in classifications:
        if c.verdict in (Verdict.GOOD, Verdict.BAD) and c.p_value is not None:
            confidence *= 1.0 - c.p_value
    return confidence


@dataclass(frozen=True)
class StepRecord:
    """One measured commit as the report shows it. ``samples`` hold raw (unoriented) values."""

    sha: str
    order: int  # position in history: 0 is GOOD, len(commits) is BAD
    subject: str
    samples: Samples
    classification: Classification
    reason: str = ""  # why it was skipped, when it was


@dataclass(frozen=True)
class BisectResult:
    """Everything a renderer needs; produced by the session, rendered by :mod:`report`."""

    status: str  # "culprit" | "all-skipped" | "no-difference" | "swapped"
    message: str
    good: StepRecord
    bad: StepRecord
    steps: tuple[StepRecord, ...] = ()
    commits_total: int = 0
    culprit: Mapping[str, str] | None = None  # sha, subject, author, date
    culprit_diffstat: str = ""
    candidates: tuple[str, ...] = ()
    baseline: BaselineCheck | None = None
    step_interval: Interval | None = None  # GOOD -> BAD, percent
    culprit_interval: Interval | None = None  # last good -> first bad, percent
    confidence: float | None = None
    metric: str = ""
    higher_is_better: bool = False
    bench_runs: int = 0  # bench invocations this session (cached ones excluded)
    bisect_log: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        # Every candidate skipped is an input the bisect could not use; no real
        # GOOD -> BAD difference (or swapped endpoints) leaves nothing to bisect.
        return {"culprit": EXIT_OK, "all-skipped": EXIT_USAGE}.get(self.status, EXIT_INCONCLUSIVE)
