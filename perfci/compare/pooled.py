"""``perfci compare STORE CUR``: tonight against the last K nights, each case with its own night-to-night noise.

Pure: tables in, a :class:`perfci.compare.comparison.Comparison` out, so every
renderer of ``perfci compare`` (table, markdown, json, csv, forest plot) works
unchanged.

Why a pooled baseline
---------------------
One run's 7 repeats share that run's clocks and placement, so ``perfci compare``
must cover run-to-run noise with a fixed effect floor (5.36% on the H200), and
a 3% change is out of reach. With K earlier nights, each case's run-to-run
spread is *measured*, and the floor's job is done by an interval.

How a case is judged (log time)
-------------------------------
1. **Nights.** For each of the case's last K ok runs: its level ``m_i``, the
   mean of the fastest half of its repeats, and that level's own variance
   ``v_i`` from a seeded bootstrap of the repeats (:mod:`perfci.history.nights`
   says why not the median). A night whose repeats scattered (robust spread
   >= 5% and >= 3x the case's typical night) is left out: it was disturbed, as
   in compare.
2. **Each history night's suite-wide shift is taken out** of its cases' levels:
   ``a + c*exponent + b/us`` fitted robustly over the suite (Huber): a night
   whose clocks ran lower moves every compute-bound case together, one whose
   launches ran faster every short case by about the same time; neither is a
   case's own noise.
3. **Between-night variance, moderated per kernel family.** ``s^2``, the
   sample variance of the ``m_i`` (K-1 degrees of freedom), is shrunk towards
   its family's prior (:mod:`perfci.compare.prior`: the cases of one kernel
   label, limma's empirical Bayes within the family, a weight of at most 8
   nights, never below the lower 95% bound of the case's own variance; a small
   family takes its kernel's, else the suite's, at least the profile's one-run
   spread or the suite's own upper bound where lower). A suite-wide prior shrank split-K cases that move 3% between
   processes to the suite's 0.5% and called them regressed. The moderated
   variance is never taken below ``mean(v_i)``: a level cannot be steadier from
   night to night than its own repeats let it be (on the H200 a cuBLAS GEMM's
   repeats mix two speeds 6% apart on three nights and sit all on the slow one
   on two; three tight mixed nights said nothing of that).
4. **Tonight.** ``est = m_0 - mean(m_i) - shift_0``, judged with a prediction
   interval: ``se^2 = s~^2 (1 + 1/K) + max(0, v_0 - mean(v_i))``: the
   night-to-night spread of the center and of tonight, plus whatever tonight's
   repeats scattered beyond a usual night's. t distribution, two-sided p;
   Benjamini-Hochberg across the suite. ``shift_0``, tonight's suite-wide shift
   at the case, is fitted as in 2 but on the *other* kernels' cases, with a
   biweight (:func:`perfci.compare.shift.tonight_offsets`), so a change to one
   kernel's code is not taken as the suite's. Compare's common mode of tonight
   is reported on its own line.
5. **Verdicts** (:func:`perfci.verdict.decide`). ``regressed``: q <= alpha and
   the whole interval above +floor, the floor being ``--min-effect``, or 1% plus
   the profile's ``floor_us`` as a share of the case's time (a short kernel's
   night moves by a fixed time); ``improved`` mirrors it; ``unchanged``: the
   interval inside +-margin (:func:`unchanged_margin`): within +-1%, or holding 0
   and reaching no further than 4% (4 x the floor, and the profile's one-run
   floor); ``inconclusive`` otherwise, which the nightly confirms. A scattered
   tonight is never ``regressed``. Leave-one-out over the H200's stored nights
   (``benchmarks/history_validation.py --only stored-nights``, docs/history.md):
   a +3% change to a kernel's cases was ``unchanged`` in 61-81% of them, now in
   3-6%, for 15-43% of cases ``inconclusive`` on unchanged nights (was 0.4-10%).

Everything is in time: device clocks of different processes are not compared
(on the H200, four nights' device clocks carried a per-process factor of up to
12% while their times were right), and the between-night spread in time
already contains whatever the clocks did.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from perfci import stats
from perfci.compare.restart import judge_since_restart, notes as restart_notes
from perfci.compare.comparison import CaseComparison, CompareOptions, Comparison, summarize
from perfci.compare.flips import ran_two_configs
from perfci.compare.noise import NoiseProfile
from perfci.compare.prior import CaseVariance, Prior, PriorOptions, case_priors, moderated_var
from perfci.compare.shift import tonight_offsets
from perfci.compare.verdicts import case_exponent, log_samples, status_case
from perfci.history.nights import level_var, mode_offsets, night_level
from perfci.model import ResultRow, ResultTable
from perfci.verdict import DISTURBED, DisturbedRule, Reasons, SuiteShift, Verdict, decide

DEFAULT_NIGHTS = 5


@dataclass(frozen=True)
class PooledOptions:
    nights: int = DEFAULT_NIGHTS  # K: the last K ok runs of each case
    min_nights: int = 2  # fewer: the case is inconclusive
    floor_pct: float = 1.0  # regressed needs the interval above this (overridden by --min-effect)
    prior: PriorOptions = PriorOptions()  # where each case's between-night variance is shrunk to
    # unchanged: the interval inside +-margin (unchanged_margin). "resolution": its own width, at least
    # the floor, at most margin_cap x the floor and the profile's one-run floor; "profile": the
    # profile's one-run floor alone (5.36% on the H200: +3% changes read unchanged).
    margin: str = "resolution"
    margin_cap: float = 4.0
    # Add the profile's floor_us / base time to the floor regressed must clear, as compare does (not
    # to the unchanged margin): a short kernel's night moves by a fixed fraction of a microsecond (H200
    # decode, a night with every host core busy: split-K cases of 9-15 us +0.55-0.7 us, repeats tight).
    # A 3% change of a 7-15 us kernel is then inconclusive rather than regressed; confirm decides it.
    absolute_floor: bool = True
    night_common_mode: bool = True  # take each history night's suite-wide shift out
    excess_over: str = "mean"  # tonight's scatter counts beyond the nights' mean | max | off
    min_night_mode_cases: int = 6
    disturbed: DisturbedRule = DISTURBED  # a night (or tonight) whose repeats scattered
    level: str = "fast"  # a night's value: fast (mean of the fastest half of its repeats) | median
    mode: str = "affine"  # a run's suite-wide shift: affine (a + c*exponent + b/us, Huber) | median
    within_floor: bool = True  # between-night variance >= the nights' own (bootstrap) level variance
    exclude_own_kernel: bool = True  # tonight's suite shift at a case is fitted on the other kernels' cases
    min_others_level: int = 3  # too few other cases for that fit, but this many: their level alone (compare.shift)


@dataclass(frozen=True)
class NightPool:
    """One case's last K nights, reduced to what the test needs (log scale)."""

    row: ResultRow  # the case's newest ok row in the history
    medians: tuple[float, ...]  # log level of each night used, less that night's common mode
    within: tuple[float, ...]  # variance of each of those levels from the night's own repeats
    spreads: tuple[float, ...]  # robust spread of each night's repeats
    left_out: int  # disturbed nights not used
    runs: tuple[int, ...] = ()  # the run (index into the history) of each night used
    flipped: bool = False  # its nights launched two configs of one source (perfci.compare.flips)

    @property
    def k(self) -> int:
        return len(self.medians)

    @property
    def center(self) -> float:
        return float(np.mean(self.medians))

    @property
    def var(self) -> float:
        return float(np.var(self.medians, ddof=1)) if self.k > 1 else 0.0


