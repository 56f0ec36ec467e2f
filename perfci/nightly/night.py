"""One night, stage by stage: run each, record its outcome, decide, write the reports.

A stage that raises never ends the night early without a report: a
:class:`~perfci.errors.PerfciError` is a failed stage with ``error: input``,
any other exception one with ``error: internal`` (exit 4, never 1), an
interrupt one with ``error: interrupted``. The stages that depend on a failed
one are recorded as skipped, saying why; summary.md, issue.md and verdict.json
are written in every case. The canary and report stages only inform
(:data:`perfci.nightly.core.INFORMING_STAGES`): what they meet, and what the
reports meet while being drawn and written, is a warning in them, so a red
night exits 1 whatever its report stage meets.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import replace
from typing import Callable, TextIO

from perfci.compile import ratchet
from perfci.errors import EXIT_REGRESSION, PerfciError, internal_error_line
from perfci.escape import md_text
from perfci.files import atomic_write_text
from perfci.history.store import add_verdict
from perfci.nightly import canary, core, render, stages, tonight
from perfci.nightly.loaded import Store
from perfci.nightly.state import Night, NightConfig, StageOutcome, TonightResult, Unfinished

Fault = Callable[[str], None]  # the tests' seam: called with each stage's name as it starts


# Each stage as the runner calls it: the stage's function (looked up in its module at each call, so a
# test may replace it there) given what the earlier stages produced, and its result kept on the Night.
# A stage that fails with part of its result (Unfinished) has that part kept too (_run).


def _tonight(n: Night) -> StageOutcome:
    n.project = tonight.checkout(n.cfg)  # kept when what follows fails: the compile diff works in it
    n.project, config = tonight.project(n.cfg, n.project)
    done = tonight.tonight(n.cfg, n.project, n.log)
    n.tonight = done.result
    n.sources = tonight.sources(n.cfg, config, n.project, _results(n), n.log)
    n.store = Store(n.sources.store)
    return done


def _baseline(n: Night) -> StageOutcome:
    return stages.baseline(n.cfg, n.project, _results(n), n.sources, n.store, n.log)


def _keep_judged(n: Night, judged) -> None:
    n.judged = judged


def _gate(n: Night) -> StageOutcome:
    return stages.gate(n.cfg, _results(n), n.judged)


def _canary(n: Night) -> StageOutcome:
    return canary.canary(n.cfg, n.project, _results(n), n.sources, n.store, n.log)


def _keep_canary(n: Night, result) -> None:
    n.canary = result


def _confirm(n: Night) -> StageOutcome:
    return stages.confirm(n.cfg, n.project, _results(n), n.judged, n.started, n.log)


def _keep_confirmation(n: Night, confirmation) -> None:
    n.confirmation = confirmation


def _bisect(n: Night) -> StageOutcome:
    return stages.bisect(n.cfg, n.project, _results(n), n.judged, n.confirmation, n.started, n.log)


def _keep_culprit(n: Night, found) -> None:
    if isinstance(found, str):  # bisect's GOOD -> BAD denied the step confirm called
        n.bisect_denied = found
    else:
        n.culprit = found


def _history(n: Night) -> StageOutcome:
    return stages.history(_results(n), n.store, n.canary, n.log)


def _keep_appended(n: Night, appended) -> None:
    n.history_appended = appended


def _report(n: Night) -> StageOutcome:
    return stages.trends(n.cfg, n.store, n.confirmation.flagged, n.log)


def _results(n: Night) -> TonightResult:
    """Tonight's results, as stage tonight read them (every later stage needs them)."""
    if n.tonight is None:
        raise RuntimeError("tonight's results were not read")
    return n.tonight


Keep = Callable[[Night, object], None]
# (name, the stage, where its result is kept: None when nothing later reads it)
STAGE_FUNCS: tuple[tuple[str, Callable[[Night], StageOutcome], Keep | None], ...] = (
    ("tonight", _tonight, None), ("baseline", _baseline, _keep_judged), ("gate", _gate, None),
    ("canary", _canary, _keep_canary), ("confirm", _confirm, _keep_confirmation),
    ("bisect", _bisect, _keep_culprit), ("history", _history, _keep_appended), ("report", _report, None),
)
# A stage is skipped when one it depends on failed.
NEEDS = {"baseline": ("tonight",), "gate": ("tonight", "baseline"), "canary": ("tonight",),
         "confirm": ("tonight", "baseline"),
         "bisect": ("tonight", "baseline", "confirm"), "history": ("tonight", "baseline"), "report": ("tonight",)}
