"""The verdicts of ``perfci compare``: two result tables in, a frozen Comparison out.

Pure: no printing, no files. What comes out is defined in
:mod:`perfci.compare.comparison`; renderers (:mod:`perfci.compare.render`) and
the command line (:mod:`perfci.compare.cli`) sit on top.

How a case is judged
--------------------
1. **Space.** Per repeat, log time; when both sides carry per-repeat core clocks,
   add ``e * log(clock)``, where ``e`` is the case's clock exponent from its
   arithmetic intensity (1 compute-bound → cycles, 0 memory-bound → time,
   partial in between; see :func:`perfci.compare.noise.clock_exponent`). Except under a
   power limit: when most repeats of either side ran power- or thermal-capped,
   the kernel sets its own clock (measured on the H200: a GROUP_M 8 -> 1 change
   ran 22% slower at a 16% lower clock while every other case kept its clock),
   and dividing that out would hide a real regression. Such a case's repeats are
   moved to their run's median clock, and its level by the median clock shift
   of the suite's power-limited cases: what the device, not the kernel, did.
2. **Common mode.** Every case's shift is split into a suite-wide part and a
   residual. The suite-wide part is robust (medians) and has a memory-side and a
   clock-side component, so a clock swing that only compute-bound cases feel is
   still removed when clocks were not recorded. The common mode is reported on
   its own line and judged on its own (see *Policy*).
3. **Test.** Mann–Whitney U on the repeats, base against cur minus the common
   mode; Benjamini–Hochberg across every tested case of the suite.
4. **Effect.** Hodges–Lehmann shift of the residual with its Moses interval;
   the floor comes from the noise profile.

Verdicts (:func:`perfci.verdict.decide`, the floor also the equivalence margin):
``regressed`` = significant after BH **and** the interval's lower end above
+floor; ``improved`` mirrors it; ``unchanged`` = the interval lies inside ±floor;
``inconclusive`` = anything else (significant but straddling the floor, a wide
interval, too few repeats to ever reach significance, a disturbed side, a floor
that had to swallow a clock swing). ``broken`` = ok in base, fail/error/timeout
in cur. ``added``/``removed`` = on one side only.

Policy on suite-wide shifts
---------------------------
A case regresses only when it stands out from the common mode. The common mode
itself gets a suite verdict: with clock telemetry on both sides (the shift is in
cycles, so the core clock did not cause it), a shift beyond the profile's suite
floor is a **suite-wide regression** and fails the gate like a case does.
Without telemetry a suite-wide shift cannot be told apart from a clock swing, so
it is reported and marked ``inconclusive`` (``--strict`` exits 3), never a
regression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from perfci import stats
from perfci.compare.comparison import CaseComparison, CompareOptions, Comparison, summarize
from perfci.compare.flips import with_flips
from perfci.compare.noise import NoiseProfile, clock_exponent, profile_for_arch
from perfci.compare.notes import comparison_notes
from perfci.model import DTYPE_BYTES, OUT_DTYPE_BYTES, ResultRow, ResultTable
from perfci.verdict import SuiteShift, Verdict, decide, status_verdict


# --------------------------------------------------------------------------- helpers


def table_arch(table: ResultTable) -> str:
    archs = [r.arch for r in table.rows if r.arch]
    return max(set(archs), key=archs.count) if archs else ""


def case_exponent(row: ResultRow, arch: str) -> float | None:
    """The case's clock exponent (1 compute-bound .. 0 memory-bound); None when unknown."""
    eb = DTYPE_BYTES.get(row.dtype, 2)
    ob = OUT_DTYPE_BYTES.get(row.dtype, 2)
    return clock_exponent(arch, row.dtype, row.m, row.n, row.k, eb, ob)


def log_samples(row: ResultRow) -> np.ndarray:
    """Log of the repeats, or of the median when a row has no repeats."""
    values = row.repeats_us or ((row.median_us,) if row.median_us else ())
    return np.log(np.asarray(values, dtype=float))


def _clocks(row: ResultRow, n: int) -> np.ndarray | None:
    """Per-repeat clocks when every repeat has one, else None."""
    c = row.sclk_mhz
    if len(c) != n or n == 0 or any(v is None for v in c):
        return None
    return np.log(np.asarray(c, dtype=float))


