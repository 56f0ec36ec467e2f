"""The words compare, the pooled compare and confirm answer in, and the one rule that picks among them.

Each of the three ends a case with an interval of its change (a log ratio,
+ = worse), a floor and a q-value; :func:`decide` turns those into
``regressed`` / ``improved`` / ``unchanged`` / ``inconclusive`` and a reason.
Where the commands' rules differ, a named parameter says so (docs/compare.md,
*Which rule each command uses*):

* ``floor``: what ``regressed`` / ``improved`` must clear with the whole interval;
* ``margin``: the equivalence margin, inside which the whole interval is
  ``unchanged``. compare and confirm: the floor itself. The pooled compare: per
  case, the interval's own width between its 1% floor and 4x that floor
  (:func:`perfci.compare.pooled.unchanged_margin`), so ``unchanged`` there means
  "within 1%, or no sign of a change and nothing past 4%";
* ``reasons``: the words of each outcome (the pooled compare says "nights").

Special cases stay with their command: compare's threshold-only single values,
too few repeats, a disturbed side and the clock-swing widening; confirm's too few
rounds. Statuses (``broken``, ``fixed``, ``skipped``, ``added``, ``removed``)
need no statistics and are part of the same vocabulary; :func:`missing` is the
one definition of a baseline case the current run lacks, :func:`no_common_case`
that of two runs with nothing to compare.

Two other questions keep words of their own: bisect's verdict on a commit
(:class:`perfci.bisect.core.CommitVerdict`: good / bad / skip / unsure), and
compile's diff of two resources files
(:class:`perfci.compile.diff.ResourceVerdict`: worse / better / same / added /
removed), which judges registers and occupancy, not time.

Plain data only: no perfci capability package is imported here.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable


class Verdict(str, Enum):
    """A case's or a suite shift's verdict, declared worst first (the order of :data:`SEVERITY`).

    A str: ``Verdict.REGRESSED == "regressed"``, one dict key with it, and
    json, csv, ``str()`` and f-strings write the plain value.
    """

    BROKEN = "broken"  # ok in base, fail / error / timeout in cur
    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    # The launched config differs while the kernel's source did not (an autotuner's choice moved):
    # neither regressed nor unchanged, and not for confirm, whose runs would autotune again.
    CONFIG_FLIP = "config-flip"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    FIXED = "fixed"  # failed in base, ok in cur
    SKIPPED = "skipped"  # not ok on either side, or skipped tonight
    ADDED = "added"  # only in cur
    REMOVED = "removed"  # only in base
    NOT_JUDGED = "n/a"  # a suite shift with no common mode to judge

    # Python 3.12 formats a (str, Enum) member as "Verdict.REGRESSED" and Enum hashes by name;
    # a verdict must read, and key a dict, exactly as its value does (enum.StrEnum needs 3.11).
    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__


# A case's verdicts, worst first: a broken kernel is worse than a slow one.
CASE_VERDICTS = tuple(v for v in Verdict if v is not Verdict.NOT_JUDGED)
SEVERITY = {v: i for i, v in enumerate(CASE_VERDICTS)}
# What decide() returns, in the order confirm counts them.
TESTED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.INCONCLUSIVE)
DECIDED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.UNCHANGED)  # no more measuring needed
FAILED_STATUSES = ("fail", "error", "timeout")  # a result row's statuses that break a case
# Not a verdict: what the nightly's flagged.json says of a case compare called unchanged that is
# confirmed anyway because the suite as a whole regressed (``--cases`` skips an ``unchanged`` case).
FLAGGED_SUITE_WIDE = "flagged-suite-wide"


def confidence_text(confidence: float) -> str:
    """``0.95`` -> ``"95%"``; as many digits as it takes not to print 100% for a level below 1.

    A sequential look's interval is at 1 - alpha/(k(k+1)) or so: 0.99997 must not read "100%".
    """
    for digits in range(4, 10):
        text = f"{100 * confidence:.{digits}g}"
        if confidence >= 1 or float(text) < 100:
            return text + "%"
    return f"{100 * confidence}%"


def worst_first(verdict: Verdict | str, ratio: float | None, key: tuple[str, ...]) -> tuple:
    """Sort key: the worst verdict first, then the largest slowdown (ratio cur/base), then by name."""
    return (SEVERITY[verdict], -(ratio or 0.0), *key)


# --------------------------------------------------------------------------- the rule


@dataclass(frozen=True)
class Reasons:
    """What :func:`decide` says for each outcome. The defaults are compare's and confirm's words."""

    regressed: str = "significant, interval above the floor"
    improved: str = "significant, interval below the floor"
    unchanged: str = "interval inside the floor"
    straddles: str = "significant, but the interval straddles the floor"  # inconclusive, significant
    not_significant: str = "not significant, interval reaches past the floor"  # inconclusive


REASONS = Reasons()


@dataclass(frozen=True)
class Decision:
    verdict: Verdict  # one of TESTED
    reason: str
    significant: bool  # q <= alpha


def decide(low: float, high: float, *, floor: float, q: float | None, alpha: float,
           margin: float | None = None, reasons: Reasons = REASONS) -> Decision:
    """The verdict of an interval [low, high] of a change (log ratio, + = worse).

    Args:
        floor: ``regressed`` needs q <= alpha and ``low > floor``; ``improved``
            q <= alpha and ``high < -floor``.
        margin: ``unchanged`` needs ``-margin < low`` and ``high < margin``
            (otherwise). None: the floor (compare, confirm); the pooled compare
            passes each case's own (:func:`perfci.compare.pooled.unchanged_margin`).
        q: the case's q-value (after Benjamini-Hochberg), or the p-value where a
            caller tests alone; None: not tested, never significant.
        reasons: the words of each outcome.
    Returns:
        regressed / improved / unchanged, else inconclusive: significant but the
        interval straddles the floor, or not significant and reaching past it.
    """
    margin = floor if margin is None else margin
    significant = q is not None and q <= alpha
    if significant and low > floor:
        return Decision(Verdict.REGRESSED, reasons.regressed, True)
    if significant and high < -floor:
        return Decision(Verdict.IMPROVED, reasons.improved, True)
    if -margin < low and high < margin:
        return Decision(Verdict.UNCHANGED, reasons.unchanged, significant)
    if significant:
        return Decision(Verdict.INCONCLUSIVE, reasons.straddles, True)
    return Decision(Verdict.INCONCLUSIVE, reasons.not_significant, False)


# --------------------------------------------------------------------------- without statistics


def status_verdict(base_status: str, cur_status: str) -> Verdict:
    """A case that is not ok on both sides: broken, fixed, or skipped."""
    if base_status == "ok" and cur_status in FAILED_STATUSES:
        return Verdict.BROKEN
    if base_status in FAILED_STATUSES and cur_status == "ok":
        return Verdict.FIXED
    return Verdict.SKIPPED


@dataclass(frozen=True)
class DisturbedRule:
    """A run whose repeats of a case scattered: ``spread >= spread_pct`` percent
    and ``>= ratio`` times the spread it is held against (the other run's, or a
    usual night's). No regressed / improved verdict rests on such a run. Seen on
    the H200 (benchmarks/results/h200-2026-11-29b, 315 A/A case pairs): a ~10 us
    split-K case usually repeats within ±1%, but now and then a whole run of it
    scatters by ±10-30% and its median moves by up to +73%; a real slowdown moves
    the repeats together, it does not scatter them. ``spread_pct`` None: off."""

    spread_pct: float | None = 5.0
    ratio: float = 3.0

    def scattered(self, spread: float, typical: float) -> bool:
        """SPREAD (robust sd of log time) is disturbed against TYPICAL."""
        if self.spread_pct is None:
            return False
        return spread >= self.spread_pct / 100.0 and spread >= self.ratio * typical

    def side(self, spread_base: float, spread_cur: float) -> str | None:
        """'base' or 'cur' when that side's repeats scatter far more than the other's."""
        wide, narrow, side = ((spread_cur, spread_base, "cur") if spread_cur >= spread_base
                              else (spread_base, spread_cur, "base"))
        return side if self.scattered(wide, narrow) else None


DISTURBED = DisturbedRule()


def missing(cases: Iterable, *, count_skipped: bool, require_base_ok: bool) -> list[tuple[str, ...]]:
    """The keys of baseline cases the current run lacks, in the cases' order.

    ``cases`` carry ``key`` and ``verdict`` (and ``base_status`` when
    ``require_base_ok``). A case ``removed`` (only in the baseline) is missing;
    ``count_skipped``: one ``skipped`` tonight is missing too; ``require_base_ok``:
    only cases the baseline measured ok count. compare and the pytest plugin:
    both True (a half-measured run is not a clean one); the nightly: both False
    (its gate fails broken cases on their own).
    """
    wanted = (Verdict.REMOVED, Verdict.SKIPPED) if count_skipped else (Verdict.REMOVED,)
    return [c.key for c in cases
            if c.verdict in wanted and (not require_base_ok or c.base_status == "ok")]


def no_common_case(cases: Iterable) -> bool:
    """Whether two runs share no case: every one of ``cases`` (carrying ``verdict``) is ``added`` or
    ``removed``, or there are none. compare, the pytest plugin and the nightly refuse such a pair
    (a wrong file, or renamed kernels), rather than calling it clean."""
    return all(c.verdict in (Verdict.ADDED, Verdict.REMOVED) for c in cases)


# --------------------------------------------------------------------------- the suite


@dataclass(frozen=True)
class SuiteShift:
    """The suite-wide change that the common mode takes out of every case, judged on its own.

    compare and the pooled compare fill the common mode's split (``memory_pct``
    ... ``time_pct``); confirm the paired interval of the runs' shared factor
    (``ratio`` ... ``spread_pct``). ``verdict`` is ``n/a`` without a common mode.
    """

    verdict: Verdict
    reason: str = ""
    ratio: float | None = None  # confirm: the suite's cur/base, its interval and p-value
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    rounds: int = 0
    n_cases: int = 0
    spread_pct: float | None = None  # confirm: sd of the per-round suite differences, percent
    memory_pct: float = 0.0  # compare: common-mode shift of memory-bound cases, percent
    compute_pct: float = 0.0  # of compute-bound cases (cycles when clock-normalized)
    overall_pct: float = 0.0
    method: str = ""  # compare: split | pooled | none
    clock_normalized: bool = False
    floor_pct: float = 0.0  # compare: the profile's suite floor
    time_pct: float = 0.0  # compare: the suite's median shift in raw time, percent

    def to_dict(self, names: Iterable[str]) -> dict:
        """The fields NAMES, in that order: what a command's JSON shows of it."""
        return {n: getattr(self, n) for n in names}