REPORTS = ("summary.md", "issue.md", "verdict.json")


def run_night(cfg: NightConfig, fault: Fault | None = None, echo: TextIO | None = None,
              compile_baseline: str | None = None) -> tuple[core.Outcome, core.NightVerdict]:
    """Every stage in order, then the reports in ``cfg.out``; returns what was decided.

    ``compile_baseline``: a directory of ``perfci compile`` resources files; the compile
    diff is added to the reports (:func:`_compile_diff`), never to the decision. Nothing
    the reports meet (a plot, the compile diff, rendering, writing) changes the exit
    code: it becomes a warning in them (:func:`_write_reports`).
    """
    echo = echo or sys.stderr
    night = Night(cfg)
    done: list[core.Stage] = []
    for name, func, keep in STAGE_FUNCS:
        why = _skip_because(name, done)
        stage = core.Stage(name, core.SKIPPED, why) if why else _run(name, func, keep, night, fault)
        done.append(stage)
        _say(stage, echo)
    night.log.files.extend(REPORTS)
    outcome = night.outcome(done)
    decision = core.judge_night(outcome)
    sections: tuple[str, ...] = ()
    more: dict = {"bench_timeout_s": cfg.bench_timeout_s}  # the limit every bench run of the night had
    if compile_baseline:
        section, record, warning = _compile_diff(cfg, night, outcome, compile_baseline, echo)
        sections = (section,)
        more["compile"] = record
        if warning:
            decision = replace(decision, warnings=decision.warnings + (warning,))
    decision = _record_verdict(night, outcome, decision)
    return outcome, _write_reports(cfg, outcome, decision, sections, more, echo)


def _record_verdict(night: Night, outcome: core.Outcome, decision: core.NightVerdict) -> core.NightVerdict:
    """Tonight's exit code beside its run in the store, so a later night confirms against the last good
    one (:func:`perfci.nightly.core.last_good`); a failure to write it is a warning, never the exit code."""
    if not outcome.history_appended or night.store.path is None or night.tonight is None:
        return decision
    try:
        add_verdict(night.store.path, night.tonight.run_id, decision.exit_code, decision.headline)
    except PerfciError as err:
        return replace(decision, warnings=decision.warnings + (f"tonight's verdict not recorded: {err.message}",))
    return decision


def _write_reports(cfg: NightConfig, outcome: core.Outcome, decision: core.NightVerdict,
                   sections: tuple[str, ...], more: dict, echo: TextIO) -> core.NightVerdict:
    """summary.md, issue.md and verdict.json, whatever rendering meets; returns the decision they carry.

    A report that cannot be rendered is written in brief (the exit code, the
    verdict line, the warnings) and said as a warning in all three; one that
    cannot be written is said on stderr. The exit code is never touched.
    """
    renderers = (("summary.md", lambda d: render.summary_md(outcome, d, sections)),
                 ("issue.md", lambda d: render.issue_md(outcome, d, sections)),
                 ("verdict.json", lambda d: render.verdict_json(outcome, d, more)))
    texts: dict[str, str] = {}
    broken: dict[str, str] = {}
    for name, draw in renderers:
        try:
            texts[name] = draw(decision)
        except Exception as err:  # noqa: BLE001 - a report that cannot be drawn is a warning, not the night
            broken[name] = internal_error_line(err)
    if broken:
        decision = replace(decision, warnings=decision.warnings + tuple(
            f"{name} could not be rendered ({why}); written in brief" for name, why in broken.items()))
        for name, draw in renderers:
            try:
                texts[name] = draw(decision) if name not in broken else render.brief(name, outcome, decision)
            except Exception:  # noqa: BLE001
                texts[name] = render.brief(name, outcome, decision)
    for name, text in texts.items():
        try:
            atomic_write_text(cfg.out / name, text)
        except Exception as err:  # noqa: BLE001 - the exit code still says what the night found
            echo.write(f"perfci nightly: warning: {name} not written: {internal_error_line(err)}\n")
    return decision


