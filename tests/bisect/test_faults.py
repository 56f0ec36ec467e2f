"""Signals at every phase: the user's tree must come back with nothing lost.

``fault="phase:SIGNAL"`` runs the bisect through tests/bisect/fault_entry.py,
whose pause hook makes the process signal itself the first time it reaches
``phase``. SIGINT and SIGTERM must restore on their own (exit 130); after
SIGKILL, ``perfci bisect --abort`` must.
"""
from __future__ import annotations

import signal
import subprocess
import time

import pytest

from perfci.bisect.search import PHASES
from tests.bisect.clihelp import (
    bisect_argv,
    bisect_env,
    default_sigint,
    parse_json,
    perfci,
)
from tests.bisect.synth import git, snapshot


# "restore" comes after a whole bisect: ~20 s on a loaded 2-core machine.
@pytest.mark.parametrize("phase", [pytest.param(p, marks=pytest.mark.slow) if p == "restore" else p for p in PHASES])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_signal_at_each_phase_loses_nothing(history_factory, phase, sig):
    h = history_factory(n_commits=8, culprit_index=5, legacy_until=4)
    before = snapshot(h.path)
    result = perfci(h.path, "--build", "true", h.good, h.bad, "--", "./bench.py", fault=f"{phase}:{sig}")
    if sig == "SIGKILL":
        assert result.returncode == -signal.SIGKILL, result.stderr
        journal = h.path / ".git" / "perfci-bisect" / "journal.json"
        assert journal.exists()
        aborted = perfci(h.path, "--abort")
        assert aborted.returncode == 0, aborted.stderr
        assert "restored" in aborted.stderr and not journal.exists()
    else:
        assert result.returncode == 130, result.stderr
        assert "Traceback" not in result.stderr
    assert snapshot(h.path) == before


@pytest.mark.slow  # two bisects, one killed: ~13 s on a loaded 2-core machine
def test_resume_after_sigkill_finds_the_culprit_without_remeasuring(history_factory, counter):
    h = history_factory(n_commits=24, culprit_index=17)
    before = snapshot(h.path)
    # A finished session first, so the cache holds another command's runs too.
    finished = perfci(h.path, h.good, h.bad, "--", "./bench.py", env=dict(counter.env))
    assert finished.returncode == 0
    runs_before = counter()
    # A second, killed session on a different bench command (no cache hits), then resumed.
    killed = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py", "--variant", env=counter.env,
                    fault="bench:SIGKILL")
    assert killed.returncode == -signal.SIGKILL
    resumed = perfci(h.path, "--resume", env=counter.env)
    assert resumed.returncode == 0, resumed.stderr
    assert parse_json(resumed.stdout)["culprit"]["sha"] == h.culprit
    assert snapshot(h.path) == before
    # Rerunning the finished resume measures nothing new.
    runs = counter()
    again = perfci(h.path, "--format", "json", h.good, h.bad, "--", "./bench.py", "--variant", env=counter.env)
    assert again.returncode == 0 and counter() == runs
    assert runs > runs_before


def test_sigkill_in_worktree_mode_then_abort_removes_worktrees(history_factory):
    h = history_factory(n_commits=10, culprit_index=6, legacy_until=3)
    before = snapshot(h.path)
    result = perfci(h.path, "--jobs", "2", "--gpus", "0,1", h.good, h.bad, "--", "./bench.py", fault="bench:SIGKILL")
    assert result.returncode == -signal.SIGKILL
    aborted = perfci(h.path, "--abort")
    assert aborted.returncode == 0, aborted.stderr
    assert snapshot(h.path) == before


def test_ctrl_c_from_outside_while_a_build_runs_restores(history_factory):
    """The user's own Ctrl-C, not the process's: it arrives while the session waits in a phase."""
    h = history_factory(n_commits=8, culprit_index=5)
    before = snapshot(h.path)
    proc = subprocess.Popen(bisect_argv("--build", "true", h.good, h.bad, "--", "./bench.py", fault="build:sleep"),
                            cwd=h.path, env=bisect_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    try:
        # GOOD's worktree comes first, for the endpoints; its build is where the session now sleeps.
        deadline = time.monotonic() + 60
        while git(h.path, "worktree", "list", "--porcelain").count("worktree ") < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        time.sleep(0.5)  # into the build's sleep, past the checkout
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert snapshot(h.path) == before
