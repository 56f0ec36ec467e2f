"""The environment of a test's ``perfci compile`` child process.

Compiling needs Triton's real JIT: a fresh process without the interpreter the
rest of the test session runs the kernels under (tests/conftest.py sets
TRITON_INTERPRET=1). Its compile cache lives under the temporary directory,
never in the user's ~/.cache, one for the test session, removed when it ends.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(tempfile.mkdtemp(prefix="perfci-test-compile-cache-"))
atexit.register(shutil.rmtree, CACHE, ignore_errors=True)


def compiler_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PERFCI_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.setdefault("PERFCI_CACHE", str(CACHE))
    return env
