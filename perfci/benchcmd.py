"""Running a build or bench command, and reading one bench run's metric (``perfci bisect``, ``perfci confirm``).

Every command runs in its own session (process group), so a timeout or a
Ctrl-C kills the whole tree it started, not just the shell at its top. Where
the metric is in a run's output is :mod:`perfci.benchmetric`'s business.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from perfci.benchmetric import MetricError, MetricSpec, extract
from perfci.procs import kill_process_group

_KILL_GRACE_S = 2.0

# Commands running in worker threads (--jobs): an interrupt in the main thread
# kills their process groups through this registry.
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def kill_running() -> None:
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        kill_process_group(proc.pid)


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None  # None: killed after the timeout
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def failure_reason(self, what: str) -> str:
        if self.returncode is None:
            return f"{what} timed out after {self.seconds:.1f}s"
        tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
        return f"{what} exited {self.returncode}: {tail[0][:200]}"


def run_command(argv: Sequence[str] | str, cwd: Path, env: Mapping[str, str] | None = None,
                timeout: float | None = None) -> CommandResult:
    """Run ``argv`` (a list, or a shell string) in ``cwd`` with its own process group."""
    shell = isinstance(argv, str)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=str(cwd), env=dict(env) if env is not None else None, shell=shell,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, errors="replace", start_new_session=True,
    )
    with _running_lock:
        _running.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
        return CommandResult(proc.returncode, out, err, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        kill_process_group(proc.pid, grace_s=_KILL_GRACE_S, leader=proc)
        out, err = proc.communicate()
        return CommandResult(None, out or "", err or "", time.monotonic() - start)
    except BaseException:
        # Ctrl-C or SIGTERM reached us, not the child (it has its own session).
        kill_process_group(proc.pid, grace_s=_KILL_GRACE_S, leader=proc)
        raise
    finally:
        with _running_lock:
            _running.discard(proc)


@dataclass(frozen=True)
class BenchSpec:
    """Everything that decides what a measurement of one commit means."""

    command: tuple[str, ...]
    build: str | None
    metric: MetricSpec
    timeout: float | None = None

    @property
    def argv(self) -> Sequence[str] | str:
        # One word with spaces is a shell line the user quoted whole.
        if len(self.command) == 1 and any(c.isspace() for c in self.command[0]):
            return self.command[0]
        return list(self.command)

    def cache_key(self, sha: str) -> str:
        payload = json.dumps([sha, list(self.command), self.build, self.metric.cache_key()])
        return hashlib.sha256(payload.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RunOutcome:
    value: float | None
    reason: str = ""


def bench_once(spec: BenchSpec, cwd: Path, env: Mapping[str, str]) -> RunOutcome:
    """One bench run: its metric, or why it has none."""
    csv_path = cwd / spec.metric.csv_file if spec.metric.csv_file else None
    before = csv_path.stat().st_mtime_ns if csv_path is not None and csv_path.exists() else None
    try:
        result = run_command(spec.argv, cwd, env, spec.timeout)
    except OSError as err:  # not found or not executable in this commit
        return RunOutcome(None, f"bench could not start: {err.strerror or err}")
    if not result.ok:
        return RunOutcome(None, result.failure_reason("bench"))
    if csv_path is not None and before is not None and csv_path.exists() and csv_path.stat().st_mtime_ns == before:
        # A CSV left by an earlier commit would silently stand in for this one.
        return RunOutcome(None, f"bench did not rewrite {spec.metric.csv_file}")
    try:
        return RunOutcome(extract(spec.metric, result.stdout, cwd))
    except MetricError as err:
        return RunOutcome(None, str(err))
