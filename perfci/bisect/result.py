"""From what the search measured to the report's data: the verdict, its numbers, and what would decide it.

Pure but for ``describe``, which the session passes in to ask git about the culprit.
"""
from __future__ import annotations

from typing import Callable, Sequence

from perfci.bisect.core import BisectResult, CommitVerdict, PairCheck, StepRecord, conclude
from perfci.bisect.rules import StepStatus
from perfci.bisect.search import BisectConfig, Measurer, Outcome


def to_result(cfg: BisectConfig, out: Outcome, good: str, bad: str, commits: Sequence[str], measurer: Measurer,
              describe: Callable[[str], tuple[dict, str]]) -> BisectResult:
    """The report's data: the verdict, the numbers behind it, and what would decide it when it is undecided.

    ``describe(sha)`` gives the culprit's (commit info, diff stat) from git.
    """
    subjects = measurer.subjects
    good_rec = StepRecord(good, 0, subjects.get(good, ""), measurer.samples(good), CommitVerdict.GOOD)
    bad_rec = StepRecord(bad, len(commits), subjects.get(bad, ""), measurer.samples(bad), CommitVerdict.BAD)
    common = dict(good=good_rec, bad=bad_rec, commits_total=len(commits), baseline=out.baseline.check,
                  metric=cfg.bench.metric.description if cfg.bench is not None else "",
                  higher_is_better=cfg.higher_is_better, min_effect_pct=cfg.min_effect_pct,
                  bench_runs=measurer.bench_runs, seconds=out.seconds)
    status = out.baseline.decision.status
    if out.state is None:
        if status == StepStatus.UNRESOLVED:
            # Not "no difference": the budget ended before GOOD -> BAD was resolved either way,
            # so a slowdown, if there is one, is anywhere in the range.
            return BisectResult(status="undecided", message=f"GOOD -> BAD not resolved: {out.baseline.check.message}",
                                candidates=tuple(commits), advice=_advice_for_pair(cfg, out.baseline.check,
                                                                                   "GOOD -> BAD"), **common)
        return BisectResult(status="swapped" if status == StepStatus.SWAPPED else "no-difference",
                            message=out.baseline.check.message, **common)
    skipped = tuple(r.sha for r in out.steps if r.verdict == CommitVerdict.SKIP)
    check = out.culprit_check.check if out.culprit_check else None
    c = conclude(out.state, check, skipped, out.leans, out.stopped)
    steps = tuple(out.steps)
    if c.status == "culprit":
        info, diffstat = describe(c.culprit)
        return BisectResult(status="culprit", message=f"first bad commit: {c.culprit[:12]} {info['subject']}",
                            steps=steps, culprit=info, culprit_diffstat=diffstat, candidates=c.candidates,
                            best_guess=c.best_guess, culprit_check=check, **common)
    advice = _advice(cfg, out, c.status)
    return BisectResult(status=c.status, message=c.message, steps=steps, candidates=c.candidates,
                        best_guess=c.best_guess, culprit_check=check, advice=advice, **common)


def _pace(check: PairCheck) -> float | None:
    total = check.rounds + check.failed_rounds
    return check.seconds / total if total and check.seconds > 0 else None


def _advice_for_pair(cfg: BisectConfig, check: PairCheck, what: str) -> tuple[str, ...]:
    out = []
    pace = _pace(check)
    if check.rounds_needed and check.rounds_needed > check.rounds:
        seconds = f" (about {check.rounds_needed * pace:.0f} s at this bench's pace: --budget " \
                  f"{max(cfg.budget_s, check.rounds_needed * pace * 1.2):.0f})" if pace else ""
        out.append(f"more runs: {what} needs about {check.rounds_needed} paired rounds at the spread seen, "
                   f"it got {check.rounds}{seconds}")
    elif check.interval is not None:
        out.append(f"more runs: {what} was not resolved in {check.rounds} rounds; raise --budget (now "
                   f"{cfg.budget_s:g} s a decision)")
    out.append("a quieter machine: paired rounds cancel the machine's slow swings, not the scatter between "
               "one run and the next")
    return tuple(out)


def _advice(cfg: BisectConfig, out: Outcome, status: str) -> tuple[str, ...]:
    if status == "all-skipped":
        return ("fix the build or the bench at the skipped commits (their reasons are in the table)",)
    advice: list[str] = []
    if "--total-budget" in out.stopped:
        advice.append(f"more time: {out.stopped}; raise it, or leave it out")
    if out.culprit_check is not None and out.culprit_check.decision.status == StepStatus.UNRESOLVED:
        advice += _advice_for_pair(cfg, out.culprit_check.check, "the culprit's own step")
    unsure = [r for r in out.steps if r.verdict == CommitVerdict.UNSURE]
    if unsure:
        advice.append(f"more runs: {len(unsure)} commit(s) stayed unsure within --budget {cfg.budget_s:g} s "
                      f"({', '.join('#' + str(r.order) for r in unsure[:5])}); raise --budget")
        if not any(a.startswith("a quieter") for a in advice):
            advice.append("a quieter machine: paired rounds cancel the machine's slow swings, not the scatter "
                          "between one run and the next")
    if out.state is not None and out.state.contradictions:
        advice.append("run the bisect again with a larger --budget: a verdict in the bracket was wrong")
    if out.culprit_check is not None and out.culprit_check.decision.status == StepStatus.BELOW_FLOOR:
        advice.append("the step is not between these two commits: a decision that bracketed them was wrong, or "
                      "the slowdown came in small steps; rerun with a larger --budget, or bisect again inside "
                      "GOOD..BAD with a lower --min-effect")
    return tuple(advice)
