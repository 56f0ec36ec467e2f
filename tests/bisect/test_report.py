"""The renderers on hand-built results: what a user reads, without a repository or a subprocess."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from perfci.bisect.core import (
    BaselineCheck, BisectResult, Classification, Interval, Samples, StepRecord, Verdict,
)
from perfci.bisect.report import RENDERERS, render_json, render_markdown, render_text
from perfci.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE

GOOD_SHA, FIRST_SHA, CULPRIT_SHA, THIRD_SHA, BAD_SHA = (c * 40 for c in "abcde")
P_MIN = 1 / 252  # the smallest one-sided p with five samples a side

GOOD = StepRecord(GOOD_SHA, 0, "GOOD: initial kernels", Samples((10.0, 10.1, 9.9, 10.05, 9.95)),
                  Classification(Verdict.GOOD))
BAD = StepRecord(BAD_SHA, 4, "refactor step 4", Samples((10.5, 10.6, 10.4, 10.55, 10.45)),
                 Classification(Verdict.BAD))
CULPRIT_STEP = StepRecord(CULPRIT_SHA, 2, "shrink BLOCK_K | tile 64", Samples((10.52, 10.48, 10.5, 10.51, 10.49)),
                          Classification(Verdict.BAD, 0.98, P_MIN, "at 98% of the gap"))
GOOD_STEP = StepRecord(FIRST_SHA, 1, "refactor step 1", Samples((10.0, 10.02, 9.98, 10.01, 9.99), failures=1),
                       Classification(Verdict.GOOD, 0.01, P_MIN, "at 1% of the gap"))
BASELINE = BaselineCheck(True, False, P_MIN, 5.0, "GOOD median 10 (n=5), BAD median 10.5 (n=5), change +5.00%")

CULPRIT = BisectResult(
    status="culprit", message=f"first bad commit: {CULPRIT_SHA[:12]} shrink BLOCK_K | tile 64",
    good=GOOD, bad=BAD, steps=(CULPRIT_STEP, GOOD_STEP), commits_total=4,  # in the order they were measured
    culprit={"sha": CULPRIT_SHA, "subject": "shrink BLOCK_K | tile 64", "author": "Synth Author <synth@example.com>",
             "date": "2026-11-29T12:00:00+00:00"},
    culprit_diffstat=" base.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
    baseline=BASELINE, step_interval=Interval(5.0, 4.25, 5.75), culprit_interval=Interval(5.0, 4.5, 5.5),
    confidence=(1 - P_MIN) ** 2, metric="last number on stdout", bench_runs=20,
    bisect_log="git bisect start\n# first bad commit: [" + CULPRIT_SHA + "]", warnings=("stash kept",),
)

SKIPPED_STEP = StepRecord(CULPRIT_SHA, 2, "broken bench", Samples((), failures=5),
                          Classification(Verdict.SKIP, reason="only 0 of 5 runs worked"),
                          "only 0 of 5 runs worked: bench exited 1: this commit's bench is broken")
ALL_SKIPPED = BisectResult(
    status="all-skipped", message="every commit between the last good and the first bad one was skipped; ...",
    good=GOOD, bad=BAD, steps=(GOOD_STEP, SKIPPED_STEP), commits_total=4,
    candidates=(CULPRIT_SHA, THIRD_SHA, BAD_SHA), baseline=BASELINE, step_interval=Interval(5.0, 4.25, 5.75),
    confidence=1 - P_MIN, metric="column 'median_us' of case 'gemv' in r.csv", bench_runs=15,
)


def test_text_report_of_a_culprit_reads_exactly_so():
    assert render_text(CULPRIT) == f"""\
first bad commit: {CULPRIT_SHA}
  subject: shrink BLOCK_K | tile 64
  author:  Synth Author <synth@example.com>
  date:    2026-11-29T12:00:00+00:00
  step at this commit: +5.00% (95% CI +4.50% .. +5.50%)
GOOD -> BAD change: +5.00% (95% CI +4.25% .. +5.75%)
confidence that every verdict was right: 99.2%
metric: last number on stdout (lower is better); 20 bench runs this session

 base.txt | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

   #  commit          n  fail      median    pos  verdict / subject
   0  aaaaaaaaaaaa    5     0          10         GOOD (endpoint)  GOOD: initial kernels
   1  bbbbbbbbbbbb    5     1          10   0.01  good  refactor step 1
   2  cccccccccccc    5     0        10.5   0.98  bad  <- first bad  shrink BLOCK_K | tile 64
   4  eeeeeeeeeeee    5     0        10.5         BAD (endpoint)  refactor step 4
