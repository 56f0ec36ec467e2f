"""Verdict logic on simulated suites (seeded) and on hand-made rows."""
import math
from dataclasses import replace
from pathlib import Path

import pytest

from perfci.compare.comparison import CompareOptions, missing_cases
from perfci.compare.verdicts import compare
from perfci.verdict import SuiteShift, Verdict
from perfci.results import ResultRow, ResultTable, read_results
from perfci.compare.simulate import SimConfig, simulate_pair, without_clocks

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"

CFG = SimConfig()


def _row(kernel="k", reps=(10.0,) * 7, status="ok", shape="4096x4096x4096", clocks=(), **kw):
    m, n, k = (int(x) for x in shape.split("x"))
    return ResultRow(kernel=kernel, shape=shape, dtype="bf16", status=status, m=m, n=n, k=k,
                     median_us=sorted(reps)[len(reps) // 2] if reps and status == "ok" else None,
                     repeats_us=tuple(reps) if status == "ok" else (), sclk_mhz=tuple(clocks),
                     arch=kw.pop("arch", "gfx950"), **kw)


def _table(rows, path="t.csv", fmt="perfci"):
    return ResultTable(path=path, format=fmt, rows=tuple(rows))


def _verdict(res, key):
    return next(c for c in res.cases if c.key == key)


@pytest.mark.slow  # 200 simulated suites
def test_quick_aa_false_alarm_share():
    # 200 whole-suite A/A comparisons under ±14% clock swings: goal <= 1%, assert <= 2%.
    alarms = sum(compare(*simulate_pair(CFG, seed=s)).regressed for s in range(200))
    assert alarms / 200 <= 0.02


@pytest.mark.slow  # 200 simulated suites
def test_quick_power_5pct_off_ridge():
    # Planted 5% slowdowns on cases outside the near-ridge band: >= 90% found.
    found = total = 0
    for s in range(200):
        case = s % CFG.n_cases
        base, cur = simulate_pair(CFG, seed=50_000 + s, regress_case=case, regress_pct=5.0)
        res = compare(base, cur)
        v = _verdict(res, base.rows[case].key)
        if v.clock_exponent in (0.0, 1.0):
            total += 1
            found += v.verdict == "regressed"
    assert total >= 80
    assert found / total >= 0.9


def test_planted_regression_is_worst_first_and_exits_regressed():
    base, cur = simulate_pair(CFG, seed=3, regress_case=2, regress_pct=10.0)
    res = compare(base, cur)
    assert res.regressed
    assert res.cases[0].key == base.rows[2].key and res.cases[0].verdict == "regressed"
    assert res.summary.worst[0] == base.rows[2].key


def test_clock_normalization_is_what_keeps_compute_bound_cases_quiet():
    # Common mode off and one fixed 2% floor, so only the normalization differs:
    # compute-bound cases then carry the full ±14% run clock swing.
    def flagged(opts):
        n = 0
        for s in range(30):
            res = compare(*simulate_pair(CFG, seed=s), options=opts)
            n += sum(c.verdict in ("regressed", "improved") for c in res.cases
                     if c.clock_exponent == 1.0)
        return n

    raw = flagged(CompareOptions(clock_normalize=False, common_mode=False, min_effect_pct=2.0))
    cycles = flagged(CompareOptions(common_mode=False, min_effect_pct=2.0))
    assert raw >= 100 and cycles <= 3


def test_suite_wide_shift_is_reported_and_fails_only_with_clocks():
    base, cur = simulate_pair(CFG, seed=4)
    slow = replace(cur, rows=tuple(replace(r, repeats_us=tuple(x * 1.09 for x in r.repeats_us),
                                           median_us=r.median_us * 1.09) for r in cur.rows))
    res = compare(base, slow)
    assert res.suite.verdict == "regressed" and res.regressed
    assert not any(c.verdict == "regressed" for c in res.cases)  # judged on residuals
    assert any("9% slower" in n for n in res.notes)
    res_nc = compare(without_clocks(base), without_clocks(slow))
    assert res_nc.suite.verdict == "inconclusive" and not res_nc.regressed and res_nc.inconclusive


def test_broken_added_removed_and_skipped():
    base = _table([_row("a"), _row("b"), _row("c"), _row("d", status="skip")])
    cur = _table([_row("a"), _row("b", status="error", message="boom"), _row("e"),
                  _row("d", status="skip")])
    res = compare(base, cur)
    got = {c.kernel: c.verdict for c in res.cases}
    assert got == {"a": "unchanged", "b": "broken", "c": "removed", "e": "added", "d": "skipped"}
    assert res.regressed
    assert res.cases[0].verdict == "broken"


def test_verdicts_are_the_shared_vocabulary_and_missing_is_compare_s_rule():
    base = _table([_row("a"), _row("b"), _row("c"), _row("d", status="skip"), _row("f")])
    cur = _table([_row("a"), _row("b", status="error", message="boom"), _row("d", status="skip"),
                  _row("f", status="skip")])
    res = compare(base, cur)
    assert all(isinstance(c.verdict, Verdict) for c in res.cases) and isinstance(res.suite, SuiteShift)
    assert _verdict(res, ("b", "4096x4096x4096", "bf16")).reason == "ok in base, error in cur: boom"
    # Removed, or skipped tonight after an ok base; a case skipped on both sides is not missing.
    assert missing_cases(res) == [("f", "4096x4096x4096", "bf16"), ("c", "4096x4096x4096", "bf16")]


def test_fixed_case_is_not_a_regression():
    res = compare(_table([_row("a", status="fail")]), _table([_row("a")]))
    assert res.cases[0].verdict == "fixed" and not res.regressed


def test_too_few_repeats_is_inconclusive_not_unchanged():
    res = compare(_table([_row("a", reps=(10.0, 10.1, 9.9))]),
                  _table([_row("a", reps=(10.0, 10.05, 9.95))]))
    assert res.cases[0].verdict == "inconclusive"
    assert "too few repeats" in res.cases[0].reason


def test_straddling_the_floor_is_inconclusive():
    # A clean, significant 2% shift against a 2% floor: interval straddles it.
    base = [10.0 + 0.01 * i for i in range(7)]
    cur = [10.2 + 0.01 * i for i in range(7)]
    res = compare(_table([_row("a", reps=base)]), _table([_row("a", reps=cur)]),
                  options=CompareOptions(min_effect_pct=2.0, common_mode=False))
    c = res.cases[0]
    assert c.p_value < 0.01 and c.ci_low < 1.02 < c.ci_high
    assert c.verdict == "inconclusive"


def test_an_unchanged_margin_below_the_floor_sends_a_change_inside_it_to_confirm():
    # +3% inside a 5% floor: "unchanged" by the floor, "inconclusive" within a 1% margin (the nightly's
    # compare against one stored night); a 0.2% change stays unchanged either way.
    base = [10.0 + 0.01 * i for i in range(7)]
    rows_b = [_row("moved", reps=base), _row("still", reps=base)]
    rows_c = [_row("moved", reps=[1.03 * x for x in base]), _row("still", reps=[1.002 * x for x in base])]
    floor = CompareOptions(min_effect_pct=5.0, common_mode=False)
    by_floor = compare(_table(rows_b), _table(rows_c), options=floor)
    assert [c.verdict for c in by_floor.cases] == ["unchanged", "unchanged"]
    within = compare(_table(rows_b), _table(rows_c), options=replace(floor, unchanged_within_pct=1.0))
    moved, still = within.cases
    assert (moved.verdict, still.verdict) == ("inconclusive", "unchanged")
    assert "inside the floor but not within ±1%" in moved.reason
    single_b = _table([_row("a", reps=(10.0,))], fmt="flydsl")
    single_c = _table([_row("a", reps=(10.3,))], fmt="flydsl")
    assert compare(single_b, single_c, options=replace(floor, unchanged_within_pct=1.0)).cases[0].verdict == \
        "inconclusive"


def test_threshold_only_for_single_values():
    base = _table([_row("a", reps=(10.0,)), _row("b", reps=(10.0,))], fmt="flydsl")
    cur = _table([_row("a", reps=(11.0,)), _row("b", reps=(10.1,))], fmt="flydsl")
    res = compare(base, cur, options=CompareOptions(min_effect_pct=5.0))
    got = {c.kernel: c.verdict for c in res.cases}
    assert got == {"a": "regressed", "b": "unchanged"}
    assert res.threshold_only and any("threshold-only" in n for n in res.notes)
    assert all(c.p_value is None for c in res.cases)


def test_few_cases_without_clocks_get_the_swing_floor():
    res = compare(_table([_row("a")]), _table([_row("a", reps=(11.0,) * 7)]))
    # One case, no clocks, compute-bound on gfx950: ±14% swings => ~33% floor.
    assert res.cases[0].floor_pct > 30
    assert res.cases[0].verdict == "inconclusive"


def test_weighted_speedup_and_geomean():
    base = _table([_row("a", reps=(10.0,) * 7, weight=3.0), _row("b", reps=(1.0,) * 7)])
    cur = _table([_row("a", reps=(5.0,) * 7, weight=3.0), _row("b", reps=(2.0,) * 7)])
    s = compare(base, cur).summary
    assert s.weighted_speedup == pytest.approx((30 + 1) / (15 + 2))
    assert s.geomean_raw_ratio == pytest.approx(1.0)


# --------------------------------------------------------------------------- real H200 data

def test_h200_planted_group_m_regression_is_found_despite_its_clock_drop():
    """Real runs (2026-11-29): GROUP_M 8 -> 1 in the sm_90 tiled config, everything else untouched.

    The two large planted GEMMs ran ~22-25% slower at a ~15% lower clock under
    the H200's power cap. Dividing each case by its own clock hid them; judged at
    the device's clock shift they are regressions.
    """
    from perfci.results import read_results

    base = read_results(DATA / "h200_planted_base.csv")
    cur = read_results(DATA / "h200_planted_cur.csv")
    verdicts = {c.key: c.verdict for c in compare(base, cur).cases}
    for kernel in ("matmul_tiled", "matmul_persistent"):
        assert verdicts[(kernel, "4096x28672x4096", "bf16")] == "regressed"
    # Untouched vendor GEMMs, same power cap, same run: not regressions.
    for shape in ("5120x5120x8320", "4096x28672x4096", "4096x4096x4096", "64x1024x6144"):
        assert verdicts[("torch_matmul", shape, "bf16")] not in ("regressed", "broken")


def test_power_limited_clock_drop_counts_against_the_kernel_but_a_free_one_does_not():
    def row(kernel, times, clocks, throttled):
        return ResultRow(kernel=kernel, shape="8192x8192x8192", dtype="bf16", status="ok",
                         m=8192, n=8192, k=8192, median_us=sorted(times)[3], repeats_us=tuple(times),
                         sclk_mhz=tuple(clocks), throttled=tuple([throttled] * 7), arch="sm_90")

    def tables(throttled):
        # Four bystanders keep their clock; the kernel under test is 15% slower at a 15% lower clock.
        base = [row(f"k{i}", [1000.0 + j for j in range(7)], [1500.0] * 7, throttled) for i in range(4)]
        cur = [row(f"k{i}", [1000.0 + j for j in range(7)], [1500.0] * 7, throttled) for i in range(4)]
        base.append(row("suspect", [1000.0 + j for j in range(7)], [1500.0] * 7, throttled))
        cur.append(row("suspect", [1150.0 + j for j in range(7)], [1500.0 / 1.15] * 7, throttled))
        return ResultTable("b.csv", "perfci", tuple(base)), ResultTable("c.csv", "perfci", tuple(cur))

    key = ("suspect", "8192x8192x8192", "bf16")
    capped = {c.key: c.verdict for c in compare(*tables(True)).cases}
    free = {c.key: c.verdict for c in compare(*tables(False)).cases}
    assert capped[key] == "regressed"  # its own power draw lowered its clock: really slower
    assert free[key] == "unchanged"  # same cycles at a clock something else lowered


def test_with_fewer_than_three_power_limited_cases_the_other_cases_clocks_are_the_device_s():
    """Real runs (2026-12-01, benchmarks/gpu/plant_demo.sh): a 3-case suite, GROUP_M 8 -> 1.

    8192^3 ran +5.7% slower at a 4.5% lower clock of its own, the only power-limited case. With its
    own clock divided out it read +1.0%, unchanged; the two other cases' clocks say the device's
    did not move, so it is judged in time (+4.8%, inconclusive against the 5.4% floor: one run
    against one run cannot resolve it; confirm can).
    """
    from perfci.results import read_results

    base, cur = read_results(DATA / "h200_3case_base.csv"), read_results(DATA / "h200_3case_group_m1.csv")
    case = next(c for c in compare(base, cur).cases if c.shape == "8192x8192x8192")
    assert case.ratio > 1.04 and case.verdict != "unchanged"


def test_a_lone_power_limited_case_says_its_own_clock_was_divided_out():
    def row(kernel, scale, clock):
        return ResultRow(kernel=kernel, shape="8192x8192x8192", dtype="bf16", status="ok", m=8192, n=8192, k=8192,
                         median_us=1000.0 * scale + 3, repeats_us=tuple(1000.0 * scale + j for j in range(7)),
                         sclk_mhz=(clock,) * 7, throttled=(True,) * 7, arch="sm_90")

    base = ResultTable("b.csv", "perfci", (row("suspect", 1.0, 1500.0),))
    cur = ResultTable("c.csv", "perfci", (row("suspect", 1.15, 1500.0 / 1.15),))
    notes = compare(base, cur).notes
    assert any("fewer than 3 cases had clocks" in n and "was divided out" in n for n in notes)


def test_a_scattered_run_is_inconclusive_but_a_clean_shift_is_regressed():
    base = _table([_row(reps=(10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0), arch="")])
    # +40% with repeats that scatter from 10.5 to 17.5: a disturbed run
    scattered = _table([_row(reps=(10.5, 17.5, 14.0, 16.0, 11.8, 12.4, 15.0), arch="")])
    clean = _table([_row(reps=(14.0, 14.1, 13.9, 14.0, 14.05, 13.95, 14.0), arch="")])
    on = CompareOptions(min_effect_pct=5.0)  # one case, no clocks: a fixed floor
    v = compare(base, scattered, options=on).cases[0]
    assert v.verdict == "inconclusive" and "disturbed" in v.reason
    assert v.spread_cur_pct > 10 > 1 > v.spread_base_pct
    assert compare(base, clean, options=on).cases[0].verdict == "regressed"
    # the guard is what holds it back
    off = CompareOptions(min_effect_pct=5.0, disturbed_spread_pct=None)
    assert compare(base, scattered, options=off).cases[0].verdict == "regressed"


def test_h200_aa_decode_runs_are_quiet_only_with_the_guard():
    # Two real runs of the same code on an H200 (84 decode cases): a few
    # ~10 us split-K cases scattered in the second run and moved by up to +53%.
    base = read_results(str(DATA / "h200_aa_decode_base.csv"))
    cur = read_results(str(DATA / "h200_aa_decode_cur.csv"))
    on = compare(base, cur)
    off = compare(base, cur, options=CompareOptions(disturbed_spread_pct=None))
    alarms = lambda res: [c for c in res.cases if c.verdict in ("regressed", "improved")]  # noqa: E731
    assert len(on.cases) == 84 and alarms(on) == []
    assert len(alarms(off)) >= 2
    assert all(c.spread_cur_pct > 5 for c in alarms(off))


def test_mixed_timers_are_named_in_a_note():
    base = _table([_row(timer="events")])
    same = compare(base, _table([_row(timer="events")]))
    mixed = compare(base, _table([_row(timer="profiler")]))
    assert not any("timed with" in n for n in same.notes)
    assert any("timed with events and cur with profiler" in n for n in mixed.notes)


def test_a_scattered_baseline_asks_for_a_new_baseline():
    scattered = _table([_row(reps=(10.5, 17.5, 14.0, 16.0, 11.8, 12.4, 15.0), arch="")])
    tight = _table([_row(reps=(20.0, 20.1, 19.9, 20.0, 20.05, 19.95, 20.0), arch="")])
    res = compare(scattered, tight, options=CompareOptions(min_effect_pct=5.0))
    assert res.cases[0].verdict == "inconclusive" and res.cases[0].disturbed == "base"
    assert any("record it again" in n for n in res.notes)


def _interval_width(case):
    return math.log(case.ci_high) - math.log(case.ci_low)  # in log space, where a level shift is free


def test_per_repeat_clocks_are_used_only_where_they_explain_the_spread():
    # A compute-bound case (4096^3 bf16 on gfx950) whose slow repeat ran at a low clock:
    # in cycles the repeats agree, so the interval is narrower than in time.
    slow_repeat = (100.0, 100.4, 99.8, 109.0, 100.1, 99.9, 100.2)
    its_clocks = (2000.0, 1992.0, 2004.0, 1835.0, 1998.0, 2002.0, 1996.0)
    steady = (100.1, 99.9, 100.0, 100.2, 99.8, 100.1, 100.0)
    flat = (2000.0,) * 7
    explained = compare(_table([_row(reps=steady, clocks=flat)]),
                        _table([_row(reps=slow_repeat, clocks=its_clocks)]),
                        options=CompareOptions(common_mode=False))
    case = explained.cases[0]
    assert case.clock_space == "cycles"
    raw = compare(_table([_row(reps=steady, clocks=flat)]), _table([_row(reps=slow_repeat, clocks=flat)]),
                  options=CompareOptions(common_mode=False)).cases[0]
    assert _interval_width(case) < _interval_width(raw)


def test_clock_noise_never_widens_the_interval_beyond_raw_time():
    # The same times, but clocks that scatter without any relation to them (read
    # apart from the kernels): judging in cycles would widen the interval.
    times = (100.1, 99.9, 100.0, 100.2, 99.8, 100.1, 100.0)
    noisy = (1850.0, 2010.0, 1920.0, 2080.0, 1890.0, 1990.0, 1960.0)
    also_noisy = (2050.0, 1880.0, 1990.0, 1900.0, 2070.0, 1930.0, 2000.0)
    res = compare(_table([_row(reps=times, clocks=noisy)]), _table([_row(reps=times, clocks=also_noisy)]),
                  options=CompareOptions(common_mode=False))
    case = res.cases[0]
    in_time = compare(_table([_row(reps=times)]), _table([_row(reps=times)]),
                      options=CompareOptions(common_mode=False)).cases[0]
    assert case.clock_space == "time, levels in cycles"
    assert _interval_width(case) == pytest.approx(_interval_width(in_time))
    assert any("repeats in time" in note for note in res.notes)
    # The runs' levels still count: cur's median clock is 1.0% higher, so in cycles it is 1% slower.
    assert case.ratio == pytest.approx(1990.0 / 1960.0, rel=1e-6)


def test_a_suite_that_moved_in_cycles_but_not_in_time_is_no_regression():
    # Two A/A nights on the H200 with the gated measurement: the device clocks of one
    # read 12% lower for the same times. In cycles the whole suite looks 14% slower;
    # in time it is 0.4% faster. That must not fail the gate.
    base = read_results(DATA / "h200_gated_prefill_q4.csv")
    cur = read_results(DATA / "h200_gated_prefill_q1.csv")
    res = compare(base, cur)
    assert res.suite.compute_pct > 10 or res.suite.overall_pct > 10
    assert abs(res.suite.time_pct) < 1
    assert res.suite.verdict == "inconclusive" and not res.regressed
    assert any("clock readings moved" in note for note in res.notes)
    assert not any(c.verdict in ("regressed", "improved") for c in res.cases)
