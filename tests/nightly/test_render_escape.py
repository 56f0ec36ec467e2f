"""summary.md and issue.md with hostile names in every field a run, an error or a commit fills in."""
import re
from dataclasses import replace

import pytest

from perfci.nightly import core, render
from perfci.nightly.core import Confirmed, Culprit, Judged, Outcome, Stage
from perfci.nightly.triaged import CaseTriage
from tests.markdown_live import _MD, headings, hostile_names, live, one_line, shown

NAMES = hostile_names()


def hostile_night(name: str) -> tuple[Outcome, core.NightVerdict]:
    key = (name, "1x8x16", "fp32")
    stages = tuple(Stage(s, core.FAILED, name, 1.0, "input") if s == "bisect" else Stage(s, core.OK, name, 1.0)
                   for s in core.STAGES)
    o = Outcome(suite=name, device=name, arch="cpu", sha="b" * 40, good_sha="a" * 40, stages=stages,
                tonight=((key, "ok"),), baseline=name, notes=(name,), compare_notes=(name,), warnings=(name,),
                cases=(Judged(*key, "regressed", reason=name, ratio=2.0, explain=name,
                              explain_sides=((name, name, name + "!"),)),),
                confirmed=(Confirmed(*key, "regressed", reason=name, ratio=2.0, rounds=3),),
                culprit=Culprit("c" * 40, name, f" kernels/{name} | 5 +++++\n ```\n@someone"),
                files=("forest.png", f"{name}.png"))
    d = core.judge_night(o)
    return o, replace(d, headline=f"regression confirmed: {name} +100.0%", warnings=(name,))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("report", [render.summary_md, render.issue_md])
def test_a_hostile_name_is_shown_and_nothing_in_it_is_live(name, report):
    o, d = hostile_night(name)
    doc = report(o, d)
    assert live(doc, own_links=("forest.png",)) == [], doc
    assert one_line(name) in shown(doc)
    # No heading made, none hidden in a block a line of the name closed: the report's own, in order.
    assert headings(doc)[1:] == headings(report(*hostile_night("plain")))[1:]


@pytest.mark.parametrize("report", [render.summary_md, render.issue_md])
def test_an_ordinary_night_reads_as_before(report):
    key = ("splitk_decode[m_fast=1]", "64x1024x6144", "bf16")
    o = Outcome(suite="decode", device="NVIDIA H200 (sm_90)", arch="sm_90", sha="b" * 40, good_sha="a" * 40,
                stages=tuple(Stage(s, core.OK, "fine", 1.0) for s in core.STAGES), tonight=((key, "ok"),),
                cases=(Judged(*key, "regressed", reason="+12.0% past the 2.0% floor", ratio=1.12),),
                culprit=Culprit("c" * 40, "kernels: retile splitk_decode", " kernels/splitk.py | 5 +++++"))
    doc = report(o, core.judge_night(o))
    assert "| **regressed** | `splitk_decode[m_fast=1] 64x1024x6144 bf16` |" in doc
    assert "| +12.0% past the 2.0% floor |" in doc
    assert f"First bad commit: `{'c' * 40}` kernels: retile splitk\\_decode" not in doc
    assert f"First bad commit: `{'c' * 40}` kernels: retile splitk_decode\n" in doc or report is render.summary_md
    assert "```\n kernels/splitk.py | 5 +++++\n```" in doc
    assert "- suite `decode` on NVIDIA H200 (sm_90), commit `bbbbbbbbbbbb`" in doc


def _cells_per_row(doc: str) -> list[int]:
    """How many cells each table row of DOC has, as a markdown parser splits them (a bare "|" adds one)."""
    tokens = _MD.parse(doc)
    rows, n = [], 0
    for t in tokens:
        if t.type == "tr_open":
            n = 0
        elif t.type in ("td_open", "th_open"):
            n += 1
        elif t.type == "tr_close":
            rows.append(n)
    return rows


def _triaged_night(sha: str, who: str = "lead", reason: str = "known") -> tuple[Outcome, core.NightVerdict]:
    key = ("gemv", "1x1024x6144", "bf16")
    o = Outcome(suite="decode", device="H200", arch="sm_90", sha="b" * 40, good_sha="a" * 40,
                stages=tuple(Stage(s, core.OK, "fine", 1.0) for s in core.STAGES), tonight=((key, "ok"),),
                cases=(Judged(*key, "regressed", reason="past the floor", ratio=1.2),),
                triage=(CaseTriage(*key, state="expected", sha=sha, who=who, when="2026-12-01", reason=reason),))
    return o, core.judge_night(o)


@pytest.mark.parametrize("report", [render.summary_md, render.issue_md])
def test_a_hostile_triage_commit_stays_in_its_code_span_and_its_cell(report):
    # A record's sha is checked as hex when it is read (perfci.history.triage); written into the table it is
    # still a code span of its own, as every other sha: a backtick or a "|" in it opens and splits nothing.
    hostile = "a`b @team #12 | <img src=x> [x](http://e)"
    doc = report(*_triaged_night(hostile, who="@team #12", reason="x` |<img src=x>"))
    assert live(doc) == [], doc
    row = next(line for line in doc.splitlines() if line.startswith("| expected |"))
    assert "| ``a`b @team #1`` |" in row  # the sha's one code span: nothing in it is live
    assert "| @\u200dteam #\u200d12 |" in row and not re.search(r"(?<!\\)<img", row)
    lines = doc.splitlines()
    start = lines.index("| state | case | tonight | change | at | who | reason |")
    assert _cells_per_row("\n".join(lines[start:start + 3])) == [7, 7]  # the header, the one record: no cell more


@pytest.mark.parametrize("report", [render.summary_md, render.issue_md])
def test_an_ordinary_triage_row_reads_as_before(report):
    doc = report(*_triaged_night("0123456789abcdef"))
    assert "| `0123456789ab` | lead | known |" in doc
