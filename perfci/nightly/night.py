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
from perfci.files import atomic_write_text
from perfci.nightly import canary, core, render, stages, tonight
from perfci.nightly.state import Night, NightConfig

Fault = Callable[[str], None]  # the tests' seam: called with each stage's name as it starts

STAGE_FUNCS: tuple[tuple[str, Callable[[Night], tuple[str, str]]], ...] = (
    ("tonight", tonight.tonight), ("baseline", stages.baseline), ("gate", stages.gate),
    ("canary", canary.canary), ("confirm", stages.confirm), ("bisect", stages.bisect), ("history", stages.history),
    ("report", stages.trends),
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
    for name, func in STAGE_FUNCS:
        why = _skip_because(name, done)
        stage = core.Stage(name, core.SKIPPED, why) if why else _run(name, func, night, fault)
        done.append(stage)
        _say(stage, echo)
    night.files.extend(REPORTS)
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
    return outcome, _write_reports(cfg, outcome, decision, sections, more, echo)


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
        data = ratchet.run(night.suite_word or cfg.suite, baseline, night.project.repo_root or os.getcwd())
        rows = ratchet.behind(data, [(c.key, c.verdict) for c in outcome.cases or ()], outcome.arch)
        section = ratchet.markdown(data, rows)
        record = {"baseline": baseline, "exit_code": data["exit_code"], "failing": data.get("failing", 0),
                  "behind": rows, "file": "compile.json"}
        atomic_write_text(cfg.out / "compile.json", json.dumps(data, indent=2) + "\n")
        said = f"{record['failing']} case(s) worse than {baseline}"
    except Exception as err:  # noqa: BLE001 - a compile diff that could not be made is a line, not a verdict
        why = err.message if isinstance(err, PerfciError) else internal_error_line(err)
        said = f"not diffed against {baseline}: {why}"
        section = f"#### Compiled resources\n\n{said}\n"
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


def _run(name: str, func: Callable[[Night], tuple[str, str]], night: Night, fault: Fault | None) -> core.Stage:
    started = time.monotonic()
    try:
        if fault is not None:
            fault(name)
        status, detail = func(night)
        return core.Stage(name, status, detail, time.monotonic() - started)
    except PerfciError as err:
        why = core.NOTHING_MEASURED if err.exit_code == EXIT_REGRESSION else core.INPUT
        return core.Stage(name, core.FAILED, err.message, time.monotonic() - started, why)
    except KeyboardInterrupt:
        return core.Stage(name, core.FAILED, "interrupted", time.monotonic() - started, core.INTERRUPTED)
    except Exception as err:  # a bug in a stage or a child that crashed: exit 4, never a verdict
        if os.environ.get("PERFCI_DEBUG", "") == "1":
            traceback.print_exc()
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
