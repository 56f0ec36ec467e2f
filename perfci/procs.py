"""Child processes in their own process group, and the one way perfci kills them.

A benchmark, a build or a measured case may start children of its own (a shell,
a compiler, a forked worker). Each is started with ``start_new_session=True``,
so a timeout or a Ctrl-C takes the whole tree down with one ``killpg``, never
just the process at its top.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time


def kill_process_group(pgid: int, *, grace_s: float = 0.0, leader: subprocess.Popen | None = None) -> None:
    """End every process in group ``pgid``.

    With ``grace_s`` the group first gets SIGTERM and that long to exit (a
    bench may want to clean up); then SIGKILL, which nothing can ignore, goes
    to whatever is left. ``leader`` (the Popen whose pid is ``pgid``) is reaped
    afterwards so it does not linger as a zombie.
    """
    if grace_s > 0:
        if not _signal_group(pgid, signal.SIGTERM):
            _reap(leader)
            return
        deadline = time.monotonic() + grace_s
        if leader is not None:
            try:
                leader.wait(timeout=grace_s)  # gone early: its children may linger, so SIGKILL still
            except subprocess.TimeoutExpired:
                pass
        else:
            while time.monotonic() < deadline and _signal_group(pgid, 0):
                time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    _reap(leader)


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
