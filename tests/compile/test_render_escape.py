"""The compile diff (markdown, table) and the nightly's compile section with hostile kernel names and errors."""
import copy
import json
import re

import pytest

from perfci.compile import ratchet
from perfci.compile.baseline import parse
from perfci.compile.diff import diff
from perfci.compile.render_diff import markdown, table, to_json
from tests.compile.test_diff import GEMV, GFX950, case, load, planted
from tests.markdown_live import headings, hostile_names, live, one_line, shown

NAMES = hostile_names()
TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def hostile_diff(name: str):
    """gemv renamed ``name`` on both sides; on the current one it spills and fails to compile with ``name``."""
    base = copy.deepcopy(load(GFX950))
    cur = planted(GFX950, GEMV, spills=24, problems=[f"compile error: {name}"])
    for data in (base, cur):
        case(data, GEMV)["kernel"] = name
    return diff(parse(json.dumps(base), "base"), parse(json.dumps(cur), "cur"))


@pytest.mark.parametrize("name", NAMES)
def test_the_diff_shows_a_hostile_name_and_error_and_nothing_in_them_is_live(name):
    d = hostile_diff(name)
    assert [c.verdict for c in d.changed] == ["worse"]
    doc = markdown([d])
    assert live(doc) == [], doc
    assert one_line(name) in shown(doc)
    assert headings(doc) == ["Compiled resources against the baseline"]
    text = table([d])
    assert not TERMINAL_CONTROL.search(text), repr(text)


@pytest.mark.parametrize("name", NAMES)
def test_the_nightly_compile_section_shows_a_hostile_name_and_nothing_in_it_is_live(name):
    data = {**json.loads(to_json([hostile_diff(name)])), "baseline": name}
    key = (name, GEMV[1], GEMV[2])
    doc = ratchet.markdown(data, ratchet.behind(data, [(key, "regressed")], "gfx950"))
    assert live(doc) == [], doc
    assert one_line(name) in shown(doc)
    assert len(headings(doc)) == 1


def test_an_ordinary_diff_reads_as_before():
    doc = markdown([hostile_diff("gemv")])
    assert "| gfx950 | `gemv` | 1x1024x6144 | bf16 | compile error: compile error: gemv | **worse** |" in doc
