"""Clock-aware history: a night in cycles where its clocks allow, a case in cycles where they explain its spread."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfci.history import store
from perfci.history.check import check_case
from perfci.history.clockspace import fitted_exponent, judge
from perfci.history.model import CaseSeries, Point, run_clock_mhz
from perfci.history.nights import CYCLES, LEVEL_IN_CYCLES, TIME, judged_night, night_level
from perfci.model import ResultRow
from tests.history.synth import MI355X, write_night

ROOT = Path(__file__).resolve().parents[2]
NOMINAL = 2400.0


def swinging_series(seed=0, n=30, step_at=None, step=1.04, exponent=1.0, true_exponent=None, swing=0.14,
                    read_error=0.0, missing=(), repeat_sd=0.01, night_sd=0.005, throttled=False):
    """A gfx950-like case: the night's clock within +-SWING, time ∝ clock^-e, a step in cycles at STEP_AT."""
    rng = np.random.default_rng(seed)
    e_true = exponent if true_exponent is None else true_exponent
    points = []
    for i in range(n):
        clk = NOMINAL * (1 + rng.uniform(-swing, swing)) * np.exp(rng.normal(0.0, 0.01, 7))
        t = 100.0 * (NOMINAL / clk) ** e_true * math.exp(rng.normal(0.0, night_sd))
        t = t * np.exp(rng.normal(0.0, repeat_sd, 7)) * (step if step_at is not None and i >= step_at else 1.0)
        read = clk * (1 + rng.uniform(-read_error, read_error))
        sclk = (float("nan"),) * 7 if i in missing else tuple(np.round(read).tolist())
        points.append(Point(i, f"r{i}", f"{i:040x}", f"2026-12-{1 + i % 28:02d}T02:00:00Z", float(np.median(t)),
                            tuple(t.tolist()), sclk_mhz=sclk, throttled=(throttled,) * 7,
                            run_clock_mhz=float(np.median(read))))
    return CaseSeries("matmul_tiled", "8192x8192x8192", "bf16", "prefill", tuple(points), exponent)


# --------------------------------------------------------------------------- one night


def test_a_compute_bound_night_is_in_cycles_when_its_repeats_clocks_explain_their_scatter():
    clocks = np.array([2000.0, 2100, 2200, 2300, 2400, 2250, 2050])
    times = np.log(100.0 * 2400.0 / clocks)  # time exactly ∝ 1/clock: cycles are flat
    night = judged_night(times, clocks, 1.0)
    assert night.space == CYCLES and night.log_clock == pytest.approx(np.log(np.median(clocks)))
    assert np.ptp(night.values) == pytest.approx(0.0, abs=1e-12)
    assert night.level == pytest.approx(np.log(100.0 * 2400.0))
    # Clocks that do not follow the times (flat while the times scatter) only move the level.
    flat = np.full(7, 2200.0) * (1 + np.array([0.03, -0.03, 0.02, -0.02, 0.01, -0.01, 0.0]))
    scattered = np.log(100.0) + np.random.default_rng(1).normal(0.0, 0.002, 7)
    moved = judged_night(scattered, flat, 1.0)
    assert moved.space == LEVEL_IN_CYCLES
    assert moved.level == pytest.approx(night_level(scattered) + np.log(np.median(flat)))


def test_memory_bound_unknown_and_unclocked_nights_stay_in_time():
    times = np.log([10.0, 10.1, 10.05])
    for clocks, e in (([2000.0] * 3, 0.0), ([2000.0] * 3, None), ((), 1.0), ((None, float("nan"), -1.0), 1.0)):
        night = judged_night(times, clocks, e)
        assert night.space == TIME and night.log_clock is None and night.level == pytest.approx(night_level(times))


def test_a_power_limited_night_moves_by_the_devices_clock_not_its_own():
    times = np.log(np.full(7, 120.0))
    own = np.full(7, 1900.0)  # the kernel's own clock fell: its power draw did that, not the device
    night = judged_night(times, own, 1.0, limited=True, run_clock_mhz=2300.0)
    assert night.level == pytest.approx(np.log(120.0 * 2300.0))
    assert judged_night(times, own, 1.0, limited=True, run_clock_mhz=None).space == TIME


