"""summary.md and issue.md with hostile names in every field a run, an error or a commit fills in."""
from dataclasses import replace

import pytest

from perfci.nightly import core, render
from perfci.nightly.core import Confirmed, Culprit, Judged, Outcome, Stage
from tests.markdown_live import headings, hostile_names, live, one_line, shown

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
