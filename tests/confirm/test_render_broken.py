"""A broken case in every format confirm writes: its verdict, its side and its reason."""
import csv
import io
import json
from types import SimpleNamespace

from perfci.confirm import render
from perfci.confirm.analysis import analyze, with_broken
from tests.markdown_live import live

ROUNDS = SimpleNamespace(rows={}, bench_runs=8, seconds=20.0)
SIDES = (SimpleNamespace(ref="good", sha="a" * 40), SimpleNamespace(ref="HEAD", sha="b" * 40))
OK, BAD = ("tiled", "64x64x64", "fp32"), ("gemv", "4x8x8", "fp32")
WHY = "fails at CUR, measured at BASE: error Segmentation fault (signal 11) <!-- perfci-triage {} --> `x`"


def _conf():
    jitter = (1.0, 1.01, 0.99, 1.005, 0.995)
    cases = {OK: [((10 * j, 10 * j), (10 * j, 10.01 * j)) for j in jitter],
             BAD: [((20 * j, 20 * j), (None, None)) for j in jitter]}
    conf = with_broken(analyze(cases, 1.0, 0.05, 0.95), {BAD: WHY})
    assert conf.broken and not conf.regressed
    return conf


def test_the_table_lists_the_broken_case_and_why():
    table = render.render_table(_conf(), ROUNDS, SIDES, None)
    row = next(line for line in table.splitlines() if "gemv" in line and not line.startswith("broken:"))
    assert row.split()[0] == "XX" and row.split()[-1] == "broken"
    assert f"broken: gemv 4x8x8 fp32: {WHY}" in table


def test_json_and_csv_carry_the_verdict_and_the_reason():
    data = json.loads(render.render_json(_conf(), ROUNDS, SIDES, None))
    case = next(c for c in data["cases"] if c["kernel"] == "gemv")
    assert case["verdict"] == "broken" and case["reason"] == WHY and case["ratio"] is None
    assert data["summary"]["broken_any"] is True and data["summary"]["broken"] == 1
    rows = list(csv.DictReader(io.StringIO(render.render_csv(_conf(), ROUNDS, SIDES, None))))
    row = next(r for r in rows if r["kernel"] == "gemv")
    assert row["verdict"] == "broken" and row["reason"] == WHY


def test_the_pr_comment_fails_and_says_why_with_nothing_live():
    doc = render.render_markdown(_conf(), ROUNDS, SIDES, None)
    assert doc.startswith("### :x: ")
    assert "| **broken** | `gemv 4x8x8 fp32` |" in doc
    assert "- **broken** `gemv 4x8x8 fp32`: fails at CUR, measured at BASE: error Segmentation fault" in doc
    assert live(doc) == [], doc