@dataclass(frozen=True)
class _Prepared:
    base: ResultRow
    cur: ResultRow
    lb: np.ndarray  # log samples in the judged space
    lc: np.ndarray
    exponent: float  # 0 when unknown
    exponent_known: bool
    normalized: bool
    shift: float  # HL shift before the common mode
    own_clock: float | None = None  # log ratio of this case's own median clocks, cur/base
    repeat_clocks: bool = True  # False: repeats judged in time, only the runs' levels in cycles
    unreferenced: bool = False  # power-limited, and no other case said what the device's clock did


def _own_clock_shift(b: ResultRow, c: ResultRow) -> float | None:
    cb, cc = _clocks(b, len(b.repeats_us)), _clocks(c, len(c.repeats_us))
    if cb is None or cc is None:
        return None
    return stats.median(cc) - stats.median(cb)


def _power_limited(row: ResultRow) -> bool:
    """Most repeats ran under a power or thermal limit (NVML reasons, amd-smi violations)."""
    flags = [t for t in row.throttled if t is not None]
    return bool(flags) and sum(flags) * 2 > len(flags)


def _prepare(b: ResultRow, c: ResultRow, arch: str, opts: CompareOptions,
             device_clock: dict[bool, float | None]) -> _Prepared:
    lb, lc = log_samples(b), log_samples(c)
    e = case_exponent(b, arch)
    known = e is not None
    e = e or 0.0
    own = _own_clock_shift(b, c)
    # "normalized" means the case was judged with clock knowledge: compute-bound
    # ones in cycles, memory-bound ones in time because the clock does not drive
    # them. Either way it gets the clocked floor.
    normalized = False
    repeat_clocks = True
    if opts.clock_normalize and known and own is not None:
        cb, cc = _clocks(b, lb.size), _clocks(c, lc.size)
        limited = _power_limited(b) or _power_limited(c)
        unreferenced = limited and device_clock[True] is None
        if limited and device_clock[True] is not None:
            # Under a power cap the kernel sets its own clock: a schedule that
            # draws more power runs slower *because* its clock falls, so its own
            # clock must not be divided out. Repeats are moved to their run's
            # median clock; the level moves by what the device's other
            # power-limited cases saw.
            level_b, level_c = 0.0, e * device_clock[True]
        else:
            level_b, level_c = e * stats.median(cb), e * stats.median(cc)
        per_repeat_b = lb + e * (cb - stats.median(cb)) + level_b
        per_repeat_c = lc + e * (cc - stats.median(cc)) + level_c
        # Per-repeat clocks only where they explain the repeats' spread: a clock
        # read badly, or flat while the times scatter, would widen the interval
        # with clock noise. Then the repeats are judged in time and only each
        # run's level is moved by its median clock, which cannot widen anything.
        repeat_clocks = _width(per_repeat_b, per_repeat_c) <= _width(lb, lc) * (1.0 + 1e-9)
        if repeat_clocks:
            lb, lc = per_repeat_b, per_repeat_c
        else:
            lb, lc = lb + level_b, lc + level_c
        normalized = True
    shift = stats.median((lc[:, None] - lb[None, :]).ravel())
    return _Prepared(b, c, lb, lc, e, known, normalized, shift, own, repeat_clocks,
                     unreferenced=normalized and unreferenced)


def _width(base: np.ndarray, cur: np.ndarray) -> float:
    """Width of the Hodges-Lehmann interval of cur - base (what the verdict rests on)."""
    if base.size < 2 or cur.size < 2:
        return 0.0
    shift = stats.hodges_lehmann(base, cur)
    return shift.high - shift.low


def _comparable(base: ResultTable, cur: ResultTable, arch: str, opts: CompareOptions) -> list[_Prepared]:
    cb = cur.by_key()
    pairs = [(b, cb[b.key]) for b in base.rows
             if b.key in cb and b.status == "ok" and cb[b.key].status == "ok"
             and b.median_us and cb[b.key].median_us]
    limited = [s for b, c in pairs if _power_limited(b) or _power_limited(c)
               for s in [_own_clock_shift(b, c)] if s is not None]
    # The device's clock shift: the median over its power-limited cases, or with fewer than three over
    # every clocked case (H200, 3-case suite: GROUP_M 8 -> 1 ran +5.7% at its own -4.5% clock and read
    # +1.0% with that clock divided out); with fewer than three of those, unknown (a note says so).
    clocked = [s for b, c in pairs for s in [_own_clock_shift(b, c)] if s is not None]
    reference = limited if len(limited) >= 3 else clocked
    device_clock = {True: float(np.median(reference)) if len(reference) >= 3 else None}
    return [_prepare(b, c, arch, opts, device_clock) for b, c in pairs]


