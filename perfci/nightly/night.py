"""One night, stage by stage: run each, record its outcome, decide, write the reports.

A stage that raises never ends the night early without a report: a
:class:`~perfci.errors.PerfciError` is a failed stage with ``error: input``,
any other exception one with ``error: internal`` (exit 4, never 1), an
interrupt one with ``error: interrupted``. The stages that depend on a failed
one are recorded as skipped, saying why; summary.md, issue.md and verdict.json
are written in every case.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Callable, TextIO

from perfci.errors import PerfciError, internal_error_line
from perfci.files import atomic_write_text
from perfci.nightly import core, render, stages, tonight
from perfci.nightly.state import Night, NightConfig

Fault = Callable[[str], None]  # the tests' seam: called with each stage's name as it starts

STAGE_FUNCS: tuple[tuple[str, Callable[[Night], tuple[str, str]]], ...] = (
    ("tonight", tonight.tonight), ("baseline", stages.baseline), ("gate", stages.gate),
    ("confirm", stages.confirm), ("bisect", stages.bisect), ("history", stages.history),
    ("report", stages.trends),
)
# A stage is skipped when one it depends on failed.
NEEDS = {"baseline": ("tonight",), "gate": ("tonight", "baseline"), "confirm": ("tonight", "baseline"),
         "bisect": ("tonight", "baseline", "confirm"), "history": ("tonight", "baseline"), "report": ("tonight",)}
REPORTS = ("summary.md", "issue.md", "verdict.json")


def run_night(cfg: NightConfig, fault: Fault | None = None, echo: TextIO | None = None,
              compile_baseline: str | None = None) -> tuple[core.Outcome, core.Decision]:
    """Every stage in order, then the reports in ``cfg.out``; returns what was decided.

    ``compile_baseline``: a directory of ``perfci compile`` resources files; the compile
    diff is added to the reports (:func:`_add_compile_diff`), never to the decision.
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
    decision = core.decide(outcome)
    for name, text in (("summary.md", render.summary_md(outcome, decision)),
                       ("issue.md", render.issue_md(outcome, decision)),
                       ("verdict.json", render.verdict_json(outcome, decision))):
        atomic_write_text(cfg.out / name, text)
    if compile_baseline:
        _add_compile_diff(cfg, night, outcome, compile_baseline, echo)
    return outcome, decision


def _add_compile_diff(cfg: NightConfig, night: Night, outcome: core.Outcome, baseline: str, echo: TextIO) -> None:
    """The compile diff beside the timing verdicts: a section of summary.md and issue.md, ``compile`` in
    verdict.json, compile.json. Informational: whatever happens here, the night's exit code stays."""
    import json

    from perfci.compile import ratchet

    started = time.monotonic()
    try:
        data = ratchet.run(night.suite_word or cfg.suite, baseline, night.repo_root or os.getcwd())
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
    try:
        for name in ("summary.md", "issue.md"):
            path = cfg.out / name
            atomic_write_text(path, path.read_text(encoding="utf-8") + "\n" + section)
        verdict = json.loads((cfg.out / "verdict.json").read_text(encoding="utf-8"))
        verdict["compile"] = record
        atomic_write_text(cfg.out / "verdict.json", json.dumps(verdict, indent=2) + "\n")
    except Exception as err:  # noqa: BLE001 - the reports as written stand
        said += f"; not added to the reports: {internal_error_line(err)}"
    echo.write(f"perfci nightly: compile: {said} [{time.monotonic() - started:.1f} s]\n")
    echo.flush()


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
        return core.Stage(name, core.FAILED, err.message, time.monotonic() - started, core.INPUT)
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
