"""``perfci bisect`` with a fault injected at one phase, for the fault tests.

    python tests/bisect/fault_entry.py PHASE:SIGNAL -- <perfci bisect arguments>
    python tests/bisect/fault_entry.py PHASE:sleep -- <perfci bisect arguments>

The first time the session reaches PHASE (one of ``perfci.bisect.search.PHASES``)
the process sends itself SIGNAL (SIGINT, SIGTERM, SIGKILL, ...), or sleeps for
an hour so that a test can signal it from outside while it is in the phase. The
fault fires once per process, so the restore that follows can finish.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's perfci, also when run by hand

from perfci import cli  # noqa: E402
from perfci.bisect.search import PHASES  # noqa: E402
from perfci.gitsession import Pause  # noqa: E402

USAGE = "usage: fault_entry.py PHASE:SIGNAL|PHASE:sleep -- <perfci bisect arguments>"


def fault_at(phase: str, action: str) -> Pause:
    """The pause hook: ``action`` the first time ``phase`` is reached, nothing otherwise."""
    # Taken once and never given back. A lock, not a flag: with --jobs the
    # phases are reached from several threads at once.
    once = threading.Lock()

    def pause(reached: str) -> None:
        if reached != phase or not once.acquire(blocking=False):
            return
        if action == "sleep":
            time.sleep(3600)
        else:
            os.kill(os.getpid(), getattr(signal, action))
            time.sleep(0.5)  # let the handler run here, inside the phase

    return pause


def parse_fault(text: str) -> tuple[str, str]:
    phase, _, action = text.partition(":")
    if phase not in PHASES:
        raise SystemExit(f"fault_entry.py: phase {phase!r} is not one of {', '.join(PHASES)}")
    if action != "sleep" and not isinstance(getattr(signal, action, None), signal.Signals):
        raise SystemExit(f"fault_entry.py: {action!r} is neither 'sleep' nor a signal name like SIGTERM")
    return phase, action


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        raise SystemExit(USAGE)
    phase, action = parse_fault(argv[0])
    # Through perfci.cli.main, as a user's run goes: it turns SIGTERM into
    # KeyboardInterrupt and errors into exit codes, which is what the tests check.
    return cli.main(["bisect", *argv[2:]], pause=fault_at(phase, action))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
