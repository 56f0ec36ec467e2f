"""The statistics of ``perfci confirm``: interleaved rounds in, a frozen Confirmation out.

Pure: no printing, no files. :mod:`perfci.confirm.session` measures the rounds.
One run against one stored run resolves ~10% on an H200, because whole runs
drift against each other (the cases of a run move together by 1-3%, at times
3-5%). Confirmation measures base and cur alternately on one GPU in rounds of
four runs, ABBA. Per round, ``d_r = mean(log cur_r) - mean(log base_r)`` cancels
the round's level and any linear trend across it; a case is judged by a
one-sample interval on its ``d_r`` (benchmarks/confirm_validation.py has the figures).

1. **Per-run common mode** (:func:`analyze`, >= ``min_cases`` cases). A run's
   drift is shared by its cases: its factor (the median over the other cases of
   their deviation from their round centre) is divided out, leaving measurement
   noise (0.5-1%) instead of run drift in ``d_r``. This takes 10% down to 3%: a
   planted +3% on one case of 20 is found in 100% of sessions, 23-37% without it.
   A case is judged *relative to the suite*, as in ``perfci compare``; the
   suite-wide change is judged apart (:class:`perfci.verdict.SuiteShift`) on the run drift.
2. **A t-interval on the d_r** (``method="wilcoxon"``: signed-rank test and the
   Hodges-Lehmann interval of the Walsh averages; both :mod:`perfci.stats`). At 5-20 rounds with outlier
   runs nominal 95% t-intervals covered 94-98% (ABBA makes ``d_r`` symmetric),
   rank ones 93-97%; both find +3% as often, but a rank p-value stays >= ``2/2**n``:
   with alpha split over 4 looks it decides at round 8 at the earliest (a lone
   case among 20: 12), t at round 5. The suite shift, whose rounds carry whole
   outlier runs, gets the signed-rank test.
3. **Verdicts** by :func:`perfci.verdict.decide`, as in compare: ``regressed`` =
   significant after Benjamini-Hochberg across the cases **and** the whole interval
   above +``min_effect_pct``; ``improved`` mirrors it; ``unchanged`` = the interval
   inside ±``min_effect_pct`` (the floor is also the equivalence margin); else
   ``inconclusive`` (always below :data:`MIN_ROUNDS`).
4. **Stopping** (:class:`StoppingRule`, :func:`look`): optional stopping inflates
   error rates, so decisions come only at a few pre-set looks, each at ``alpha/K``
   with a ``1 - (1 - confidence)/K`` interval (Bonferroni over K looks): however
   the session stops, the chance that any look's interval missed stays <= 1 - confidence.

Every difference is a *badness* log inside (+ = worse), so one rule serves times
and ``higher_is_better`` metrics; ratios reported are cur/base as measured.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

import numpy as np

from perfci import stats
from perfci.stats import Estimate
from perfci.verdict import DECIDED, TESTED, SuiteShift, Verdict, decide

CaseKey = tuple[str, ...]  # (kernel, shape, dtype), or ("metric",) for one bench metric
METHODS = stats.ONE_SAMPLE_METHODS
SUITE_METHOD = "wilcoxon"  # the suite shift's rounds carry whole outlier runs: a rank test
MIN_ROUNDS = 3  # below this no interval is trusted: the case is inconclusive
RoundSeq = Sequence["Round | tuple"]


@dataclass(frozen=True)
class Round:
    """What one round measured of one case, in run order per side.

    Position ``j`` of a side must be the same run (process, drift) for every case
    of the suite: that is how the common mode finds a run's factor. ABBA:
    ``base = (run 1, run 4)``, ``cur = (run 2, run 3)``. ``None`` or NaN marks a
    run that failed for this case and keeps its position; values must be > 0."""

    base: tuple[float | None, ...]
    cur: tuple[float | None, ...]


@dataclass(frozen=True)
class CaseConfirmation:
    """The judgement of one case. Ratios are cur/base as measured (> 1: slower
    for times, faster for ``higher_is_better``); the verdict is oriented."""

    key: CaseKey
    verdict: Verdict  # regressed | improved | unchanged | inconclusive
    reason: str
    ratio: float | None = None  # judged geometric paired ratio (relative to the suite if common_mode)
    ci_low: float | None = None  # interval of ``ratio``, ci_low <= ci_high whatever the orientation
    ci_high: float | None = None
    raw_ratio: float | None = None  # mean paired ratio before the common mode came out
    p_value: float | None = None  # two-sided, None when not tested
    q_value: float | None = None  # after Benjamini-Hochberg across the judged cases
    rounds: int = 0  # rounds used: at least one value a side
    rounds_total: int = 0
    n_base: int = 0  # values used, each side
    n_cur: int = 0
    spread_pct: float | None = None  # sd of the per-round paired differences, percent
    min_effect_pct: float = 0.0
    confidence: float = 0.0
    method: str = "t"
    common_mode: bool = False
    higher_is_better: bool = False


@dataclass(frozen=True)
class Confirmation:
    """What a session showed. ``alpha`` and ``confidence`` are the levels used
    (at a look of a :class:`StoppingRule`: the per-look ones)."""

    cases: tuple[CaseConfirmation, ...]
    suite: SuiteShift
    counts: dict  # verdict -> number of judged cases
    rounds: int  # rounds recorded (the longest case)
    alpha: float
    confidence: float
    min_effect_pct: float
    method: str
    higher_is_better: bool

    @property
    def regressed(self) -> bool:
        """A case, or the suite as a whole, regressed: what fails the gate."""
        return self.counts.get(Verdict.REGRESSED, 0) > 0 or self.suite.verdict == Verdict.REGRESSED

    @property
    def inconclusive(self) -> bool:
        """A judged case is undecided (the suite shift, often undecided, does not count)."""
        return self.counts.get(Verdict.INCONCLUSIVE, 0) > 0

    def case(self, key: Iterable[str]) -> CaseConfirmation:
        return {c.key: c for c in self.cases}[tuple(key)]


# --------------------------------------------------------------------------- one case


def as_round(r: Round | tuple) -> Round:
    """A Round from a Round or a (base values, cur values) pair."""
    return r if isinstance(r, Round) else Round(tuple(r[0]), tuple(r[1]))


def _log(v: float | None) -> float:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return math.nan
    if not v > 0:
        raise ValueError(f"confirm values must be > 0 (a time or a positive metric), got {v!r}")
    return math.log(v)


def _table(rounds: RoundSeq) -> tuple[np.ndarray, np.ndarray]:
    """(base, cur) log values: a row a round, a column a run position, NaN where none."""
    rs = [as_round(r) for r in rounds]
    out = []
    for side in ("base", "cur"):
        a = np.full((len(rs), max([len(getattr(r, side)) for r in rs] + [1])), np.nan)
        for i, r in enumerate(rs):
            a[i, :len(getattr(r, side))] = [_log(v) for v in getattr(r, side)]
        out.append(a)
    return out[0], out[1]


def _row_means(a: np.ndarray) -> np.ndarray:
    n = np.sum(~np.isnan(a), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.nansum(a, axis=1) / n, np.nan)


def _diffs(base: np.ndarray, cur: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Per usable round ``mean(log cur) - mean(log base)``, + = worse. A round with no
    value on a side is skipped: nothing in its block to pair the other side with."""
    d = _row_means(cur) - _row_means(base)
    return (-d if higher_is_better else d)[~np.isnan(d)]


