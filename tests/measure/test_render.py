"""perfci.measure.render: the run's table keeps a case's label as written."""
from __future__ import annotations

from types import SimpleNamespace

from perfci.measure.render import render_table


def test_a_variant_label_in_brackets_survives_the_table():
    # rich reads "[m_fast=1]" as markup and dropped it from the label
    spec = SimpleNamespace(label="splitk_decode[m_fast=1]", shape="64x1024x6144", dtype="fp16")
    result = SimpleNamespace(spec=spec, median_us=None, status="skip", message="no GPU", repeats=())
    text = render_table([result], SimpleNamespace(arch="cpu"), "decode", width=200)
    assert "splitk_decode[m_fast=1]" in text