def _compile_diff(cfg: NightConfig, night: Night, outcome: core.Outcome, baseline: str,
                  echo: TextIO) -> tuple[str, dict, str]:
    """The compile diff beside the timing verdicts: (a section of summary.md and issue.md, ``compile`` in
    verdict.json, a warning or ""), and compile.json. Informational: the night's exit code stays."""
    started = time.monotonic()
    warning = ""
    try:
        data = ratchet.run(night.project.suite_word or cfg.suite, baseline, night.project.repo_root or os.getcwd())
        rows = ratchet.behind(data, [(c.key, c.verdict) for c in outcome.cases or ()], outcome.arch)
        section = ratchet.markdown(data, rows)
        record = {"baseline": baseline, "exit_code": data["exit_code"], "failing": data.get("failing", 0),
                  "behind": rows, "file": "compile.json"}
        atomic_write_text(cfg.out / "compile.json", json.dumps(data, indent=2) + "\n")
        said = f"{record['failing']} case(s) worse than {baseline}"
    except Exception as err:  # noqa: BLE001 - a compile diff that could not be made is a line, not a verdict
        why = err.message if isinstance(err, PerfciError) else internal_error_line(err)
        said = f"not diffed against {baseline}: {why}"
        # The baseline is the user's path, the reason a child's last stderr line: shown, never live.
        section = f"#### Compiled resources\n\n{md_text(said)}\n"
        record = {"baseline": baseline, "error": why}
        warning = f"compile diff {said}"
    echo.write(f"perfci nightly: compile: {said} [{time.monotonic() - started:.1f} s]\n")
    echo.flush()
    return section, record, warning


def _skip_because(name: str, done: list[core.Stage]) -> str:
    by_name = {s.name: s for s in done}
    if any(s.error == core.INTERRUPTED for s in done):
        return "interrupted"
    for need in NEEDS.get(name, ()):
        stage = by_name.get(need)
        if stage is not None and stage.status == core.FAILED:
            return f"stage {need} failed"
    return ""


def _run(name: str, func: Callable[[Night], StageOutcome], keep: Keep | None, night: Night,
         fault: Fault | None) -> core.Stage:
    """One stage: its outcome as a core.Stage, and its result (or the part an Unfinished carries) kept."""
    started = time.monotonic()
    try:
        if fault is not None:
            fault(name)
        done = func(night)
    except Unfinished as unfinished:
        if keep is not None:
            keep(night, unfinished.result)
        return _failed(name, unfinished.cause, started)
    except (Exception, KeyboardInterrupt) as err:
        return _failed(name, err, started)
    if keep is not None and done.result is not None:
        keep(night, done.result)
    return core.Stage(name, done.status, done.detail, time.monotonic() - started)


def _failed(name: str, err: BaseException, started: float) -> core.Stage:
    """What a stage raised, as its failure: bad input, nothing measured, an interrupt, or an internal error."""
    if isinstance(err, PerfciError):
        why = core.NOTHING_MEASURED if err.exit_code == EXIT_REGRESSION else core.INPUT
        return core.Stage(name, core.FAILED, err.message, time.monotonic() - started, why)
    if isinstance(err, KeyboardInterrupt):
        return core.Stage(name, core.FAILED, "interrupted", time.monotonic() - started, core.INTERRUPTED)
    # a bug in a stage or a child that crashed: exit 4, never a verdict
    if os.environ.get("PERFCI_DEBUG", "") == "1":
        traceback.print_exception(err)
    return core.Stage(name, core.FAILED, internal_error_line(err), time.monotonic() - started, core.INTERNAL)


def _say(stage: core.Stage, echo: TextIO) -> None:
    """A progress line per stage; a failed input stage is left to the one error line at the end."""
    if stage.status == core.FAILED and stage.name in core.INPUT_STAGES and stage.error == core.INPUT:
        return
    if stage.status == core.SKIPPED and stage.detail.startswith("stage "):
        return  # follows from a failure already said
    what = f"failed ({stage.error})" if stage.status == core.FAILED else stage.status
    echo.write(f"perfci nightly: {stage.name}: {what}: {stage.detail} [{stage.seconds:.1f} s]\n")
    echo.flush()
