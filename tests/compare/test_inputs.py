"""What compare and calibrate read: results of every supported format, and noise profiles."""
import dataclasses
import json
from pathlib import Path

import pytest

from perfci.compare.inputs import read_any, read_profile
from perfci.compare.noise import BUILTIN_PROFILES, profile_to_json
from perfci.errors import PerfciError

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"

CSV = "kernel,shape,dtype,median_us,repeats_us,status\nk,64x64x64,bf16,10,10;10.1;9.9,ok\n"


def _bench(**fields):
    entry = {"name": "test_gemm[512]", "stats": {"data": [1e-5, 2e-5, 3e-5]}, **fields}
    return json.dumps({"benchmarks": [entry]})


# --------------------------------------------------------------------------- read_any dispatch


def test_json_suffix_is_read_as_pytest_benchmark_whatever_the_content(tmp_path):
    upper = tmp_path / "run.JSON"
    upper.write_text(_bench())
    assert read_any(upper).format == "pytest-benchmark"
    csv_named_json = tmp_path / "run.json"
    csv_named_json.write_text(CSV)
    with pytest.raises(PerfciError, match=r"run.json: line 1, column 1: not valid JSON"):
        read_any(csv_named_json)


def test_other_names_are_json_when_the_first_byte_is_a_brace(tmp_path):
    braced = tmp_path / "run.txt"
    braced.write_text("\n  " + _bench())  # leading whitespace does not hide the brace
    assert read_any(braced).format == "pytest-benchmark"
    plain = tmp_path / "run.txt.bak"
    plain.write_text(CSV)
    table = read_any(plain)
    assert table.format == "perfci" and [r.key for r in table.rows] == [("k", "64x64x64", "bf16")]


def test_flydsl_csv_and_a_missing_file_go_to_the_csv_reader(tmp_path):
    assert read_any(DATA / "flydsl_base.csv").format == "flydsl"
    with pytest.raises(PerfciError, match="no such file"):
        read_any(tmp_path / "missing")


# --------------------------------------------------------------------------- pytest-benchmark


def test_params_with_m_n_k_name_the_shape_and_dtype(tmp_path):
    f = tmp_path / "pb.json"
    f.write_text(_bench(fullname="tests/test_gemm.py::test_gemm[512]",
                        params={"M": 512, "N": 4096, "K": 1024, "dtype": "torch.bfloat16"}))
    (row,) = read_any(f).rows
    assert (row.kernel, row.shape, row.dtype) == ("tests/test_gemm.py::test_gemm", "512x4096x1024", "bf16")
    assert (row.m, row.n, row.k) == (512, 4096, 1024)
    assert row.repeats_us == pytest.approx((10.0, 20.0, 30.0)) and row.median_us == pytest.approx(20.0)


def test_other_params_become_the_shape_text_and_no_params_keep_the_name(tmp_path):
    f = tmp_path / "pb.json"
    f.write_text(_bench(params={"tile": 64, "Layout": "nt", "dtype": "float16"}))
    (row,) = read_any(f).rows
    assert (row.kernel, row.shape, row.dtype) == ("test_gemm", "Layout=nt,tile=64", "fp16")
    f.write_text(_bench())
    (row,) = read_any(f).rows
    assert (row.kernel, row.shape, row.dtype) == ("test_gemm[512]", "-", "-")


def test_median_alone_is_one_value_so_compare_is_threshold_only(tmp_path):
    f = tmp_path / "pb.json"
    f.write_text(_bench(stats={"median": 2e-5, "mean": 9.0}))
    (row,) = read_any(f).rows
    assert row.repeats_us == pytest.approx((20.0,)) and row.median_us == pytest.approx(20.0)


@pytest.mark.parametrize("text,message", [
    ('{"benchmarks": {}}', "'benchmarks' must be a list, got dict"),
    ('{"benchmarks": []}', "'benchmarks' is empty"),
    ('{"benchmarks": [3]}', "benchmarks[0]: must be an object, got int"),
    ('{"benchmarks": [{"name": " ", "stats": {"median": 1}}]}',
     "benchmarks[0]: 'name' (or 'fullname') must be a non-empty string"),
    (_bench(params=[512]), "benchmarks[0].params: must be an object or null, got list"),
    (_bench(stats={"data": []}), "benchmarks[0].stats.data: must be a non-empty list of seconds"),
    (_bench(stats={"mean": 1}), "benchmarks[0].stats: has neither 'data' nor 'median'"),
    (_bench(stats={"median": True}), "benchmarks[0].stats.median: True is not a number"),
    ('{"benchmarks": [{"name": "a", "stats": {"median": Infinity}}]}',
     "'Infinity' is not a finite number (JSON has no NaN or Infinity)"),
    # the bad-input probe: these tracebacked, or were read as something else
    ('{"benchmarks": [{"name": "a", "stats": {"median": 1' + "0" * 400 + '}}]}',
     "benchmarks[0].stats.median: 1" + "0" * 29 + "... (401 characters) "
     "must be a finite time greater than zero"),
    ('{"benchmarks": [{"name": "a", "stats": {"median": 1e300}}]}',
     "benchmarks[0].stats.median: 1e+300 s is outside 0.001..1e+12 us"),
    ('{"benchmarks": [{"name": "a", "stats": {"median": 1e-320}}]}',
     "benchmarks[0].stats.median: 1e-320 s is outside 0.001..1e+12 us"),
    ('{"benchmarks": [{"name": "a", "stats": {"median": 1}}], "benchmarks": []}',
     "key 'benchmarks' appears twice in one JSON object"),
    ('{"benchmarks": [{"name": "a", "stats": {"median": 1' + "0" * 5000 + '}}]}',
     "Exceeds the limit (4300 digits) for integer string conversion: value has 5001 digits; "
     "use sys.set_int_max_str_digits() to increase the limit"),
    ("[" * 100_000 + "]" * 100_000, "not valid input (JSON nested too deeply)"),
])
def test_bad_pytest_benchmark_json_is_one_line_naming_file_and_place(tmp_path, text, message):
    f = tmp_path / "pb.json"
    f.write_text(text)
    with pytest.raises(PerfciError) as err:
        read_any(f)
    assert str(err.value) == f"{f}: {message}"