def paired_differences(rounds: RoundSeq, higher_is_better: bool = False) -> np.ndarray:
    """The per-round paired log differences of one case (+ = worse)."""
    return _diffs(*_table(rounds), higher_is_better)


def _ratio(badness: float, higher_is_better: bool) -> float:
    return math.exp(-badness if higher_is_better else badness)


def _interval(est: Estimate, hib: bool) -> tuple[float, float, float]:
    lo, hi = sorted((_ratio(est.low, hib), _ratio(est.high, hib)))
    return _ratio(est.estimate, hib), lo, hi


def _judge(d: np.ndarray, floor: float, confidence: float, method: str, q_value: float | None,
           alpha: float | None) -> tuple[Verdict, str, Estimate | None]:
    """Verdict of badness differences ``d`` against ``floor`` (a log ratio), which is
    also the equivalence margin. Significant: ``q_value <= alpha`` when given (after
    BH), else ``p <= 1 - confidence``."""
    if d.size < MIN_ROUNDS:
        return Verdict.INCONCLUSIVE, f"too few rounds ({d.size} < {MIN_ROUNDS})", None
    est = stats.one_sample(d, confidence, method)
    if not est.confident:
        return Verdict.INCONCLUSIVE, f"{d.size} rounds cannot reach {confidence:.4g} confidence", est
    decision = decide(est.low, est.high, floor=floor, q=est.p_value if q_value is None else q_value,
                      alpha=1.0 - confidence if alpha is None else alpha)
    return decision.verdict, decision.reason, est


