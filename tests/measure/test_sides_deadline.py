"""A warm side's run ends at the session's budget (perfci/measure/sides.py, CaseRunner.run's deadline).

confirm --suite and bisect --suite measure in warm workers; a case that hangs there was given its
whole per-case timeout (600 s) whatever was left of the night's budget. Live on the CPU: a plain
callable that never returns.
"""
from __future__ import annotations

import time

from perfci.benchcmd import Deadline
from perfci.measure.sides import SuiteSpec, WarmSides
from perfci.model import CaseSpec

HANGS = """\
import time


def mm(a, b):  # a kernel that never returns
    time.sleep(3600)
"""


def test_a_hung_case_is_stopped_at_the_budget_and_the_rest_is_not_started(tmp_path):
    (tmp_path / "team.py").write_text(HANGS)
    cases = (CaseSpec("team:mm", 4, 8, 8, "fp32"), CaseSpec("team:mm", 8, 8, 8, "fp32"))
    spec = SuiteSpec("t", cases, device="cpu", repeats=1, iters=1, timeout_s=300.0)
    notes: list[str] = []
    with WarmSides(spec, notes.append) as sides:
        sides.open("cur", tmp_path)
        deadline = Deadline.after(2.0, "--budget 2 s")  # ends 3 s from now (its grace: 1 s)
        started = time.monotonic()
        run = sides.measure("cur", deadline=deadline)
        took = time.monotonic() - started
    assert run.values == {} and "ran out" in run.why_not, run
    assert took < 30, took  # not the case's 300 s
    assert any("4x8x8" in n and "no result after the --budget 2 s ran out" in n for n in notes), notes
    assert any("8x8x8" in n and "not run: the --budget 2 s ran out" in n for n in notes), notes


def test_without_a_deadline_a_case_keeps_its_own_timeout(tmp_path):
    (tmp_path / "team.py").write_text(HANGS)
    spec = SuiteSpec("t", (CaseSpec("team:mm", 4, 8, 8, "fp32"),), device="cpu", repeats=1, iters=1,
                     timeout_s=2.0)
    notes: list[str] = []
    with WarmSides(spec, notes.append) as sides:
        sides.open("cur", tmp_path)
        run = sides.measure("cur")
    assert run.values == {} and any("no result after 2 s; killed" in n for n in notes), notes
