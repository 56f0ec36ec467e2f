"""The renderers on hand-built results: what a user reads, without a repository or a subprocess."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from perfci.bisect.core import (
    BisectResult,
    CommitVerdict,
    Interval,
    PairCheck,
    Samples,
    StepRecord,
)
from perfci.bisect.report import (
    RENDERERS,
    plot,
    render_json,
    render_markdown,
    render_text,
)
from perfci.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE

GOOD_SHA, FIRST_SHA, CULPRIT_SHA, THIRD_SHA, BAD_SHA = (c * 40 for c in "abcde")

GOOD = StepRecord(GOOD_SHA, 0, "GOOD: initial kernels", Samples((10.0, 10.1, 9.9, 10.05, 9.95)), CommitVerdict.GOOD)
BAD = StepRecord(BAD_SHA, 4, "refactor step 4", Samples((10.5, 10.6, 10.4, 10.55, 10.45)), CommitVerdict.BAD)
CULPRIT_STEP = StepRecord(CULPRIT_SHA, 2, "shrink BLOCK_K | tile 64", Samples((10.52, 10.48, 10.5, 10.51)),
                          CommitVerdict.BAD, position=0.98, interval=Interval(2.4, 1.9, 2.9), rounds=2, against=(0, 4),
                          seconds=1.5, reason="2 rounds, likelihood ratio e^+7.0 for bad")
GOOD_STEP = StepRecord(FIRST_SHA, 1, "refactor step 1", Samples((10.0, 10.02, 9.98, 10.01), failures=1),
                       CommitVerdict.GOOD, position=0.01, interval=Interval(-2.4, -2.9, -1.9), rounds=2, against=(0, 2),
                       seconds=1.4, reason="2 rounds, likelihood ratio e^-7.0 for bad")
BASELINE = PairCheck("real", "GOOD -> BAD +5.00% [+4.25%, +5.75%] (99.5% interval, 6 rounds)",
                     Interval(5.0, 4.25, 5.75, 0.995), rounds=6, seconds=3.0)
CHECK = PairCheck("real", "step +5.00% [+4.50%, +5.50%] (99.5% interval, 4 rounds)", Interval(5.0, 4.5, 5.5, 0.995),
                  rounds=4, failed_rounds=1, seconds=2.0)

CULPRIT = BisectResult(
    status="culprit", message=f"first bad commit: {CULPRIT_SHA[:12]} shrink BLOCK_K | tile 64",
    good=GOOD, bad=BAD, steps=(CULPRIT_STEP, GOOD_STEP), commits_total=4,  # in the order they were decided
    culprit={"sha": CULPRIT_SHA, "subject": "shrink BLOCK_K | tile 64", "author": "Synth Author <synth@example.com>",
             "date": "2026-11-29T12:00:00+00:00"},
    culprit_diffstat=" base.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
    candidates=(CULPRIT_SHA,), best_guess=CULPRIT_SHA, baseline=BASELINE, culprit_check=CHECK,
    metric="last number on stdout", min_effect_pct=2.0, bench_runs=60, seconds=9.4,
    bisect_log="git bisect start\n# first bad commit: [" + CULPRIT_SHA + "]", warnings=("a worktree was kept",),
)

UNSURE_STEP = replace(CULPRIT_STEP, verdict=CommitVerdict.UNSURE, position=0.55, reason="40 rounds: undecided")
UNDECIDED = BisectResult(
    status="undecided", message=f"the slowdown is in {FIRST_SHA[:12]}..{BAD_SHA[:12]} (4 commits): a probe stayed "
                                f"unsure within its budget", good=GOOD, bad=BAD, steps=(UNSURE_STEP,), commits_total=4,
    candidates=(FIRST_SHA, CULPRIT_SHA, THIRD_SHA, BAD_SHA), best_guess=THIRD_SHA, baseline=BASELINE,
    advice=("more runs: 1 commit(s) stayed unsure within --budget 300 s (#2); raise --budget",
            "a quieter machine: paired rounds cancel the machine's slow swings, not the scatter between one run and "
            "the next"), metric="last number on stdout", bench_runs=200, seconds=310.0,
    notes=("your uncommitted changes stay as they are in your tree: the bench measures the committed code of each "
           "commit",),
)

SKIPPED_STEP = StepRecord(CULPRIT_SHA, 2, "broken bench", Samples((), failures=2), CommitVerdict.SKIP, rounds=1,
                          reason="bench exited 1: this commit's bench is broken")
ALL_SKIPPED = BisectResult(
    status="all-skipped", message="every commit between the last good and the first bad one was skipped; ...",
    good=GOOD, bad=BAD, steps=(GOOD_STEP, SKIPPED_STEP), commits_total=4,
    candidates=(CULPRIT_SHA, THIRD_SHA, BAD_SHA), baseline=BASELINE,
    metric="column 'median_us' of case 'gemv' in r.csv", bench_runs=15,
)


def test_text_report_of_a_culprit_reads_exactly_so():
    assert render_text(CULPRIT) == f"""\
