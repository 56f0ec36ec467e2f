"""Trend plots and the report on extreme inputs: a plot never fails a command, and its bars hold its dots."""
import argparse
import math
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from perfci.history import store
from perfci.history.changepoints import detect
from perfci.history.check import check, check_case
from perfci.history.clockspace import judge
from perfci.history.model import CaseSeries, History, Manifest, Point, Run, RunInfo
from perfci.history.plot import level_intervals, night_values, trend_png, trend_png_or_warning
from perfci.history.report import case_html, case_slug, index_html, suite_file, suite_html
from perfci.model import ResultRow, ResultTable
from tests.history.synth import night_rows, write_rows

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def series_of(nights, clocks=None, exponent=None, label=("gemv", "1x8x16", "fp32")):
    points = tuple(Point(i, f"r{i}", "a" * 40, f"2026-11-{i + 1:02d}T02:00:00Z", float(np.median(r)), tuple(r),
                         sclk_mhz=tuple(clocks[i]) if clocks else ())
                   for i, r in enumerate(nights))
    return CaseSeries(*label, "tiny", points, exponent)


def test_a_level_an_ulp_above_its_identical_repeats_is_drawn():
    # The crash of a red night: every repeat 12.3456 us, and exp(mean(log)) comes back 1.8e-15 above it,
    # so "level to the top of the repeats' range" was negative and matplotlib refused the bars.
    s = series_of([(12.3456,) * 7] * 8)
    assert night_values(s)[0] > 12.3456
    png = trend_png(s, detect(s.medians, None, [p.repeats_us for p in s.points]))
    assert png.startswith(PNG)


def test_each_nights_bar_is_its_levels_own_interval_and_holds_the_dot():
    rng = np.random.default_rng(0)
    nights = [tuple(100.0 * np.exp(rng.normal(0.0, 0.02, 7))) for _ in range(10)] + [(50.0,), (7.0, 7.0)]
    j = judge(series_of(nights))
    low, high = level_intervals(j)
    level = j.levels_us
    assert np.all(low <= level) and np.all(level <= high)
    assert np.all(high[:10] > low[:10])  # scattered repeats: a real interval
    assert low[10] == level[10] == high[10] and low[11] == pytest.approx(high[11])  # one repeat: empty


@pytest.mark.parametrize("case", ["nan-clocks", "cycles", "huge", "tiny", "two-nights", "spike", "zero-width"])
def test_trends_draw_on_extreme_inputs(case):
    rng = np.random.default_rng(1)
    nights = [tuple(100.0 * np.exp(rng.normal(0.0, 0.01, 7))) for _ in range(12)]
    clocks, exponent = None, None
    if case == "nan-clocks":
        clocks, exponent = [(float("nan"),) * 7] * 12, 1.0
    elif case == "cycles":  # levels in cycles quoted at the reference clock: outside the nights' time ranges
        clk = 2400.0 * (1 + rng.uniform(-0.14, 0.14, 12))
        nights = [tuple(np.asarray(r) * 2400.0 / c) for r, c in zip(nights, clk)]
        clocks, exponent = [(c,) * 7 for c in clk], 1.0
    elif case == "huge":
        nights = [tuple(np.asarray(r) * 1e7) for r in nights]
    elif case == "tiny":
        nights = [tuple(np.asarray(r) * 1e-6) for r in nights]
    elif case == "two-nights":
        nights = nights[:2]
    elif case == "spike":
        nights[5] = tuple(np.asarray(nights[5]) * 40.0)
    elif case == "zero-width":
        nights = [(100.0,)] * 12
    s = series_of(nights, clocks, exponent)
    c = check_case(s)
    if case == "nan-clocks":
        assert c.judged.space == "time" and "clocks on 0 of 12" in c.judged.reason
    if case == "cycles":
        assert c.judged.space == "cycles"
        levels, lows = c.judged.levels_us, [min(p.repeats_us) for p in s.points]
        assert any(lv < lo for lv, lo in zip(levels, lows))  # what the repeats' range bars could not draw
    png, warning = trend_png_or_warning(s, c.detection, "extreme", c.judged)
    assert warning == "" and png.startswith(PNG)


def test_a_plot_that_fails_is_a_warning_not_an_exception(monkeypatch):
    import perfci.history.plot as plot

    def broken(*args, **kw):
        raise ValueError("'yerr' must not contain negative values\nmore detail")
    monkeypatch.setattr(plot, "trend_png", broken)
    s = series_of([(10.0, 10.1)] * 6)
    png, warning = plot.trend_png_or_warning(s, check_case(s).detection)
    assert png is None and warning == "trend of gemv 1x8x16 fp32 not drawn: ValueError: 'yerr' must not contain " \
                                       "negative values"