def analyze_case(rounds: RoundSeq, min_effect_pct: float, confidence: float = 0.95, *,
                 key: Iterable[str] = ("metric",), higher_is_better: bool = False, method: str = "t",
                 q_value: float | None = None, alpha: float | None = None) -> CaseConfirmation:
    """Judge one case from its own rounds (no common mode: that needs the suite, :func:`analyze`).

    ``rounds`` in measurement order, each a :class:`Round` or (base values, cur
    values). Significant: ``p_value <= 1 - confidence``, or ``q_value <= alpha``
    when both are given (as :func:`analyze` does after Benjamini-Hochberg)."""
    return _case(tuple(key), *_table(rounds), None, min_effect_pct, confidence, higher_is_better, method,
                 q_value, alpha)


def _case(key: CaseKey, base: np.ndarray, cur: np.ndarray, raw: tuple[np.ndarray, np.ndarray] | None,
          min_effect_pct: float, confidence: float, hib: bool, method: str, q_value: float | None,
          alpha: float | None) -> CaseConfirmation:
    d = _diffs(base, cur, hib)
    d_raw = d if raw is None else _diffs(*raw, hib)
    used = ~np.isnan(_row_means(base)) & ~np.isnan(_row_means(cur))
    verdict, reason, est = _judge(d, math.log1p(min_effect_pct / 100.0), confidence, method, q_value, alpha)
    out = CaseConfirmation(
        key=key, verdict=verdict, reason=reason, rounds=int(d.size), rounds_total=int(base.shape[0]),
        n_base=int(np.sum(~np.isnan(base[used]))), n_cur=int(np.sum(~np.isnan(cur[used]))),
        raw_ratio=_ratio(float(d_raw.mean()), hib) if d_raw.size else None,
        spread_pct=100.0 * float(d.std(ddof=1)) if d.size >= 2 else None,
        min_effect_pct=min_effect_pct, confidence=confidence, method=method,
        common_mode=raw is not None, higher_is_better=hib, q_value=q_value)
    if est is None:
        return out
    ratio, lo, hi = _interval(est, hib)
    return replace(out, ratio=ratio, ci_low=lo, ci_high=hi, p_value=est.p_value,
                   q_value=est.p_value if q_value is None else q_value)


# --------------------------------------------------------------------------- the suite