first bad commit: {CULPRIT_SHA}
  subject: shrink BLOCK_K | tile 64
  author:  Synth Author <synth@example.com>
  date:    2026-11-29T12:00:00+00:00
  step at this commit, paired against its parent: +5.00% (99.5% interval +4.50% .. +5.50%), 4 paired rounds, \
1 with a failed run left out, 2 s
GOOD -> BAD change, paired: +5.00% (99.5% interval +4.25% .. +5.75%), 6 paired rounds, 3 s
metric: last number on stdout (lower is better); 60 bench runs, 9 s this session

 base.txt | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

   #  commit        rounds  runs  fail      median    pos  verdict / subject
   0  aaaaaaaaaaaa             5     0          10         GOOD (endpoint)  GOOD: initial kernels
   1  bbbbbbbbbbbb       2     4     1      10.005   0.01  good  refactor step 1
   2  cccccccccccc       2     4     0      10.505   0.98  bad  <- first bad  shrink BLOCK_K | tile 64
   4  eeeeeeeeeeee             5     0        10.5         BAD (endpoint)  refactor step 4
warning: a worktree was kept
"""


def test_an_undecided_report_names_the_range_the_best_guess_and_what_would_decide_it():
    text = render_text(UNDECIDED)
    lines = text.splitlines()
    assert lines[0] == UNDECIDED.message
    assert lines[1] == f"candidates (4): {FIRST_SHA[:12]} {CULPRIT_SHA[:12]} {THIRD_SHA[:12]} {BAD_SHA[:12]}"
    assert lines[2] == f"best guess: {THIRD_SHA}"
    assert "what would decide it:" in lines and "  - " + UNDECIDED.advice[0] in lines
    assert f"note: {UNDECIDED.notes[0]}" in lines
    assert "first bad commit:" not in text and "<- first bad" not in text
    row = next(line for line in lines if line.startswith("   2  cccccccccccc"))
    assert row.endswith("unsure  shrink BLOCK_K | tile 64")
    assert lines[lines.index(row) + 1] == "      unsure: 40 rounds: undecided"
    md = render_markdown(UNDECIDED)
    assert "- what would decide it:" in md and "- - more runs" in md.replace("  - ", "- - ")


def test_text_report_of_an_all_skipped_range_gives_the_reason():
    text = render_text(ALL_SKIPPED)
    lines = text.splitlines()
    assert lines[0] == ALL_SKIPPED.message
    assert "best guess" not in text
    assert "metric: column 'median_us' of case 'gemv' in r.csv (lower is better); 15 bench runs" in text
    skipped_row = lines.index(next(line for line in lines if line.startswith("   2  cccccccccccc")))
    assert lines[skipped_row].split()[1:5] == ["cccccccccccc", "1", "0", "2"]
    assert lines[skipped_row + 1] == f"{'':>4}  skip: {SKIPPED_STEP.reason}"


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
    assert rows[2] == ("| 2 | `cccccccccccc` | 2 | 4 | 0 | 10.505 | 0.98 | bad  <- first bad | "
                       "shrink BLOCK_K \\| tile 64 |")


def test_json_report_carries_every_number():
    doc = json.loads(render_json(CULPRIT))
    assert doc["status"] == "culprit" and doc["exit_code"] == EXIT_OK
    assert doc["culprit"] == {**CULPRIT.culprit, "diffstat": CULPRIT.culprit_diffstat}
    assert doc["culprit_interval"] == {"estimate_pct": 5.0, "low_pct": 4.5, "high_pct": 5.5, "confidence": 0.995}
    assert doc["step_interval"] == {"estimate_pct": 5.0, "low_pct": 4.25, "high_pct": 5.75, "confidence": 0.995}
    assert doc["baseline"]["status"] == "real" and doc["baseline"]["rounds"] == 6
    assert doc["culprit_check"] == {"status": "real", "message": CHECK.message, "interval": doc["culprit_interval"],
                                    "rounds": 4, "failed_rounds": 1, "seconds": 2.0, "rounds_needed": None}
    assert [s["sha"] for s in doc["steps"]] == [CULPRIT_SHA, FIRST_SHA]  # decision order, as the run went
    assert doc["steps"][1] == {"sha": FIRST_SHA, "order": 1, "subject": "refactor step 1",
                               "samples": [10.0, 10.02, 9.98, 10.01], "failures": 1, "median": pytest.approx(10.005),
                               "verdict": "good", "position": 0.01,
                               "interval": {"estimate_pct": -2.4, "low_pct": -2.9, "high_pct": -1.9,
                                            "confidence": 0.95},
                               "rounds": 2, "against": [0, 2], "seconds": 1.4, "reason": GOOD_STEP.reason}
    assert doc["good"]["verdict"] == "good" and doc["bad"]["median"] == 10.5
    assert doc["warnings"] == ["a worktree was kept"] and doc["bisect_log"] == CULPRIT.bisect_log
    assert doc["min_effect_pct"] == 2.0 and doc["best_guess"] == CULPRIT_SHA
    undecided = json.loads(render_json(UNDECIDED))
    assert undecided["culprit"] is None and undecided["best_guess"] == THIRD_SHA
    assert undecided["advice"] == list(UNDECIDED.advice) and undecided["exit_code"] == EXIT_INCONCLUSIVE


@pytest.mark.parametrize("status, exit_code", [
    ("culprit", EXIT_OK), ("undecided", EXIT_INCONCLUSIVE), ("all-skipped", EXIT_USAGE),
    ("no-difference", EXIT_INCONCLUSIVE), ("swapped", EXIT_INCONCLUSIVE),
])
def test_exit_code_follows_the_status_in_the_json_too(status, exit_code):
    result = replace(CULPRIT, status=status)
    assert result.exit_code == exit_code
    assert json.loads(render_json(result))["exit_code"] == exit_code


def test_no_difference_has_no_culprit_and_every_renderer_says_why():
    check = PairCheck("below-floor", "GOOD -> BAD +0.10% [-0.50%, +0.70%] (99.5% interval, 6 rounds): no slowdown "
                                     "past --min-effect 2%", Interval(0.1, -0.5, 0.7, 0.995), 6)
    result = BisectResult(status="no-difference", message=check.message, good=GOOD, bad=BAD, commits_total=4,
                          baseline=check, metric="last number on stdout", bench_runs=24)
    doc = json.loads(render_json(result))
    assert doc["culprit"] is None and doc["culprit_interval"] is None and doc["steps"] == []
    for name, render in RENDERERS.items():
        out = render(result)
        assert result.message in out, name
        assert "first bad" not in out, name


def test_plot_marks_the_best_guess_of_an_undecided_bisect(tmp_path):
    plot(UNDECIDED, tmp_path / "u.png")
    plot(CULPRIT, tmp_path / "c.png")
    assert (tmp_path / "u.png").stat().st_size > 5_000 and (tmp_path / "c.png").stat().st_size > 5_000
