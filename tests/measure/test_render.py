"""perfci.measure.render: the run's table keeps a case's label as written."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from perfci.measure.render import progress_line, render_markdown, render_table
from tests.markdown_live import headings, hostile_names, live, one_line, shown


def test_a_variant_label_in_brackets_survives_the_table():
    # rich reads "[m_fast=1]" as markup and dropped it from the label
    spec = SimpleNamespace(label="splitk_decode[m_fast=1]", shape="64x1024x6144", dtype="fp16")
    result = SimpleNamespace(spec=spec, median_us=None, status="skip", message="no GPU", repeats=())
    text = render_table([result], SimpleNamespace(arch="cpu"), "decode", width=200)
    assert "splitk_decode[m_fast=1]" in text


def _hostile_result(name: str):
    spec = SimpleNamespace(label=name, shape="64x1024x6144", dtype="fp16")
    return SimpleNamespace(spec=spec, median_us=None, status="error", message=name, repeats=(), index=0)


@pytest.mark.parametrize("name", hostile_names())
def test_a_hostile_label_and_error_are_text_in_markdown_and_on_a_terminal(name):
    env = SimpleNamespace(arch="cpu")
    doc = render_markdown([_hostile_result(name)], env, name)
    assert live(doc) == [], doc
    assert one_line(name) in shown(doc) and len(headings(doc)) == 1
    for text in (render_table([_hostile_result(name)], env, name, width=400),
                 progress_line(0, 1, _hostile_result(name))):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), repr(text)
