"""The issue-comment triage workflow's steps, run here: a command read, records written, an answer given.

The steps run as GitHub runs a bash step (``bash --noprofile --norc -eo
pipefail``), with a `perfci` that is this tree and a stand-in `gh` that keeps
the answer. A comment crafted to reach a shell must reach none.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.history import store
from perfci.nightly import core, render
from perfci.nightly.core import Confirmed, Judged, Outcome, Stage
from perfci.project.init import InitOptions, template, workflow_text
from tests.history.synth import write_night

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")
ROOT = Path(__file__).resolve().parents[2]
SHA = "0" * 40  # night 0's commit in tests.history.synth
CASE = ("matmul_tiled", "16x1024x6144", "bf16")
TITLE = "[perfci-nightly h200/decode] decode regressed on h200"


def workflow_steps(which: str) -> dict[str, str]:
    text = (workflow_text(template("triage.yml"), InitOptions(perfci_spec="perfci==0.1.0")) if which == "template"
            else (ROOT / ".github" / "workflows" / "perfci-triage.yml").read_text(encoding="utf-8"))
    doc = yaml.safe_load(text)
    return {s["name"]: s["run"] for s in doc["jobs"]["record"]["steps"] if "run" in s}


def issue_body() -> str:
    cases = (Judged(*CASE, "regressed", ratio=1.1), Judged("matmul_tiled", "1x1024x6144", "bf16", "unchanged"))
    o = Outcome(suite="decode", device="NVIDIA H200 (sm_90)", arch="sm_90", sha=SHA, good_sha="1" * 40,
                stages=tuple(Stage(s, core.OK) for s in core.STAGES), cases=cases,
                confirmed=(Confirmed(*CASE, "regressed", ratio=1.1, rounds=3),))
    return render.issue_md(o, core.judge_night(o))


@pytest.fixture
def runner(tmp_path):
    """A workspace with perf-history/h200 (one night), a `perfci` of this tree and a `gh` that keeps its body."""
    work, temp, bins = tmp_path / "work", tmp_path / "temp", tmp_path / "bin"
    for d in (work, temp, bins):
        d.mkdir()
    store.add_runs(work / "perf-history" / "h200", [str(write_night(tmp_path / "n0.csv", 0))])
    for name, body in (("perfci", f'exec {sys.executable} -m perfci "$@"\n'),
                       ("gh", f'printf "%s\\n" "$@" > {tmp_path}/gh-args\ncp "$5" {tmp_path}/gh-body\n')):
        (bins / name).write_text("#!/bin/bash\n" + body)
        (bins / name).chmod((bins / name).stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bins}:{os.environ['PATH']}", "RUNNER_TEMP": str(temp), "TITLE": TITLE,
           "BODY": issue_body(), "ACTOR": "ana", "NUMBER": "7", "ISSUE_URL": "https://github.com/o/r/issues/7",
           "RUN_URL": "https://github.com/o/r/actions/runs/1", "PUSHED": "success",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return work, temp, env, tmp_path


def step(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("which", ["template", "repository"])
def test_a_comment_becomes_a_record_on_the_branch_store_and_an_answer(runner, which):
    work, temp, env, tmp = runner
    steps = workflow_steps(which)
    env = {**env, "COMMENT": "/perfci expected bigger tile: prefill +9%, decode -4%\nmore words below"}
    for name in ("read the command", "write the records (perfci history triage)", "answer on the issue"):
        r = step(steps[name], work, env)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
    (record,) = store.load_triage(work / "perf-history" / "h200")
    assert (record.case, record.sha, record.state.value, record.who) == (" ".join(CASE), SHA, "expected", "ana")
    assert record.reason == "bigger tile: prefill +9%, decode -4%" and record.link.endswith("/issues/7")
    answer = (tmp / "gh-body").read_text()
    assert "perfci recorded **expected**" in answer and "`matmul_tiled 16x1024x6144 bf16`" in answer
    assert (tmp / "gh-args").read_text().split("\n")[:3] == ["issue", "comment", "7"]


def test_ack_needs_no_reason_and_expected_does(runner):
    work, temp, env, tmp = runner
    steps = workflow_steps("template")
    assert step(steps["read the command"], work, {**env, "COMMENT": "/perfci ack"}).returncode == 0
    t = json.loads((temp / "triage.json").read_text())
    assert t["ok"] and t["state"] == "acknowledged" and t["reason"] == "acknowledged on issue #7"
    for comment, words in (("/perfci expected", "needs a reason"), ("/perfci wontfix x", "usage:"),
                           ("/perfci invalid  ", "needs a reason")):
        assert step(steps["read the command"], work, {**env, "COMMENT": comment}).returncode == 0
        t = json.loads((temp / "triage.json").read_text())
        assert not t["ok"] and words in t["error"], (comment, t)
        assert step(steps["write the records (perfci history triage)"], work, env).returncode == 0
        assert step(steps["answer on the issue"], work, env).returncode == 0
        assert "perfci recorded nothing" in (tmp / "gh-body").read_text()
    assert store.load_triage(work / "perf-history" / "h200") == []
    # an issue body without the perfci-triage line: nothing recorded, and said why
    assert step(steps["read the command"], work, {**env, "COMMENT": "/perfci ack", "BODY": "hand-written"}).returncode == 0
    assert "no perfci-triage line" in json.loads((temp / "triage.json").read_text())["error"]


def test_a_comment_crafted_for_a_shell_reaches_none(runner):
    work, temp, env, tmp = runner
    steps = workflow_steps("template")
    planted = tmp / "pwned"
    evil = f'/perfci invalid $(touch {planted}) `touch {planted}` "; touch {planted}; echo " @team [x](http://e)'
    env = {**env, "COMMENT": evil}
    for name in ("read the command", "write the records (perfci history triage)", "answer on the issue"):
        assert step(steps[name], work, env).returncode == 0, name
    assert not planted.exists()
    (record,) = store.load_triage(work / "perf-history" / "h200")
    assert record.reason == evil.removeprefix("/perfci invalid ") and record.state.value == "invalid"
    answer = (tmp / "gh-body").read_text()
    # what the person typed is shown in one code span: no mention, no link, no markdown
    assert "`$(touch" in answer and "@team" in answer and answer.count("`") % 2 == 0
    assert "'touch" in answer  # backticks typed in the comment cannot close the span


def test_a_device_with_no_store_is_said_on_the_issue(runner):
    work, temp, env, tmp = runner
    steps = workflow_steps("template")
    env = {**env, "COMMENT": "/perfci ack", "TITLE": "[perfci-nightly mi355x/decode] decode regressed on mi355x"}
    assert step(steps["read the command"], work, env).returncode == 0
    assert step(steps["write the records (perfci history triage)"], work, env).returncode == 1
    assert step(steps["answer on the issue"], work, {**env, "PUSHED": "failure"}).returncode == 0
    assert "no such history store" in (tmp / "gh-body").read_text()