@dataclass(frozen=True)
class Baseline:
    pools: Mapping[tuple[str, str, str], NightPool]
    last_status: Mapping[tuple[str, str, str], ResultRow]  # the newest row of every case, any status
    suite_keys: Mapping[str, frozenset]  # suite -> the cases of its newest run
    priors: Mapping[tuple[str, str, str], Prior]  # each pooled case's prior (perfci.compare.prior)
    n_runs: int
    # Cases whose pool restarts at a run (an `expected` triage record): why, in words (perfci.compare.restart)
    restarted: Mapping[tuple[str, str, str], str] = field(default_factory=dict)


def _pool(indexed: Sequence[tuple[int, ResultRow]], opts: PooledOptions) -> NightPool:
    rows = [r for _, r in indexed]
    logs = [log_samples(r) for r in rows]
    spreads = [stats.robust_spread(x) for x in logs]
    keep = []
    for i, s in enumerate(spreads):
        others = [t for j, t in enumerate(spreads) if j != i]
        keep.append(not (others and opts.disturbed.scattered(s, float(np.median(others)))))
    if sum(keep) < opts.min_nights:
        keep = [True] * len(rows)
    used = [i for i, k in enumerate(keep) if k]
    return NightPool(rows[used[-1]], tuple(night_level(logs[i], opts.level) for i in used),
                     tuple(level_var(logs[i], opts.level) for i in used), tuple(spreads[i] for i in used),
                     len(rows) - len(used), tuple(indexed[i][0] for i in used),
                     ran_two_configs([rows[i] for i in used]))


