"""The renderers on a Comparison computed here: every verdict kind a reader meets, no subprocess."""
import csv
import io
import json
from dataclasses import replace

import matplotlib.figure
import matplotlib.image
import pytest

from perfci.compare import render
from perfci.compare.verdicts import compare
from perfci.model import ResultRow, ResultTable

# Seven repeats within ±0.4%: tight enough that a 50% slowdown is certain to be
# regressed and an untouched case unchanged.
JITTER = (1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998)
GEMV_M = (1, 2, 4, 8, 16, 32, 64)


def _row(kernel, m, us, status="ok"):
    reps = tuple(us * j for j in JITTER) if status == "ok" else ()
    return ResultRow(kernel=kernel, shape=f"{m}x4096x4096", dtype="bf16", status=status, m=m, n=4096, k=4096,
                     median_us=sorted(reps)[3] if reps else None, repeats_us=reps, arch="gfx942",
                     message="out of memory, again" if status == "fail" else "")


@pytest.fixture(scope="module")
def cmp():
    """gemv M=4 runs 50% slower, gemm_tiled fails, gemm_old is gone and gemm|new is new."""
    base = [_row("gemv", m, 10.0 + m) for m in GEMV_M] + [_row("gemm_tiled", 4096, 900.0),
                                                          _row("gemm_old", 128, 50.0)]
    cur = [_row("gemv", m, (10.0 + m) * (1.5 if m == 4 else 1.0)) for m in GEMV_M] + [
        _row("gemm_tiled", 4096, 0.0, status="fail"), _row("gemm|new", 128, 50.0)]
    result = compare(ResultTable("base.csv", "perfci", tuple(base)), ResultTable("cur.csv", "perfci", tuple(cur)))
    # What every test below relies on; if compare changes, this says so first.
    assert [c.verdict for c in result.cases] == ["broken", "regressed"] + ["unchanged"] * 6 + ["added", "removed"]
    return result


def test_table_lists_worst_first_in_aligned_columns(cmp):
    lines = render.render_table(cmp).splitlines()
    assert lines[0] == "perfci compare: base.csv -> cur.csv (gfx942)"
    header, rule, rows = lines[1], lines[2], lines[3:3 + len(cmp.cases)]
    assert header.split() == ["kernel", "shape", "dtype", "base", "us", "cur", "us", "TFLOP/s", "roof", "raw",
                              "judged", "95%", "CI", "q", "floor", "verdict"]
    assert set(rule) == {"-", " "}
    assert [r.split()[0] for r in rows] == ["XX", "!!"] + ["~"] * 6 + ["+", "-"]
    assert rows[1].split() == ["!!", "gemv", "4x4096x4096", "bf16", "14.00", "21.00", "+50.0%", "+50.0%",
                               "[+49.4%,", "+50.6%]", "0.0041", "2.9%", "regressed"]
    # Every row's kernel starts under the header's: the columns line up.
    assert {r.index(r.split()[1]) for r in rows} == {header.index("kernel")}
    assert "verdicts: 1 broken, 1 regressed, 6 unchanged, 1 added, 1 removed" in lines
    assert [line[len("note: "):] for line in lines if line.startswith("note: ")] == list(cmp.notes)


def test_markdown_puts_what_matters_first_and_folds_the_unchanged(cmp):
    text = render.render_markdown(cmp)
    assert text.startswith("### :x: perfci compare: 1 broken, 1 regressed, 6 unchanged, 1 added, 1 removed\n")
    notable, folded = text.split("<details><summary>6 unchanged</summary>")
    assert "| **broken** | `gemm_tiled` |" in notable and "| **regressed** | `gemv` | 4x4096x4096 |" in notable
    assert "| added | `gemm\\|new` |" in notable  # a | in a name would end the cell
    assert folded.count("| unchanged |") == 6 and "| unchanged |" not in notable
    assert text.rstrip().endswith("</details>")


def test_markdown_cuts_long_tables_and_says_how_many_are_left(cmp):
    text = render.render_markdown(cmp, max_rows=2)
    assert "| … | 2 more | | | | | | | | | |" in text  # 4 notable cases, 2 shown
    assert "| … | 4 more | | | | | | | | | |" in text  # 6 unchanged, 2 shown


def test_markdown_icon_follows_the_outcome(cmp):
    timed = [c for c in cmp.cases if c.verdict == "unchanged"]
    passing = replace(cmp, cases=tuple(timed))
    doubtful = replace(cmp, cases=(replace(timed[0], verdict="inconclusive"),) + tuple(timed[1:]))
    assert render.render_markdown(passing).startswith("### :white_check_mark: ")
    assert render.render_markdown(doubtful).startswith("### :warning: ")


