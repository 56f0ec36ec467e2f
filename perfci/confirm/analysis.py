"""The statistics of ``perfci confirm``: interleaved rounds in, a frozen Confirmation out.

Pure: no printing, no files. :mod:`perfci.confirm.session` measures the rounds,
:mod:`perfci.confirm.stopping` decides when to look and when to stop.
One run against one stored run resolves ~10% on an H200, because whole runs
drift against each other. Confirmation measures base and cur alternately on one
machine in rounds of four runs, ABBA or BAAB. Per round, ``d_r = mean(log cur_r) -
mean(log base_r)`` cancels the round's level and any linear trend across it; a
case is judged by a one-sample interval on its ``d_r``
(benchmarks/confirm_validation.py and benchmarks/confirm_defaults.py have the figures).

1. **Each case on its own change** (the default). The interval of a case is its
   raw paired interval: nothing another case did can move it.
2. **A declared reference** (``reference``: cases the change cannot touch, such
   as the vendor BLAS). Where runs drift together (a CPU host's clock states, a
   busy neighbour), each run's shared factor, the median over the reference
   cases of their deviation from their round centre, is divided out of every
   case, leaving measurement noise instead of run drift: a +3% on one case of 20
   under 1-3% run drift is found in 100% of sessions, 23-37% without. The factor
   never comes from the cases under test: taken from all cases (the rule before
   this one), a change shared by most of them was read as the run's drift and
   cancelled (H200: 4 of 6 cases ~20% faster read ``unchanged``, the other 2
   ``regressed +27%``). The reference's own paired change is judged first, by
   the cases' rule (:class:`perfci.verdict.SuiteShift`); when it is ``regressed``
   or ``improved``, the reference moved and every case is judged on its own.
   A reference case is judged against the other reference cases.
3. **Never ``unchanged`` past the raw interval.** Whatever the reference did, a
   case whose raw paired interval reaches past ±``min_effect_pct`` is not
   ``unchanged`` (``inconclusive``, with the raw interval in the reason): a
   reference can only sharpen a case's interval, never hide a change the case's
   own rounds still allow.
4. **A t-interval on the d_r** (``method="wilcoxon"``: signed-rank test and the
   Hodges-Lehmann interval of the Walsh averages; both :mod:`perfci.stats`). At 5-20 rounds with outlier
   runs nominal 95% t-intervals covered 94-98% (ABBA makes ``d_r`` symmetric),
   rank ones 93-97%; a rank p-value stays >= ``2/2**n``, so ranks decide later.
5. **Verdicts** by :func:`perfci.verdict.decide`, as in compare: ``regressed`` =
   significant after Benjamini-Hochberg across the cases **and** the whole interval
   above +``min_effect_pct``; ``improved`` mirrors it; ``unchanged`` = the interval
   inside ±``min_effect_pct`` (the floor is also the equivalence margin); else
   ``inconclusive`` (always below :data:`MIN_ROUNDS`).

One estimate per interval: a case's ``ratio`` is the estimate its ``ci_low`` ..
``ci_high`` belongs to (relative to the reference when one was used); the raw
paired ratio and its interval are ``raw_ratio``, ``raw_ci_low``, ``raw_ci_high``.
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
MIN_ROUNDS = 3  # below this no interval is trusted: the case is inconclusive
RoundSeq = Sequence["Round | tuple"]
NO_REFERENCE = "no reference declared: each case judged on its own change"


@dataclass(frozen=True)
class Round:
    """What one round measured of one case, in run order per side.

    Position ``j`` of a side must be the same run (process, drift) for every case
    of the suite: that is how a reference finds a run's factor. ABBA:
    ``base = (run 1, run 4)``, ``cur = (run 2, run 3)``; BAAB the reverse. ``None`` or NaN marks a
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
    ratio: float | None = None  # the judged geometric paired ratio: the estimate of ci_low .. ci_high
    ci_low: float | None = None  # interval of ``ratio``, ci_low <= ci_high whatever the orientation
    ci_high: float | None = None
    raw_ratio: float | None = None  # the paired ratio with no reference taken out, and its interval
    raw_ci_low: float | None = None
    raw_ci_high: float | None = None
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
    common_mode: bool = False  # judged relative to the reference's run factors
    higher_is_better: bool = False


