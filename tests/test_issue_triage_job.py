"""Triage in the nightly's issue job: a clean night whose `fixed` cases were green closes the issue; an
acknowledged-only night comments only when an acknowledged case moved again.

Each test runs the verdict job's ``perfci nightly`` step as the runner runs it, with a stand-in
``perfci`` that writes a verdict.json perfci itself rendered and exits with its code, then the issue
job's step with the outputs the first step set (when the job's ``if`` lets it run), against a
stand-in for GitHub's issues (tests/test_issue_job.py), in perfci's nightly and in the one
``perfci init`` writes.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest

from perfci.history.triage import TriageRecord, TriageState
from perfci.nightly import core, render, triaged
from perfci.nightly.core import Confirmed, Judged, Outcome, Stage
from tests.test_issue_job import BOT, WORKFLOWS, _issue, issue_job, yaml  # noqa: F401 - issue_job: a fixture

A = ("gemv", "1x8x16", "fp32")
B = ("gemv", "1x16x16", "fp32")
WEIRD = ("gemv`<b>x</b>", "1x8x16", "fp32")  # a kernel name that markdown would read as code and HTML

FAKE_PERFCI = """\
#!{python}
import os, sys
args = sys.argv[1:]
out = args[args.index("--out") + 1]
text = open(os.environ["FAKE_VERDICT"]).read()
if text:
    open(os.path.join(out, "verdict.json"), "w").write(text)
