"""A perfci worker whose cases really crash, hang or run out of memory, for the isolation tests.

``python -m tests.measure.faulty_worker KIND[@KERNEL_LABEL] [--serve | REQUEST RESULT]``
is the real worker with a ``before_measure`` hook that does KIND to every case
(or only to the case labelled KERNEL_LABEL); KIND is segv, hang or oom. For
hang, ``$FAULT_PIDFILE`` receives the pid of a grandchild that a plain kill of
the worker would leave behind.

``python -m tests.measure.faulty_worker --perfci KIND[@LABEL] run ARGS...`` is
``perfci run ARGS...`` with that worker in place of the real one.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from perfci.measure import worker
from perfci.model import CaseSpec


def fault(kind: str, target: str = ""):
    def before_measure(spec: CaseSpec) -> None:
        if target and target != spec.label:
            return
        if kind == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif kind == "hang":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            pid_file = os.environ.get("FAULT_PIDFILE")
            if pid_file:
                with open(pid_file, "w") as fh:
                    fh.write(str(child.pid))
            time.sleep(3600)
        elif kind == "oom":
            raise MemoryError("out of memory (injected)")
        else:
            raise SystemExit(f"faulty_worker: unknown fault {kind!r}")

    return before_measure


if __name__ == "__main__":
    if sys.argv[1] == "--perfci":
        from perfci import cli

        faulty = (sys.executable, "-m", "tests.measure.faulty_worker", sys.argv[2])
        raise SystemExit(cli.main(sys.argv[3:], worker=faulty))
    kind, _, target = sys.argv[1].partition("@")
    raise SystemExit(worker.main(sys.argv[2:], before_measure=fault(kind, target)))