def _common_mode(prepared: Sequence[_Prepared], opts: CompareOptions) -> stats.CommonMode:
    if not opts.common_mode or not prepared:
        return stats.CommonMode(n_cases=len(prepared), method="none")
    return stats.common_mode([p.shift for p in prepared], [p.exponent for p in prepared],
                             min_cases=opts.min_common_mode_cases)


@dataclass(frozen=True)
class Residual:
    """One case of one A/A pair, as ``perfci calibrate`` needs it."""
    log_shift: float  # after clock normalization and the common mode
    exponent: float | None
    clocked: bool
    base_us: float
    disturbed: bool  # compare would never call it regressed/improved (perfci.verdict.DisturbedRule.side)


def pair_residuals(base: ResultTable, cur: ResultTable, arch: str,
                   opts: CompareOptions) -> list[Residual]:
    """Every comparable case's residual shift between two runs, judged as compare judges it."""
    prepared = _comparable(base, cur, arch, opts)
    cm = _common_mode(prepared, opts)
    return [Residual(p.shift - cm.at(p.exponent), p.exponent if p.exponent_known else None,
                     p.normalized, float(p.base.median_us),
                     opts.disturbed.side(stats.robust_spread(p.lb), stats.robust_spread(p.lc)) is not None)
            for p in prepared]


def suite_common_mode(base: ResultTable, cur: ResultTable, arch: str,
                      opts: CompareOptions) -> stats.CommonMode:
    return _common_mode(_comparable(base, cur, arch, opts), opts)


def _floor(p: _Prepared, profile: NoiseProfile, cm: stats.CommonMode,
           opts: CompareOptions) -> tuple[float, float]:
    """(floor, floor before any clock-swing widening), both as log ratios."""
    if not opts.use_floor:
        return 0.0, 0.0
    if opts.min_effect_pct is not None:
        f = math.log1p(opts.min_effect_pct / 100.0)
        return f, f
    exponent = p.exponent if p.exponent_known else None
    floor = math.log1p(profile.floor_for(exponent, p.normalized, p.base.median_us) / 100.0)
    if p.normalized or cm.method != "none":
        return floor, floor
    # Nothing removed the clock swing: a clock-driven case can move by the whole
    # ratio of two runs' clocks. Unknown boundness counts as driven.
    e = p.exponent if p.exponent_known else 1.0
    return max(floor, e * profile.swing_floor()), floor


# --------------------------------------------------------------------------- compare


def compare(base: ResultTable, cur: ResultTable, profile: NoiseProfile | None = None,
            options: CompareOptions | None = None) -> Comparison:
    """Judge every case of ``cur`` against ``base``.

    Args:
        base, cur: result tables (perfci, FlyDSL or pytest-benchmark, already read).
        profile: noise profile; by default the built-in one for the arch.
        options: thresholds and switches (see :class:`CompareOptions`).
    Returns:
        A :class:`Comparison` with one :class:`CaseComparison` per case of
        either side, the suite-wide shift, a summary and notes for the reader.
    """
    opts = options or CompareOptions()
    notes: list[str] = []
    arch_b, arch_c = table_arch(base), table_arch(cur)
    arch = opts.arch or arch_c or arch_b
    if arch_b and arch_c and arch_b != arch_c and not opts.arch:
        notes.append(f"base ran on {arch_b} and cur on {arch_c}: the comparison mixes devices")
    profile = profile or profile_for_arch(arch)
    threshold_only = base.format == "flydsl" or cur.format == "flydsl" or not (
        base.has_repeats and cur.has_repeats)

    prepared = _comparable(base, cur, arch, opts)
    cm = _common_mode(prepared, opts)

    # Tests first, so Benjamini–Hochberg sees the whole suite at once.
    p_values = []
    for p in prepared:
        testable = p.lb.size >= 2 and p.lc.size >= 2
        p_values.append(stats.mann_whitney(p.lb, p.lc - cm.at(p.exponent)).p_value
                        if testable else float("nan"))
    q_values = stats.benjamini_hochberg(p_values) if opts.fdr else np.asarray(p_values, dtype=float)
    n_tested = int(np.sum(~np.isnan(q_values)))

    judged: dict[tuple[str, str, str], CaseComparison] = {}
    for p, pv, qv in zip(prepared, p_values, q_values):
        judged[p.base.key] = _judge(p, None if math.isnan(pv) else pv,
                                    None if math.isnan(qv) else float(qv), cm, profile, opts)

    cases = []
    cur_by = cur.by_key()
    base_keys = set()
    for b in base.rows:
        base_keys.add(b.key)
        c = cur_by.get(b.key)
        if b.key in judged:
            cases.append(judged[b.key])
        elif c is None:
            cases.append(_status_only(b, None, Verdict.REMOVED, "only in base"))
        else:
            cases.append(status_case(b, c, weight=b.weight))
    for c in cur.rows:
        if c.key not in base_keys:
            cases.append(_status_only(None, c, Verdict.ADDED, "only in cur"))
    cases.sort(key=CaseComparison.severity_key)

    suite = _suite_verdict(cm, prepared, profile, opts)
    notes.extend(comparison_notes(prepared, cm, suite, profile, opts, threshold_only, n_tested, arch))
    timers_b = {r.timer for r in base.rows if r.timer}
    timers_c = {r.timer for r in cur.rows if r.timer}
    if timers_b and timers_c and timers_b != timers_c:
        notes.append(f"base was timed with {'/'.join(sorted(timers_b))} and cur with "
                     f"{'/'.join(sorted(timers_c))}: on an H200, device events read 3-5 us above "
                     f"the profiler's kernel time, so short cases differ by construction; "
                     f"compare runs made with the same --timer")
    for side, advice in (("cur", "run them again"),
                         ("base", "the baseline itself scattered, so record it again")):
        held = [c for c in cases if c.disturbed == side]
        if held:
            names = ", ".join(f"{c.kernel} {c.shape}" for c in held[:4]) + (" ..." if len(held) > 4 else "")
            notes.append(f"{len(held)} case(s) held back as inconclusive because {side}'s repeats "
                         f"scattered (a disturbed run looks like this; so would a change that makes "
                         f"a kernel both slower and erratic, which --strict turns into exit 3); "
                         f"{advice}: {names}")
    summary = summarize(cases)
    result = Comparison(base.path, cur.path, arch, profile, opts, tuple(cases), suite, summary,
                        threshold_only, tuple(notes))
    return with_flips(result, {r.key: (r,) for r in base.rows}, {r.key: (r,) for r in cur.rows})