def test_the_run_clock_is_the_median_of_its_power_limited_cases_when_there_are_three():
    def row(clock, limited):
        return ResultRow("k", "s", "bf16", "ok", median_us=1.0, repeats_us=(1.0,) * 3, sclk_mhz=(clock,) * 3,
                         throttled=(limited,) * 3)
    rows = [row(2400.0, False), row(2410.0, False), row(1800.0, True), row(1850.0, True), row(1900.0, True)]
    assert run_clock_mhz(rows) == 1850.0
    assert run_clock_mhz(rows[:2] + rows[3:]) == 2150.0  # two limited: every clocked case
    assert run_clock_mhz(rows[:2]) is None


# --------------------------------------------------------------------------- a case's series


def test_a_four_percent_step_under_a_fourteen_percent_clock_swing_is_found_in_cycles_not_in_time():
    found_cycles = found_time = 0
    for seed in range(8):
        s = swinging_series(seed, step_at=20)
        auto, timed = check_case(s), check_case(s, rule="time")
        assert auto.judged.space == CYCLES and auto.judged.reference_mhz == pytest.approx(NOMINAL, rel=0.1)
        assert timed.judged.space == TIME
        found_cycles += any(abs(c.index - 20) <= 1 and 1.03 < c.ratio < 1.05 for c in auto.detection.changes)
        found_time += any(abs(c.index - 20) <= 1 for c in timed.detection.changes)
    assert found_cycles >= 7 and found_time <= 2, (found_cycles, found_time)


def test_a_flat_swinging_series_shows_no_change_in_cycles():
    for seed in range(8):
        c = check_case(swinging_series(100 + seed))
        assert c.judged.in_cycles and c.detection.changes == (), seed
        assert c.judged.spread_cycles < 0.3 * c.judged.spread_time


def test_clocks_read_wrong_from_process_to_process_leave_the_case_in_time():
    # The H200's case: the clock hardly moves, but each process reads it with its own factor (up to 12%).
    s = swinging_series(3, swing=0.005, read_error=0.12, step_at=20)
    c = check_case(s)
    assert c.judged.space == TIME and "do not explain" in c.judged.reason
    assert c.judged.spread_cycles > c.judged.spread_time
    assert any(abs(ch.index - 20) <= 1 for ch in c.detection.changes)


def test_memory_bound_and_unknown_cases_say_why_they_are_in_time():
    s = swinging_series(4, exponent=0.0, true_exponent=0.0)
    assert judge(s).space == TIME and "memory-bound" in judge(s).reason
    unknown = CaseSeries(s.kernel, s.shape, s.dtype, s.suite, s.points, None)
    assert judge(unknown).space == TIME and "unknown" in judge(unknown).reason
    with pytest.raises(ValueError):
        judge(s, "cycles")


def test_nights_without_clocks_are_taken_at_the_reference_clock_and_too_few_clocks_mean_time():
    s = swinging_series(5, step_at=20, missing=(2, 11))
    j = judge(s)
    assert j.in_cycles and j.clocked_nights == 28 and "2 night(s) without clocks" in j.reason
    assert all(np.isfinite(j.levels))
    c = check_case(s)
    assert any(abs(ch.index - 20) <= 1 for ch in c.detection.changes)
    sparse = swinging_series(5, missing=tuple(range(0, 30, 2)) + (1, 3))
    assert judge(sparse).space == TIME and "clocks on 13 of 30" in judge(sparse).reason


def test_a_power_limited_case_is_judged_by_the_devices_clock_so_its_own_slowdown_stays():
    # The kernel's change draws more power: it runs 6% slower at a 6% lower clock of its own.
    rng = np.random.default_rng(7)
    points = []
    for i in range(20):
        device = NOMINAL * (1 + rng.uniform(-0.1, 0.1))
        own = device * (0.94 if i >= 10 else 1.0)
        t = 100.0 * (NOMINAL / own) * np.exp(rng.normal(0.0, 0.005, 7))
        points.append(Point(i, f"r{i}", "a" * 40, f"2026-12-{1 + i:02d}T02:00:00Z", float(np.median(t)),
                            tuple(t.tolist()), sclk_mhz=(own,) * 7, throttled=(True,) * 7, run_clock_mhz=device))
    c = check_case(CaseSeries("k", "s", "bf16", "x", tuple(points), 1.0))
    assert c.judged.in_cycles
    assert [ch.index for ch in c.detection.changes] == [10] and c.detection.changes[0].ratio > 1.05


