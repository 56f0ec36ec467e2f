"""bisect's markdown and text reports with hostile commit subjects, authors and messages."""
import re
from dataclasses import replace

import pytest

from perfci.bisect.report import render_markdown, render_text
from tests.bisect.test_report import CULPRIT, CULPRIT_STEP, GOOD_STEP, UNDECIDED
from tests.markdown_live import headings, hostile_names, live, one_line, shown

NAMES = hostile_names()
TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def hostile(name: str):
    """The culprit's subject and author, a probed commit's subject, a note, a warning and the diffstat are ``name``."""
    culprit = replace(CULPRIT, culprit={**CULPRIT.culprit, "subject": name, "author": f"{name} <{name}@x.org>"},
                      steps=(replace(CULPRIT_STEP, subject=name), GOOD_STEP), notes=(name,), warnings=(name,),
                      culprit_diffstat=f" {name} | 2 +-\n ```\n@someone")
    undecided = replace(UNDECIDED, message=f"the slowdown is in {name}", advice=(name, "more runs"))
    return culprit, undecided


@pytest.mark.parametrize("name", NAMES)
def test_markdown_shows_a_hostile_subject_and_nothing_in_it_is_live(name):
    for result, plain in zip(hostile(name), hostile("plain")):
        doc = render_markdown(result)
        assert live(doc) == [], doc
        assert one_line(name) in shown(doc)
        assert headings(doc) == headings(render_markdown(plain)) == ["perfci bisect"]


@pytest.mark.parametrize("name", NAMES)
def test_text_prints_no_control_character_of_a_subject(name):
    for result in hostile(name):
        text = render_text(result)
        assert not TERMINAL_CONTROL.search(text), repr(text)


def test_ordinary_subjects_read_as_before():
    doc = render_markdown(CULPRIT)
    assert "| shrink BLOCK\\_K \\| tile 64 |" not in doc and "| shrink BLOCK_K \\| tile 64 |" in doc
    assert "- - more runs: 1 commit(s) stayed unsure" in render_markdown(UNDECIDED)
    assert "\n```\n base.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n```\n" in doc