def build_baseline(runs: Sequence[tuple[str, ResultTable]], profile: NoiseProfile,
                   options: PooledOptions | None = None, arch: str = "",
                   restarts: Mapping[tuple[str, str, str], tuple[int, str]] | None = None) -> Baseline:
    """Each case's last K ok nights from RUNS (suite, table), oldest first.

    RESTARTS: case -> (the index of the run its nights start at, why): an
    intended change accepted there; the nights before it are not pooled.
    """
    opts = options or PooledOptions()
    restarts = restarts or {}
    ok_rows: dict[tuple[str, str, str], list[tuple[int, ResultRow]]] = {}
    last: dict[tuple[str, str, str], ResultRow] = {}
    suite_keys: dict[str, frozenset] = {}
    for j, (suite, table) in enumerate(runs):
        suite_keys[suite] = frozenset(r.key for r in table.rows)
        for row in table.rows:
            last[row.key] = row
            if row.status == "ok" and row.median_us and j >= restarts.get(row.key, (0, ""))[0]:
                ok_rows.setdefault(row.key, []).append((j, row))
    pools = {key: _pool(rows[-opts.nights:], opts) for key, rows in ok_rows.items()}
    if opts.night_common_mode:
        pools = _remove_night_modes(pools, arch, opts)
    priors = case_priors({key: _variance(p) for key, p in pools.items()}, profile, opts.prior)
    return Baseline(pools, last, suite_keys, priors, len(runs), {k: why for k, (_, why) in restarts.items()})


def _variance(pool: NightPool) -> CaseVariance:
    return CaseVariance(pool.k, pool.var, pool.center, pool.flipped)


def _remove_night_modes(pools: dict, arch: str, opts: PooledOptions) -> dict:
    """Take each night's suite-wide shift out of its cases' levels.

    A night whose clocks ran a little lower moves every compute-bound case
    together, and one whose launches ran faster every short case; left in, that
    shift would count as every case's own noise. Each run's shift (``opts.mode``:
    :func:`perfci.history.nights.mode_offsets`) of its cases' deviations from
    their centers is removed, twice, since the centers move with it.
    """
    exps = {key: _exponent(p.row, arch) for key, p in pools.items()}
    raw = {key: np.asarray(p.medians) for key, p in pools.items()}
    adj = dict(raw)
    for _ in range(2):
        centers = {key: float(np.mean(v)) for key, v in adj.items()}
        devs: dict[int, list[tuple[tuple, float, float, float]]] = {}
        for key, p in pools.items():
            for run, m in zip(p.runs, raw[key]):
                devs.setdefault(run, []).append((key, m - centers[key], exps[key], centers[key]))
        offsets: dict[tuple, dict[int, float]] = {}
        for run, v in devs.items():
            off = mode_offsets([d for _, d, _, _ in v], [e for _, _, e, _ in v], [c for _, _, _, c in v],
                               opts.mode, opts.min_night_mode_cases)
            for (key, _, _, _), o in zip(v, off):
                offsets.setdefault(key, {})[run] = float(o)
        adj = {key: raw[key] - np.asarray([offsets[key][r] for r in p.runs]) for key, p in pools.items()}
    return {key: replace(p, medians=tuple(float(x) for x in adj[key])) for key, p in pools.items()}


