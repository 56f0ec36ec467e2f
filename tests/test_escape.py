"""perfci.escape on the hostile-name corpus (tests/data/escape/hostile_names.json), read back by real parsers."""
import csv
import io
import re

import pytest
import yaml
from markdown_it import MarkdownIt

from perfci.escape import csv_cell, html_text, md_block, md_code, md_text, term_text, yaml_scalar
from tests.markdown_live import hostile_names, live, one_line, shown

NAMES = hostile_names()
ORDINARY = ("splitk_decode[m_fast=1] 64x1024x6144 bf16", "matmul_tiled", "GOOD -> BAD +0.10% [-0.50%, +0.70%]",
            "NVIDIA H200 (sm_90)", "regression confirmed: gemv 1x8x16 fp32 +100.0%", "-", "-5%", "a < b")
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_the_checker_sees_what_github_would_make_live():
    """Raw, the corpus's first name is a mention and a link: the checker says so, or it checks nothing."""
    found = live(f"| case |\n|---|\n| `{NAMES[0]}` |\n")
    assert any(f.startswith("mention") for f in found) and any(f.startswith("link_open") for f in found)
    assert any("HTML tag <a" in f for f in live(f"**{NAMES[3]}**"))
    assert any(f.startswith("autolink") for f in live("see <https://evil.example>"))
    assert any(f.startswith("bare URL") for f in live("see https://evil.example"))
    assert any(f.startswith("image") for f in live(NAMES[7]))
    assert live("[x]\n\n[x]: https://evil.example\n")  # a reference definition makes [x] a link


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("where", ["- {}\n", "## perfci: {}\n", "**{}**\n", "| a | b |\n|---|---|\n| {} | x |\n",
                                   "{}\n\n[x]\n", "First bad commit: `abc` {}\n"])
def test_markdown_text_shows_the_name_and_nothing_live(name, where):
    doc = where.format(md_text(name))
    assert live(doc) == [], doc
    assert one_line(name) in shown(doc), doc


@pytest.mark.parametrize("name", NAMES)
def test_a_code_span_holds_the_whole_name(name):
    for doc, table in ((f"a {md_code(name)} b\n", False), (f"| a |\n|---|\n| {md_code(name, table=True)} |\n", True)):
        inline = [t for t in MarkdownIt("commonmark").enable("table").parse(doc) if t.type == "inline"][-1]
        codes = [c.content for c in inline.children if c.type == "code_inline"]
        assert codes == [one_line(name)], doc
        assert live(doc) == [], doc


@pytest.mark.parametrize("name", NAMES)
def test_a_code_block_no_line_of_the_text_can_close(name):
    text = f"{name}\n```\n@someone\n````"
    tokens = MarkdownIt("commonmark").parse(md_block(text, "text") + "\nafter @x\n")
    assert [t.type for t in tokens][:1] == ["fence"] and tokens[0].info == "text"
    assert tokens[0].content.rstrip("\n") == re.sub("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                                                     "\u2066-\u2069]", "", text.replace("\r\n", "\n"))


@pytest.mark.parametrize("name", NAMES)
def test_html_text_in_a_summary_is_text(name):
    doc = f"<details><summary><code>{html_text(name)}</code>: {html_text(name)}</summary>\n\n</details>\n"
    assert live(doc) == [], doc


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_text_is_written_as_it_is(name):
    assert md_text(name) == name and md_code(name) == f"`{name}`" and term_text(name) == name
    assert csv_cell(name) == (name if not name.startswith("-") else "'" + name)


def test_a_csv_cell_a_spreadsheet_would_run_gets_an_apostrophe():
    cells = [csv_cell(n) for n in NAMES] + [csv_cell(-1.5), csv_cell(None), csv_cell(3)]
    buf = io.StringIO()
    csv.writer(buf).writerow(cells)
    back = next(csv.reader(io.StringIO(buf.getvalue())))
    for name, cell in zip(NAMES, back):
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        assert cell in (name, "'" + name)
    assert back[-3:] == ["-1.5", "", "3"]  # numbers are data


@pytest.mark.parametrize("name", NAMES)
def test_terminal_text_has_no_control_character(name):
    out = term_text(name)
    assert not CONTROL.search(out) and "\x1b" not in out
    assert (out == name) == (not CONTROL.search(name))


@pytest.mark.parametrize("name", NAMES + ["decode", "1__2", "yes", "null", "a: b", "- x", ""])
def test_a_yaml_scalar_reads_back_as_the_same_string(name):
    doc = f"tests:\n  {yaml_scalar(name)}:\n    file: {yaml_scalar(name)}\n"
    assert yaml.safe_load(doc) == {"tests": {name: {"file": name}}}
