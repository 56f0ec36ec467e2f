"""A night's exit code and confirmed_regression are what its judging stages found, whatever its report meets.

Each report step (the trend plots, the forest plot, compare --explain, the
compile diff, rendering summary.md / issue.md / verdict.json, writing them, the
canary) is made to raise, on a red night (a confirmed regression) and on a green
one: the exit codes stay 1 and 0, verdict.json says so, and the failure is a
warning in the reports. Nights are run in this process (``run_night``) on results
CSVs with chosen times, so nothing here depends on how fast this machine runs.
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from perfci.errors import PerfciError
from perfci.history.store import add_runs
from perfci.nightly import core, night, render, stages
from perfci.nightly.night import run_night
from perfci.nightly.state import Confirmation, NightConfig, StageOutcome
from tests.nightly.conftest import make_repo

HEADER = ("kernel,shape,dtype,M,N,K,median_us,repeats_us,iters,timer,status,message,weight,group,arch,"
          "device_name,vendor,torch,triton,perfci,git_sha,host,timestamp,suite")
QUIET = (1.000, 0.995, 1.004, 0.990, 1.010, 0.998, 1.002)  # seven repeats within +-1%
SLOW_CASE = ("gemv", "1x8x16", "fp32")


def results(path: Path, when: str, slow: float = 1.0, sha: str = "") -> Path:
    """The tiny suite's two cases at 100 us (the first one ``slow`` times that), recorded at ``when``."""
    lines = [HEADER]
    for (n, scale) in ((8, slow), (16, 1.0)):
        reps = [100.0 * scale * q for q in QUIET]
        lines.append(f"gemv,1x{n}x16,fp32,1,{n},16,{sorted(reps)[3]:.4f},{';'.join(f'{r:.4f}' for r in reps)},70,"
                     f"host,ok,,1,,cpu,Test CPU,cpu,2.13.0,3.9.0,0.1.0,{sha},host,{when},tiny")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def setup(tmp_path):
    """A repository, a store with one earlier night, that night as the --baseline, and two tonights."""
    repo = make_repo(tmp_path / "repo")
    base = results(tmp_path / "base.csv", "2026-11-30T02:00:00+00:00")
    add_runs(str(tmp_path / "store"), [str(base)])
    red = results(tmp_path / "red.csv", "2026-12-01T02:00:00+00:00", slow=1.9)
    green = results(tmp_path / "green.csv", "2026-12-01T02:00:00+00:00")
    return {"repo": repo, "base": base, "red": red, "green": green, "store": tmp_path / "store",
            "compile": tmp_path / "compile"}


def confirm_regressed(cfg, p, t, j, started, log):
    """confirm's answer on the flagged case, as perfci confirm gives it: +90% [+85%, +95%], regressed.

    The real confirm measures two worktrees (tests/nightly/test_nights.py); here only what the
    report stage is handed matters.
    """
    return StageOutcome(core.OK, "1.9x", Confirmation(core.flagged(j.cases, j.comparison.suite.verdict),
                        (core.Confirmed(*SLOW_CASE, "regressed", "", 1.9, 1.85, 1.95, 5),), "n/a"))


def confirmed_against_a_commit(monkeypatch):
    """The night's confirm answers ``confirm_regressed``, against a baseline that names a commit."""
    real = stages.baseline

    def baseline(*args):
        done = real(*args)
        return replace(done, result=replace(done.result, good_sha="0" * 40))

    monkeypatch.setattr(stages, "baseline", baseline)
    monkeypatch.setattr(stages, "confirm", confirm_regressed)


def night_of(setup, which: str, monkeypatch, compile_diff: bool = False, **cfg) -> tuple:
    if which == "red":
        confirmed_against_a_commit(monkeypatch)
    out = setup["repo"].parent / f"out-{which}"
    config = NightConfig(suite=str(setup["repo"] / "suites" / "tiny.toml"), out=out, run=str(setup[which]),
                         baseline=str(setup["base"]), history=str(setup["store"]), repo=setup["repo"],
                         device="cpu", bisect=False, **cfg)
    setup["compile"].mkdir(exist_ok=True)
    _, decision = run_night(config, echo=io.StringIO(),
                                  compile_baseline=str(setup["compile"]) if compile_diff else None)
    return out, decision


def boom(*args, **kwargs):
    raise ValueError("'yerr' must not contain negative values")


# (what is made to fail, how, the warning it leaves, whether a green night reaches it)
STEPS = {
    "trend": ("perfci.history.plot.trend_png", "trend of gemv 1x8x16 fp32 not drawn: ValueError", False),
    "trend stage": ("perfci.history.check.check", "stage report failed (internal): ValueError", False),
    "forest": ("perfci.compare.render.plot", "forest plot not drawn: ValueError", False),
    "explain": ("perfci.compare.explain.with_explain", "compare --explain not added to the reports", True),
    "compile diff": ("perfci.compile.ratchet.run", "compile diff not diffed against", True),
    "summary.md": ("perfci.nightly.render.summary_md", "summary.md could not be rendered", True),
    "issue.md": ("perfci.nightly.render.issue_md", "issue.md could not be rendered", True),
    "verdict.json": ("perfci.nightly.render.verdict_json", "verdict.json could not be rendered", True),
    "canary": ("perfci.nightly.canary._measure", "stage canary failed (internal): ValueError", True),
}


