"""The process of ``perfci run`` imports neither torch nor triton nor a kernel module: the worker
does, once, and checks the suite's kernels there (docs/run.md, 'Where the time goes')."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A registered kernel of the project (kernels.backends) and one named by import path
# (torch:matmul): checking either in the parent would import what this test forbids.
SUITE = """
name = "parent"
devices = ["cpu"]
dtype = "fp32"

[[cases]]
kernel = ["torch_matmul", "torch:matmul"]
M = 8
N = 16
K = 32
"""

# perfci run, in-process, then what it left in sys.modules.
PARENT = """
import json, sys
from perfci.cli import main
code = main(sys.argv[2:])
heavy = ("torch", "triton", "kernels", "perfci_kernels")
found = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
with open(sys.argv[1], "w") as fh:
    json.dump({"code": code, "imported": found}, fh)
"""


def _run_parent(tmp_path, *args):
    report = tmp_path / "parent.json"
    proc = subprocess.run([sys.executable, "-c", PARENT, str(report), "run", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert report.is_file(), proc.stderr[-2000:]
    return proc, json.loads(report.read_text())


def test_the_parent_of_perfci_run_imports_no_torch_and_no_kernel_module(tmp_path):
    suite = tmp_path / "parent.toml"
    suite.write_text(SUITE)
    out = tmp_path / "r.csv"
    proc, seen = _run_parent(tmp_path, str(suite), "--device", "cpu", "--repeats", "1", "--out", str(out),
                             "--format", "none")
    assert seen["code"] == 0, proc.stderr[-2000:]
    assert seen["imported"] == []
    # The worker measured both kernels: the check moved, it did not go away.
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["kernel"], r["status"]) for r in rows] == [("torch_matmul", "ok"), ("torch:matmul", "ok")]


def test_a_kernel_the_worker_cannot_find_is_still_one_line_and_exit_2(tmp_path):
    suite = tmp_path / "parent.toml"
    suite.write_text(SUITE.replace('"torch:matmul"', '"torch:no_such_gemm"'))
    proc, seen = _run_parent(tmp_path, str(suite), "--device", "cpu", "--out", str(tmp_path / "r.csv"))
    assert seen["code"] == 2 and seen["imported"] == []
    assert proc.stderr.strip().splitlines() == [
        f"perfci: error: {suite}: [[cases]] entry 1: torch:no_such_gemm 8x16x32 fp32: "
        f"kernel 'torch:no_such_gemm': torch has no attribute no_such_gemm"]
    assert not (tmp_path / "r.csv").exists()