# --------------------------------------------------------------------------- read_profile


def test_huge_params_are_shape_text_not_dimensions(tmp_path):
    f = tmp_path / "pb.json"
    f.write_text(_bench(params={"m": 10 ** 400, "n": 2, "k": 3}))
    (row,) = read_any(f).rows
    assert (row.m, row.n, row.k) == (None, None, None) and row.shape.startswith("k=3,m=1000")


@pytest.mark.parametrize("change, message", [
    ({"floor_pct": 7.4e296}, "floor_pct 7.4e+296% is not a floor between 0 and 100%"),
    ({"suite_floor_pct": 101}, "suite_floor_pct 101% is not a floor between 0 and 100%"),
    ({"clock_swing_pct": 100}, "clock_swing_pct 100% must be below 100%"),
    ({"floor_us": 10 ** 400}, "key 'floor_us' must be a number >= 0, got 1" + "0" * 29 + "... (401 characters)"),
])
def test_read_profile_refuses_absurd_floors(tmp_path, change, message):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({**json.loads(profile_to_json(BUILTIN_PROFILES["cpu"])), **change}))
    with pytest.raises(PerfciError) as err:
        read_profile(str(f))
    assert str(err.value).startswith(f"{f}: {message}")


def _table(path, arch, name):
    from perfci.model import ResultRow, ResultTable
    rows = (ResultRow(kernel="k", shape="1x2x3", dtype="bf16", status="ok", median_us=1.0, arch=arch,
                      device_name=name),)
    return ResultTable(path=path, format="perfci", rows=rows)


def test_devices_must_match_where_both_files_say():
    from perfci.compare.inputs import check_same_device

    h200 = _table("a.csv", "sm_90", "NVIDIA H200")
    check_same_device(h200, _table("b.csv", "sm_90", "NVIDIA H200"))
    check_same_device(h200, _table("b.csv", "", ""))  # FlyDSL / pytest-benchmark: nothing to check
    check_same_device(h200, _table("b.csv", "sm_90", ""))  # an older file without the name
    check_same_device(_table("a.csv", "cpu", "AMD EPYC"), _table("b.csv", "cpu", "Intel Xeon"))
    with pytest.raises(PerfciError, match=r"^a.csv ran on NVIDIA H200 \(sm_90\) and b.csv on NVIDIA H100 "
                                          r"\(sm_90\): a different device is not a regression"):
        check_same_device(h200, _table("b.csv", "sm_90", "NVIDIA H100"))
    with pytest.raises(PerfciError, match="on AMD Instinct MI300X \\(gfx942\\)"):
        check_same_device(h200, _table("b.csv", "gfx942", "AMD Instinct MI300X"))
    mixed = _table("m.csv", "sm_90", "x")
    mixed = type(mixed)(path="m.csv", format="perfci", rows=mixed.rows + tuple(
        dataclasses.replace(r, kernel="k2", arch="gfx942") for r in mixed.rows))
    with pytest.raises(PerfciError, match=r"^m.csv: rows from more than one device \(gfx942, sm_90, x\)"):
        check_same_device(mixed, h200)


def test_read_profile_takes_a_builtin_name_or_calibrates_json(tmp_path):
    assert read_profile("gfx950") is BUILTIN_PROFILES["gfx950"]
    f = tmp_path / "p.json"
    f.write_text(profile_to_json(BUILTIN_PROFILES["gfx942"], {"runs": 3}))
    assert read_profile(str(f)) == BUILTIN_PROFILES["gfx942"]


def test_read_profile_accepts_files_written_before_floor_us(tmp_path):
    data = json.loads(profile_to_json(BUILTIN_PROFILES["gfx950"]))
    del data["floor_us"]
    f = tmp_path / "old.json"
    f.write_text(json.dumps(data))
    assert read_profile(str(f)).floor_us == 0.0


def test_read_profile_errors_are_one_line_naming_the_file(tmp_path):
    with pytest.raises(PerfciError) as err:
        read_profile(str(tmp_path / "nope.json"))
    assert str(err.value) == (f"--noise-profile {tmp_path / 'nope.json'}: neither a built-in profile "
                              f"(gfx950, gfx942, sm_90, cpu, generic) nor an existing file")
    f = tmp_path / "p.json"
    f.write_text('{"name": ')
    with pytest.raises(PerfciError, match=r"p.json: line 1, column 10: not valid JSON \(Expecting value\)$"):
        read_profile(str(f))
    f.write_text(json.dumps({**json.loads(profile_to_json(BUILTIN_PROFILES["cpu"])), "floor_pct": "two"}))
    with pytest.raises(PerfciError, match=r"p.json: key 'floor_pct' must be a number >= 0, got 'two'$"):
        read_profile(str(f))
    f.write_bytes(b"\xff\xfe{}")
    with pytest.raises(PerfciError, match=r"p.json: not a text file \(cannot decode as UTF-8\)$"):
        read_profile(str(f))
