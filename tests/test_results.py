import os

import pytest

from perfci.errors import PerfciError
from perfci.model import CaseResult, CaseSpec, Environment, RepeatSample
from perfci.results import (COLUMNS, cell_number, parse_shape, read_results, read_results_cells,
                            result_to_row, write_results)

ENV = Environment(device_name="NVIDIA H200", arch="sm_90", vendor="nvidia", git_sha="abc123",
                  timestamp="2026-11-29T12:00:00Z")


def make_result(kernel="splitk_decode", variant=None, m=16, status="ok", medians=(10.0, 11.0, 9.0)):
    spec = CaseSpec(kernel=kernel, m=m, n=1024, k=6144, dtype="bf16", variant=variant or {}, weight=2.0)
    repeats = tuple(RepeatSample(median_us=v, sclk_mhz=1500.0 + i, throttled=i == 0)
                    for i, v in enumerate(medians)) if status == "ok" else ()
    return CaseResult(spec=spec, status=status, repeats=repeats, iters=70,
                      message="" if status == "ok" else "boom\nsecond line")


def test_round_trip_keeps_repeats_clocks_and_derived_metrics(tmp_path):
    ok = make_result(variant={"m_fast": 1})
    failed = make_result(m=4, status="fail")
    path = tmp_path / "r.csv"
    write_results(path, [result_to_row(ok, ENV, "decode", 788.0, 4.3), result_to_row(failed, ENV, "decode")])
    header = path.read_text().splitlines()[0].split(",")
    assert header == list(COLUMNS)
    table = read_results(path)
    assert table.format == "perfci"
    first, second = table.rows
    assert first.key == ("splitk_decode[m_fast=1]", "16x1024x6144", "bf16")
    assert first.median_us == 10.0  # median of the three repeat medians
    assert first.repeats_us == (10.0, 11.0, 9.0)
    assert first.sclk_mhz == (1500.0, 1501.0, 1502.0)
    assert first.throttled == (True, False, False)
    assert first.weight == 2.0
    assert first.tflops == pytest.approx(2 * 16 * 1024 * 6144 / 10e-6 / 1e12, rel=1e-3)
    assert (first.m, first.n, first.k) == (16, 1024, 6144)
    assert second.status == "fail" and second.median_us is None
    assert "\n" not in second.message  # one line per row, whatever the worker said


def test_roofline_is_the_larger_of_compute_and_memory_floor(tmp_path):
    row = result_to_row(make_result(), ENV, "decode", 788.0, 4.3)
    spec = make_result().spec
    floor_us = max(spec.flops / 788e12, spec.min_bytes / 4.3e12) * 1e6
    assert float(row["roofline_pct"]) == pytest.approx(100 * floor_us / 10.0, abs=0.06)
    assert result_to_row(make_result(), ENV)["roofline_pct"] == ""  # unknown device: no invented peak


def test_parse_shape():
    assert parse_shape("5120x5120x8320_tile64x256x128") == (5120, 5120, 8320)
    assert parse_shape("attention") is None


def test_flydsl_csv_is_accepted(tmp_path):
    path = tmp_path / "flydsl.csv"
    path.write_text("op,shape,dtype,tbps,tflops,status\n"
                    "preshuffle_gemm,5120x5120x8320_tile64x256x128,bf16,1.234,500.000,ok\n"
                    "hgemm,2048x2048x2048,fp16,-,-,missing\n"
                    "softmax,rows4096,bf16,3.100,-,ok\n")
    table = read_results(path)
    assert table.format == "flydsl" and not table.has_repeats
    gemm, missing, softmax = table.rows
    assert gemm.median_us == pytest.approx(2 * 5120 * 5120 * 8320 / 500e12 * 1e6)
    assert missing.status == "error" and missing.median_us is None
    assert softmax.median_us == pytest.approx(1e6 / 3.1)  # no shape: 1/throughput stands in


GOOD_HEADER = "kernel,shape,dtype,median_us,repeats_us,status\n"