warning: stash kept
"""


def test_text_report_of_an_all_skipped_range_gives_the_reason_and_no_confidence():
    text = render_text(ALL_SKIPPED)
    lines = text.splitlines()
    assert lines[0] == ALL_SKIPPED.message
    assert "confidence" not in text  # no culprit: a confidence in it would mean nothing
    assert "metric: column 'median_us' of case 'gemv' in r.csv (lower is better); 15 bench runs" in text
    skipped_row = lines.index(next(line for line in lines if line.startswith("   2  cccccccccccc")))
    assert lines[skipped_row].split()[1:5] == ["cccccccccccc", "0", "5", "-"]
    assert lines[skipped_row + 1] == f"{'':>4}  skipped: {SKIPPED_STEP.reason}"


def test_higher_is_better_is_named_in_every_format():
    result = replace(CULPRIT, higher_is_better=True)
    assert "(higher is better)" in render_text(result) and "(higher is better)" in render_markdown(result)
    assert json.loads(render_json(result))["higher_is_better"] is True


def test_markdown_escapes_pipes_and_keeps_history_order():
    markdown = render_markdown(CULPRIT)
    assert markdown.startswith("## perfci bisect\n\n- first bad commit: " + CULPRIT_SHA + "\n- subject: ")
    assert "```\n" + CULPRIT.culprit_diffstat + "\n```" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and "`" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| 0", "| 1", "| 2", "| 4"]
    assert rows[2] == ("| 2 | `cccccccccccc` | 5 | 0 | 10.5 | 0.98 | bad  <- first bad | "
                       "shrink BLOCK_K \\| tile 64 |")


def test_json_report_carries_every_number():
    doc = json.loads(render_json(CULPRIT))
    assert doc["status"] == "culprit" and doc["exit_code"] == EXIT_OK
    assert doc["culprit"] == {**CULPRIT.culprit, "diffstat": CULPRIT.culprit_diffstat}
    assert doc["culprit_interval"] == {"estimate_pct": 5.0, "low_pct": 4.5, "high_pct": 5.5}
    assert doc["step_interval"] == {"estimate_pct": 5.0, "low_pct": 4.25, "high_pct": 5.75}
    assert doc["baseline"] == {"p_value": P_MIN, "effect_pct": 5.0, "message": BASELINE.message}
    assert [s["sha"] for s in doc["steps"]] == [CULPRIT_SHA, FIRST_SHA]  # measurement order, as the run went
    assert doc["steps"][1] == {"sha": FIRST_SHA, "order": 1, "subject": "refactor step 1",
                               "samples": [10.0, 10.02, 9.98, 10.01, 9.99], "failures": 1, "median": 10.0,
                               "verdict": "good", "position": 0.01, "p_value": P_MIN, "reason": ""}
    assert doc["good"]["verdict"] == "good" and doc["bad"]["median"] == 10.5
    assert doc["confidence"] == pytest.approx((1 - P_MIN) ** 2)
    assert doc["warnings"] == ["stash kept"] and doc["bisect_log"] == CULPRIT.bisect_log


@pytest.mark.parametrize("status, exit_code", [
    ("culprit", EXIT_OK), ("all-skipped", EXIT_USAGE), ("no-difference", EXIT_INCONCLUSIVE),
    ("swapped", EXIT_INCONCLUSIVE),
])
def test_exit_code_follows_the_status_in_the_json_too(status, exit_code):
    result = replace(CULPRIT, status=status)
    assert result.exit_code == exit_code
    assert json.loads(render_json(result))["exit_code"] == exit_code


def test_no_difference_has_no_intervals_and_every_renderer_says_why():
    result = BisectResult(status="no-difference", message="no significant difference between GOOD and BAD (...)",
                          good=GOOD, bad=BAD, commits_total=4, metric="last number on stdout", bench_runs=10)
    doc = json.loads(render_json(result))
    assert doc["culprit"] is None and doc["step_interval"] is None and doc["steps"] == []
    for name, render in RENDERERS.items():
        out = render(result)
        assert result.message in out, name
        assert "CI" not in out, name  # no interval was computed, so none is shown
