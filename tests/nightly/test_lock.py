"""Two nights in one checkout take turns at confirm and bisect instead of one failing as bad input.

On a 2-GPU H200 host, decode and prefill nights side by side in one checkout
(benchmarks/gpu/nightly_demo.sh) had prefill's confirm refused: decode's
confirm journal was in the repository ("an earlier perfci confirm did not finish").
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.bisect.synth import git
from perfci.nightly.stages import CHECKOUT_LOCK, checkout_lock

HOLD = """\
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
"""


def test_a_second_night_waits_for_the_checkout_and_says_so(repo, tmp_path, capsys):
    lock_path = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")) / CHECKOUT_LOCK
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_path), "2"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with checkout_lock(repo):
            waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert waited > 1.0  # it waited for the holder's 2 s, instead of going on (or failing)
    assert "waiting for another perfci nightly's confirm or bisect" in capsys.readouterr().err


def test_the_lock_is_the_repositorys_even_from_a_worktree(repo, tmp_path, capsys):
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(worktree))
    with checkout_lock(repo):
        # A night in the worktree finds the same lock held (a second FileLock object would wait).
        from filelock import FileLock, Timeout

        common = Path(git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        try:
            FileLock(str(common / CHECKOUT_LOCK)).acquire(timeout=0.2)
            raised = False
        except Timeout:
            raised = True
    assert raised
    with checkout_lock(worktree):  # and free again afterwards, without waiting
        pass
    assert "waiting" not in capsys.readouterr().err