@pytest.mark.parametrize("body, expected", [
    ("", "the file is empty"),
    ("kernel,shape,dtype\nk,1x2x3,bf16\n", "line 1: missing column(s) median_us, repeats_us, status"),
    (GOOD_HEADER, "has a header but no rows"),
    (GOOD_HEADER + "k,1x2x3,bf16,nan,1;2,ok\n", "line 2, column 'median_us': 'nan' is not a finite number"),
    (GOOD_HEADER + "k,1x2x3,bf16,-4,1;2,ok\n", "line 2, column 'median_us': -4 must be greater than zero"),
    (GOOD_HEADER + "k,1x2x3,bf16,0,1;2,ok\n", "line 2, column 'median_us': 0 must be greater than zero"),
    (GOOD_HEADER + "k,1x2x3,bf16,fast,1;2,ok\n", "line 2, column 'median_us': 'fast' is not a number"),
    (GOOD_HEADER + "k,1x2x3,bf16,3,1;x,ok\n", "line 2, column 'repeats_us': 'x' is not a number"),
    (GOOD_HEADER + "k,1x2x3,bf16,3,1;2,great\n", "line 2, column 'status': 'great' is not one of"),
    (GOOD_HEADER + "k,1x2x3,bf16,3,3,ok\nk,1x2x3,bf16,4,4,ok\n",
     "line 3, column 'kernel': duplicate case k,1x2x3,bf16 (first on line 2)"),
    ("kernel,shape,dtype,median_us,repeats_us,status,M\nk,1x2x3,bf16,3,3,ok,two\n",
     "line 2, column 'M': 'two' is not an integer"),
    ("op,shape,dtype,tbps,tflops,status\nop,1x2x3,bf16,-,-,ok\n", "line 2, column 'tflops': an ok row needs"),
    # what the bad-input probe found: a traceback or a silent misreading before
    (GOOD_HEADER + "k,1x2x3,bf16,1e-320,1e-320,ok\n", "line 2, column 'median_us': 1e-320 is outside 0.001..1e+12 us"),
    (GOOD_HEADER + "k,1x2x3,bf16,3,3;1e13,ok\n", "line 2, column 'repeats_us': 1e13 is outside"),
    ("kernel,shape,dtype,median_us,repeats_us,status,median_us\nk,1x2x3,bf16,3,3,ok,4\n",
     "line 1: column 'median_us' appears twice (columns 4 and 7)"),
    (GOOD_HEADER + "k,1x2x3,bf16,3,3,ok,extra\n", "line 2: 7 cells, but the header has 6 columns"),
    (GOOD_HEADER + "k,1x2x3,bf16,3,3\n", "line 2: 5 cells, but the header has 6 columns"),
    ("kernel,shape,dtype,median_us,repeats_us,status,M\nk,1x2x3,bf16,3,3,ok," + "9" * 400 + "\n",
     "line 2, column 'M': 9999999999"),
    ("kernel,shape,dtype,median_us,repeats_us,status\nk," + "9" * 400 + "x2x3,bf16,3,3,ok\n",
     "line 2, column 'M': " + "9" * 400 + " must be a positive integer up to 2147483648"),
    ("kernel,shape,dtype,median_us,repeats_us,status,sclk_mhz\nk,1x2x3,bf16,3,3;3;3,ok,1500;1500\n",
     "line 2, column 'sclk_mhz': has 2 entries for 3 repeats"),
    ("kernel,shape,dtype,median_us,repeats_us,status,throttled\nk,1x2x3,bf16,3,3;3,ok,0;1;1\n",
     "line 2, column 'throttled': has 3 entries for 2 repeats"),
    ("kernel,shape,dtype,median_us,repeats_us,status,sclk_mhz\nk,1x2x3,bf16,3,3;3,ok,1e-320;1\n",
     "line 2, column 'sclk_mhz': 1e-320 is outside 1..100000 MHz"),
    ("kernel,shape,dtype,median_us,repeats_us,status,weight\nk,1x2x3,bf16,3,3,ok,1e300\n",
     "line 2, column 'weight': 1e300 is outside"),
    ("op,shape,dtype,tbps,tflops,status\nop,1x2x3,bf16,-,1e-300,ok\n", "line 2, column 'tflops': 1e-300 gives a time"),
])
def test_bad_files_name_file_line_and_column(tmp_path, body, expected):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(PerfciError) as err:
        read_results(path)
    message = str(err.value)
    assert message.startswith(str(path))
    assert expected in message
    assert "\n" not in message


def test_missing_and_directory_inputs(tmp_path):
    with pytest.raises(PerfciError, match="no such file"):
        read_results(tmp_path / "nope.csv")
    with pytest.raises(PerfciError, match="is a directory"):
        read_results(tmp_path)


