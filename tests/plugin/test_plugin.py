"""The pytest plugin on the CPU: the fixture, --perfci-out/-compare/-disable/-isolate, and its errors."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfci.plugin.session import EXIT_PERF_REGRESSION
from perfci.results import COLUMNS, read_results

# Three matmul cases; PERFCI_TEST_SLOW_N=128 makes the 128 case do 8 matmuls per call (a real slowdown).
# Sizes of 20-85 us a call: at 3-9 us (n = 32..64) a process's own state moved a case's median by up to
# 1.5x between sessions on a 2-core runner (CI read +87% on an untouched 64x64x64), past the cpu floor.
BENCH = textwrap.dedent("""
    import os
    import pytest
    import torch

    SLOW_N = int(os.environ.get("PERFCI_TEST_SLOW_N", "0"))
    torch.set_num_threads(1)  # two shared cores: a second thread only adds scheduling noise

    @pytest.mark.parametrize("n", [96, 128, 160])
    def test_matmul(perfci_benchmark, n):
        a, b = torch.randn(n, n), torch.randn(n, n)

        def fn(a, b):
            for _ in range(8 if n == SLOW_N else 1):
                out = torch.matmul(a, b)
            return out

        out = perfci_benchmark(fn, a, b, kernel="matmul", shape=(n, n, n), dtype=torch.float32,
                               reference=lambda a, b: a.double() @ b.double())
        assert out.shape == (n, n)
