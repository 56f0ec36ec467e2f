"""Triage states in a night's reports: acknowledged under its own heading, fixed closes, every state in verdict.json."""
from __future__ import annotations

import json
import re
from pathlib import Path

from perfci.history import store, triage
from perfci.history.triage import TriageRecord, TriageState
from perfci.nightly import core, render, stages, triaged
from perfci.nightly.core import Confirmed, Judged, Outcome, Stage
from perfci.nightly.loaded import Store
from perfci.nightly.state import Judgement, Log, NightConfig, Project, Sources, StageOutcome, TonightResult
from perfci.results import read_results_text
from tests.history.synth import write_night

A = ("gemv", "1x8x16", "fp32")
B = ("gemv", "1x16x16", "fp32")
SHA = "ab" * 20


def rec(case, state, when="2026-12-01T00:00:00+00:00", reason="why", link=""):
    return TriageRecord(case, SHA, TriageState(state), "ana", when, reason, link, record_id=when)


def night(cases, confirmed=None, records=()):
    judged = tuple(Judged(*key, verdict, ratio=ratio) for verdict, key, ratio in cases)
    o = Outcome(suite="tiny", device="X (cpu)", arch="cpu", sha="b" * 40, good_sha="a" * 40,
                stages=tuple(Stage(s, core.OK, "fine", 1.0) for s in core.STAGES),
                tonight=tuple((key, "ok") for _, key, _ in cases), cases=judged, confirmed=confirmed,
                triage=triaged.case_triage(list(records), [k for _, k, _ in cases], "tiny"))
    return o, core.judge_night(o)


def test_acknowledged_is_reported_under_its_own_heading_through_two_nights():
    records = [rec(" ".join(A), "acknowledged", reason="tile change, fix in #12",
                   link="https://github.com/o/r/issues/12")]
    # night 1: A regressed again (confirmed), and only A: the night says it is the acknowledged case
    o, d = night([("regressed", A, 1.08), ("unchanged", B, 1.0)],
                 confirmed=(Confirmed(*A, "regressed", ratio=1.08, rounds=3),), records=records)
    v = json.loads(render.verdict_json(o, d))
    assert v["triage"][0]["state"] == "acknowledged" and v["triage"][0]["case"] == list(A)
    assert v["triage"][0]["tonight"] == "regressed" and v["triage_acknowledged_only"] is True
    for md, head, table in ((render.summary_md(o, d), "#### Acknowledged", "#### Compare"),
                            (render.issue_md(o, d), "### Acknowledged", "### Tonight's verdicts")):
        assert head in md
        ack = md[md.index(head):]
        assert "`gemv 1x8x16 fp32`" in ack and "tile change, fix in #\u200d12" in ack and "+8.0%" in ack
        assert "`https://github.com/o/r/issues/12`" in ack  # the link shown in a code span, never live
        compare = md[md.index(table):md.index(head)]  # the plain verdicts table: without the acknowledged case
        assert "gemv 1x8x16 fp32" not in compare and "other than the acknowledged unchanged (1)" in compare
    # an unacknowledged case regressed too: not acknowledged-only
    o2, d2 = night([("regressed", A, 1.08), ("regressed", B, 1.09)],
                   confirmed=(Confirmed(*A, "regressed", rounds=3), Confirmed(*B, "regressed", rounds=3)),
                   records=records)
    assert json.loads(render.verdict_json(o2, d2))["triage_acknowledged_only"] is False
    # night 2: A quiet; still reported under its heading, with tonight's word
    o3, d3 = night([("unchanged", A, 1.0), ("unchanged", B, 1.0)], records=records)
    s = render.summary_md(o3, d3)
    assert "#### Acknowledged" in s and "| acknowledged | `gemv 1x8x16 fp32` | unchanged |" in s


def test_fixed_says_the_issue_can_close_on_the_first_green_night_of_those_cases():
    records = [rec("gemv 1x* fp32", "acknowledged"), rec("gemv 1x* fp32", "fixed", when="2026-12-02T00:00:00+00:00",
                                                         reason="reverted the tile")]
    o, d = night([("regressed", A, 1.05), ("unchanged", B, 1.0)],
                 confirmed=(Confirmed(*A, "regressed", rounds=3),), records=records)
    v = json.loads(render.verdict_json(o, d))
    assert [t["state"] for t in v["triage"]] == ["fixed", "fixed"] and v["issue_can_close"] is False
    assert "can close" not in render.summary_md(o, d)
    o, d = night([("inconclusive", A, 1.02), ("unchanged", B, 1.0)],
                 confirmed=(Confirmed(*A, "unchanged", rounds=3),), records=records)
    v = json.loads(render.verdict_json(o, d))
    assert v["issue_can_close"] is True and "the issue can close" in render.issue_md(o, d)