@dataclass(frozen=True)
class Confirmation:
    """What a session showed. ``alpha`` and ``confidence`` are the levels used
    (at a look of a :class:`perfci.confirm.stopping.StoppingRule`: the look's own).
    ``suite`` is the reference's paired change (``n/a`` without a reference);
    ``reference_used``: the cases were judged relative to it."""

    cases: tuple[CaseConfirmation, ...]
    suite: SuiteShift
    counts: dict  # verdict -> number of judged cases
    rounds: int  # rounds recorded (the longest case)
    alpha: float
    confidence: float
    min_effect_pct: float
    method: str
    higher_is_better: bool
    reference: tuple[CaseKey, ...] = ()  # the cases declared untouched
    reference_used: bool = False

    @property
    def regressed(self) -> bool:
        """A case, or the reference as a whole, regressed: what fails the gate."""
        return self.counts.get(Verdict.REGRESSED, 0) > 0 or self.suite.verdict == Verdict.REGRESSED

    @property
    def broken(self) -> bool:
        """A case was measured on one side and never on the other (it crashed, failed its check or hung)."""
        return self.counts.get(Verdict.BROKEN, 0) > 0

    @property
    def inconclusive(self) -> bool:
        """A judged case is undecided (the reference's shift does not count)."""
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


def _pct(x: float) -> str:
    return f"{100.0 * math.expm1(x):+.2f}%"


def _inside(est: Estimate, floor: float) -> bool:
    return -floor < est.low and est.high < floor


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
    """Judge one case from its own rounds (a reference needs the suite: :func:`analyze`).

    ``rounds`` in measurement order, each a :class:`Round` or (base values, cur
    values). Significant: ``p_value <= 1 - confidence``, or ``q_value <= alpha``
    when both are given (as :func:`analyze` does after Benjamini-Hochberg)."""
    return _case(tuple(key), *_table(rounds), None, min_effect_pct, confidence, higher_is_better, method,
                 q_value, alpha)


def _case(key: CaseKey, base: np.ndarray, cur: np.ndarray, raw: tuple[np.ndarray, np.ndarray] | None,
          min_effect_pct: float, confidence: float, hib: bool, method: str, q_value: float | None,
          alpha: float | None) -> CaseConfirmation:
    """One case from its (adjusted) tables; ``raw``: its tables before the reference came out."""
    d = _diffs(base, cur, hib)
    d_raw = d if raw is None else _diffs(*raw, hib)
    floor = math.log1p(min_effect_pct / 100.0)
    used = ~np.isnan(_row_means(base)) & ~np.isnan(_row_means(cur))
    verdict, reason, est = _judge(d, floor, confidence, method, q_value, alpha)
    raw_est = est if raw is None else (stats.one_sample(d_raw, confidence, method) if d_raw.size >= MIN_ROUNDS
                                       else None)
    if verdict == Verdict.UNCHANGED and raw is not None and not (raw_est is not None and _inside(raw_est, floor)):
        # The reference narrowed the interval; the case's own rounds still allow a change past the floor.
        reach = f"[{_pct(raw_est.low)}, {_pct(raw_est.high)}]" if raw_est is not None else "(none)"
        verdict, reason = (Verdict.INCONCLUSIVE, f"inside the floor relative to the reference, but the raw "
                           f"paired interval {reach} reaches past +-{min_effect_pct:g}%")
    out = CaseConfirmation(
        key=key, verdict=verdict, reason=reason, rounds=int(d.size), rounds_total=int(base.shape[0]),
        n_base=int(np.sum(~np.isnan(base[used]))), n_cur=int(np.sum(~np.isnan(cur[used]))),
        raw_ratio=_ratio(float(d_raw.mean()), hib) if d_raw.size else None,
        spread_pct=100.0 * float(d.std(ddof=1)) if d.size >= 2 else None,
        min_effect_pct=min_effect_pct, confidence=confidence, method=method,
        common_mode=raw is not None, higher_is_better=hib, q_value=q_value)
    if raw_est is not None:
        out = replace(out, **dict(zip(("raw_ratio", "raw_ci_low", "raw_ci_high"), _interval(raw_est, hib))))
    if est is None:
        return out
    ratio, lo, hi = _interval(est, hib)
    return replace(out, ratio=ratio, ci_low=lo, ci_high=hi, p_value=est.p_value,
                   q_value=est.p_value if q_value is None else q_value)


# --------------------------------------------------------------------------- the reference's run factors


Tables = tuple[np.ndarray, np.ndarray]