def _spread(row: ResultRow, pool: NightPool, baseline: Baseline, popts: PooledOptions) -> tuple[float, float]:
    """(the case's between-night variance, its degrees of freedom): moderated, at least its nights' own."""
    s2, df = moderated_var(_variance(pool), baseline.priors[row.key], popts.prior)
    if popts.within_floor:  # a level cannot move less between nights than its own repeats let it
        s2 = max(s2, float(np.mean(pool.within)))
    return s2, df


def _usual(within: Sequence[float], how: str) -> float:
    if how == "off":
        return math.inf
    return float(np.max(within) if how == "max" else np.mean(within))


def _exponent(row: ResultRow, arch: str) -> float:
    """The case's clock exponent, 0 when unknown: in time, a night's shift is fitted on it."""
    e = case_exponent(row, arch)
    return 0.0 if e is None else e


@dataclass(frozen=True)
class _Tested:
    pool: NightPool
    cur: ResultRow
    est: float
    se: float
    df: float
    s_between: float
    spread_cur: float
    exponent: float


def judge(baseline: Baseline, cur: ResultTable, cur_suite: str, arch: str, profile: NoiseProfile,
          options: CompareOptions | None = None, pooled: PooledOptions | None = None,
          base_label: str = "history") -> Comparison:
    """Judge every case of CUR against its pooled nights (see the module docstring)."""
    opts = options or CompareOptions()
    popts = pooled or PooledOptions()
    floor_pct = opts.min_effect_pct if opts.min_effect_pct is not None else popts.floor_pct
    floor = math.log1p(floor_pct / 100.0)
    cases: list[CaseComparison] = []
    candidates = []
    since_restart = []
    for row in cur.rows:
        pool = baseline.pools.get(row.key)
        prev = baseline.last_status.get(row.key)
        if row.key in baseline.restarted and row.status == "ok" and row.median_us and (
                pool is None or pool.k < popts.min_nights):
            since_restart.append((row, pool))
        elif row.status != "ok" or not row.median_us:
            cases.append(_plain(row, Verdict.ADDED, "not in the history") if prev is None else
                         status_case(prev, row, weight=row.weight, where=("in the last run", "now")))
        elif pool is None:  # never ok in the history
            verdict, why = ((Verdict.FIXED, f"{prev.status} in the last run, ok now") if prev is not None
                            else (Verdict.ADDED, "not in the history"))
            cases.append(_plain(row, verdict, why))
        elif pool.k < popts.min_nights:
            cases.append(replace_base(_plain(row, Verdict.INCONCLUSIVE, f"{pool.k} night(s) of history; "
                                             f"pooling needs {popts.min_nights}"), pool, row))
        else:
            candidates.append((row, pool))
    cur_keys = {r.key for r in cur.rows}
    for key in sorted(baseline.suite_keys.get(cur_suite, frozenset()) - cur_keys):
        cases.append(_plain(baseline.last_status[key], Verdict.REMOVED, "in the suite's last run, not in cur",
                            side="base"))

    raw = [night_level(log_samples(r), popts.level) - p.center for r, p in candidates]
    exps = [_exponent(r, arch) for r, _ in candidates]
    cm = (stats.common_mode(raw, exps, min_cases=opts.min_common_mode_cases) if opts.common_mode and raw
          else stats.CommonMode(n_cases=len(raw), method="none"))
    spreads = [_spread(row, pool, baseline, popts) for row, pool in candidates]
    if opts.common_mode and raw:
        offsets = tonight_offsets(raw, exps, [p.center for _, p in candidates], [r.kernel for r, _ in candidates],
                                  [math.sqrt(s2 * (1.0 + 1.0 / p.k)) for (s2, _), (_, p) in zip(spreads, candidates)],
                                  popts.mode, opts.min_common_mode_cases, popts.exclude_own_kernel,
                                  popts.min_others_level)
    else:
        offsets = np.zeros(len(raw))
    tested = []
    for (row, pool), shift, e, offset, (s2, df) in zip(candidates, raw, exps, offsets, spreads):
        logs = log_samples(row)
        excess = max(0.0, level_var(logs, popts.level) - _usual(pool.within, popts.excess_over))
        se = math.sqrt(max(s2, 1e-8) * (1.0 + 1.0 / pool.k) + excess)
        tested.append(_Tested(pool, row, shift - float(offset), se, df, math.sqrt(s2),
                              stats.robust_spread(logs), e))
    estimates = [stats.t_estimate(t.est, t.se, t.df, opts.confidence) for t in tested]
    p_values = [e.p_value for e in estimates]
    q_values = stats.benjamini_hochberg(p_values) if opts.fdr else np.asarray(p_values, dtype=float)
    for t, e, q in zip(tested, estimates, q_values):
        case_floor = floor_pct
        if popts.absolute_floor and opts.min_effect_pct is None and profile.floor_us:
            case_floor += 100.0 * profile.floor_us / math.exp(t.pool.center)
        cases.append(_verdict(t, e, float(q), math.log1p(case_floor / 100.0), floor, profile, opts, popts))
    cases.extend(judge_since_restart(since_restart, baseline.restarted, cur.path, arch, profile, opts))
    cases.sort(key=CaseComparison.severity_key)
    suite = _suite(cm, tested, profile)
    notes = _notes(baseline, tested, cm, suite, profile, opts, popts, floor) + restart_notes(baseline.restarted, cur)
    few = sum(1 for _, p in [(None, baseline.pools.get(r.key)) for r in cur.rows
                             if r.status == "ok" and r.key not in baseline.restarted]
              if p is not None and p.k < popts.min_nights)
    if few:
        notes.insert(0, f"{few} case(s) have fewer than {popts.min_nights} ok nights in the store, so they are "
                        f"inconclusive: pooling needs {popts.min_nights}; add runs with `perfci history add`")
    return Comparison(base_label, cur.path, arch, profile, opts, tuple(cases), suite, summarize(cases),
                      False, tuple(notes))