def test_every_state_is_carried_and_untriaged_nights_say_nothing():
    o, d = night([("unchanged", A, 1.0), ("improved", B, 0.9)],
                 records=[rec(" ".join(A), "expected"), rec(" ".join(B), "invalid")])
    v = json.loads(render.verdict_json(o, d))
    assert {t["state"] for t in v["triage"]} == {"expected", "invalid"}
    assert "Triaged (perfci history triage)" in render.summary_md(o, d)
    o, d = night([("unchanged", A, 1.0)])
    v = json.loads(render.verdict_json(o, d))
    assert v["triage"] == [] and v["issue_can_close"] is False and "Triaged" not in render.summary_md(o, d)


def test_issue_md_carries_a_marker_the_triage_workflow_reads():
    o, d = night([("regressed", A, 1.1), ("unchanged", B, 1.0)], confirmed=(Confirmed(*A, "regressed", rounds=3),))
    issue = render.issue_md(o, d)
    found = re.search(r"<!-- perfci-triage (\{.*\}) -->", issue)
    assert json.loads(found.group(1)) == {"suite": "tiny", "sha": "b" * 40, "cases": ["gemv 1x8x16 fp32"]}


def tonight(path: Path) -> TonightResult:
    return TonightResult(path, *read_results_text(path), sha="")


def judged_against(st: Path, path: Path, out: Path) -> StageOutcome[Judgement]:
    """Stage baseline on tonight's results at ``path``, against the store ``st``, with suite decode."""
    return stages.baseline(NightConfig(suite="decode", out=out, history=str(st)), Project(suite="decode"),
                           tonight(path), Sources(store=str(st)), Store(str(st)), Log())


def test_the_baseline_stage_reads_the_stores_records_and_a_corrupt_one_is_bad_input(tmp_path):
    files = [write_night(tmp_path / f"n{i}.csv", i) for i in range(3)]
    store.add_runs(tmp_path / "st", [str(f) for f in files[:2]])
    store.add_triage(tmp_path / "st", triage.make_record("matmul_tiled 16x* bf16", "01" * 20, "acknowledged",
                                                         "known", "ana"))
    (tmp_path / "out").mkdir()
    done = judged_against(tmp_path / "st", files[2], tmp_path / "out")
    assert done.status == core.OK
    assert len(done.result.triage) == 3 and {t.state for t in done.result.triage} == {"acknowledged"}
    assert all(t.kernel == "matmul_tiled" and t.shape.startswith("16x") for t in done.result.triage)
    (tmp_path / "st" / "triage" / "bad.json").write_text("{")
    try:
        judged_against(tmp_path / "st", files[2], tmp_path / "out")
        raise AssertionError("a corrupt triage record was read as fine")
    except Exception as err:  # noqa: BLE001 - the stage runner turns PerfciError into exit 2
        assert type(err).__name__ == "PerfciError" and "corrupt triage record" in str(err)


def test_a_moved_toolchain_is_said_at_the_top_of_the_summary_and_the_issue(tmp_path):
    files = [write_night(tmp_path / "n0.csv", 0), write_night(tmp_path / "n1.csv", 1),
             write_night(tmp_path / "n2.csv", 2, env={"torch": "2.12.0+cu130", "triton": "3.7.0"})]
    store.add_runs(tmp_path / "st", [str(f) for f in files[:2]])
    done = judged_against(tmp_path / "st", files[2], tmp_path / "out")
    assert done.status == core.OK
    assert done.result.toolchain == (("torch", "2.11.0+cu130", "2.12.0+cu130"), ("Triton", "3.6.0", "3.7.0"))
    o, d = night([("regressed", A, 1.1)])
    o = Outcome(**{**o.__dict__, "toolchain": done.result.toolchain})
    d = core.judge_night(o)
    for md in (render.summary_md(o, d), render.issue_md(o, d)):
        top = md.split("\n- suite")[0]  # before the identity lines
        assert "toolchain moved since the baseline: torch 2.11.0+cu130 -> 2.12.0+cu130, Triton 3.6.0 -> 3.7.0" in top
    v = json.loads(render.verdict_json(o, d))
    assert v["toolchain_moved"][0] == {"what": "torch", "baseline": "2.11.0+cu130", "tonight": "2.12.0+cu130"}
    # the same toolchain: nothing said
    store.add_runs(tmp_path / "st2", [str(files[0])])
    same = judged_against(tmp_path / "st2", files[1], tmp_path / "out")
    assert same.status == core.OK and same.result.toolchain == ()
