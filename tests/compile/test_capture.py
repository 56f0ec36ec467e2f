"""perfci compile on kernels perfci did not write, run as a team runs it in its own repository.

examples/kernel-repo's own Triton GEMM (a Backend in the team's package ``kernels``),
an autotuned kernel behind a plain callable named by import path, and a torch op;
then the ratchet: a baseline, a config edit that costs occupancy, and the
project's own acceptance of it in ``[tool.perfci] compile_accept``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compile.procs import CACHE

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kernel-repo"
TUNED = ROOT / "tests" / "data" / "compile" / "team_tuned.py"
SMALL_TILES = "block_m, block_n, block_k = 16, 16, 16"
BIG_TILES = "block_m, block_n, block_k = 128, 128, 64"
EXTRA_CASES = """
[[cases]]
kernel = "kernels.tuned:tuned_mm"
M = 4
N = 64
K = 32

[[cases]]
kernel = "kernels.tuned:gpu_only_mm"
M = 4
N = 64
K = 32

[[cases]]
kernel = "torch:matmul"
M = 16
N = 16
K = 32
"""


@pytest.fixture
def team(tmp_path: Path) -> Path:
    repo = tmp_path / "gemmlab"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(TUNED, repo / "kernels" / "tuned.py")
    suite = repo / "bench" / "suites" / "gemm.toml"
    suite.write_text(suite.read_text() + EXTRA_CASES)
    assert SMALL_TILES in (repo / "kernels" / "gemm.py").read_text()
    return repo


def compile_in(repo: Path, *argv: str) -> subprocess.CompletedProcess:
    # perfci as an installed tool: not on the repository's path, so the team's `kernels` is the one imported
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PERFCI_DEBUG", "PYTHONPATH")}
    env.setdefault("PERFCI_CACHE", str(CACHE))
    return subprocess.run([sys.executable, "-m", "perfci", "compile", *argv], capture_output=True, text=True,
                          cwd=repo, env=env, timeout=600)


def test_a_team_s_kernels_compile_from_the_launches_their_own_code_makes(team):
    proc = compile_in(team, "gemm", "--arch", "gfx942,sm_90", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = {(c["kernel"], c["arch"]): c for c in json.loads(proc.stdout)["cases"]}

    own = cases[("gemmlab_matmul", "gfx942")]
    assert own["status"] == "ok" and own["vgprs"] > 0 and own["spills"] == 0
    assert own["config"]["BLOCK_M"] == 16 and own["config"]["num_warps"] == 4  # Triton's default, not None
    assert cases[("gemmlab_matmul", "sm_90")]["registers"] > 0

    # autotuned: one compiled kernel per config it lists, each with that config's constexprs and warps
    tuned = cases[("kernels.tuned:tuned_mm", "gfx942")]["kernels"]
    assert [(k["kernel"], k["config"]["BLOCK_N"], k["config"]["num_warps"]) for k in tuned] == \
        [("rowdot_kernel", 32, 2), ("rowdot_kernel", 64, 4)]
    assert [k["grid"] for k in tuned] == [[4, 2], [4, 1]]  # the grid lambda, evaluated per config

    torch_op = cases[("torch:matmul", "sm_90")]
    assert torch_op["status"] == "vendor" and "no Triton kernel call" in torch_op["note"]
    # a launcher that wants a GPU cannot be recorded on this machine: said, not a compile failure
    gpu_only = cases[("kernels.tuned:gpu_only_mm", "gfx942")]
    assert gpu_only["status"] == "vendor" and "Expected a cuda device, but got: cpu" in gpu_only["note"]


def test_the_ratchet_fails_a_team_s_edit_that_costs_occupancy_until_the_project_accepts_it(team, tmp_path):
    base = tmp_path / "compile-baseline"
    first = compile_in(team, "gemm", "--arch", "gfx942,sm_90", "--out", f"{base}/")
    assert first.returncode == 0, first.stderr
    same = compile_in(team, "gemm", "--arch", "gfx942,sm_90", "--baseline", f"{base}/", "--format", "json")
    assert same.returncode == 0, same.stdout + same.stderr  # a commit against itself: nothing changed

    gemm = team / "kernels" / "gemm.py"
    gemm.write_text(gemm.read_text().replace(SMALL_TILES, BIG_TILES))
    worse = compile_in(team, "gemm", "--arch", "gfx942,sm_90", "--baseline", f"{base}/")
    assert worse.returncode == 1, worse.stdout + worse.stderr
    rows = [line for line in worse.stdout.splitlines() if line.split()[1:2] == ["gemmlab_matmul"]]
    assert len(rows) == 2 and all("occupancy" in r and r.rstrip().endswith("worse") for r in rows), worse.stdout
    assert "BLOCK_M 16 -> 128" in rows[0]

    pyproject = team / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + """
[[tool.perfci.compile_accept]]
arch = "sm_90"
case = "gemmlab_matmul"
occupancy = 4
reason = "128x128 tiles: one block per SM is what the large shapes need"
""")
    half = compile_in(team, "gemm", "--arch", "gfx942,sm_90", "--baseline", f"{base}/")
    assert half.returncode == 1  # gfx942's loss is not accepted
    assert "worse (accepted)" in next(r for r in half.stdout.splitlines() if r.startswith("sm_90 "))
    sm90 = compile_in(team, "gemm", "--arch", "sm_90", "--baseline", f"{base}/", "--format", "json")
    assert sm90.returncode == 0, sm90.stdout + sm90.stderr


def test_a_compile_accept_without_a_reason_is_one_line_and_exit_2(team):
    pyproject = team / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[[tool.perfci.compile_accept]]\narch = "sm_90"\n'
                         'case = "gemmlab_matmul"\noccupancy = 4\n')
    proc = compile_in(team, "gemm", "--arch", "sm_90")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "'reason' must be a non-empty string" in proc.stderr