def unchanged_margin(low: float, high: float, min_effect: float, cap: float) -> float:
    """The equivalence margin of an interval [LOW, HIGH] (logs): ``unchanged`` needs it inside +-margin.

    The interval's own width, so that between MIN_EFFECT and CAP a case is
    unchanged exactly when its interval holds 0: no sign of a change, at the
    resolution its nights give it. At least MIN_EFFECT: an interval inside
    +-1% is unchanged even when it excludes 0. At most CAP, the profile's
    one-run floor: unchanged never claims less than a one-run compare would.
    """
    return min(max(high - low, min_effect), max(cap, min_effect))


def _verdict(t: _Tested, est: stats.Estimate, q: float, floor: float, min_effect: float, profile: NoiseProfile,
             opts: CompareOptions, popts: PooledOptions) -> CaseComparison:
    lo, hi = est.low, est.high
    base_us = math.exp(t.pool.center)
    c = replace_base(CaseComparison(
        kernel=t.cur.kernel, shape=t.cur.shape, dtype=t.cur.dtype, verdict="", ratio=math.exp(t.est),
        ci_low=math.exp(lo), ci_high=math.exp(hi), p_value=est.p_value, q_value=q,
        floor_pct=100.0 * math.expm1(floor), clock_exponent=t.exponent, clock_space="time",
        spread_base_pct=100.0 * t.s_between, spread_cur_pct=100.0 * t.spread_cur), t.pool, t.cur)
    if popts.margin == "profile":  # the rule before per-case margins, kept for validation side by side
        margin = math.log1p(profile.floor_for(t.exponent, False, base_us) / 100.0)
        inside, past = f"±{100 * math.expm1(margin):.1f}% (profile floor)", "the profile floor"
    else:
        cap = min(math.log1p(popts.margin_cap * math.expm1(min_effect)),
                  math.log1p(profile.floor_for(t.exponent, False, base_us) / 100.0))
        margin = unchanged_margin(lo, hi, min_effect, cap)
        inside = past = f"±{100 * math.expm1(margin):.1f}%"
        inside += " (the minimum effect)" if margin <= min_effect else " (what its nights resolve)"
    # The floor (1%) is what a change must clear; unchanged needs the whole interval inside the margin.
    decision = decide(lo, hi, floor=floor, margin=margin, q=q, alpha=opts.alpha, reasons=Reasons(
        regressed=f"significant against {t.pool.k} nights, interval above the floor",
        improved=f"significant against {t.pool.k} nights, interval below the floor",
        unchanged=f"interval inside {inside}",
        straddles="significant, but the interval reaches inside the floor",
        not_significant=f"not significant, interval reaches past {past}"))
    if decision.verdict in (Verdict.REGRESSED, Verdict.IMPROVED):
        typical = float(np.median(t.pool.spreads))
        if popts.disturbed.scattered(t.spread_cur, typical):
            return _with(c, Verdict.INCONCLUSIVE, f"tonight's repeats spread ±{100 * t.spread_cur:.1f}% against "
                                                  f"±{100 * typical:.1f}% on a usual night: run it again", "cur")
    return _with(c, decision.verdict, decision.reason)


