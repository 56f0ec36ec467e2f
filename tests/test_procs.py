"""A command's process group ends with it: when it exits, at its timeout or a budget's end, on an interrupt."""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from perfci.benchcmd import DEFAULT_TIMEOUT_S, BenchSpec, Deadline, bench_once, run_command
from perfci.benchmetric import MetricSpec
from perfci.procs import kill_process_group, wait_group
from tests.proc_util import wait_until_dead


def pids(path: Path, count: int, timeout: float = 10.0) -> list[int]:
    """The pids a command wrote to ``path``, one a line, once ``count`` are there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().split() if path.exists() else []
        if len(lines) >= count:
            return [int(p) for p in lines]
        time.sleep(0.02)
    raise AssertionError(f"{path}: {count} pids never written")


def group(line: str, tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen(line, shell=True, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL)


@pytest.fixture
def alarm():
    """``alarm(s)``: a KeyboardInterrupt in the main thread after s seconds, as Ctrl-C would raise."""
    def interrupt(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_a_background_child_is_killed_when_the_command_exits_and_its_pipe_is_not_waited_for(tmp_path):
    started = time.monotonic()
    result = run_command("sleep 3334 & echo $!; echo done", tmp_path)
    child = int(result.stdout.split()[0])
    assert result.ok and result.stdout.split()[1] == "done"
    assert wait_until_dead(child, timeout=1.0), "the bench's background child outlived it"
    assert time.monotonic() - started < 10.0  # not held by the child's copy of stdout


def test_a_hung_command_ignoring_sigterm_is_killed_with_its_children_at_the_timeout(tmp_path):
    proc = group(f"trap '' TERM; sleep 3334 & echo $! > {tmp_path}/pids; echo $$ >> {tmp_path}/pids; wait",
                 tmp_path)
    started = time.monotonic()
    assert wait_group(proc, timeout_s=0.5, grace_s=0.5) is None
    assert time.monotonic() - started < 10.0
    assert all(wait_until_dead(pid, timeout=1.0) for pid in pids(tmp_path / "pids", 2))


def test_an_interrupt_while_waiting_kills_the_group(tmp_path, alarm):
    proc = group(f"sleep 3334 & echo $! > {tmp_path}/pids; wait", tmp_path)
    (child,) = pids(tmp_path / "pids", 1)
    alarm(0.3)
    with pytest.raises(KeyboardInterrupt):
        wait_group(proc, timeout_s=None, grace_s=0.5)
    assert wait_until_dead(child, timeout=1.0) and wait_until_dead(proc.pid, timeout=1.0)


def test_a_second_interrupt_during_the_grace_still_ends_the_group(tmp_path, alarm):
    proc = group(f"trap '' TERM; sleep 3334 & echo $! > {tmp_path}/pids; wait", tmp_path)
    (child,) = pids(tmp_path / "pids", 1)
    alarm(0.2)  # arrives while the group has its 2 s of grace after SIGTERM
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        kill_process_group(proc.pid, grace_s=2.0, leader=proc)
    assert time.monotonic() - started >= 1.5  # the grace was not cut short
    assert wait_until_dead(child, timeout=1.0) and wait_until_dead(proc.pid, timeout=1.0)


def test_a_run_in_flight_is_stopped_at_the_budget_s_end_as_a_failed_run(tmp_path):
    started = time.monotonic()
    result = run_command("sleep 3334", tmp_path, timeout=60, deadline=Deadline(time.monotonic() + 0.5, "--budget 9 s"))
    assert result.returncode is None and time.monotonic() - started < 15.0
    assert result.failure_reason("bench") == "bench stopped after 0.5s: the --budget 9 s ran out"


def test_a_budget_s_end_gives_a_grace_of_a_tenth_at_least_a_second():
    now = time.monotonic()
    assert Deadline.after(20, "x", start=now).at == pytest.approx(now + 22)
    assert Deadline.after(2, "x", start=now).at == pytest.approx(now + 3)


def test_a_bench_run_has_a_timeout_by_default_and_none_starts_once_the_budget_is_spent(tmp_path):
    spec = BenchSpec(("sh", "-c", "echo 1"), None, MetricSpec())
    assert spec.timeout == DEFAULT_TIMEOUT_S == 1800
    outcome = bench_once(spec, tmp_path, {}, Deadline(time.monotonic() - 1, "--total-budget 20 s"))
    assert outcome.value is None and outcome.reason == "not run: the --total-budget 20 s ran out"
    assert bench_once(spec, tmp_path, {"PATH": "/usr/bin:/bin"}).value == 1.0


def test_a_bench_that_prints_its_metric_then_hangs_is_a_failed_run_not_a_measurement(tmp_path):
    spec = BenchSpec(("echo 5; sleep 3334",), None, MetricSpec(), timeout=0.5)
    outcome = bench_once(spec, tmp_path, {"PATH": "/usr/bin:/bin"})
    assert outcome.value is None and "timed out after 0.5s" in outcome.reason
