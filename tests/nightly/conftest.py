"""A small git repository with a copy of kernels/ and a tiny fp32 GEMV suite; `perfci nightly` run as a user runs it.

Only Triton kernels (gemv) are measured: on a shared CPU a torch op's time
swings with the host's load (16 ms instead of 2.5 us), the interpreter's much less.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bisect.synth import git

ROOT = Path(__file__).resolve().parents[2]
SUITE = """\
name = "tiny"
devices = ["cpu", "cuda"]
dtype = "fp32"

[[cases]]
kernel = "gemv"
M = 1
N = 8
K = 16

[[cases]]
kernel = "gemv"
M = 1
N = 16
K = 16
"""
ONE_CASE_SUITE = SUITE[: SUITE.index("[[cases]]", SUITE.index("[[cases]]") + 1)].rstrip() + "\n"
FAST = ["--device", "cpu"]


def perfci(repo: Path, *args: str, entry: Path | None = None, timeout: float = 900,
           env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m perfci ARGS`` (or ``python ENTRY ARGS``) in ``repo``, with this checkout's perfci."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    **(env or {}))
    full_env.pop("PERFCI_DEBUG", None)
    argv = [sys.executable, str(entry)] if entry else [sys.executable, "-m", "perfci"]
    return subprocess.run([*argv, *args], cwd=repo, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def make_repo(path: Path, suite: str = SUITE) -> Path:
    path.mkdir(parents=True)
    shutil.copytree(ROOT / "kernels", path / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    (path / "suites").mkdir()
    (path / "suites" / "tiny.toml").write_text(suite)
    (path / ".gitignore").write_text("__pycache__/\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def write_rows(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def verdict(out: Path) -> dict:
    return json.loads((out / "verdict.json").read_text())


def stage(v: dict, name: str) -> dict:
    return next(s for s in v["stages"] if s["name"] == name)


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "repo")


@pytest.fixture(scope="session")
def measured(tmp_path_factory) -> Path:
    """One real run of the two-case suite (measured once per session), to build nights from."""
    base = tmp_path_factory.mktemp("measured")
    where = make_repo(base / "repo")
    out = base / "good.csv"
    proc = perfci(where, "run", "suites/tiny.toml", *FAST, "--out", str(out), "--format", "none")
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in read_rows(out)] == ["ok", "ok"]
    return out