def _with(c: CaseComparison, verdict: Verdict, reason: str, disturbed: str = "") -> CaseComparison:
    return replace(c, verdict=verdict, reason=reason, disturbed=disturbed)


def replace_base(c: CaseComparison, pool: NightPool, row: ResultRow) -> CaseComparison:
    """Fill the base side of C from the pooled nights: their center, count and status."""
    base_us = math.exp(pool.center)
    return replace(c, base_us=base_us, cur_us=row.median_us, raw_ratio=row.median_us / base_us, n_base=pool.k,
                   n_cur=len(row.repeats_us) or 1, weight=row.weight, base_status="ok", cur_status=row.status)


def _plain(row: ResultRow, verdict: Verdict, why: str, side: str = "cur") -> CaseComparison:
    base = side == "base"
    return CaseComparison(kernel=row.kernel, shape=row.shape, dtype=row.dtype, verdict=verdict, reason=why,
                          base_us=row.median_us if base else None, cur_us=None if base else row.median_us,
                          weight=row.weight, base_status=row.status if base else "",
                          cur_status="" if base else row.status)


def _suite(cm: stats.CommonMode, tested: Sequence[_Tested], profile: NoiseProfile) -> SuiteShift:
    floor_pct = profile.suite_floor_pct
    mem, comp = 100.0 * math.expm1(cm.memory), 100.0 * math.expm1(cm.memory + cm.clock)
    overall = 100.0 * math.expm1(cm.overall)
    shift = SuiteShift(Verdict.NOT_JUDGED, memory_pct=mem, compute_pct=comp, overall_pct=overall,
                       method=cm.method, clock_normalized=False, floor_pct=floor_pct, time_pct=overall,
                       n_cases=cm.n_cases)
    if cm.method == "none":
        return shift
    worst = max((mem, comp), key=abs) if cm.method == "split" else overall
    # In time, a suite-wide shift cannot be told from a clock or driver change: never a regression.
    return replace(shift, verdict=Verdict.UNCHANGED if abs(worst) <= floor_pct else Verdict.INCONCLUSIVE)