def _judge(p: _Prepared, pv: float | None, qv: float | None, cm: stats.CommonMode,
           profile: NoiseProfile, opts: CompareOptions) -> CaseComparison:
    offset = cm.at(p.exponent)
    floor, plain_floor = _floor(p, profile, cm, opts)
    n1, n2 = p.lb.size, p.lc.size
    base = CaseComparison(
        kernel=p.base.kernel, shape=p.base.shape, dtype=p.base.dtype, verdict="",
        base_us=p.base.median_us, cur_us=p.cur.median_us,
        raw_ratio=p.cur.median_us / p.base.median_us,
        p_value=pv, q_value=qv, floor_pct=100.0 * math.expm1(floor), n_base=n1, n_cur=n2,
        clock_exponent=p.exponent if p.exponent_known else None, clock_normalized=p.normalized,
        clock_space=_clock_space(p), weight=p.base.weight, base_status="ok", cur_status="ok")
    if n1 == 1 or n2 == 1:
        # One value a side (FlyDSL): no spread to test, so the floor alone decides.
        est = p.shift - offset
        within = plain_floor if opts.unchanged_within_pct is None else \
            min(plain_floor, math.log1p(opts.unchanged_within_pct / 100.0))
        verdict = (Verdict.REGRESSED if est > floor else Verdict.IMPROVED if est < -floor
                   else Verdict.UNCHANGED if abs(est) <= within else Verdict.INCONCLUSIVE)
        return replace(base, verdict=verdict, ratio=math.exp(est), ci_low=math.exp(est),
                       ci_high=math.exp(est), reason="threshold only: no repeats to test")
    hl = stats.hodges_lehmann(p.lb, p.lc - offset, confidence=opts.confidence)
    spread_b, spread_c = stats.robust_spread(p.lb), stats.robust_spread(p.lc)
    base = replace(base, ratio=math.exp(hl.estimate), ci_low=math.exp(hl.low),
                   ci_high=math.exp(hl.high), spread_base_pct=100.0 * spread_b,
                   spread_cur_pct=100.0 * spread_c)
    if stats.min_pvalue(n1, n2) > opts.alpha or not hl.confident:
        return replace(base, verdict=Verdict.INCONCLUSIVE,
                       reason=f"too few repeats ({n1} vs {n2}) to reach significance")
    margin = None if opts.unchanged_within_pct is None else min(floor, math.log1p(opts.unchanged_within_pct / 100.0))
    decision = decide(hl.low, hl.high, floor=floor, q=qv, alpha=opts.alpha, margin=margin)
    if decision.verdict in (Verdict.REGRESSED, Verdict.IMPROVED):
        disturbed = opts.disturbed.side(spread_b, spread_c)
        if disturbed:
            return replace(base, verdict=Verdict.INCONCLUSIVE, disturbed=disturbed,
                           reason=f"{disturbed}'s repeats spread ±{100 * max(spread_b, spread_c):.1f}% "
                                  f"against ±{100 * min(spread_b, spread_c):.1f}%: that run was "
                                  f"disturbed during this case")
    elif (decision.verdict == Verdict.UNCHANGED and floor > plain_floor
          and not -plain_floor < hl.low <= hl.high < plain_floor):
        # Inside only because the floor had to swallow a possible clock swing.
        return replace(base, verdict=Verdict.INCONCLUSIVE,
                       reason="within a clock swing: no clocks recorded and too few cases for a common mode")
    elif (decision.verdict == Verdict.INCONCLUSIVE and margin is not None
          and -floor <= hl.low <= hl.high <= floor):
        return replace(base, verdict=Verdict.INCONCLUSIVE,
                       reason=f"inside the floor but not within ±{opts.unchanged_within_pct:g}%: "
                              f"a change this small is confirm's to decide")
    return replace(base, verdict=decision.verdict, reason=decision.reason)


