"""Running ``python -m perfci bisect`` as a user would, and checking what it says."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAULT_ENTRY = Path(__file__).resolve().with_name("fault_entry.py")


def perfci(repo: Path, *args: str, env: dict | None = None, timeout: float = 120,
           fault: str | None = None) -> subprocess.CompletedProcess:
    """``perfci bisect ARGS`` in ``repo``; with ``fault`` ('PHASE:SIGNAL' or 'PHASE:sleep'), through fault_entry.py."""
    return subprocess.run(bisect_argv(*args, fault=fault), cwd=repo, env=bisect_env(env),
                          capture_output=True, text=True, timeout=timeout, preexec_fn=default_sigint)


def bisect_argv(*args: str, fault: str | None = None) -> list[str]:
    if fault:
        return [sys.executable, str(FAULT_ENTRY), fault, "--", *args]
    return [sys.executable, "-m", "perfci", "bisect", *args]


def bisect_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def default_sigint() -> None:
    # A shell that starts pytest in the background hands its children SIGINT
    # ignored, and Python then installs no Ctrl-C handler; the user's terminal
    # does not, so the tests restore the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def one_clean_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def parse_json(stdout: str) -> dict:
    return json.loads(stdout)
