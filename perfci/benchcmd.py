"""Running a build or bench command, and reading one bench run's metric (``perfci bisect``, ``perfci confirm``).

Every command runs in its own session (process group), so a timeout, the end
of a budget or a Ctrl-C kills the whole tree it started, not just the shell at
its top, and what it leaves running when it exits is killed then
(:func:`perfci.procs.wait_group`). A bench run has a timeout unless one is
given (:data:`DEFAULT_TIMEOUT_S`); a run that times out is a failed run. Where
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
from perfci.config import BUILD_TIMEOUT_S
from perfci.procs import KILL_GRACE_S, drain, kill_process_group, wait_group

# A bench run's limit unless --timeout says otherwise. A GPU bench run takes seconds to
# minutes (a whole `perfci run` on a GPU about 15 s, a confirm round of eight cases on an
# H200 about 15 s); half an hour is far past a healthy one, and still ends a hung run long
# before the CI job's own limit (6 hours on GitHub), which held the runner all that time.
DEFAULT_TIMEOUT_S = 1800.0
# The pipes are read to their end after the group is gone; a process that left the
# group (setsid) and keeps them open is not waited for longer than this.
_PIPE_WAIT_S = 5.0

# Commands running in worker threads (--jobs): an interrupt in the main thread
# kills their process groups through this registry.
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def kill_running() -> None:
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        kill_process_group(proc.pid)


def ran_out(what: str) -> str:
    """The words of a run a budget named ``what`` stopped or left unstarted: what says it, and what
    tells such a run (time ran out) from one that failed by itself."""
    return f"the {what} ran out"


@dataclass(frozen=True)
class Deadline:
    """When a budget ends (``time.monotonic()``), for the run still going then: it is stopped, a failed run.

    ``what`` names the budget in the failure's reason ("--total-budget 900 s").
    """

    at: float
    what: str

    @classmethod
    def after(cls, budget_s: float, what: str, start: float | None = None) -> "Deadline":
        """The budget's end plus a grace (a tenth of it, at least a second): a run that began just
        before the end is let finish, a hung one is not waited for much past it."""
        begun = time.monotonic() if start is None else start
        return cls(begun + budget_s + max(1.0, 0.1 * budget_s), what)

    def left(self) -> float:
        return self.at - time.monotonic()

    @property
    def ran_out(self) -> str:
        return ran_out(self.what)


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None  # None: killed after the timeout
    stdout: str
    stderr: str
    seconds: float
    stopped_by: str = ""  # when a budget's end, not the timeout, stopped it: the budget's name
    limit_s: float | None = None  # the time it was allowed (its timeout, or what its budget had left)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def cut_off(self) -> bool:
        """Stopped at its timeout or a budget's end, rather than exited."""
        return self.returncode is None

    def failure_reason(self, what: str, limit_name: str = "") -> str:
        """Why it failed, in one line. ``limit_name``: the setting its timeout came from, said with it (a
        build: "did not finish in 1800 s (--build-timeout)", so a hung build names what bounds it)."""
        if self.returncode is None:
            after = self.seconds if self.limit_s is None else self.limit_s
            if self.stopped_by:
                return f"{what} stopped after {after:.1f}s: {ran_out(self.stopped_by)}"
            if limit_name:
                return f"{what} did not finish in {after:g} s ({limit_name})"
            return f"{what} timed out after {after:.1f}s"
        tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
        return f"{what} exited {self.returncode}: {tail[0][:200]}"


def run_command(argv: Sequence[str] | str, cwd: Path, env: Mapping[str, str] | None = None,
                timeout: float | None = None, deadline: Deadline | None = None) -> CommandResult:
    """Run ``argv`` (a list, or a shell string) in ``cwd`` in its own process group.

    The group is ended when the command exits (what it left in the background
    too), at ``timeout`` or ``deadline``, whichever comes first (the result's
    returncode is then None), and on an interrupt.
    """
    limit, stopped_by = timeout, ""
    if deadline is not None and (limit is None or deadline.left() < limit):
        limit, stopped_by = max(0.0, deadline.left()), deadline.what
    shell = isinstance(argv, str)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=str(cwd), env=dict(env) if env is not None else None, shell=shell,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, errors="replace", start_new_session=True,
    )
    with _running_lock:
        _running.add(proc)
    out: list[str] = []
    err: list[str] = []
    readers = (drain(proc.stdout, out.append), drain(proc.stderr, err.append))
    try:
        code = wait_group(proc, limit, KILL_GRACE_S)
    finally:
        with _running_lock:
            _running.discard(proc)
    for reader in readers:
        reader.join(timeout=_PIPE_WAIT_S)
    return CommandResult(code, "".join(out), "".join(err), time.monotonic() - start,
                         stopped_by if code is None else "", limit)


@dataclass(frozen=True)
class BenchSpec:
    """Everything that decides what a measurement of one commit means."""

    command: tuple[str, ...]
    build: str | None
    metric: MetricSpec
    timeout: float | None = DEFAULT_TIMEOUT_S  # None: no limit
    build_timeout: float = BUILD_TIMEOUT_S  # --build-timeout; not in the cache key: it does not change a value

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


def bench_once(spec: BenchSpec, cwd: Path, env: Mapping[str, str], deadline: Deadline | None = None) -> RunOutcome:
    """One bench run: its metric, or why it has none (a run that timed out has none, whatever it printed)."""
    if deadline is not None and deadline.left() <= 0:
        return RunOutcome(None, f"not run: {deadline.ran_out}")
    csv_path = cwd / spec.metric.csv_file if spec.metric.csv_file else None
    before = csv_path.stat().st_mtime_ns if csv_path is not None and csv_path.exists() else None
    try:
        result = run_command(spec.argv, cwd, env, spec.timeout, deadline)
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
