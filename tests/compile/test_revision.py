"""``perfci compile`` plans the kernels of the tree it runs in, not those of the perfci that runs it.

A copy of this commit (``git archive HEAD``) whose kernels/_configs.py makes the
AMD 16-bit large tile 256x256x64 with 3 stages, compiled from that copy by the
perfci under test (the copy's own perfci/ removed, so only its kernels can
differ): the plan must carry the copy's tile, and the diff against the committed
baselines must see it. Before the compile plan came through the kernel API it
read the installed ``perfci_kernels._configs``, and this compile exited 0 with
nothing changed.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import perfci

ROOT = Path(__file__).resolve().parents[2]
LARGE_AMD_16BIT = ("(_BIG, KernelConfig(256, 128, 64, GROUP_M=4, num_warps=8, num_stages=2, waves_per_eu=2, "
                   "matrix_instr_nonkdim=16)),")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_compile_plans_the_copy_s_kernels(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs perfci's git checkout (git archive HEAD)")
    copy = tmp_path / "copy"
    copy.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
    shutil.rmtree(copy / "perfci")  # the perfci under test runs; only the kernels are the copy's
    configs = copy / "kernels" / "_configs.py"
    text = configs.read_text(encoding="utf-8")
    assert text.count(LARGE_AMD_16BIT) == 1
    configs.write_text(text.replace(LARGE_AMD_16BIT, LARGE_AMD_16BIT.replace("256, 128, 64", "256, 256, 64")
                                    .replace("num_stages=2", "num_stages=3")), encoding="utf-8")

    env = {**os.environ, "PYTHONPATH": str(Path(perfci.__file__).resolve().parents[1])}
    env.pop("TRITON_INTERPRET", None)  # cross-compiling, not interpreting
    proc = subprocess.run([sys.executable, "-m", "perfci", "compile", "prefill", "--arch", "gfx950",
                           "--filter", "kernel=matmul_tiled,M=5120", "--baseline", "baselines/compile/",
                           "--format", "json", "--cache", str(tmp_path / "cache")],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stderr  # the 256x256 tile's LDS leaves no room for a second wave
    data = json.loads(proc.stdout)
    (case,) = [c for c in data["diffs"][0]["cases"] if c["verdict"] != "same"]
    changed = {c["field"]: (c["before"], c["after"]) for c in case["changes"]}
    assert changed["config.BLOCK_N"] == (128, 256) and changed["config.num_stages"] == (2, 3)
    assert case["verdict"] == "worse" and data["failing"] == 1
