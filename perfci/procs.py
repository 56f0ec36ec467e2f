"""Child processes in their own process group, and the one way perfci ends them.

A benchmark, a build or a measured case may start children of its own (a shell,
a compiler, a forked worker, ``sleep 3600 &``). Each is started with
``start_new_session=True``, so one ``killpg`` reaches the whole tree it started,
never just the process at its top. The group is ended when its command times
out, when perfci is interrupted, and also when the command's main process exits:
a child it left running in the background would otherwise hold the GPU, and the
output pipe, after perfci moved on (:func:`wait_group`).
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import IO, Callable

import psutil

# SIGTERM first, then this long for the group to exit (a bench may want to clean up),
# then SIGKILL, which nothing can ignore.
KILL_GRACE_S = 5.0
_POLL_S = 0.05


def kill_process_group(pgid: int, *, grace_s: float = 0.0, leader: subprocess.Popen | None = None) -> None:
    """End every process in group ``pgid``.

    With ``grace_s`` the group first gets SIGTERM and that long to exit; then
    SIGKILL goes to whatever is left. ``leader`` (the Popen whose pid is
    ``pgid``) is reaped so it does not linger as a zombie. An interrupt that
    arrives meanwhile (a second Ctrl-C, the SIGTERM of a parent perfci) does not
    cut the grace short or skip the SIGKILL: it is raised once the group is gone.
    """
    interrupted = False
    try:
        if grace_s > 0 and _signal_group(pgid, signal.SIGTERM):
            deadline = time.monotonic() + grace_s
            while True:
                try:
                    _wait_gone(pgid, leader, deadline)
                    break
                except KeyboardInterrupt:
                    interrupted = True
    finally:
        _signal_group(pgid, signal.SIGKILL)
        _reap(leader)
    if interrupted:
        raise KeyboardInterrupt


def wait_group(proc: subprocess.Popen, timeout_s: float | None, grace_s: float = KILL_GRACE_S) -> int | None:
    """Wait for ``proc`` (a group leader: ``start_new_session=True``), then end what is left of its group.

    Returns its exit code, or None when it ran past ``timeout_s`` and its group was
    killed. Whatever it left running in its group (a background child) is ended
    when it exits, as it is when it times out. An interrupt here ends the group too.
    """
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process_group(proc.pid, grace_s=grace_s, leader=proc)
        return None
    except BaseException:  # Ctrl-C or SIGTERM reached us, not the group (its own session)
        kill_process_group(proc.pid, grace_s=grace_s, leader=proc)
        raise
    # The leader is reaped, yet its number stays the group's id while any member lives.
    kill_process_group(proc.pid, grace_s=grace_s)
    return code


def drain(stream: IO[str] | None, sink: Callable[[str], None]) -> threading.Thread:
    """A daemon thread handing each line of ``stream`` to ``sink`` until its end (pipes must be read
    while the command runs, or a chatty command blocks on a full pipe)."""

    def run() -> None:
        if stream is None:
            return
        try:
            for line in stream:
                sink(line)
        except (OSError, ValueError):  # the pipe closed under us
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def interrupt_on_sigterm() -> None:
    """SIGTERM (and SIGINT) become KeyboardInterrupt, so cleanup runs the same way for both."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def _wait_gone(pgid: int, leader: subprocess.Popen | None, deadline: float) -> None:
    if leader is not None:
        try:
            leader.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(_POLL_S)


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie does not: under a PID 1 that
    never reaps, as in some containers, orphans stay zombies and would hold ``killpg`` up)."""
    if not _signal_group(pgid, 0):
        return False
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (psutil.Error, OSError):
            continue
    return False


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # the pgid was reused by someone else's process: leave it alone
        return False
    return True


def _reap(leader: subprocess.Popen | None) -> None:
    if leader is None:
        return
    try:
        leader.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