def _clock_space(p: _Prepared) -> str:
    if not p.normalized or p.exponent == 0.0:
        return "time"
    return "cycles" if p.repeat_clocks else "time, levels in cycles"


def status_case(b: ResultRow, c: ResultRow, *, weight: float,
                where: tuple[str, str] = ("in base", "in cur")) -> CaseComparison:
    """A case not ok on both sides: broken, fixed or skipped (:func:`perfci.verdict.status_verdict`).

    ``where`` names the sides in the reason: "ok in base, fail in cur" (compare),
    "ok in the last run, fail now" (the pooled compare)."""
    verdict = status_verdict(b.status, c.status)
    why = f"{b.status} {where[0]}, {c.status} {where[1]}"
    if verdict == Verdict.BROKEN and c.message:
        why += f": {c.message}"
    return CaseComparison(kernel=c.kernel, shape=c.shape, dtype=c.dtype, verdict=verdict, reason=why,
                          base_us=b.median_us, cur_us=c.median_us, weight=weight, base_status=b.status,
                          cur_status=c.status)


def _status_only(b: ResultRow | None, c: ResultRow | None, verdict: Verdict, why: str) -> CaseComparison:
    row = b or c
    assert row is not None
    return CaseComparison(kernel=row.kernel, shape=row.shape, dtype=row.dtype, verdict=verdict,
                          reason=why, base_us=b.median_us if b else None,
                          cur_us=c.median_us if c else None, weight=row.weight,
                          base_status=b.status if b else "", cur_status=c.status if c else "")


def _suite_verdict(cm: stats.CommonMode, prepared: Sequence[_Prepared], profile: NoiseProfile,
                   opts: CompareOptions) -> SuiteShift:
    # The shift is "not the core clock" only when no clock-driven case was judged in time.
    clocked = bool(prepared) and all(p.normalized or (p.exponent_known and p.exponent == 0)
                                     for p in prepared)
    floor_pct = profile.suite_floor_pct
    mem, comp = 100.0 * math.expm1(cm.memory), 100.0 * math.expm1(cm.memory + cm.clock)
    overall = 100.0 * math.expm1(cm.overall)
    shift = SuiteShift(Verdict.NOT_JUDGED, memory_pct=mem, compute_pct=comp, overall_pct=overall,
                       method=cm.method, clock_normalized=clocked, floor_pct=floor_pct, n_cases=cm.n_cases)
    if cm.method == "none":
        return shift
    worst = max((mem, comp), key=abs) if cm.method == "split" else overall
    # What a user's job feels is time: a suite that moved in cycles but not in
    # time saw its clock readings move, not its kernels (seen on the H200: two
    # A/A nights 12% apart in cycles, 0.5% in time).
    time_pct = 100.0 * math.expm1(float(np.median([math.log(p.cur.median_us / p.base.median_us)
                                                   for p in prepared])))
    if abs(worst) <= floor_pct:
        verdict = Verdict.UNCHANGED
    elif clocked and abs(time_pct) > floor_pct and (time_pct > 0) == (worst > 0):
        verdict = Verdict.REGRESSED if worst > 0 else Verdict.IMPROVED
    else:
        verdict = Verdict.INCONCLUSIVE
    return replace(shift, verdict=verdict, time_pct=time_pct)
