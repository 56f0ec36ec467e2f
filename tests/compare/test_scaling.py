"""perfci compare on many cases: memory and work that grow with the rows, not faster.

The figures for 100k and 1M rows, and the command that measures them, are in docs/compare.md
(benchmarks/make_large_results.py writes the files).
"""
from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from perfci.compare.inputs import read_any
from perfci.compare.verdicts import compare

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import make_large_results  # noqa: E402


def peak_bytes(folder: Path) -> int:
    tracemalloc.start()
    try:
        compare(read_any(folder / "base.csv"), read_any(folder / "cur.csv"))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # tracemalloc slows compare several times: ~10 s on a 2-core machine
def test_compare_memory_grows_with_the_rows_and_a_row_is_small(tmp_path):
    folders = {}
    for rows in (100, 400, 1000):
        folders[rows] = tmp_path / str(rows)
        make_large_results.main(["--rows", str(rows), "--out", str(folders[rows])])
    peak_bytes(folders[100])  # imports and caches, once: what is left grows with the rows
    peaks = {rows: peak_bytes(folder) for rows, folder in folders.items()}
    first = (peaks[400] - peaks[100]) / 300
    second = (peaks[1000] - peaks[400]) / 600
    assert second < 1.3 * first, (first, second)  # linear: the next rows cost what the first did
    # A row pair at the peak (both files' rows, the text being parsed, the judged case): 2.9 KB
    # while every ResultRow and CaseComparison carried a __dict__ and every cell was kept as text.
    assert second < 2_000, second


def test_compare_takes_a_fixed_number_of_numpy_medians_not_one_per_repeat(tmp_path, monkeypatch):
    # numpy's median costs ~10 us a call in checks alone; compare called it ~16 times per case.
    folder = tmp_path / "f"
    make_large_results.main(["--rows", "300", "--out", str(folder)])
    base, cur = read_any(folder / "base.csv"), read_any(folder / "cur.csv")
    calls = []
    real = np.median
    monkeypatch.setattr(np, "median", lambda *a, **k: calls.append(1) or real(*a, **k))
    result = compare(base, cur)
    assert len(result.cases) == 300
    assert len(calls) < 20, len(calls)
