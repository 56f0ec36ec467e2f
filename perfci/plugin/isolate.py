"""``--perfci-isolate``: each benchmark test in a process of its own, as ``perfci run`` runs each case.

The parent re-runs the test's node id in a child pytest with
``PERFCI_PYTEST_CHILD`` naming a JSON file. The child writes the case's row there
twice: as ``error`` before it measures (so a crash still names the case) and as
measured afterwards. A crash or a hang (``--perfci-timeout``) costs that one case:
its row says so and its test fails, and the session goes on.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile

from perfci.files import atomic_write_text
from perfci.procs import KILL_GRACE_S, drain, wait_group

CHILD_ENV = "PERFCI_PYTEST_CHILD"


def child_path() -> str | None:
    return os.environ.get(CHILD_ENV) or None


def child_report(path: str, row: dict[str, str], outcome: str) -> None:
    """In the child: the case's row so far ('started' before measuring, 'done' after)."""
    atomic_write_text(path, json.dumps({"row": row, "outcome": outcome}))


def run_isolated(nodeid: str, rootdir: str, device: str, timeout_s: float) -> tuple[dict | None, str]:
    """Run one test node in a child pytest. Returns (its last report or None, a problem line or '')."""
    with tempfile.TemporaryDirectory(prefix="perfci-case-") as tmp:  # removed on any exit, Ctrl-C too
        path = os.path.join(tmp, "case.json")
        cmd = [sys.executable, "-m", "pytest", nodeid, "-q", "-p", "no:cacheprovider", "--no-header",
               "-o", "addopts=", "--rootdir", rootdir, "--perfci-device", device]
        env = {**os.environ, CHILD_ENV: path}
        proc = subprocess.Popen(cmd, cwd=rootdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
        lines: list[str] = []
        reader = drain(proc.stdout, lines.append)
        # Its group is ended when it exits (a child it left running too), at the timeout, or on Ctrl-C.
        code = wait_group(proc, timeout_s, KILL_GRACE_S)
        reader.join(timeout=5)
        if code is None:
            problem = f"timed out after {timeout_s:g} s (--perfci-timeout); its process was killed"
        else:
            problem = "" if code == 0 else _failure_line(code, "".join(lines))
        try:
            with open(path, encoding="utf-8") as fh:
                report = json.load(fh)
        except (OSError, ValueError):
            report = None
    return report, problem


def _failure_line(code: int, output: str) -> str:
    if code < 0:
        return f"its process died of signal {-code} ({signal.Signals(-code).name})"
    lines = [line for line in output.splitlines() if line.startswith(("E ", "FAILED", "ERROR"))]
    why = " ".join(lines[0].lstrip("E").split()) if lines else f"exit code {code}"
    return f"failed in its own process: {why}"[:400]