@pytest.mark.parametrize("which, code", [("red", 1), ("green", 0)])
def test_the_nights_reports_as_they_are_when_nothing_fails(setup, monkeypatch, which, code):
    out, decision = night_of(setup, which, monkeypatch)
    v = json.loads((out / "verdict.json").read_text())
    assert decision.exit_code == v["exit_code"] == code
    assert v["confirmed_regression"] is (which == "red")
    if which == "red":
        assert v["cases"][0]["verdict"] == "regressed"
        assert "trends/" in " ".join(v["files"]) and "forest.png" in v["files"]
    assert not [w for w in v["warnings"] if "could not be rendered" in w or "not drawn" in w]


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("which, code", [("red", 1), ("green", 0)])
def test_a_failing_report_step_is_a_warning_never_the_exit_code(setup, monkeypatch, step, which, code):
    target, warning, on_green = STEPS[step]
    module, _, name = target.rpartition(".")
    monkeypatch.setattr(f"{module}.{name}", boom)
    extra = {"canary": 5.0} if step == "canary" else {}
    out, decision = night_of(setup, which, monkeypatch, compile_diff=step == "compile diff", **extra)
    assert decision.exit_code == code and decision.confirmed_regression is (which == "red")
    v = json.loads((out / "verdict.json").read_text())
    assert v["exit_code"] == code and v["confirmed_regression"] is (which == "red")
    if which == "red" or on_green:
        assert any(warning in w for w in v["warnings"]), v["warnings"]
        for report in ("summary.md", "issue.md"):
            assert warning in (out / report).read_text(), report
    if step == "compile diff":
        assert "ValueError" in v["compile"]["error"]
    if step == "verdict.json":
        assert v["brief"] is True and v["issue_title"] == "perfci-nightly cpu tiny"
    if step in ("summary.md", "issue.md"):  # the other reports are whole
        assert "#### Stages" in (out / "summary.md").read_text() or step == "summary.md"
        assert "cases" in v


@pytest.mark.parametrize("which, code", [("red", 1), ("green", 0)])
def test_a_report_that_cannot_be_written_is_said_and_the_code_stands(setup, monkeypatch, which, code):
    real = night.atomic_write_text

    def full_disk(path, text):
        if Path(path).name == "summary.md":
            raise PerfciError(f"{path}: cannot write (No space left on device)")
        return real(path, text)

    monkeypatch.setattr(night, "atomic_write_text", full_disk)
    out, decision = night_of(setup, which, monkeypatch)
    assert decision.exit_code == code
    assert json.loads((out / "verdict.json").read_text())["exit_code"] == code
    assert not (out / "summary.md").exists()


def test_every_renderer_failing_still_leaves_a_verdict_the_workflow_can_read(setup, monkeypatch):
    for name in ("summary_md", "issue_md", "verdict_json"):
        monkeypatch.setattr(render, name, boom)
    out, decision = night_of(setup, "red", monkeypatch)
    v = json.loads((out / "verdict.json").read_text())
    assert (v["exit_code"], v["confirmed_regression"]) == (1, True) and decision.exit_code == 1
    assert sum("could not be rendered" in w for w in v["warnings"]) == 3
    assert "exit 1; confirmed regression: yes" in (out / "issue.md").read_text()


def test_the_reports_render_extreme_inputs():
    """1,000 cases, estimates at their interval's edge, empty intervals, NaN and infinite numbers, a canary
    that judged nothing: every report renders, verdict.json stays strict JSON, the verdict as decided."""
    nan, inf = float("nan"), float("inf")
    odd = [(1.0, 1.0, 1.0), (1.2, 1.2, 1.5), (nan, nan, nan), (inf, 1.0, inf), (None, None, None), (0.0, -1.0, 0.0)]
    cases = tuple(core.Judged("k", f"{i}x1x1", "bf16", "regressed" if i % 3 == 0 else "unchanged", "why | not",
                              100.0 if i % 5 else nan, 120.0, *odd[i % len(odd)]) for i in range(1000))
    from perfci.history.canary import CanaryNight, rates

    blank = CanaryNight("r", "", "", "d", "sm_90", "s", 3.0, 3.125, "1x1x1", "bf16", truth_ratio=nan)
    outcome = core.Outcome(suite="s", device="d", arch="sm_90", stages=(core.Stage("tonight", core.OK),),
                           tonight=tuple((c.key, "ok") for c in cases), cases=cases,
                           flagged=tuple(c.key for c in cases if c.verdict == "regressed"),
                           canary=blank, canary_rates=rates([blank]))
    decision = core.judge_night(outcome)
    assert decision.exit_code == 1
    summary, issue = render.summary_md(outcome, decision), render.issue_md(outcome, decision)
    assert "more |" in summary and not re.search(r"\b(nan|inf)\b", summary.lower() + issue.lower())
    assert "#### Canary" in summary and "### Canary" in issue
    v = json.loads(render.verdict_json(outcome, decision))
    assert v["exit_code"] == 1 and len(v["cases"]) == 1000 and v["canary"]["tonight"]["truth_ratio"] is None
