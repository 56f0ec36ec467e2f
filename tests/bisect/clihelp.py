"""Running ``python -m perfci bisect`` as a user would, and checking what it says."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def perfci(repo: Path, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.pop("PERFCI_BISECT_TEST_PAUSE", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "perfci", "bisect", *args], cwd=repo, env=full_env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=_default_sigint)


def _default_sigint() -> None:
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
