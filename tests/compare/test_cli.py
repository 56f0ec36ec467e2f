"""perfci compare / calibrate as a user runs them: stdout, stderr and the exit code."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
ROOT = Path(__file__).resolve().parents[2]


def perfci(*args):
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_aa_exits_0_and_planted_regression_exits_1():
    r = perfci("compare", DATA / "aa_base.csv", DATA / "aa_cur.csv")
    assert r.returncode == 0, r.stderr
    r = perfci("compare", DATA / "base.csv", DATA / "cur_regressed.csv", "--format", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    worst = out["cases"][0]
    assert (worst["kernel"], worst["shape"], worst["verdict"]) == ("gemm_bf16_v0", "32x6144x4096", "regressed")
    for field in ("kernel", "shape", "dtype", "verdict", "ratio", "ci_low", "ci_high", "p_value"):
        assert field in worst
    assert out["summary"]["counts"]["regressed"] == 1 and out["regressed"] is True


def test_strict_exits_3_on_inconclusive(tmp_path):
    # Same suite, 2.5% slower everywhere with no clocks: nothing regresses, but the
    # suite-wide shift cannot be told from a clock swing.
    rows = (DATA / "aa_base.csv").read_text().splitlines()
    head, body = rows[0], rows[1:]
    cols = head.split(",")
    i_med, i_rep, i_clk = cols.index("median_us"), cols.index("repeats_us"), cols.index("sclk_mhz")
    out_b, out_c = [head], [head]
    for line in body:
        cells = line.split(",")
        cells[i_clk] = ""
        out_b.append(",".join(cells))
        cells[i_med] = f"{float(cells[i_med]) * 1.05:.4f}"
        cells[i_rep] = ";".join(f"{float(x) * 1.05:.4f}" for x in cells[i_rep].split(";"))
        out_c.append(",".join(cells))
    (tmp_path / "b.csv").write_text("\n".join(out_b) + "\n")
    (tmp_path / "c.csv").write_text("\n".join(out_c) + "\n")
    plain = perfci("compare", tmp_path / "b.csv", tmp_path / "c.csv")
    strict = perfci("compare", tmp_path / "b.csv", tmp_path / "c.csv", "--strict")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert strict.returncode == 3
    assert "clocks, driver or a shared change?" in plain.stdout


def test_markdown_csv_and_plot(tmp_path):
    png = tmp_path / "forest.png"
    r = perfci("compare", DATA / "base.csv", DATA / "cur_regressed.csv", "--format", "markdown",
               "--plot", png)
    assert r.returncode == 1
    assert r.stdout.startswith("### :x: perfci compare: 1 regressed")
    assert "<details>" in r.stdout and "| **regressed** |" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = perfci("compare", DATA / "base.csv", DATA / "cur_regressed.csv", "--format", "csv")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("kernel,shape,dtype,verdict,ratio") and len(lines) == 61


def test_flydsl_is_threshold_only():
    r = perfci("compare", DATA / "flydsl_base.csv", DATA / "flydsl_cur.csv", "--min-effect", "5")
    assert r.returncode == 1
    assert "threshold-only verdicts" in r.stdout
    assert "regressed" in r.stdout.splitlines()[3]
    r = perfci("compare", DATA / "flydsl_base.csv", DATA / "flydsl_cur.csv")
    assert r.returncode == 0 and "inconclusive" in r.stdout  # 24% is within a possible clock swing


def test_pytest_benchmark_json():
    r = perfci("compare", DATA / "pb_base.json", DATA / "pb_cur.json", "--arch", "sm_90", "--format", "json")
    assert r.returncode == 1, r.stderr
    cases = json.loads(r.stdout)["cases"]
    assert cases[0]["shape"] == "2048x4096x4096" and cases[0]["verdict"] == "regressed"
    assert cases[0]["kernel"] == "tests/test_gemm.py::test_gemm" and cases[0]["dtype"] == "bf16"
    assert cases[0]["n_base"] == 15


def test_added_removed_broken(tmp_path):
    lines = (DATA / "aa_base.csv").read_text().splitlines()
    head = lines[0].split(",")
    i_status, i_kernel = head.index("status"), head.index("kernel")
    cur = [lines[0]]
    for n, line in enumerate(lines[1:]):
        cells = line.split(",")
        if n == 0:
            continue  # removed
        if n == 1:
            cells[i_status] = "fail"
        if n == 2:
            cells[i_kernel] = "brand_new"
        cur.append(",".join(cells))
    (tmp_path / "cur.csv").write_text("\n".join(cur) + "\n")
    r = perfci("compare", DATA / "aa_base.csv", tmp_path / "cur.csv", "--format", "json")
    assert r.returncode == 1
    counts = json.loads(r.stdout)["summary"]["counts"]
    assert (counts["broken"], counts["added"], counts["removed"]) == (1, 1, 2)
    assert json.loads(r.stdout)["cases"][0]["verdict"] == "broken"


GOOD = "kernel,shape,dtype,median_us,repeats_us,status\nk,64x64x64,bf16,10,10;10.1;9.9,ok\n"


@pytest.mark.parametrize("name,text,expect", [
    ("empty.csv", "", "the file is empty"),
    ("cols.csv", "kernel,shape\nk,1x1x1\n", "missing column(s) dtype"),
    ("nan.csv", GOOD.replace("10,10;", "nan,10;"), "line 2, column 'median_us'"),
    ("neg.csv", GOOD.replace("10;10.1", "-10;10.1"), "line 2, column 'repeats_us'"),
    ("zero.csv", GOOD.replace(",10,10;", ",0,10;"), "must be greater than zero"),
    ("type.csv", GOOD.replace("10;10.1", "ten;10.1"), "'ten' is not a number"),
    ("dup.csv", GOOD + GOOD.splitlines()[1] + "\n", "line 3, column 'kernel': duplicate case"),
    ("empty.json", "", "the file is empty"),
    ("syntax.json", '{"benchmarks": [', "line 1, column 17: not valid JSON"),
    ("nobench.json", '{"x": 1}', "no top-level 'benchmarks' list"),
    ("nan.json", '{"benchmarks": [{"name": "a", "stats": {"data": [NaN]}}]}', "not a finite number"),
    ("negjs.json", '{"benchmarks": [{"name": "a", "stats": {"data": [0.1, -1]}}]}',
     "benchmarks[0].stats.data[1]: -1 must be a finite time greater than zero"),
    ("typejs.json", '{"benchmarks": [{"name": "a", "stats": {"data": ["x"]}}]}',
     "benchmarks[0].stats.data[0]: 'x' is not a number"),
    ("nostat.json", '{"benchmarks": [{"name": "a"}]}', "benchmarks[0].stats: missing"),
    ("dupjs.json", '{"benchmarks": [{"name": "a", "stats": {"median": 1}}, '
                   '{"name": "a", "stats": {"median": 2}}]}', "benchmarks[1]: duplicate case"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, name, text, expect):
    bad = tmp_path / name
    bad.write_text(text)
    good = tmp_path / ("good.json" if name.endswith(".json") else "good.csv")
    good.write_text('{"benchmarks": [{"name": "a", "stats": {"median": 1}}]}'
                    if name.endswith(".json") else GOOD)
    r = perfci("compare", good, bad)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and expect in lines[0], r.stderr


def test_usage_errors_exit_2():
    assert perfci("compare", DATA / "base.csv").returncode == 2
    r = perfci("compare", DATA / "base.csv", DATA / "base.csv", "--alpha", "2")
    assert r.returncode == 2 and "between 0 and 1" in r.stderr
    r = perfci("compare", DATA / "base.csv", DATA / "base.csv", "--noise-profile", "nope")
    assert r.returncode == 2 and "neither a built-in profile" in r.stderr


def test_help_teaches_verdicts_and_exit_codes():
    r = perfci("compare", "--help")
    assert r.returncode == 0
    for text in ("inconclusive", "common mode", "exit codes", "GITHUB_STEP_SUMMARY", "--strict"):
        assert text in r.stdout


def test_calibrate_writes_a_profile_compare_accepts(tmp_path):
    out = tmp_path / "gfx950.json"
    r = perfci("calibrate", DATA / "aa_base.csv", DATA / "aa_cur.csv", DATA / "base.csv", "--out", out)
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())
    assert prof["arch"] == "gfx950" and prof["floor_pct"] > 0 and prof["calibration"]["pairs"] == 3
    # The A/A pair it was calibrated on passes under it, judged by its floor, not the built-in 2%.
    r = perfci("compare", DATA / "aa_base.csv", DATA / "aa_cur.csv", "--noise-profile", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"noise profile gfx950: floor {prof['floor_pct']:g}% with clocks" in r.stdout
    assert perfci("calibrate", DATA / "aa_base.csv").returncode == 2


def _relabel(src, dst, **cells):
    import csv
    rows = list(csv.DictReader(open(src)))
    with open(dst, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, **cells} for row in rows)


def test_compare_refuses_two_devices_unless_told(tmp_path):
    base = DATA / "h200_planted_base.csv"
    _relabel(base, tmp_path / "mi300x.csv", arch="gfx942", device_name="AMD Instinct MI300X")
    r = perfci("compare", base, tmp_path / "mi300x.csv")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"perfci: error: {base} ran on NVIDIA H200 (sm_90) and {tmp_path / 'mi300x.csv'} on AMD Instinct "
        f"MI300X (gfx942): a different device is not a regression; compare runs of one device "
        f"(--allow-device-mismatch to compare them anyway)"]
    r = perfci("compare", base, tmp_path / "mi300x.csv", "--allow-device-mismatch")
    assert r.returncode == 0 and "mixes devices" in r.stdout


def test_calibrate_refuses_to_write_over_one_of_its_runs(tmp_path):
    runs = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for run, src in zip(runs, ("aa_base.csv", "aa_cur.csv")):
        run.write_bytes((DATA / src).read_bytes())
    r = perfci("calibrate", *runs, "--out", tmp_path / "." / "b.csv")
    assert r.returncode == 2 and "--out" in r.stderr and "is one of the runs it reads" in r.stderr
    assert runs[1].read_bytes() == (DATA / "aa_cur.csv").read_bytes()  # nothing lost


def _drop_rows(src: Path, dst: Path, keep) -> None:
    lines = src.read_text().splitlines()
    dst.write_text("\n".join([lines[0]] + [line for i, line in enumerate(lines[1:]) if keep(i)]) + "\n")


def test_a_case_missing_from_cur_fails_the_gate_unless_allowed(tmp_path):
    # A/A, with half the suite missing tonight: not a clean night.
    _drop_rows(DATA / "aa_cur.csv", tmp_path / "half.csv", lambda i: i % 2 == 0)
    r = perfci("compare", DATA / "aa_base.csv", tmp_path / "half.csv")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "were not measured in CUR" in r.stderr and "--allow-missing" in r.stderr
    allowed = perfci("compare", DATA / "aa_base.csv", tmp_path / "half.csv", "--allow-missing")
    assert allowed.returncode == 0, allowed.stderr
    # Cases only tonight (added) are no failure.
    added = perfci("compare", tmp_path / "half.csv", DATA / "aa_cur.csv")
    assert added.returncode == 0, added.stderr


def test_only_changed_and_sort(tmp_path):
    full = json.loads(perfci("compare", DATA / "base.csv", DATA / "cur_regressed.csv", "--format", "json").stdout)
    r = perfci("compare", DATA / "base.csv", DATA / "cur_regressed.csv", "--format", "json", "--only-changed")
    shown = json.loads(r.stdout)
    assert r.returncode == 1
    assert shown["cases"] and all(c["verdict"] != "unchanged" for c in shown["cases"])
    assert len(shown["cases"]) < len(full["cases"])
    assert shown["summary"]["counts"] == full["summary"]["counts"]  # the summary still counts every case
    by_name = json.loads(perfci("compare", DATA / "base.csv", DATA / "cur_regressed.csv", "--format", "json",
                                "--sort", "name").stdout)["cases"]
    names = [(c["kernel"], c["shape"], c["dtype"]) for c in by_name]
    assert names == sorted(names) and len(names) == len(full["cases"])