# --------------------------------------------------------------------------- the commands


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_report_and_plot_exit_0_on_the_store_whose_trend_crashed_the_red_night(tmp_path):
    files = []
    for i in range(8):
        rows = night_rows(i, only={("matmul_tiled", "64x1024x6144", "bf16"), ("matmul_tiled", "1x1024x6144", "bf16")})
        for row in rows:
            if row["shape"] == "64x1024x6144":
                row["repeats_us"], row["median_us"] = ";".join(["12.3456"] * 7), "12.3456"
        files.append(write_rows(tmp_path / f"n{i}.csv", rows))
    store.add_runs(tmp_path / "st", [str(f) for f in files])
    for action in ("report", "plot"):
        r = perfci("history", action, tmp_path / "st", "--out", tmp_path / action)
        assert r.returncode == 0 and "warning" not in r.stderr, (action, r.stderr)
    assert len(list((tmp_path / "report" / "img").glob("*.png"))) == 2


def test_a_case_whose_plot_fails_gets_a_warning_on_its_page_and_stderr_and_the_rest_is_written(
        tmp_path, monkeypatch, capsys):
    import perfci.history.plot as plot
    from perfci.history import cli

    files = [write_rows(tmp_path / f"n{i}.csv", night_rows(i, only={("matmul_tiled", "64x1024x6144", "bf16"),
                                                                   ("matmul_tiled", "1x1024x6144", "bf16")}))
             for i in range(8)]
    store.add_runs(tmp_path / "st", [str(f) for f in files])
    real = plot.trend_png

    def fails_on_one(series, *args, **kw):
        if series.shape == "64x1024x6144":
            raise ValueError("'yerr' must not contain negative values")
        return real(series, *args, **kw)
    monkeypatch.setattr(plot, "trend_png", fails_on_one)
    out = tmp_path / "site"
    code = cli.report_main(argparse.Namespace(store=str(tmp_path / "st"), out=str(out), filter=None, space="auto"))
    err = capsys.readouterr().err
    assert code == 0
    assert err.count("warning: trend of matmul_tiled 64x1024x6144 bf16 not drawn: ValueError") == 1
    assert [p.name.split("_")[2] for p in (out / "img").glob("*.png")] == ["1x1024x6144"]
    page = next((out / "cases").glob("matmul_tiled_64x1024x6144*.html")).read_text()
    assert "class=warn>warning: trend of matmul_tiled 64x1024x6144 bf16 not drawn" in page and "<img" not in page
    assert "1 trend(s) could not be drawn" in (out / "index.html").read_text()
    for page in [out / "index.html", *out.glob("suite-*.html"), *(out / "cases").glob("*.html")]:
        for target in re.findall(r'(?:href|src)="([^"#]+)"', page.read_text()):
            assert (page.parent / target).resolve().is_file(), (page.name, target)
    code = cli.plot_main(argparse.Namespace(store=str(tmp_path / "st"), out=str(tmp_path / "png"), filter=None,
                                            space="auto"))
    assert code == 0 and len(list((tmp_path / "png").glob("*.png"))) == 1
    assert "1 could not be drawn" in capsys.readouterr().out


def _big_history(n_cases=1000, nights=8):
    rng = np.random.default_rng(2)
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    runs = []
    for i in range(nights):
        when = start + timedelta(days=i)
        rows = []
        for c in range(n_cases):
            reps = tuple(float(x) for x in 10.0 * (1 + c % 97) * np.exp(rng.normal(0.0, 0.01, 3)))
            clocks = (float("nan"), 2100.0, None) if c % 5 == 0 else ()
            rows.append(ResultRow(f"k{c % 7}", f"{c}x64x64", "bf16", "ok", c + 1, 64, 64, float(np.median(reps)),
                                  reps, sclk_mhz=clocks))
        info = RunInfo(f"run{i}", "big", f"{i:040x}", when.isoformat(), when, "MI355X", "gfx950")
        runs.append(Run(info, ResultTable(f"run{i}.csv", "perfci", tuple(rows))))
    return History("big-store", Manifest("MI355X", "gfx950"), tuple(runs))


def test_a_thousand_cases_make_every_page_with_a_row_and_a_space_for_each():
    history = _big_history()
    result = check(history)
    assert len(result.cases) == 1000
    failed = {case_slug(result.cases[3].series): "trend of x not drawn: ValueError: boom"}
    index = index_html(history, result.cases, failed)
    assert "<td class=num>1000</td>" in index and "1 trend(s) could not be drawn" in index
    suite = suite_html(history, "big", result.cases, failed)
    assert suite.count("<tr><td><a href=\"cases/") == 1000 and suite.count("class=warn>warning") == 1
    assert suite.count("img/") == 999
    slugs = {case_slug(c.series) for c in result.cases}
    assert len(slugs) == 1000  # one file per case, no two cases on one page
    page = case_html(history, result.cases[0])
    assert page.count("<tr><td class=num>") == 8 and "Judged in <b>" in page and suite_file("big") in page
    assert all(math.isfinite(v) for c in result.cases for v in c.judged.levels)