def test_non_ok_rows_may_have_no_time(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(GOOD_HEADER + "k,1x2x3,bf16,,,timeout\n")
    (row,) = read_results(path).rows
    assert row.status == "timeout" and row.median_us is None and os.path.exists(path)


def test_cells_give_the_columns_a_result_row_has_no_field_for(tmp_path):
    path = tmp_path / "r.csv"
    write_results(path, [result_to_row(make_result(), ENV, "decode", 788.0, 4.3),
                         result_to_row(make_result(m=4, status="fail"), ENV, "decode")])
    table, cells = read_results_cells(path)
    assert table == read_results(path)  # the same rows, validated the same way
    ok, failed = table.rows
    assert len(cells) == 2 and set(cells[0]) == set(COLUMNS)
    assert cell_number(table, ok, cells[0], "roofline_pct") == float(cells[0]["roofline_pct"]) > 0
    assert cell_number(table, ok, cells[0], "median_us") == ok.median_us
    with pytest.raises(PerfciError) as err:
        cell_number(table, failed, cells[1], "roofline_pct")
    assert str(err.value) == f"{path}: line 3, column 'roofline_pct': is empty"
    with pytest.raises(PerfciError, match="line 2, column 'sclk_mhz': '1500;1501;1502' is not a number"):
        cell_number(table, ok, cells[0], "sclk_mhz")


def test_placement_columns_round_trip_and_the_selection_id_ignores_order(tmp_path):
    from perfci.results import selection_id

    keys = [("a", "1x1x1", "bf16"), ("b", "2x2x2", "fp16")]
    assert selection_id(keys) == selection_id(reversed(keys)) != selection_id(keys[:1])
    assert selection_id(keys).startswith("2:")
    placed = {"shard": "2/4", "case_index": "7", "selection": selection_id(keys)}
    path = tmp_path / "r.csv"
    write_results(path, [result_to_row(make_result(), ENV, "decode", placement=placed)])
    _, cells = read_results_cells(path)
    assert {c: cells[0][c] for c in placed} == placed
    assert result_to_row(make_result(), ENV)["shard"] == ""  # an unsharded run


# --------------------------------------------------------------------------- launch and resources columns

from dataclasses import replace  # noqa: E402

from perfci.model import KernelRecord  # noqa: E402
from perfci.results import format_kernels, parse_kernels  # noqa: E402

SPLITK = (KernelRecord("splitk_partial_kernel",
                       (("grid", "1x16x8"), ("BLOCK_M", "16"), ("num_warps", "4"), ("num_stages", "3")),
                       (("regs", "128"), ("spills", "0"), ("shared", "24576"), ("occupancy", "16"))),
          KernelRecord("splitk_reduce_kernel", (("grid", "64x1x1"), ("num_warps", "4")),
                       (("regs", "16"), ("spills", "0"))))


def test_kernel_records_round_trip_through_the_csv(tmp_path):
    path = tmp_path / "r.csv"
    write_results(path, [result_to_row(replace(make_result(), kernels=SPLITK), ENV, "decode")])
    cells = read_results_cells(path)[1][0]
    assert cells["launch"] == ("splitk_partial_kernel:grid=1x16x8,BLOCK_M=16,num_warps=4,num_stages=3;"
                               "splitk_reduce_kernel:grid=64x1x1,num_warps=4")
    row = read_results(path).rows[0]
    assert row.kernels == SPLITK
    assert row.kernels[0].value("spills") == "0" and row.kernels[0].value("grid") == "1x16x8"


def test_no_kernels_write_empty_cells_and_files_without_the_columns_still_read(tmp_path):
    assert format_kernels(()) == ("", "", "")
    old = tmp_path / "old.csv"
    old.write_text("kernel,shape,dtype,median_us,repeats_us,status\nk,1x2x3,fp16,5.0,5.0;5.1,ok\n")
    assert read_results(old).rows[0].kernels == ()


def test_each_kernel_s_source_round_trips_and_the_interpreter_s_records_leave_resources_empty(tmp_path):
    # The interpreter reads no compiled resources; the launch and each kernel's source are still recorded.
    cpu = (KernelRecord("splitk_partial_kernel", (("grid", "1x4x2"), ("BLOCK_M", "16")), (), "81d101fe14015f07", True),
           KernelRecord("splitk_reduce_kernel", (("grid", "4x1x1"), ("BLOCK", "256")), (), "679f25afb6252201"))
    path = tmp_path / "r.csv"
    write_results(path, [result_to_row(replace(make_result(), kernels=cpu), ENV, "decode")])
    cells = read_results_cells(path)[1][0]
    assert cells["resources"] == ""
    assert cells["source"] == ("splitk_partial_kernel:81d101fe14015f07:autotuned;"
                               "splitk_reduce_kernel:679f25afb6252201")
    row = read_results(path).rows[0]
    assert row.kernels == cpu
    assert row.kernels[0].config == (("BLOCK_M", "16"),)  # the config is the launch without its grid


@pytest.mark.parametrize("launch, resources, column", [
    ("splitk_partial_kernel", "", "launch"),  # no ':'
    ("a:grid=1,BLOCK_M", "", "launch"),  # no value
    ("a:grid=1 2", "", "launch"),  # a space in a value
    ("a:grid=1", "b:regs=2", "resources"),  # another kernel
    ("a:grid=1", "", "source"),  # the source of another kernel (SOURCE below)
])
def test_a_malformed_kernel_cell_names_its_column(tmp_path, launch, resources, column):
    source = "b:0f3e" if column == "source" else ""
    with pytest.raises(ValueError, match=f"^{column}: "):
        parse_kernels(launch, resources, source)
    row = result_to_row(make_result(), ENV)
    row.update(launch=launch, resources=resources, source=source)
    path = tmp_path / "bad.csv"
    write_results(path, [row])
    with pytest.raises(PerfciError, match=f"line 2, column '{column}'"):
        read_results(path)
