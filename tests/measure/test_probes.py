"""The gate and clock-stamp kernels cross-compile for sm_90, gfx942 and gfx950, with the right instructions.

No GPU is needed: Triton compiles for a named target on the CPU. The compile
runs in a fresh interpreter because the test session runs kernels through the
Triton interpreter (TRITON_INTERPRET=1), which replaces the JIT.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]

COMPILE = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from perfci.measure import probes

CHECKS = {
    "cuda": {"globaltimer": r"%globaltimer", "clock64": r"%clock64", "smid": r"%smid",
             "volatile_load": r"ld\.volatile\.global", "nanosleep": r"nanosleep"},
    "hip": {"s_memrealtime": r"s_memrealtime", "s_memtime": r"s_memtime\b",
            "lgkmcnt0": r"s_waitcnt lgkmcnt\(0\)", "hw_id": r"hwreg\(HW_REG_HW_ID",
            "xcc_id": r"hwreg\(HW_REG_XCC_ID", "uncached_load": r"global_load_dword[^\n]*sc0 sc1",
            "s_sleep": r"s_sleep"},
}
target = {"sm_90": GPUTarget("cuda", 90, 32), "gfx942": GPUTarget("hip", "gfx942", 64),
          "gfx950": GPUTarget("hip", "gfx950", 64)}[sys.argv[1]]
amd = target.backend == "hip"
out = {}
for name, fn in probes.KERNELS.items():
    compiled = triton.compile(ASTSource(fn=fn, signature=probes.SIGNATURES[name], constexprs={"AMD": amd}),
                              target=target, options={"num_warps": 1})
    text = compiled.asm["amdgcn" if amd else "ptx"]
    out[name] = {check: bool(re.search(pattern, text)) for check, pattern in CHECKS[target.backend].items()}
print(json.dumps(out))
"""


def compiled_for(arch: str) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "0",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", COMPILE, arch], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sm_90_reads_globaltimer_and_clock64_and_polls_a_volatile_flag():
    found = compiled_for("sm_90")
    assert found["stamp_kernel"]["globaltimer"] and found["stamp_kernel"]["clock64"]
    assert found["stamp_kernel"]["smid"]
    assert found["gate_kernel"]["volatile_load"] and found["gate_kernel"]["nanosleep"]
    assert found["timer_sleep_kernel"]["globaltimer"]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amd_reads_memrealtime_and_memtime_and_polls_past_the_caches(arch):
    found = compiled_for(arch)
    stamp, gate = found["stamp_kernel"], found["gate_kernel"]
    assert stamp["s_memrealtime"] and stamp["s_memtime"] and stamp["lgkmcnt0"]
    assert stamp["hw_id"] and stamp["xcc_id"]
    # A flag read through the scalar cache would never see the host's write.
    assert gate["uncached_load"] and gate["s_sleep"]
    assert found["timer_sleep_kernel"]["s_memrealtime"]
