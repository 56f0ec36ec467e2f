"""confirm's PR comment (markdown), csv and table with hostile names and refs."""
import csv
import io
import re
from types import SimpleNamespace

import pytest

from perfci.compare.comparison import Explanation
from perfci.confirm import render
from perfci.confirm.analysis import analyze
from tests.markdown_live import headings, hostile_names, live, one_line, shown

NAMES = hostile_names()
ROUNDS = SimpleNamespace(rows={}, bench_runs=24, seconds=60.0)
TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def session(name: str):
    """``name`` 50% slower at 4x8x8, the same at 8x8x8, over 6 interleaved rounds."""
    jitter = (1.0, 1.01, 0.99, 1.005, 0.995, 1.002)
    cases = {(name, "4x8x8", "bf16"): [((10 * j, 10 * j), (15 * j, 15 * j)) for j in jitter],
             (name, "8x8x8", "bf16"): [((20 * j, 20 * j), (20 * j, 20.1 * j)) for j in jitter]}
    conf = analyze(cases, 1.0, 0.05, 0.95)
    assert [c.verdict for c in conf.cases].count("regressed") == 1
    sides = (SimpleNamespace(ref=name, sha="a" * 40), SimpleNamespace(ref="cur", sha="b" * 40))
    return conf, sides


@pytest.fixture
def explained(monkeypatch):
    """Each regressed case explained in the name's own words (compare --explain's reading and sides)."""
    def fake(conf, rounds):
        return {c.key: Explanation("config", c.key[0], ((c.key[0], c.key[0], c.key[0] + "!"),))
                for c in conf.cases if c.verdict == "regressed"}
    monkeypatch.setattr(render, "_explanations", fake)


@pytest.mark.parametrize("name", NAMES)
def test_the_pr_comment_shows_a_hostile_name_and_nothing_in_it_is_live(name, explained):
    conf, sides = session(name)
    doc = render.render_markdown(conf, ROUNDS, sides, None)
    assert live(doc) == [], doc
    assert one_line(name) in shown(doc)
    plain, plain_sides = session("plain")
    assert len(headings(doc)) == len(headings(render.render_markdown(plain, ROUNDS, plain_sides, None))) == 1


@pytest.mark.parametrize("name", NAMES)
def test_csv_and_table_write_no_formula_and_no_control_character(name, explained):
    conf, sides = session(name)
    for row in csv.DictReader(io.StringIO(render.render_csv(conf, ROUNDS, sides, None))):
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row.values()), row
        assert row["kernel"] in (name, "'" + name)
    table = render.render_table(conf, ROUNDS, sides, None)
    assert not TERMINAL_CONTROL.search(table), repr(table)
    assert [line.split()[0] for line in table.splitlines()[3:5]] == ["!!", "~"]


def test_an_ordinary_name_reads_as_before(explained):
    conf, sides = session("splitk_decode[m_fast=1]")
    doc = render.render_markdown(conf, ROUNDS, sides, None)
    assert "| **regressed** | `splitk_decode[m_fast=1] 4x8x8 bf16` |" in doc
    assert ("<details><summary><code>splitk_decode[m_fast=1] 4x8x8 bf16</code>: splitk_decode[m_fast=1]"
            "</summary>") in doc
    assert "| **splitk_decode[m_fast=1]** | splitk_decode[m_fast=1] | splitk_decode[m_fast=1]! |" in doc
