"""Helpers for tests that check a process really ended."""
import time

import psutil


def wait_until_dead(pid: int, timeout: float = 5.0) -> bool:
    """True once ``pid`` is gone or a zombie (killed, waiting to be reaped by init).

    A SIGKILLed grandchild is reparented to PID 1, which in a container may reap
    it late; a zombie runs no code, so for "was it killed" it counts as dead.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False