open(os.path.join(out, "summary.md"), "w").write("summary\\n")
sys.exit(int(os.environ["FAKE_RC"]))
"""


def verdict(cases, confirmed=None, records=(), tonight=None, since_ack=None) -> dict:
    """verdict.json as perfci renders it for a night of these cases, triage records and acked judgements."""
    judged = tuple(Judged(*key, word, ratio=1.0) for word, key in cases)
    found = triaged.case_triage(list(records), [k for _, k in cases], "decode")
    found = tuple(replace(t, since_ack=(since_ack or {}).get(t.key, "")) for t in found)
    o = Outcome(suite="decode", device="X (cpu)", arch="cpu", sha="b" * 40, good_sha="a" * 40,
                stages=tuple(Stage(s, core.OK, "fine", 1.0) for s in core.STAGES),
                tonight=tonight or tuple((key, "ok") for _, key in cases), cases=judged, confirmed=confirmed,
                triage=found)
    return json.loads(render.verdict_json(o, core.judge_night(o)))


def rec(key, state, when="2026-12-01T00:00:00+00:00"):
    return TriageRecord(" ".join(key), "cd" * 20, TriageState(state), "ana", when, "why", record_id=when)


def regressed(*keys):
    return tuple(Confirmed(*k, "regressed", ratio=1.08, rounds=3) for k in keys)


@pytest.fixture
def night(tmp_path, issue_job):
    """Runs the verdict step with VERDICT, then the issue step on its outputs: gh's log and the outputs."""
    bin_dir = tmp_path / "bin"
    fake = bin_dir / "perfci"
    fake.write_text(FAKE_PERFCI.format(python=sys.executable))
    fake.chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)

    def run(workflow: str, v: dict | None, issues: list[dict]) -> tuple[list[str], dict]:
        text = WORKFLOWS[workflow]()
        doc = yaml.safe_load(text)
        job = "verdict" if "verdict" in doc["jobs"] else "nightly"
        step = next(s for s in doc["jobs"][job]["steps"] if s.get("id") == "nightly")
        (tmp_path / "verdict.json").write_text("" if v is None else json.dumps(v))
        shutil.rmtree(tmp_path / "nightly", ignore_errors=True)  # as the job's first step: no night's files left
        repo = tmp_path / "repo"
        repo.mkdir(exist_ok=True)
        shards = tmp_path / "shards" / "decode"
        shards.mkdir(parents=True, exist_ok=True)
        (shards / "shard-1.csv").write_text("")
        output = tmp_path / "outputs"
        output.write_text("")
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SUITES": "decode", "SHARDS": "1",
               "DEVICE": "h200", "JOBS": "1", "BENCH": "", "GITHUB_WORKSPACE": str(tmp_path),
               "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
               "FAKE_VERDICT": str(tmp_path / "verdict.json"), "FAKE_RC": str((v or {}).get("exit_code", 4))}
        script = tmp_path / "nightly.sh"
        script.write_text(step["run"])
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=repo,
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == int(env["FAKE_RC"]), proc.stderr
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
        sent = {k: v for k, v in outputs.items() if v}  # the runner never sends an empty output
        # The artifact the issue job downloads: nightly-DEVICE/SUITE/.
        artifact = tmp_path / "nightly" / "nightly-h200"
        artifact.mkdir(parents=True)
        (tmp_path / "nightly" / "decode").replace(artifact / "decode")
        if not sent:  # the issue job's `if`: every output empty, the job does not run
            return [], outputs
        return issue_job(text, issues, sent), outputs
    return run


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_a_clean_night_whose_fixed_cases_were_green_closes_the_issue_saying_which(night, workflow, tmp_path):
    v = verdict([("unchanged", A), ("unchanged", B), ("improved", WEIRD)],
                records=[rec(A, "acknowledged"), rec(A, "fixed", "2026-12-02T00:00:00+00:00"), rec(WEIRD, "fixed")])
    assert v["exit_code"] == 0 and v["issue_can_close"] is True
    log, outputs = night(workflow, v, [_issue(8, "mallory"), _issue(7, BOT)])
    assert outputs == {"confirmed_h200": "", "close_h200": "decode"}
    assert log == ["comment 7", "close 7 completed"]
    body = (tmp_path / "gh.log.7.md").read_text()
    assert "Every case marked `fixed` was green tonight" in body and "`gemv 1x8x16 fp32`: unchanged tonight" in body
    assert "``gemv`<b>x</b> 1x8x16 fp32``: improved tonight" in body  # escaped by perfci: code, never HTML
    assert "Night of " in body and "actions/runs/1" in body
    # no open issue of the bot's: nothing to close, nothing opened
    assert night(workflow, v, [_issue(8, "mallory")])[0] == []


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_a_red_undecided_or_broken_night_never_closes(night, workflow):
    fixed = [rec(A, "fixed")]
    red = verdict([("unchanged", A), ("regressed", B)], confirmed=regressed(B), records=fixed)
    assert (red["exit_code"], red["issue_can_close"], red["confirmed_regression"]) == (1, True, True)
    assert night(workflow, red, [_issue(7, BOT)]) == (["comment 7"], {"confirmed_h200": "decode", "close_h200": ""})
    undecided = verdict([("unchanged", A), ("regressed", B)],  # compare's regressed, confirm's inconclusive
                        confirmed=(Confirmed(*B, "inconclusive", rounds=3),), records=fixed)
    assert (undecided["exit_code"], undecided["issue_can_close"]) == (3, True)
    assert night(workflow, undecided, [_issue(7, BOT)])[0] == []
    broken = verdict([("unchanged", A), ("broken", B)], records=fixed, tonight=((A, "ok"), (B, "error")))
    assert (broken["exit_code"], broken["issue_can_close"], broken["confirmed_regression"]) == (1, True, False)
    assert night(workflow, broken, [_issue(7, BOT)])[0] == []
    assert night(workflow, None, [_issue(7, BOT)])[0] == []  # no verdict.json at all (exit 4)


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_the_issue_step_checks_the_nights_verdict_before_closing(issue_job, workflow, tmp_path):
    """A close_* output whose night's verdict.json is red, or missing, closes nothing."""
    text = WORKFLOWS[workflow]()
    folder = tmp_path / "nightly" / "nightly-h200" / "decode"
    assert issue_job(text, [_issue(7, BOT)], {"close_h200": "decode"}) == []  # no verdict.json
    folder.mkdir(parents=True)
    red = verdict([("unchanged", A), ("regressed", B)], confirmed=regressed(B), records=[rec(A, "fixed")])
    (folder / "verdict.json").write_text(json.dumps(red))
    assert issue_job(text, [_issue(7, BOT)], {"close_h200": "decode"}) == []
    assert "not closed" in (tmp_path / "summary.md").read_text()
    clean = verdict([("unchanged", A)], records=[rec(A, "fixed")])
    (folder / "verdict.json").write_text(json.dumps(clean))
    assert issue_job(text, [_issue(7, BOT)], {"close_h200": "decode"}) == ["comment 7", "close 7 completed"]


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_an_acknowledged_only_night_comments_only_when_an_acked_case_moved_again(night, workflow):
    records = [rec(A, "acknowledged")]
    cases = [("regressed", A), ("unchanged", B)]
    still = verdict(cases, confirmed=regressed(A), records=records, since_ack={A: "unchanged"})
    assert (still["exit_code"], still["triage_acknowledged_only"], still["acknowledged_moved"]) == (1, True, [])
    assert night(workflow, still, [_issue(7, BOT)]) == ([], {"confirmed_h200": "", "close_h200": ""})
    moved = verdict(cases, confirmed=regressed(A), records=records, since_ack={A: "regressed"})
    assert moved["acknowledged_moved"] == [list(A)]
    assert night(workflow, moved, [_issue(7, BOT)])[0] == ["comment 7"]
    # a new regression of a case nobody acknowledged is news whatever the acknowledged one did
    both = verdict([("regressed", A), ("regressed", B)], confirmed=regressed(A, B), records=records,
                   since_ack={A: "unchanged"})
    assert both["triage_acknowledged_only"] is False
    assert night(workflow, both, [_issue(7, BOT)])[0] == ["comment 7"]
