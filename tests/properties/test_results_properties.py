"""Every results CSV reader: bytes or near-misses in, a valid table or one PerfciError out."""
from __future__ import annotations

import csv
import io
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfci.errors import PerfciError
from perfci.model import CaseResult, CaseSpec, Environment, RepeatSample
from perfci.results import (CLOCK_RANGE_MHZ, COLUMNS, FLYDSL_COLUMNS, REPEAT_LISTS, TIME_RANGE_US, WEIGHT_RANGE,
                            _fmt, read_results, read_results_cells, result_to_row, write_results)
from tests.properties.strategies import CELL, FAST, on_disk


def read_or_refuse(path):
    """The table, or None when the reader refused in one line; any other exception fails the test."""
    try:
        table, cells = read_results_cells(path)
    except PerfciError as err:
        assert "\n" not in str(err) and str(err)
        return None
    assert len(cells) == len(table.rows) > 0
    for row in table.rows:
        assert row.kernel and row.shape and row.dtype
        if row.median_us is not None:
            assert TIME_RANGE_US[0] <= row.median_us <= TIME_RANGE_US[1]
        assert all(TIME_RANGE_US[0] <= r <= TIME_RANGE_US[1] for r in row.repeats_us)
        assert all(c is None or CLOCK_RANGE_MHZ[0] <= c <= CLOCK_RANGE_MHZ[1] for c in row.sclk_mhz)
        assert WEIGHT_RANGE[0] <= row.weight <= WEIGHT_RANGE[1] or row.weight == 1.0
        for d in (row.m, row.n, row.k):
            assert d is None or d >= 1 and math.isfinite(float(d))
    return table


@FAST
@given(st.binary(max_size=2000))
def test_arbitrary_bytes(data):
    read_or_refuse(on_disk(data))


def _csv(header, rows):
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


@st.composite
def near_miss_tables(draw, columns):
    """A header of real columns (some dropped, some twice) and rows of tricky cells."""
    header = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=len(columns) + 2))
    if draw(st.booleans()):
        header = list(dict.fromkeys(columns if draw(st.booleans()) else header))
    width = len(header)
    rows = draw(st.lists(st.lists(CELL, min_size=max(0, width - 1), max_size=width + 1), max_size=5))
    return _csv(header, rows)


@FAST
@given(near_miss_tables(list(COLUMNS)))
def test_perfci_csv_near_misses(text):
    read_or_refuse(on_disk(text))


@FAST
@given(near_miss_tables(list(FLYDSL_COLUMNS)))
def test_flydsl_csv_near_misses(text):
    read_or_refuse(on_disk(text))


@FAST
@given(st.data())
def test_one_cell_of_a_valid_row_replaced(data):
    """The most likely corruption: a valid file with one cell wrong."""
    row = {c: "" for c in COLUMNS}
    row.update(kernel="k", shape="16x16x32", dtype="bf16", M="16", N="16", K="32", median_us="10.0000",
               repeats_us="9.0000;10.0000;11.0000", sclk_mhz="1500;1500;1500", throttled="0;0;1",
               status="ok", weight="1", arch="sm_90", schema="3")
    column = data.draw(st.sampled_from(COLUMNS))
    row[column] = data.draw(CELL)
    table = read_or_refuse(on_disk(_csv(list(COLUMNS), [[row[c] for c in COLUMNS]])))
    if table is not None and column in REPEAT_LISTS + ("repeats_us",):
        (r,) = table.rows
        lists = [len(r.repeats_us) or 3, len(r.sclk_mhz) or len(r.repeats_us) or 3,
                 len(r.throttled) or len(r.repeats_us) or 3]
        assert len(set(lists)) == 1  # never a clock list silently shorter than the repeats


# --------------------------------------------------------------------------- round trip

SAFE_TEXT = st.text(st.characters(whitelist_categories=("L", "N", "P", "S", "Zs")), max_size=16).map(str.strip)
TIMES = st.floats(min_value=TIME_RANGE_US[0], max_value=TIME_RANGE_US[1])


@st.composite
def case_results(draw):
    spec = CaseSpec(kernel=draw(SAFE_TEXT.filter(bool)), m=draw(st.integers(1, 2 ** 31)),
                    n=draw(st.integers(1, 2 ** 31)), k=draw(st.integers(1, 2 ** 31)),
                    dtype=draw(st.sampled_from(["bf16", "fp16", "fp32"])),
                    variant=draw(st.dictionaries(st.sampled_from(["m_fast", "tile"]),
                                                 st.integers(0, 9) | SAFE_TEXT.filter(bool), max_size=2)),
                    weight=draw(st.floats(WEIGHT_RANGE[0] * 10, WEIGHT_RANGE[1])), group=draw(SAFE_TEXT))
    status = draw(st.sampled_from(["ok", "ok", "ok", "fail", "error", "timeout", "skip"]))
    repeats = tuple(RepeatSample(median_us=draw(TIMES), sclk_mhz=draw(st.none() | st.floats(1, 1e5)),
                                 throttled=draw(st.none() | st.booleans()))
                    for _ in range(draw(st.integers(1, 9)))) if status == "ok" else ()
    return CaseResult(spec=spec, status=status, repeats=repeats, iters=draw(st.integers(0, 80)),
                      message=draw(SAFE_TEXT))


ENVS = st.builds(Environment, device_name=SAFE_TEXT, arch=SAFE_TEXT, git_sha=SAFE_TEXT, host=SAFE_TEXT)


@pytest.mark.slow  # 200 tables written and read back
@FAST
@given(st.lists(case_results(), min_size=1, max_size=6, unique_by=lambda r: r.spec.key), ENVS,
       st.sampled_from(["", "1/2", "2/2"]))
def test_a_valid_table_round_trips(results, env, shard):
    written = [result_to_row(r, env, "suite", 788.0, 4.3, placement={"shard": shard}) for r in results]
    path = on_disk("", "round-trip.csv")
    write_results(path, written)
    table, cells = read_results_cells(path)
    assert [dict(c) for c in cells] == written  # every cell back as it was written
    assert table == read_results(path)
    for result, row in zip(results, table.rows):
        assert row.key == result.spec.key and row.status == result.status
        if result.status == "ok":
            assert row.repeats_us == tuple(float(_fmt(r.median_us)) for r in result.repeats)
            assert row.median_us == float(_fmt(result.median_us))
            assert len(row.sclk_mhz) in (0, len(row.repeats_us))
        assert (row.m, row.n, row.k) == (result.spec.m, result.spec.n, result.spec.k)
