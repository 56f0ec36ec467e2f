"""$PERFCI_CASES: perfci nightly's confirm and bisect run a bench session for the flagged cases only."""
from __future__ import annotations

import json
import os

import pytest

from perfci.results import read_results

TESTS = """
    import pytest

    @pytest.mark.parametrize("n", [1, 2, 3])
    def test_k(perfci_benchmark, n):
        perfci_benchmark(lambda: None, kernel="k", shape=(n, 1, 1), dtype="fp32", repeats=1)

    def test_fp8(perfci_benchmark):
        perfci_benchmark.unsupported("no fp8 here", kernel="k", shape=(1, 1, 1), dtype="fp8")
"""


def test_only_the_listed_cases_are_measured_and_written(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (pytester.path / "cases.txt").write_text("# the flagged ones\nk,2x1x1,fp32\nk,1x1x1,fp8\n")
    monkeypatch.setenv("PERFCI_CASES", str(pytester.path / "cases.txt"))
    pytester.makepyfile(test_n=TESTS)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-out", "o.csv", "-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*k 1x1x1 fp32: not among the cases in $PERFCI_CASES*"])
    rows = read_results(pytester.path / "o.csv").rows
    assert sorted((r.key, r.status) for r in rows) == [(("k", "1x1x1", "fp8"), "skip"), (("k", "2x1x1", "fp32"), "ok")]


def test_a_compare_json_lists_its_flagged_cases(pytester, monkeypatch):
    # What perfci nightly passes to confirm: compare's JSON of the flagged cases.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    flagged = {"cases": [{"kernel": "k", "shape": "3x1x1", "dtype": "fp32", "verdict": "regressed"}]}
    (pytester.path / "flagged.json").write_text(json.dumps(flagged))
    monkeypatch.setenv("PERFCI_CASES", str(pytester.path / "flagged.json"))
    pytester.makepyfile(test_n=TESTS)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-out", "o.csv")
    result.assert_outcomes(passed=1, skipped=3)
    assert [r.key for r in read_results(pytester.path / "o.csv").rows] == [("k", "3x1x1", "fp32")]


def test_an_empty_perfci_cases_measures_everything(pytester, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PERFCI_CASES", "")
    pytester.makepyfile(test_n=TESTS)
    result = pytester.runpytest("--perfci-device", "cpu", "--perfci-out", "o.csv")
    result.assert_outcomes(passed=3, skipped=1)


def test_a_case_list_perfci_cannot_read_is_a_usage_error(pytester, monkeypatch):
    (pytester.path / "cases.txt").write_text("only-two,fields\n")
    monkeypatch.setenv("PERFCI_CASES", str(pytester.path / "cases.txt"))
    pytester.makepyfile(test_n=TESTS)
    result = pytester.runpytest("--perfci-device", "cpu")
    assert result.ret == 4  # pytest's usage error, before anything runs
    result.stderr.fnmatch_lines(["*$PERFCI_CASES: --cases *cases.txt: line 1: expected kernel,shape,dtype*"])


@pytest.mark.parametrize("made, fragment", [
    ("devzero", "is a character device (a symbolic link to /dev/zero), not a case list file"),
    ("fifo", "is a pipe (FIFO), not a case list file"),
    ("huge", "300 MiB is larger than the 256 MiB perfci reads as a case list file"),
])
def test_a_perfci_cases_that_is_not_a_regular_file_is_a_usage_error_not_internalerror(pytester, monkeypatch,
                                                                                     made, fragment):
    # Was: /dev/zero grew until MemoryError, an INTERNALERROR traceback; a FIFO blocked forever.
    monkeypatch.delenv("PERFCI_MAX_INPUT_MB", raising=False)
    path = pytester.path / "cases.txt"
    if made == "devzero":
        path.symlink_to("/dev/zero")
    elif made == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as fh:
            fh.truncate(300 << 20)
    monkeypatch.setenv("PERFCI_CASES", str(path))
    pytester.makepyfile(test_n=TESTS)
    result = pytester.runpytest("--perfci-device", "cpu")
    assert result.ret == 4  # pytest's usage error, before anything runs
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([f"*$PERFCI_CASES: *cases.txt: {fragment}*"])