def test_json_is_strict_json_with_non_finite_numbers_as_null(cmp):
    nan_case = replace(cmp.cases[1], p_value=float("nan"), ci_high=float("inf"))
    out = json.loads(render.render_json(replace(cmp, cases=(cmp.cases[0], nan_case) + cmp.cases[2:])),
                     parse_constant=lambda name: pytest.fail(f"{name} in JSON output"))
    assert out["regressed"] is True and out["inconclusive"] is False
    assert (out["base"], out["cur"], out["arch"], out["profile"]["name"]) == ("base.csv", "cur.csv", "gfx942", "gfx942")
    assert [c["verdict"] for c in out["cases"]] == [c.verdict for c in cmp.cases]
    assert out["cases"][1]["p_value"] is None and out["cases"][1]["ci_high"] is None
    assert out["summary"]["worst"] == [["gemm_tiled", "4096x4096x4096", "bf16"], ["gemv", "4x4096x4096", "bf16"]]
    assert out["notes"] == list(cmp.notes) and out["suite_shift"]["method"] == cmp.suite.method


def test_csv_has_the_documented_columns_and_empty_cells_for_none(cmp):
    rows = list(csv.DictReader(io.StringIO(render.render_csv(cmp))))
    assert tuple(rows[0]) == render.CSV_FIELDS
    assert [(r["kernel"], r["verdict"]) for r in rows] == [(c.kernel, c.verdict) for c in cmp.cases]
    broken = rows[0]
    assert broken["ratio"] == broken["raw_ratio"] == broken["cur_us"] == ""
    assert broken["reason"] == "ok in base, fail in cur: out of memory, again"  # the comma survives quoting
    assert float(rows[1]["ratio"]) == pytest.approx(1.5) and float(rows[1]["raw_ratio"]) == pytest.approx(1.5)
    assert float(rows[1]["ci_low"]) <= float(rows[1]["ratio"]) <= float(rows[1]["ci_high"])


def test_forest_plot_draws_one_row_per_judged_case_worst_on_top(cmp, tmp_path, monkeypatch):
    drawn = []
    save = matplotlib.figure.Figure.savefig

    def keep_figure(fig, *args, **kwargs):
        drawn.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep_figure)
    png = tmp_path / "forest.png"
    render.plot(cmp, str(png))

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.image.imread(png).shape[1] == 9 * 120  # 9 inches at 120 dpi
    (ax,) = drawn[0].axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # broken, added and removed cases have no judged ratio, so no row; the plot's
    # top row (the last label) is the worst judged case.
    judged = [c for c in cmp.cases if c.ratio is not None]
    assert labels == [f"{c.kernel} {c.shape} {c.dtype}  ({render._us(c.cur_us)} µs)" for c in reversed(judged)]
    assert labels[-1] == "gemv 4x4096x4096 bf16  (21.00 µs)"
    assert ax.get_title() == "perfci compare on gfx942: 1 broken, 1 regressed, 6 unchanged, 1 added, 1 removed"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["regressed", "unchanged", "noise floor"]


def test_times_are_written_as_people_write_them():
    assert [render._us(x) for x in (1834.4, 248.26, 14.754, 0.9123, None)] == ["1834", "248.3", "14.75", "0.912", ""]


def test_a_large_suite_plots_only_its_changed_cases_and_clips_outliers(tmp_path, monkeypatch):
    # 84 cases, one +60% (far past the axis): 83 unchanged rows would bury it.
    base = [_row("gemv", m, 10.0 + m) for m in range(1, 85)]
    cur = [_row("gemv", m, (10.0 + m) * (1.6 if m == 7 else 1.0)) for m in range(1, 85)]
    result = compare(ResultTable("b.csv", "perfci", tuple(base)), ResultTable("c.csv", "perfci", tuple(cur)))
    drawn = []
    save = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **k: (drawn.append(fig), save(fig, *a, **k))[1])
    render.plot(result, str(tmp_path / "f.png"))
    (ax,) = drawn[0].axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gemv 7x4096x4096 bf16  (27.20 µs)"]
    assert "83 unchanged not shown" in ax.get_title()
    assert ax.get_xlim()[1] < 60  # clipped: the +60% point is an arrow at the edge, with its value
    assert any(t.get_text() == "+60%" for t in ax.texts)


def test_identity_lines_say_what_ran_where_and_what_differs(cmp):
    from perfci.compare.identity import with_identity

    def table(path, driver, torch_version):
        rows = tuple(replace(r, git_sha="a" * 40, device_name="AMD Instinct MI300X", driver=driver,
                             torch=torch_version, timestamp="2026-11-30T02:00:00Z") for r in
                     (_row("gemv", m, 10.0 + m) for m in GEMV_M))
        return ResultTable(path, "perfci", rows)

    base, cur = table("b.csv", "6.8.5", "2.9.0"), table("c.csv", "6.10.5", "2.9.0")
    text = render.render_markdown(with_identity(compare(base, cur), base, cur))
    assert "- base: aaaaaaaaaaaa, 2026-11-30, AMD Instinct MI300X, arch gfx942, driver 6.8.5, torch 2.9.0" in text
    assert "- environment differs: driver 6.8.5 -> 6.10.5" in text and "torch 2.9.0 ->" not in text
