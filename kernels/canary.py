"""perfci_canary: a GEMM with a planted slowdown of known size, the nightly's check on its own detector.

Each night ``perfci nightly`` measures two builds of this kernel: the twin
(``plant_pct = 0``) and the planted build (``plant_pct = P``), and reports whether
compare and confirm found the plant and whether the twin stayed quiet
(docs/nightly.md#the-canary). The plant is the masked-K plant of
``benchmarks/gpu/plants.sh``: extra iterations of the K loop whose loads are
masked off, so the result is bit for bit the twin's and only the work grows, by
``round(P% of the K iterations)`` (at least one). Both builds are one compiled
kernel: the extra count is a runtime argument that Triton does not specialise
on, so nothing but the work differs between them. How much slower that makes
the planted build on a device (a masked iteration still issues its dot, but
moves no data) is measured every night; ``P`` only sizes it.

Importing this module imports neither torch nor triton (kernels/backends.py
lists it among perfci's kernels); the kernel is built when a case is prepared.
"""
from __future__ import annotations

import functools
import math
from typing import Any

from perfci.kernel import TOLERANCE, Prepared, Unsupported, backend, gemm_inputs, poisoner, reference
from perfci.model import CaseSpec

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): a plain tiled GEMM on a GPU; on the CPU, tiles
# small enough for the interpreter (each of its tl ops costs ~1 ms there).
GPU_BLOCKS = (128, 128, 64, 8, 3)
CPU_BLOCKS = (16, 16, 16, 4, 1)
MAX_PLANT_PCT = 1000.0


def extra_iterations(k: int, block_k: int, plant_pct: float) -> int:
    """The masked K iterations a plant of ``plant_pct`` adds: that share of the loop, at least one."""
    if plant_pct <= 0:
        return 0
    return max(1, round(math.ceil(k / block_k) * plant_pct / 100.0))


def planted_pct(k: int, block_k: int, plant_pct: float) -> float:
    """The share of the K loop actually added (a whole number of iterations), in percent."""
    return 100.0 * extra_iterations(k, block_k, plant_pct) / math.ceil(k / block_k)


def _check(spec: CaseSpec) -> str | None:
    pct = spec.variant.get("plant_pct", 0)
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 <= pct <= MAX_PLANT_PCT:
        return f"{spec.kernel}: variant plant_pct must be a number from 0 to {MAX_PLANT_PCT:g}, got {pct!r}"
    return None


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    # extra_k is not specialised: 0 (divisible by 16) and 2 would otherwise compile two kernels.
    @triton.jit(do_not_specialize=["extra_k"])
    def canary_gemm(a_ptr, b_ptr, c_ptr, M, N, K, extra_k,
                    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid = tl.program_id(axis=0)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        pid_m = pid // num_pid_n
        pid_n = pid % num_pid_n
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        offs_am = offs_m % M
        offs_bn = offs_n % N
        num_k = tl.cdiv(K, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for i in range(0, num_k + extra_k):
            # A planted iteration revisits a real K block (its addresses stay in bounds) with every
            # element masked off: it loads nothing and adds zero, but its dot is still issued.
            kb = i % num_k
            k_left = tl.where(i < num_k, K - kb * BLOCK_K, 0)
            a = tl.load(a_ptr + offs_am[:, None] * stride_am + (kb * BLOCK_K + offs_k[None, :]) * stride_ak,
                        mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptr + (kb * BLOCK_K + offs_k[:, None]) * stride_bk + offs_bn[None, :] * stride_bn,
                        mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
        c = acc.to(c_ptr.dtype.element_ty)
        tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, c,
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

    return triton, canary_gemm


@backend("perfci_canary", description="the nightly's canary: a tiled GEMM with plant_pct% extra masked K iterations",
         dtypes=("fp32", "fp16", "bf16"), variant_keys={"plant_pct"}, check=_check)
def perfci_canary(spec: CaseSpec, device: Any, seed: int) -> Prepared:
    import torch

    device = torch.device(device)
    if device.type == "cpu" and spec.dtype == "bf16":
        raise Unsupported("bf16 Triton kernels are unreliable in the interpreter (numpy has no bf16); "
                          "the canary runs fp32 or fp16 on the CPU.")
    block_m, block_n, block_k, warps, stages = CPU_BLOCKS if device.type == "cpu" else GPU_BLOCKS
    triton, kernel = _kernel()
    a, w, _, out_dtype = gemm_inputs(spec, device, seed)
    b = w.t()
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    extra = extra_iterations(spec.k, block_k, float(spec.variant.get("plant_pct", 0)))
    grid = (triton.cdiv(spec.m, block_m) * triton.cdiv(spec.n, block_n),)
    launch = kernel[grid]
    args = (a, b, out, spec.m, spec.n, spec.k, extra, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            out.stride(0), out.stride(1))
    kwargs = dict(BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    if device.type != "cpu":
        kwargs.update(num_warps=warps, num_stages=stages)

    def run():
        launch(*args, **kwargs)
        return out

    run.launches = ((kernel, grid, args, kwargs),)  # what perfci run reads the compiled kernel from
    return Prepared(run, out, reference(a, w), TOLERANCE[spec.dtype], poisoner(out))
