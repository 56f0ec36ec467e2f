"""Reading metrics, and running commands with timeouts and the cache."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from perfci.benchcmd import BenchSpec, bench_once, run_command
from perfci.benchmetric import (
    MetricError,
    MetricSpec,
    extract,
    from_csv,
    from_json,
    from_regex,
    last_number,
    out_path_from_command,
)
from perfci.bisect.cache import Cache
from tests.proc_util import wait_until_dead

CSV = """kernel,shape,dtype,median_us,repeats_us,status
matmul_tiled,4096x4096x4096,fp16,812.5,812.5;813.0,ok
matmul_tiled,4096x4096x4096,bf16,820.0,820.0;821.0,ok
gemv,1x4096x4096,fp16,,,fail
"""


def test_last_number_ignores_words_with_digits():
    assert last_number("gpu0 sm_90 run 3 of 5\ntime: 1.25e-3 s (x86_64)\n") == pytest.approx(1.25e-3)
    with pytest.raises(MetricError):
        last_number("no numbers at all")


def test_regex_takes_first_group_of_last_match():
    text = "iter tflops=1.0\niter tflops=2.5\n"
    assert from_regex(text, r"tflops=([\d.]+)") == 2.5
    with pytest.raises(MetricError):
        from_regex(text, r"latency=([\d.]+)")


def test_json_path_with_list_index_and_log_lines():
    text = 'compiling...\n{"results": [{"t": 3}, {"t": 4.5}]}\n'
    assert from_json(text, "results.1.t") == 4.5
    with pytest.raises(MetricError, match="no key"):
        from_json(text, "results.1.missing")
    with pytest.raises(MetricError, match="not JSON"):
        from_json("plain text", "a")


def test_csv_case_exact_substring_ambiguous_and_failed(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(CSV)
    assert from_csv(path, "median_us", "matmul_tiled,4096x4096x4096,bf16") == 820.0
    assert from_csv(path, "median_us", "4096x4096x4096 fp16") == 812.5
    with pytest.raises(MetricError, match="matches 2 rows"):
        from_csv(path, "median_us", "matmul_tiled")
    with pytest.raises(MetricError, match="status"):
        from_csv(path, "median_us", "gemv")
    with pytest.raises(MetricError, match="no row"):
        from_csv(path, "median_us", "persistent")
    with pytest.raises(MetricError, match="no column"):
        from_csv(path, "tflops", "gemv")


def test_csv_column_the_result_row_has_no_field_for(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("kernel,shape,dtype,median_us,repeats_us,status,roofline_pct,power_w\n"
                    "a,1x2x3,bf16,5.0,5.0,ok,61.5,\n"
                    "b,1x2x3,bf16,6.0,6.0,ok,inf,300;310\n")
    assert from_csv(path, "roofline_pct", "a,1x2x3,bf16") == 61.5
    with pytest.raises(MetricError, match=r"line 2, column 'power_w': is empty$"):
        from_csv(path, "power_w", "a 1x2x3")
    with pytest.raises(MetricError, match=r"line 3, column 'roofline_pct': 'inf' is not a finite number$"):
        from_csv(path, "roofline_pct", "b 1x2x3")
    with pytest.raises(MetricError, match=r"line 3, column 'power_w': '300;310' is not a number$"):
        from_csv(path, "power_w", "b 1x2x3")


RESULTS_HEADER = "kernel,shape,dtype,median_us,repeats_us,status\n"


@pytest.mark.parametrize("body, message", [
    # The case asked for is fine, but another row makes the file no results CSV.
    pytest.param(RESULTS_HEADER + "a,1x2x3,bf16,5.0,5.0,ok\nb,1x2x3,bf16,fast,5.0,ok\n",
                 "line 3, column 'median_us': 'fast' is not a number", id="malformed cell"),
    # Two rows of the asked-for case: which one the bench meant cannot be known.
    pytest.param(RESULTS_HEADER + "a,1x2x3,bf16,5.0,5.0,ok\na,1x2x3,bf16,6.0,6.0,ok\n",
                 "line 3, column 'kernel': duplicate case a,1x2x3,bf16 (first on line 2)", id="duplicate case"),
    pytest.param("kernel,shape,dtype,median_us,status\na,1x2x3,bf16,5.0,ok\n",
                 "line 1: missing column(s) repeats_us;", id="missing column"),
])
def test_a_csv_the_results_reader_rejects_is_a_failed_run_with_its_line(tmp_path, body, message):
    path = tmp_path / "r.csv"
    path.write_text(body)
    with pytest.raises(MetricError) as err:
        from_csv(path, "median_us", "a,1x2x3,bf16")
    assert str(err.value).startswith(f"{path}: {message}")
    assert "\n" not in str(err.value)


def test_flydsl_csv_rows_are_named_by_op(tmp_path):
    path = tmp_path / "flydsl.csv"
    path.write_text("op,shape,dtype,tbps,tflops,status\nhgemm,2048x2048x2048,fp16,1.5,400.0,ok\n")
    assert from_csv(path, "tflops", "hgemm,2048x2048x2048,fp16") == 400.0


def test_out_path_from_perfci_run_command():
    assert out_path_from_command(["perfci", "run", "smoke", "--out", "r.csv"]) == "r.csv"
    assert out_path_from_command(["perfci", "run", "--out=x/y.csv"]) == "x/y.csv"
    assert out_path_from_command(["./bench.sh"]) is None


def test_extract_reads_csv_relative_to_the_tree(tmp_path):
    (tmp_path / "r.csv").write_text(CSV)
    spec = MetricSpec(csv_column="median_us", case="bf16", csv_file="r.csv")
    assert extract(spec, "", tmp_path) == 820.0


def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    start = time.monotonic()
    result = run_command(["bash", "-c", script], tmp_path, timeout=1.0)
    assert result.returncode is None and "timed out" in result.failure_reason("bench")
    assert time.monotonic() - start < 10
    grandchild = int(pid_file.read_text())
    assert wait_until_dead(grandchild)


def test_bench_once_failures_are_reasons_not_exceptions(tmp_path):
    env = dict(os.environ)
    ok = BenchSpec((sys.executable, "-c", "print('t 1.5')"), None, MetricSpec())
    assert bench_once(ok, tmp_path, env).value == 1.5
    crash = BenchSpec((sys.executable, "-c", "raise SystemExit(3)"), None, MetricSpec())
    assert "exited 3" in bench_once(crash, tmp_path, env).reason
    silent = BenchSpec((sys.executable, "-c", "print('done')"), None, MetricSpec())
    assert bench_once(silent, tmp_path, env).reason == "no number on stdout"
    missing = BenchSpec((str(tmp_path / "nope.sh"),), None, MetricSpec())
    assert "could not start" in bench_once(missing, tmp_path, env).reason


def test_stale_csv_is_a_failed_run(tmp_path):
    (tmp_path / "r.csv").write_text(CSV)
    spec = BenchSpec(("true",), None, MetricSpec(csv_column="median_us", case="bf16", csv_file="r.csv"))
    assert "did not rewrite" in bench_once(spec, tmp_path, dict(os.environ)).reason


def test_cache_round_trips_and_keys_on_build_and_command(tmp_path):
    path = tmp_path / "cache.json"
    spec = BenchSpec(("./bench.py",), None, MetricSpec())
    cache = Cache(path)
    rounds = [(("a", 10.0), ("b", 10.8), ("b", None), ("a", 10.1))]
    cache.put_rounds(spec.cache_key("pair:abc:def"), "endpoints", rounds, 1.5)
    cache.put_build_failure(spec.cache_key("abc"), "abc", "build exited 1: no")
    again = Cache(path)
    assert again.rounds(spec.cache_key("pair:abc:def")) == (rounds, 1.5)
    assert again.build_failed(spec.cache_key("abc")) == "build exited 1: no"
    assert spec.cache_key("abc") != BenchSpec(("./bench.py",), "make", MetricSpec()).cache_key("abc")
    assert spec.cache_key("abc") != BenchSpec(("./bench.py", "-v"), None, MetricSpec()).cache_key("abc")
    Path(path).write_text("{torn")
    assert Cache(path).rounds(spec.cache_key("pair:abc:def")) == ([], 0.0)
    # The unpaired samples of an older perfci cannot be paired afterwards: not read.
    Path(path).write_text('{"k": {"sha": "abc", "values": [1.0, 2.0], "failures": 0}}')
    assert Cache(path).rounds("k") == ([], 0.0)