def _deviations(tables: Sequence[tuple[np.ndarray, np.ndarray]], effects: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Every case's deviation in every run, stacked (case, round, position) per side: a
    log value minus the case's round centre (the mean of its sides' means, so a case's
    own change is not the run's), less ``effects`` (each case's own change) so a
    changed case cannot pull the medians at all (median polish)."""
    rows = max(t[0].shape[0] for t in tables)
    wb, wc = max(t[0].shape[1] for t in tables), max(t[1].shape[1] for t in tables)
    devs_b, devs_c = np.full((len(tables), rows, wb), np.nan), np.full((len(tables), rows, wc), np.nan)
    for i, (b, c) in enumerate(tables):
        centre = ((_row_means(b) + _row_means(c)) / 2.0)[:, None]  # NaN unless both sides have a value
        half = 0.0 if effects is None or np.isnan(effects[i]) else effects[i] / 2.0
        devs_b[i, :b.shape[0], :b.shape[1]] = b - centre + half
        devs_c[i, :c.shape[0], :c.shape[1]] = c - centre - half
    return devs_b, devs_c


def _factors(devs_b: np.ndarray, devs_c: np.ndarray, min_cases: int, drop: int | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Each run's shared log factor: the median deviation over the cases measured in it
    (a few changed or disturbed cases cannot move it), leaving out case ``drop`` (a
    case judged against factors it is part of is pulled towards the suite: 94.5%
    coverage, not 95%). NaN for a run with fewer than ``min_cases`` cases (the
    dropped one included): its values are then left out, their drift unknown."""
    out = []
    for devs in (devs_b, devs_c):
        if drop is not None:
            devs = np.delete(devs, drop, axis=0)
        enough = np.sum(~np.isnan(devs), axis=0) >= min_cases - (drop is not None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN runs: NaN, as meant
            out.append(np.where(enough, np.nanmedian(devs, axis=0), np.nan))
    return out[0], out[1]


def _adjust(b: np.ndarray, c: np.ndarray, fb: np.ndarray, fc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return b - fb[:b.shape[0], :b.shape[1]], c - fc[:c.shape[0], :c.shape[1]]


def analyze(cases: Mapping[Iterable[str], RoundSeq], min_effect_pct: float = 1.0, alpha: float = 0.05,
            confidence: float = 0.95, *, higher_is_better: bool = False, method: str = "t",
            common_mode: bool = True, min_cases: int = 6,
            focus: Iterable[Iterable[str]] | None = None) -> Confirmation:
    """Judge every case of an interleaved session, with Benjamini-Hochberg across them.

    Args:
        cases: case key -> its rounds in measurement order (see :class:`Round`).
            Round i of every case must come from the same four runs: a case
            missing from a round gets an empty (or all-None) round, not none.
        min_effect_pct: the floor, percent; alpha: the false discovery rate;
            confidence: the level of every interval.
        common_mode: divide out each run's shared factor when at least
            ``min_cases`` cases were measured, and judge the suite-wide shift apart.
        focus: the cases to judge (BH over these only) when the others were
            measured only to find the run factors; chosen before this session's
            data (what compare flagged), or the BH guarantee is lost. None: all.
    """
    tables = {tuple(k): _table(v) for k, v in cases.items()}
    judged = list(tables) if focus is None else [tuple(k) for k in focus]
    if [k for k in judged if k not in tables]:
        raise ValueError(f"focus names cases that were not measured: {[k for k in judged if k not in tables]}")
    use_cm = common_mode and len(tables) >= min_cases
    adjusted = {k: tables[k] for k in judged}
    if use_cm:
        tabs, index = list(tables.values()), {k: i for i, k in enumerate(tables)}
        fb, fc = _factors(*_deviations(tabs), min_cases)
        # Second pass with each case's own change (relative to the suite) out of its deviations:
        # one +5% case among 20 moved every other case by -0.08% (-3 points of coverage at 20 rounds).
        eff = np.array([np.mean(d) if (d := _diffs(*_adjust(b, c, fb, fc), False)).size else math.nan
                        for b, c in tabs])
        devs = _deviations(tabs, None if np.isnan(eff).all() else eff - np.nanmedian(eff))
        fb, fc = _factors(*devs, min_cases)
        adjusted = {k: _adjust(*tables[k], *_factors(*devs, min_cases, index[k])) for k in judged}
    pvals = []  # BH over the cases that can be tested at all
    for k in judged:
        d = _diffs(*adjusted[k], higher_is_better)
        pvals.append(stats.one_sample(d, confidence, method).p_value if d.size >= MIN_ROUNDS else math.nan)
    results = tuple(_case(k, *adjusted[k], tables[k] if use_cm else None, min_effect_pct, confidence,
                          higher_is_better, method, None if math.isnan(q) else float(q), alpha)
                    for k, q in zip(judged, stats.benjamini_hochberg(pvals)))
    if use_cm:  # per round: mean cur run factor - mean base run factor, the suite's paired difference
        s = _diffs(fb, fc, higher_is_better)
        verdict, reason, est = _judge(s, math.log1p(min_effect_pct / 100.0), confidence, SUITE_METHOD,
                                      None, alpha)
        suite = SuiteShift(verdict, reason, rounds=int(s.size), n_cases=len(tables),
                           spread_pct=100.0 * float(s.std(ddof=1)) if s.size >= 2 else None)
        if est is not None:
            ratio, lo, hi = _interval(est, higher_is_better)
            suite = replace(suite, ratio=ratio, ci_low=lo, ci_high=hi, p_value=est.p_value)
    else:
        suite = SuiteShift(Verdict.NOT_JUDGED, "common mode off" if not common_mode else
                           f"fewer than {min_cases} cases: no common mode", n_cases=len(tables))
    counts = {v: sum(1 for c in results if c.verdict == v) for v in TESTED}
    n_rounds = max((t[0].shape[0] for t in tables.values()), default=0)
    return Confirmation(results, suite, counts, n_rounds, alpha, confidence, min_effect_pct, method,
                        higher_is_better)


# --------------------------------------------------------------------------- stopping


def decided(case: CaseConfirmation | SuiteShift) -> bool:
    """A case needs no more rounds: regressed, improved or unchanged."""
    return case.verdict in DECIDED


@dataclass(frozen=True)
class StoppingRule:
    """When the session may stop. Decisions come only at ``looks`` (rounds completed),
    each at ``alpha / K`` with a ``1 - (1 - confidence) / K`` interval, K = len(looks):
    stopping at the first look that decides every case keeps the error rates of one
    analysis (Bonferroni). Few looks: 4 widen a 20-round t-interval by ~30%."""

    looks: tuple[int, ...] = (5, 10, 15, 20)
    alpha: float = 0.05
    confidence: float = 0.95
    min_effect_pct: float = 1.0
    method: str = "t"

    def __post_init__(self):
        if not self.looks or list(self.looks) != sorted(set(self.looks)) or self.looks[0] < MIN_ROUNDS:
            raise ValueError(f"looks must be increasing round counts >= {MIN_ROUNDS}, not {self.looks}")

    @property
    def min_rounds(self) -> int:
        return self.looks[0]

    @property
    def max_rounds(self) -> int:
        return self.looks[-1]

    @property
    def look_alpha(self) -> float:
        return self.alpha / len(self.looks)

    @property
    def look_confidence(self) -> float:
        return 1.0 - (1.0 - self.confidence) / len(self.looks)

    def next_look(self, rounds: int) -> int:
        return next((k for k in self.looks if k > rounds), self.max_rounds)

    @classmethod
    def spaced(cls, min_rounds: int = 5, max_rounds: int = 20, n_looks: int = 4, **kw) -> "StoppingRule":
        """``n_looks`` looks evenly spaced from ``min_rounds`` to ``max_rounds``."""
        n = max(1, min(n_looks, max_rounds - min_rounds + 1))
        return cls(looks=tuple(sorted({int(round(x)) for x in np.linspace(min_rounds, max_rounds, n)})), **kw)


@dataclass(frozen=True)
class Look:
    rounds: int  # rounds completed (the longest case)
    at_look: bool  # a decision point: one of the rule's looks, the last round, or forced
    stop: bool
    reason: str
    confirmation: Confirmation | None  # the analysis at the per-look levels; None between looks


def look(cases: Mapping[Iterable[str], RoundSeq], rule: StoppingRule, *, higher_is_better: bool = False,
         focus: Iterable[Iterable[str]] | None = None, force: bool = False, **analyze_kw) -> Look:
    """After a round: stop or go on, and at a look the analysis to report.

    ``force``: analyse and stop now (the budget ran out). That analysis is one of
    the K looks (the ones after it never happen), so the guarantee holds.
    ``analyze_kw`` go to :func:`analyze` (``common_mode``, ``min_cases``)."""
    n = max((len(v) for v in cases.values()), default=0)
    if not force and n < rule.max_rounds and n not in rule.looks:
        why = f"{n} < {rule.min_rounds} rounds" if n < rule.min_rounds else f"next look at {rule.next_look(n)}"
        return Look(n, False, False, why, None)
    conf = analyze(cases, rule.min_effect_pct, rule.look_alpha, rule.look_confidence,
                   higher_is_better=higher_is_better, method=rule.method, focus=focus, **analyze_kw)
    undecided = sum(1 for c in conf.cases if not decided(c))
    if force:
        return Look(n, True, True, f"stopped on request; {undecided} undecided", conf)
    if n >= rule.max_rounds:
        return Look(n, True, True, f"max rounds ({rule.max_rounds}); {undecided} undecided", conf)
    if undecided == 0:
        return Look(n, True, True, "every case decided", conf)
    return Look(n, True, False, f"{undecided} undecided; next look at {rule.next_look(n)}", conf)


def next_round_needed(cases: Mapping[Iterable[str], RoundSeq], rule: StoppingRule, **look_kw) -> bool:
    """True while the session should measure another round (see :func:`look`)."""
    return not look(cases, rule, **look_kw).stop
