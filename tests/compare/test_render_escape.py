"""compare's markdown, csv and table with hostile names, read back by markdown-it-py and the csv module."""
import csv
import io
import re
from dataclasses import replace

import pytest

from perfci.compare import render
from perfci.compare.comparison import Explanation
from perfci.compare.verdicts import compare
from perfci.model import ResultRow, ResultTable
from tests.markdown_live import headings, hostile_names, live, one_line, shown

NAMES = hostile_names()
JITTER = (1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998)
# What a terminal acts on: C0 (but the report's own new lines), DEL, C1, bidirectional overrides.
TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _row(kernel, m, us):
    reps = tuple(us * j for j in JITTER)
    return ResultRow(kernel=kernel, shape=f"{m}x4096x4096", dtype="bf16", status="ok", m=m, n=4096, k=4096,
                     median_us=sorted(reps)[3], repeats_us=reps, arch="gfx942")


def hostile_comparison(name: str):
    """``name`` regressed at M=4, unchanged at M=1 and M=16, explained and noted in its own words."""
    base = [_row(name, m, 10.0 + m) for m in (1, 4, 16)]
    cur = [_row(name, m, (10.0 + m) * (1.5 if m == 4 else 1.0)) for m in (1, 4, 16)]
    cmp = compare(ResultTable("base.csv", "perfci", tuple(base)), ResultTable(name, "perfci", tuple(cur)))
    cases = tuple(replace(c, explain=Explanation("config", name, ((name, name, name + "!"),)))
                  if c.verdict == "regressed" else c for c in cmp.cases)
    return replace(cmp, cases=cases, notes=(*cmp.notes, name))


@pytest.mark.parametrize("name", NAMES)
def test_markdown_shows_a_hostile_name_and_nothing_in_it_is_live(name):
    cmp = hostile_comparison(name)
    assert [c.verdict for c in cmp.cases].count("regressed") == 1
    doc = render.render_markdown(cmp)
    assert live(doc) == [], doc
    assert one_line(name) in shown(doc)
    assert headings(doc) == headings(render.render_markdown(hostile_comparison("plain")))


@pytest.mark.parametrize("name", NAMES)
def test_csv_writes_no_formula(name):
    rows = list(csv.DictReader(io.StringIO(render.render_csv(hostile_comparison(name)))))
    assert len(rows) == 3
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        assert row["kernel"] in (name, "'" + name)
    assert all(row["ratio"] and float(row["ratio"]) > 0 for row in rows)  # numbers stay numbers


@pytest.mark.parametrize("name", NAMES)
def test_table_prints_no_control_character_of_a_name(name):
    text = render.render_table(hostile_comparison(name))
    assert not TERMINAL_CONTROL.search(text), repr(text)
    lines = text.splitlines()
    header, rows = lines[1], lines[3:6]
    # One line per case, each case's shape under the header's "shape": the name did not break the table.
    assert [r.split()[0] for r in rows] == ["!!", "~", "~"]
    assert {r.index("x4096x4096") - 1 for r in rows} <= {header.index("shape"), header.index("shape") + 1}


def test_an_ordinary_name_reads_as_before():
    cmp = hostile_comparison("splitk_decode[m_fast=1]")
    doc = render.render_markdown(cmp)
    assert "| **regressed** | `splitk_decode[m_fast=1]` | 4x4096x4096 | bf16 |" in doc
    assert "**why `splitk_decode[m_fast=1]` 4x4096x4096 bf16 regressed:** splitk_decode[m_fast=1]" in doc
    assert next(csv.DictReader(io.StringIO(render.render_csv(cmp))))["kernel"] == "splitk_decode[m_fast=1]"
    assert "splitk_decode[m_fast=1]  4x4096x4096" in render.render_table(cmp)