""")


def _pytest(cwd: Path, *args: str, slow: str = "0") -> subprocess.CompletedProcess:
    env = {**os.environ, "PERFCI_TEST_SLOW_N": slow}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _compare(base: Path, cur: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfci", "compare", str(base), str(cur)],
                          capture_output=True, text=True, timeout=120)


def _scattered(path: Path) -> bool:
    """Whether a case's repeats scattered as compare's disturbed-run guard holds back (a loaded machine)."""
    import math

    from perfci.stats import robust_spread
    from perfci.verdict import DISTURBED

    return any(robust_spread([math.log(r) for r in row.repeats_us]) >= DISTURBED.spread_pct / 100.0
               for row in read_results(path).rows)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """base.csv (as written) and slow.csv (the 128 case 8x slower), from real sessions.

    A session whose repeats scattered is recorded again, up to three times, as compare advises for a
    disturbed run: these tests are about the plugin's files and verdicts, not about how busy the
    machine was (an 8x slowdown against a scattered base is rightly held back as inconclusive)."""
    folder = tmp_path_factory.mktemp("bench")
    (folder / "test_bench.py").write_text(BENCH)
    for name, slow in (("base.csv", "0"), ("slow.csv", "128")):
        for _ in range(3):
            proc = _pytest(folder, "test_bench.py", "--perfci-device", "cpu", "--perfci-out", name, slow=slow)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            if not _scattered(folder / name):
                break
    return folder


@pytest.fixture
def bench(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("PERFCI_TEST_SLOW_N", raising=False)
    pytester.makepyfile(test_bench=BENCH)
    return pytester


@pytest.mark.slow  # live benchmark sessions (runs: two, ~20 s)
def test_out_writes_perfci_runs_columns_and_cases_keyed_by_kernel_shape_dtype(runs):
    assert (runs / "base.csv").read_text().splitlines()[0] == ",".join(COLUMNS)
    table = read_results(runs / "base.csv")
    assert sorted(r.key for r in table.rows) == sorted(("matmul", f"{n}x{n}x{n}", "fp32") for n in (96, 128, 160))
    for row in table.rows:
        assert row.status == "ok" and row.iters == 70 and row.timer == "host"
        assert len(row.repeats_us) == 7 and row.arch == "cpu"


@pytest.mark.slow  # live benchmark sessions (runs: two, ~20 s)
def test_compare_reads_the_csv_unchanged_against_itself_and_regressed_against_the_planted_run(runs):
    same = _compare(runs / "base.csv", runs / "base.csv")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "3 unchanged" in same.stdout
    slow = _compare(runs / "base.csv", runs / "slow.csv")
    assert slow.returncode == 1, slow.stdout + slow.stderr
    regressed = [line for line in slow.stdout.splitlines() if "regressed" in line and "x" in line]
    assert any("128x128x128" in line for line in regressed)
    assert not any("96x96x96" in line or "160x160x160" in line for line in regressed), slow.stdout


@pytest.mark.slow  # live benchmark sessions (runs: two, ~20 s)
def test_perfci_compare_fails_the_session_on_the_regression(bench, runs):
    bench.syspathinsert()
    os.environ["PERFCI_TEST_SLOW_N"] = "128"  # monkeypatch (bench) restores it
    for _ in range(3):  # a session whose own repeats scattered is run again, as for `runs`
        result = bench.runpytest("--perfci-device", "cpu", "--perfci-compare", str(runs / "base.csv"),
                                 "--perfci-out", "session.csv")
        if result.ret == EXIT_PERF_REGRESSION or not _scattered(bench.path / "session.csv"):
            break
    assert result.ret == EXIT_PERF_REGRESSION
    result.stdout.fnmatch_lines(["*128x128x128*regressed*", "*a benchmark regressed against*exit 6*"])


@pytest.mark.slow  # live benchmark sessions (runs: two, ~20 s)
def test_perfci_compare_passes_an_aa_session(bench, runs):
    """A session measuring what the baseline measured passes the gate: exit 0, every case judged, none regressed.

    Both sides are live CPU timings taken minutes apart, and this machine drifts by +-25% between them
    (A/A sessions here have read +15..+28%). That is inside the cpu profile's 75% floor, so no case may
    read regressed; whether one reads unchanged or inconclusive is up to the machine and not asserted.
    """
    out = bench.path / "cur.csv"
    result = bench.runpytest("--perfci-device", "cpu", "--perfci-compare", str(runs / "base.csv"),
                             "--perfci-out", str(out))
    assert result.ret == 0, result.stdout.str()
    (headline,) = [line for line in result.stdout.lines if line.startswith("verdicts: ")]
    counts = {verdict: int(n) for n, verdict in (part.split() for part in headline[len("verdicts: "):].split(", "))}
    assert set(counts) <= {"unchanged", "inconclusive"} and sum(counts.values()) == 3, headline
    assert len(read_results(out).rows) == 3


def test_disable_runs_each_benchmark_once_as_a_plain_test(pytester):
    pytester.makepyfile(test_once="""
        CALLS = []

        def test_once(perfci_benchmark):
            assert perfci_benchmark(lambda: CALLS.append(1) or 7, kernel="k", shape="1x1x1", dtype="fp32") == 7
            assert CALLS == [1]
    """)
    result = pytester.runpytest("--perfci-disable")
    result.assert_outcomes(passed=1)
    assert "= perfci =" not in result.stdout.str()


@pytest.mark.parametrize("call, message", [
    ("fn, kernel='k', shape=(1, 1, 1), dtype='fp32', iters=5",
     "*perfci_benchmark: iters=5: use 60..80 launches per repeat*"),
    ("fn, shape=(1, 1, 1), dtype='fp32'", "*perfci_benchmark: kernel= is required*"),
    ("fn, kernel='k', shape=(1, 0, 1), dtype='fp32'", "*shape=(1, 0, 1) must be (M, N, K)*"),
    ("fn, kernel='k', shape=(1, 1, 1), dtype='int7'", "*dtype='int7' is not one of*"),
    ("fn, kernel='k', shape=(1, 1, 1), dtype='fp32', weight=0", "*perfci_benchmark: weight=0 must be a positive number*"),
    ("fn, kernel='k', shape=(1, 1, 1), dtype='fp32', group='a\\nb'", "*group= must be one line of text*"),
    ("fn, kernel='k', shape=(2, 2, 2), dtype='fp32', reference=lambda: torch.ones(2, 2)",
     "*output differs from the reference: relative error*"),
])
def test_fixture_errors_are_one_clear_line(pytester, monkeypatch, call, message):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytester.makepyfile(test_bad=f"""
        import torch

        def fn():
            return torch.zeros(2, 2)

        def test_bad(perfci_benchmark):
            perfci_benchmark({call})
    """)
    result = pytester.runpytest("--perfci-device", "cpu")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str() and "def test_bad" not in result.stdout.str()


def test_a_gpu_asked_for_without_one_is_a_usage_error(pytester):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = pytester.runpytest("--perfci-device", "cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perfci-device cuda: torch sees no GPU on this machine*"])
    assert "Traceback" not in result.stderr.str()


def test_a_bad_baseline_is_a_usage_error_before_anything_runs(pytester):
    (pytester.path / "base.csv").write_text("kernel,shape\nx,1x1x1\n")
    result = pytester.runpytest("--perfci-compare", "base.csv")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*base.csv: line 1: missing column(s)*"])


def test_group_and_weight_reach_the_row_as_a_suite_case_s_do(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytester.makepyfile(test_gw="""
        def test_gw(perfci_benchmark):
            perfci_benchmark(lambda: None, kernel="k", shape=(1, 1, 1), dtype="fp32", repeats=1,
                             group="decode-qkv", weight=32)
    """)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-out", "o.csv")
    result.assert_outcomes(passed=1)
    (row,) = read_results(pytester.path / "o.csv").rows
    assert row.weight == 32.0
    import csv

    with open(pytester.path / "o.csv", newline="") as fh:
        assert [r["group"] for r in csv.DictReader(fh)] == ["decode-qkv"]


def test_an_unsupported_case_is_a_skip_row_and_a_skipped_test(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytester.makepyfile(test_fp8="""
        def test_fp8(perfci_benchmark):
            perfci_benchmark.unsupported("no fp8 matrix instructions on this device",
                                         kernel="matmul", shape=(16, 16, 16), dtype="fp8")
            raise AssertionError("not reached")
    """)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-out", "o.csv", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*matmul 16x16x16 fp8: unsupported here: no fp8 matrix instructions*"])
    (row,) = read_results(pytester.path / "o.csv").rows
    assert (row.kernel, row.status, row.message) == ("matmul", "skip", "no fp8 matrix instructions on this device")


def test_two_tests_with_one_case_key_fail_the_second(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytester.makepyfile(test_dup="""
        def test_a(perfci_benchmark):
            perfci_benchmark(lambda: None, kernel="k", shape=(1, 1, 1), dtype="fp32", repeats=1)

        def test_b(perfci_benchmark):
            perfci_benchmark(lambda: None, kernel="k", shape=(1, 1, 1), dtype="fp32", repeats=1)
    """)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-out", "o.csv")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*case k 1x1x1 fp32 is already measured by test_dup.py::test_a*"])
    assert len(read_results(pytester.path / "o.csv").rows) == 1


def test_the_plugin_is_inert_without_its_fixture_or_options(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins:*perfci-*"])  # loaded through the pytest11 entry point
    assert "= perfci =" not in result.stdout.str()
    probe = subprocess.run([sys.executable, "-c", "import sys, perfci.plugin.pytest_plugin; "
                                                  "print('torch' in sys.modules)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "False", probe.stderr


@pytest.mark.slow  # a process per benchmark: ~13 s on a loaded 2-core machine
def test_isolate_a_crash_costs_one_case(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytester.makepyfile(test_iso="""
        import os

        import pytest

        @pytest.mark.parametrize("crash", [False, True])
        def test_iso(perfci_benchmark, crash):
            def fn():
                if crash:
                    os._exit(3)
            perfci_benchmark(fn, kernel="iso", shape=(1, 1, 2 if crash else 1), dtype="fp32", repeats=2)
    """)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-isolate", "--perfci-out", "o.csv")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*failed in its own process: exit code 3*"])
    rows = {r.shape: r for r in read_results(pytester.path / "o.csv").rows}
    assert rows["1x1x1"].status == "ok" and len(rows["1x1x1"].repeats_us) == 2
    assert rows["1x1x2"].status == "error" and "exit code 3" in rows["1x1x2"].message


def test_a_benchmark_that_raises_is_an_error_row_and_a_failed_test(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pytester.makepyfile(test_raise="""
        def test_raise(perfci_benchmark):
            perfci_benchmark(lambda: 1 / 0, kernel="div", shape=(1, 1, 1), dtype="fp32")
    """)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-out", "o.csv")
    result.assert_outcomes(failed=1)
    (row,) = read_results(pytester.path / "o.csv").rows
    assert row.status == "error" and "ZeroDivisionError" in row.message