def _deviations(tables: Sequence[Tables], shape: tuple[int, int, int], effects: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Every case's deviation in every run, stacked (case, round, position) per side, padded
    to ``shape`` (rounds, base positions, cur positions): a log value minus the case's round
    centre (the mean of its sides' means, so a case's own change is not the run's), less
    ``effects`` (each case's own change) so a changed case cannot pull the medians at all
    (median polish)."""
    rows, wb, wc = shape
    devs_b, devs_c = np.full((len(tables), rows, wb), np.nan), np.full((len(tables), rows, wc), np.nan)
    for i, (b, c) in enumerate(tables):
        centre = ((_row_means(b) + _row_means(c)) / 2.0)[:, None]  # NaN unless both sides have a value
        half = 0.0 if effects is None or np.isnan(effects[i]) else effects[i] / 2.0
        devs_b[i, :b.shape[0], :b.shape[1]] = b - centre + half
        devs_c[i, :c.shape[0], :c.shape[1]] = c - centre - half
    return devs_b, devs_c


def _factors(devs_b: np.ndarray, devs_c: np.ndarray, min_cases: int, drop: int | None = None) -> Tables:
    """Each run's shared log factor: the median deviation over the cases measured in it
    (a few changed or disturbed cases cannot move it), leaving out case ``drop`` (a
    case judged against factors it is part of is pulled towards them: 94.5%
    coverage, not 95%). NaN for a run with fewer than ``min_cases`` cases (the
    dropped one included): its values are then left out, their drift unknown."""
    out = []
    for devs in (devs_b, devs_c):
        if drop is not None:
            devs = np.delete(devs, drop, axis=0)
        enough = np.sum(~np.isnan(devs), axis=0) >= max(1, min_cases - (drop is not None))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN runs: NaN, as meant
            out.append(np.where(enough, np.nanmedian(devs, axis=0), np.nan))
    return out[0], out[1]


def _adjust(b: np.ndarray, c: np.ndarray, fb: np.ndarray, fc: np.ndarray) -> Tables:
    return b - fb[:b.shape[0], :b.shape[1]], c - fc[:c.shape[0], :c.shape[1]]


def _reference_factors(refs: Sequence[Tables], shape: tuple[int, int, int], min_cases: int
                       ) -> tuple[tuple[np.ndarray, np.ndarray], Tables]:
    """The reference cases' polished deviations and their run factors."""
    fb, fc = _factors(*_deviations(refs, shape), min_cases)
    # Second pass with each reference case's own change (relative to the others) out of its
    # deviations: one case moving +5% among 20 moved every factor by 0.08% before.
    eff = np.array([np.mean(d) if (d := _diffs(*_adjust(b, c, fb, fc), False)).size else math.nan
                    for b, c in refs])
    devs = _deviations(refs, shape, None if np.isnan(eff).all() else eff - np.nanmedian(eff))
    return devs, _factors(*devs, min_cases)


# --------------------------------------------------------------------------- the suite


def analyze(cases: Mapping[Iterable[str], RoundSeq], min_effect_pct: float = 1.0, alpha: float = 0.05,
            confidence: float = 0.95, *, higher_is_better: bool = False, method: str = "t",
            reference: Iterable[Iterable[str]] | None = None, min_cases: int = 1,
            focus: Iterable[Iterable[str]] | None = None) -> Confirmation:
    """Judge every case of an interleaved session, with Benjamini-Hochberg across them.

    Args:
        cases: case key -> its rounds in measurement order (see :class:`Round`).
            Round i of every case must come from the same four runs: a case
            missing from a round gets an empty (or all-None) round, not none.
        min_effect_pct: the floor, percent; alpha: the false discovery rate;
            confidence: the level of every interval.
        reference: the cases declared untouched by the change (measured ones);
            None or empty: every case judged on its own change. Their run
            factors are divided out of every case unless the reference itself
            moved (its paired change regressed or improved).
        min_cases: the fewest reference cases for a reference at all, and in a
            run for its factor to count.
        focus: the cases to judge (BH over these only) when the others were
            measured only for the reference; chosen before this session's
            data (what compare flagged), or the BH guarantee is lost. None: all.
    """
    tables = {tuple(k): _table(v) for k, v in cases.items()}
    judged = list(tables) if focus is None else [tuple(k) for k in focus]
    refs = list(dict.fromkeys(tuple(k) for k in (reference or ())))
    for what, keys in (("focus", judged), ("reference", refs)):
        if [k for k in keys if k not in tables]:
            raise ValueError(f"{what} names cases that were not measured: {[k for k in keys if k not in tables]}")
    floor = math.log1p(min_effect_pct / 100.0)
    adjusted: dict[CaseKey, Tables] = {k: tables[k] for k in judged}
    used, suite = False, SuiteShift(Verdict.NOT_JUDGED, NO_REFERENCE, n_cases=len(refs))
    if refs and len(refs) < min_cases:
        suite = replace(suite, reason=f"fewer than {min_cases} reference cases: each case judged on its own change")
    elif refs:
        all_tables = list(tables.values())
        shape = (max(t[0].shape[0] for t in all_tables), max(t[0].shape[1] for t in all_tables),
                 max(t[1].shape[1] for t in all_tables))
        devs, (fb, fc) = _reference_factors([tables[k] for k in refs], shape, min_cases)
        # The reference's own paired change, judged with the cases' method and rule: a move it makes is
        # taken out of every case. Only a decided move (regressed / improved) drops it: where runs
        # drift together, a merely significant shift is as often the drift itself, which the cases'
        # own intervals share; falling back on those lost 1.3 points of coverage (95.0 -> 93.7%).
        s = _diffs(fb, fc, higher_is_better)
        verdict, reason, est = _judge(s, floor, confidence, method, None, alpha)
        moved = verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
        suite = SuiteShift(verdict, reason, rounds=int(s.size), n_cases=len(refs),
                           spread_pct=100.0 * float(s.std(ddof=1)) if s.size >= 2 else None)
        if est is not None:
            ratio, lo, hi = _interval(est, higher_is_better)
            suite = replace(suite, ratio=ratio, ci_low=lo, ci_high=hi, p_value=est.p_value)
        if moved:
            suite = replace(suite, reason=f"the reference moved ({reason}): each case judged on its own change")
        else:
            used = True
            index = {k: i for i, k in enumerate(refs)}
            for k in judged:
                if k not in index:
                    adjusted[k] = _adjust(*tables[k], fb, fc)
                elif len(refs) > 1:  # a reference case against the others
                    adjusted[k] = _adjust(*tables[k], *_factors(*devs, min_cases, index[k]))
    pvals = []  # BH over the cases that can be tested at all
    for k in judged:
        d = _diffs(*adjusted[k], higher_is_better)
        pvals.append(stats.one_sample(d, confidence, method).p_value if d.size >= MIN_ROUNDS else math.nan)
    results = tuple(_case(k, *adjusted[k], tables[k] if adjusted[k] is not tables[k] else None, min_effect_pct,
                          confidence, higher_is_better, method, None if math.isnan(q) else float(q), alpha)
                    for k, q in zip(judged, stats.benjamini_hochberg(pvals)))
    counts = verdict_counts(results)
    n_rounds = max((t[0].shape[0] for t in tables.values()), default=0)
    return Confirmation(results, suite, counts, n_rounds, alpha, confidence, min_effect_pct, method,
                        higher_is_better, tuple(refs), used)


def verdict_counts(cases: Iterable[CaseConfirmation]) -> dict:
    """verdict -> how many of ``cases`` have it, for each verdict a tested case can have (and ``broken``
    and ``config-flip`` when a case has it)."""
    verdicts = [c.verdict for c in cases]
    extra = {v: verdicts.count(v) for v in (Verdict.BROKEN, Verdict.CONFIG_FLIP) if v in verdicts}
    return {**{v: verdicts.count(v) for v in TESTED}, **extra}


def with_broken(judgement: Confirmation, broken: Mapping[CaseKey, str]) -> Confirmation:
    """``judgement`` with each case of ``broken`` (measured on one side, never on the other: key -> why)
    made ``broken``. Its rounds say nothing about a change, and "too few rounds" would hide that the
    kernel crashed, failed its check or hung on one side; so it is decided, and fails the gate."""
    if not broken:
        return judgement
    known = {c.key for c in judgement.cases}
    cases = [replace(c, verdict=Verdict.BROKEN, reason=broken[c.key], ratio=None, ci_low=None, ci_high=None,
                     p_value=None, q_value=None) if c.key in broken else c for c in judgement.cases]
    cases += [CaseConfirmation(key=k, verdict=Verdict.BROKEN, reason=why, min_effect_pct=judgement.min_effect_pct,
                               confidence=judgement.confidence, method=judgement.method,
                               higher_is_better=judgement.higher_is_better)
              for k, why in broken.items() if k not in known]
    return replace(judgement, cases=tuple(cases), counts=verdict_counts(cases))


def decided(case: CaseConfirmation | SuiteShift) -> bool:
    """A case needs no more rounds: regressed, improved or unchanged."""
    return case.verdict in DECIDED