def _notes(baseline: Baseline, tested: Sequence[_Tested], cm: stats.CommonMode, suite: SuiteShift,
           profile: NoiseProfile, opts: CompareOptions, popts: PooledOptions, floor: float) -> list[str]:
    notes = []
    if tested:
        ks = sorted({t.pool.k for t in tested})
        nights = f"{ks[0]}" if len(ks) == 1 else f"{ks[0]}-{ks[-1]}"
        spreads = [100.0 * t.s_between for t in tested]
        notes.append(f"pooled baseline: each case against its last {nights} ok nights of {baseline.n_runs} "
                     f"run(s) in the store (--nights {popts.nights}), in time; between-night spread "
                     f"(moderated) median {np.median(spreads):.2f}%, range {min(spreads):.2f}-{max(spreads):.2f}%")
        level = "the mean of its fastest half of repeats" if popts.level == "fast" else "its median"
        notes.append(f"a night's value: {level}; spread prior {_prior_words(baseline, tested)}; a case's "
                     f"interval adds the spread of the nights' mean and of tonight, and any scatter of tonight's "
                     f"repeats beyond a usual night's")
    left = sum(t.pool.left_out for t in tested)
    if left:
        notes.append(f"{left} disturbed night(s) (repeats scattered >= {popts.disturbed.spread_pct:g}%) left "
                     f"out of their case's pool")
    if cm.method != "none":
        line = (f"common mode (in time): compute-bound cases {suite.compute_pct:+.1f}%, memory-bound "
                f"{suite.memory_pct:+.1f}%" if cm.method == "split" else
                f"common mode (in time): every case {suite.overall_pct:+.1f}%")
        if suite.verdict == Verdict.INCONCLUSIVE:
            line += " -- the suite moved as a whole tonight: clocks, driver or a shared change?"
        how = ("from tonight's shift fitted per case (a + b/us, robust: short kernels move by a fixed time)"
               if popts.mode == "affine" else "from it")
        if popts.mode == "affine" and popts.exclude_own_kernel:
            how = ("from tonight's shift at each case, fitted on the other kernels' cases (a + b/us, biweight: "
                   "short kernels move by a fixed time, and a kernel's own change is not the suite's)")
        notes.append(f"{line}; cases are judged on their residual {how}")
    absolute = popts.absolute_floor and opts.min_effect_pct is None and profile.floor_us
    notes.append(f"regressed/improved: q <= {opts.alpha:g} and the interval beyond ±{100 * math.expm1(floor):.1f}%"
                 + (" (--min-effect)" if opts.min_effect_pct is not None else "")
                 + (f" + {profile.floor_us:g} us / base time" if absolute else "")
                 + "; unchanged: " + _unchanged_words(profile, popts, floor))
    return notes


def _unchanged_words(profile: NoiseProfile, popts: PooledOptions, floor: float) -> str:
    if popts.margin == "profile":
        return (f"the interval inside the {profile.name} profile's floor ({profile.floor_pct:g}%"
                + (f" + {profile.floor_us:g} us" if profile.floor_us else "") + ")")
    cap = 100.0 * popts.margin_cap * math.expm1(floor)
    return (f"the interval inside ±{100 * math.expm1(floor):.1f}%, or holding 0 and inside ±{cap:.1f}% "
            f"(and the {profile.name} profile's floor); otherwise inconclusive")


def _prior_words(baseline: Baseline, tested: Sequence[_Tested]) -> str:
    """Where the tested cases' priors came from, e.g. "per family (splitk_decode: 16 case(s), worth 8.0 nights)"."""
    used: dict[tuple[str, str], list] = {}
    for t in tested:
        p = baseline.priors[t.cur.key]
        used.setdefault((p.source, p.group), [p, 0])[1] += 1

    def weight(p: Prior) -> str:
        return "every case alike" if math.isinf(p.d0) or p.d0 >= 1e4 else f"worth {p.d0:.1f} nights"

    if len(used) == 1 and not next(iter(used))[1]:  # one prior for every case: the suite's or the profile's
        p = next(iter(used.values()))[0]
        return f"from the {p.source} ({weight(p)})"
    parts = [f"{p.group or 'the ' + p.source}: {n} case(s), {weight(p)}" for p, n in (used[k] for k in sorted(used))]
    return "per family (" + "; ".join(parts) + ")"
