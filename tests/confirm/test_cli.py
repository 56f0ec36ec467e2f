"""``perfci confirm`` as a user runs it, on synthetic git histories with a planted slowdown.

The bench (tests/bisect/synth.py) prints a time: the commit's base value times
1 + N(0, BENCH_NOISE), seeded per run, so every outcome here replays.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfci.confirm.analysis import NO_REFERENCE
from tests.bisect.synth import dirty_the_tree, git, make_history, snapshot

ROOT = Path(__file__).resolve().parents[2]


def confirm(repo: Path, *args: str, env: dict | None = None, timeout: float = 300):
    full = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", "perfci", "confirm", *args], cwd=repo, env=full,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def history(tmp_path):
    """GOOD, then 3 commits; the second makes the bench 3% slower."""
    return make_history(tmp_path / "repo", 3, culprit_index=2, step=0.03)


def noise(tmp_path, level="0.01"):
    return {"BENCH_NOISE": level, "BENCH_SEED_FILE": str(tmp_path / "seed.txt")}


def test_a_planted_3pct_step_is_confirmed_and_the_tree_is_untouched(history, tmp_path):
    dirty_the_tree(history.path)
    before = snapshot(history.path)
    proc = confirm(history.path, history.good, "HEAD", "--format", "json", "--", "./bench.py",
                   env=noise(tmp_path))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    (case,) = report["cases"]
    assert case["metric"] and case["verdict"] == "regressed"
    assert case["ci_low"] <= 1.03 <= case["ci_high"] and case["ci_low"] > 1.01
    assert report["summary"]["regressed"] == 1
    assert snapshot(history.path) == before  # tree, index, branch, stash and worktree list as they were


def test_two_revisions_with_the_same_bench_are_not_confirmed_slower(history, tmp_path):
    proc = confirm(history.path, history.commits[1], "HEAD", "--format", "json", "--", "./bench.py",
                   env=noise(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (case,) = json.loads(proc.stdout)["cases"]
    assert case["verdict"] in ("unchanged", "inconclusive") and case["ci_low"] < 1.0 + 0.01


def test_no_common_mode_is_the_default_and_a_cap_still_ends_the_session(history, tmp_path):
    proc = confirm(history.path, history.good, "HEAD", "--no-common-mode", "--min-rounds", "3", "--max-rounds", "3",
                   "--format", "json", "--", "./bench.py", env=noise(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["suite"]["reason"] == NO_REFERENCE and report["summary"]["rounds"] == 3
    assert report["summary"]["reference"] == {"cases": [], "used": False}
    assert "round 3: 12 bench runs" in proc.stderr and "s a round, ~" in proc.stderr  # the budget's estimate


@pytest.mark.parametrize("args, message", [
    (["nope", "HEAD", "--", "./bench.py"], "BASE 'nope' is not a commit"),
    (["HEAD", "HEAD", "--", "./bench.py"], "are the same commit"),
    (["HEAD~1", "HEAD", "./bench.py"], "put the bench command after '--'"),
    (["HEAD~1", "--min-rounds", "1", "--", "./bench.py"], "--min-rounds"),
    (["HEAD~1", "--min-rounds", "8", "--max-rounds", "6", "--", "./bench.py"], "--min-rounds"),
    (["HEAD~1", "--budget", "0", "--", "./bench.py"], "--budget"),
    (["HEAD~1", "--build-timeout", "-1", "--", "./bench.py"], "--build-timeout: -1 must be a positive number of seconds"),
    (["HEAD~1", "--reference", "kernel=torch_matmul", "--", "./bench.py"], "--reference names cases"),
    (["HEAD~1", "--reference", "M=x", "--results", "r.csv", "--", "./bench.py"], "--reference 'M=x'"),
    (["HEAD~1", "--reference", "kernel=a", "--no-common-mode", "--results", "r.csv", "--", "./bench.py"],
     "contradict"),
])
def test_bad_input_is_one_line_and_exit_2(history, args, message):
    proc = confirm(history.path, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_bench_that_fails_on_one_side_is_broken_there_exit_1_with_its_reason(tmp_path):
    history = make_history(tmp_path / "repo", 3, culprit_index=2, step=0.03, broken=(3,))
    proc = confirm(history.path, history.good, "HEAD", "--", "./bench.py", env=noise(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert "broken: metric: fails at CUR, measured at BASE: bench exited" in proc.stdout
    assert "every case broken (1): nothing left to measure" in proc.stderr
    assert git(history.path, "worktree", "list").count("\n") == 0  # only the main tree is left


def test_a_build_that_hangs_is_stopped_at_build_timeout_and_the_tree_is_untouched(history):
    dirty_the_tree(history.path)
    before = snapshot(history.path)
    started = time.monotonic()
    proc = confirm(history.path, history.good, "HEAD", "--build", "sleep 30", "--build-timeout", "1",
                   "--", "./bench.py")
    assert time.monotonic() - started < 25.0  # the hung build was not waited for
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"the build 'sleep 30' at base {history.good} ({history.good[:12]}) did not finish in 1 s " \
           f"(--build-timeout)" in proc.stderr
    assert snapshot(history.path) == before  # worktrees removed, tree, index and branch as they were


def test_a_killed_confirm_is_cleaned_up_by_abort(history, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **noise(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "perfci", "confirm", history.good, "--max-rounds", "40",
                             "--min-rounds", "40", "--", "./bench.py"], cwd=history.path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while git(history.path, "worktree", "list").count("\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # no cleanup can run: the journal says what to undo
    proc.wait()
    assert git(history.path, "worktree", "list").count("\n") == 2
    again = confirm(history.path, history.good, "--", "./bench.py")
    assert again.returncode == 2 and "perfci confirm --abort" in again.stderr
    done = confirm(history.path, "--abort")
    assert done.returncode == 0, done.stderr
    assert git(history.path, "worktree", "list").count("\n") == 0


def test_interrupt_removes_the_worktrees(history, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **noise(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "perfci", "confirm", history.good, "--max-rounds", "40",
                             "--min-rounds", "40", "--", "./bench.py"], cwd=history.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while git(history.path, "worktree", "list").count("\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert git(history.path, "worktree", "list").count("\n") == 0
    assert not (history.path / ".git" / "perfci-bisect" / "confirm-journal.json").exists()