# --------------------------------------------------------------------------- as a user runs it


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_history_check_on_a_clock_swinging_store_finds_the_step_and_says_the_space(tmp_path):
    step = ("matmul_tiled", "4096x4096x4096", "bf16")  # compute-bound on gfx950 (exponent 1)
    rng = np.random.default_rng(11)
    files = [write_night(tmp_path / f"n{i}.csv", i, env=MI355X, clock_mhz=NOMINAL * (1 + rng.uniform(-0.14, 0.14)),
                         slow={step: 1.04} if i >= 20 else None, sha=f"{i:02d}" * 20) for i in range(30)]
    store.add_runs(tmp_path / "st", [str(f) for f in files])
    r = perfci("history", "check", tmp_path / "st", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    spaces = {(c["kernel"], c["shape"], c["dtype"]): c for c in out["case_spaces"]}
    assert spaces[step]["space"] == "cycles" and spaces[step]["roofline_exponent"] == 1.0
    assert spaces[step]["clock_exponent"] == pytest.approx(1.0, abs=0.05)
    assert spaces[("matmul_tiled", "1x1024x6144", "bf16")]["space"] == "time"  # memory-bound
    assert out["spaces"]["cycles"] >= 6 and out["options"]["space"] == "auto"
    mine = [c for c in out["changes"] if (c["kernel"], c["shape"], c["dtype"]) == step]
    assert len(mine) == 1 and abs(mine[0]["run_index"] - 20) <= 1 and mine[0]["space"] == "cycles"
    assert 1.03 < mine[0]["ratio"] < 1.05 and mine[0]["reference_mhz"] > 2000
    assert len(out["changes"]) <= 2  # the flat cases, swinging in time, stay quiet
    timed = json.loads(perfci("history", "check", tmp_path / "st", "--format", "json", "--space", "time").stdout)
    assert not any((c["kernel"], c["shape"], c["dtype"]) == step and abs(c["run_index"] - 20) <= 1 and
                   1.03 < c["ratio"] < 1.05 for c in timed["changes"])
    table = perfci("history", "check", tmp_path / "st").stdout
    line = next(x for x in table.splitlines() if x.startswith("matmul_tiled  4096x4096x4096"))
    assert "cycles (us at" in line and "judged in: cycles" in table


def test_an_exponent_the_roofline_gets_wrong_is_fitted_to_the_nights():
    # The roofline says 1, the kernel's time follows clock^-0.75: at 1 a third of the swing would remain.
    s = swinging_series(21, step_at=20, true_exponent=0.75)
    j = judge(s)
    assert j.in_cycles and j.exponent == pytest.approx(0.75, abs=0.06) and j.roofline_exponent == 1.0
    assert "fitted to its nights; the roofline says 1.00" in j.reason
    assert any(abs(ch.index - 20) <= 1 for ch in check_case(s).detection.changes)
    # Nights that do not follow the clock give no fitted exponent: noise is not fitted.
    flat = swinging_series(22, true_exponent=0.0, exponent=0.0)
    clocks = [math.log(np.median(p.sclk_mhz)) for p in flat.points]
    assert fitted_exponent(judge(flat).levels, clocks) is None
    assert fitted_exponent(judge(s, "time").levels, [math.log(np.median(p.sclk_mhz)) for p in s.points]) > 0.6


def test_a_night_without_a_clock_is_placed_within_its_times_range_nearest_its_neighbours():
    s = swinging_series(6, missing=(9,))
    j = judge(s)
    t = judge(s, "time")
    assert j.placed == (9,)
    clocks = [np.log(np.median(p.sclk_mhz)) for i, p in enumerate(s.points) if i != 9]
    ref = np.log(j.reference_mhz)
    low, high = t.levels[9] + j.exponent * (min(clocks) - ref), t.levels[9] + j.exponent * (max(clocks) - ref)
    assert low - 1e-12 <= j.levels[9] <= high + 1e-12
    neighbours = np.median([j.levels[i] for i in (7, 8, 10, 11)])
    assert j.levels[9] == pytest.approx(np.clip(neighbours, low, high))
    assert abs(j.levels[9] - neighbours) < 3 * j.spread_cycles  # not a spike in cycles
    # Its repeats move with its level, so the plot draws them around it.
    assert night_level(j.values[9]) == pytest.approx(j.levels[9])
