"""The IO edge of ``--against-triton``: the same commit compiled by another Triton, in an environment of its own.

A Triton version is a Python package, and one process imports one: the other
version runs ``perfci compile`` in a virtual environment that holds it
(created on first use with ``python -m venv --system-site-packages`` and
``pip install triton==VERSION``, so it shares this one's torch and perfci) and
writes its resources files, which this process then diffs against its own.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from perfci.compile.cache import default_dir
from perfci.errors import PerfciError

_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([.+-]?[A-Za-z0-9]+)*$")
_ROOT = Path(__file__).resolve().parents[2]  # the checkout: the child runs this perfci, whatever it has installed


def _same(a: str, b: str) -> bool:
    """3.8 and 3.8.0 are one version to pip; to this check too."""
    try:
        from packaging.version import Version  # lazy: optional

        return Version(a) == Version(b)
    except Exception:  # noqa: BLE001 - no packaging, or not a version it reads: compare the text
        return a == b


def check_version(version: str) -> str:
    if not _VERSION.match(version or ""):
        raise PerfciError(f"--against-triton '{version}' is not a version (e.g. 3.8.0)")
    return version


def default_env(version: str) -> Path:
    return default_dir().parent / f"triton-{version}"


def _installed(python: Path) -> str:
    proc = subprocess.run([str(python), "-c", "import triton; print(triton.__version__)"], capture_output=True,
                          text=True, env=_child_env())
    return proc.stdout.strip() if proc.returncode == 0 else ""


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def triton_python(version: str, env_dir: str | os.PathLike | None = None) -> Path:
    """The python of an environment with triton ``version``; made (venv + pip) when there is none."""
    where = Path(env_dir) if env_dir else default_env(version)
    python = where / "bin" / "python"
    if python.exists() and _same(_installed(python), version):
        return python
    steps = [] if python.exists() else [[sys.executable, "-m", "venv", "--system-site-packages", str(where)]]
    steps.append([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"triton=={version}"])
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise PerfciError(f"--against-triton {version}: `{' '.join(cmd[-3:])}` failed: {last}")
    found = _installed(python)
    if not _same(found, version):
        raise PerfciError(f"--against-triton {version}: {where} imports triton {found or '(none)'}, not {version}")
    return python


def compile_elsewhere(python: Path, suite: str, arches: Sequence[str], out_dir: Path, filter_expr: str | None,
                      cache: str | None, version: str) -> None:
    """``perfci compile SUITE --arch ... --out OUT_DIR`` under ``python``; exit 0 or 1 (findings) is success."""
    cmd = [str(python), "-m", "perfci", "compile", suite, "--arch", ",".join(arches), "--out", str(out_dir),
           "--format", "json"]
    if filter_expr:
        cmd += ["--filter", filter_expr]
    cmd += ["--cache", cache] if cache else ["--no-cache"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env())
    if proc.returncode not in (0, 1):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PerfciError(f"--against-triton {version}: perfci compile there exited {proc.returncode}: {last}",
                          exit_code=proc.returncode if proc.returncode in (2, 4) else 4)
