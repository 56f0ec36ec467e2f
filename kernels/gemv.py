"""
GEMV for M = 1
==============

With one row in ``A`` the GEMM is a matrix-vector product: every weight
element is used exactly once, so the kernel is bound by how fast the weight
streams from HBM, and matrix instructions (``tl.dot`` needs 16 rows) would
waste 15/16 of their work. This kernel uses no ``tl.dot``: each program owns
``BLOCK_N`` outputs, walks K in ``BLOCK_K`` steps, multiplies the weight tile
by the broadcast ``a`` slice on the vector units and reduces along K.

The weight is ``B = w.t()`` with ``w`` of shape (N, K), so ``B``'s K stride is
1; the tile is loaded as ``(BLOCK_N, BLOCK_K)`` so each row is one contiguous
run of K elements, which is what coalesces. Strides are still passed, so a
non-transposed ``B`` is correct, only slower.

``BLOCK_N`` comes from :func:`kernels._configs.gemv_config`: it shrinks until
there are at least two programs per SM/CU, since an idle SM is lost bandwidth.
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import _configs


@triton.jit
def gemv_kernel(
    # Pointers
    a_ptr, b_ptr, c_ptr,
    # Dimensions
    N, K,
    # Strides (a is a single row, so only its K stride matters)
    stride_ak,
    stride_bk, stride_bn,
    stride_cn,
    # Meta-parameters
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """One program: c[0, n block] = sum over k of a[0, k] * b[k, n block]."""
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :] * stride_bk
    a_ptrs = a_ptr + offs_k * stride_ak

    # Keep a 2-D fp32 accumulator and reduce once at the end: reducing every
    # step would put a cross-lane shuffle inside the streaming loop.
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=k_mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptrs, mask=n_mask[:, None] & k_mask[None, :], other=0.0).to(tl.float32)
        acc += b * a[None, :]
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = tl.sum(acc, axis=1)
    tl.store(c_ptr + offs_n * stride_cn, c.to(c_ptr.dtype.element_ty), mask=n_mask)


def gemv(a, b, *, out=None, config=None):
    """``a @ b`` for a single-row ``a``.

    a: (1, K); b: (K, N), any strides (typically ``w.t()``);
    out: optional (1, N) contiguous output; config: dict or KernelConfig
    (reads BLOCK_N, BLOCK_K, num_warps, num_stages, and waves_per_eu on AMD).
    """
    return gemv_launcher(a, b, out=out, config=config)()


def gemv_launcher(a, b, *, out=None, config=None):
    """Check and bind everything once; return a zero-argument call that only launches (for timing)."""
    # (1) Check the inputs.
    M, N, K, out_dtype, kind = _configs.check_gemm_operands(a, b, "gemv")
    if M != 1:
        raise ValueError(f"gemv takes exactly one row (M=1), got M={M}; use splitk_decode or matmul_tiled.")
    dtype_key = _configs.dtype_name(a.dtype)
    default = _configs.gemv_config(kind, dtype_key, N, K, _configs.num_sms(a.device))
    # No tl.dot here, so blocks below 16 are fine.
    cfg = _configs.resolve(default, config, kind, min_block=1)
    # (2) Allocate the output, or take the caller's.
    c = _configs.check_out(out, 1, N, out_dtype, a.device, "gemv")
    # (3) Bind the launch: one program per BLOCK_N outputs.
    grid = (triton.cdiv(N, cfg.BLOCK_N),)
    launch = gemv_kernel[grid]
    args = (
        a, b, c,
        N, K,
        a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(1),
    )
    kwargs = dict(BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K, **_configs.launch_options(cfg, kind))

    def run():
        launch(*args, **kwargs)
        return c

    run.launches = ((gemv_kernel, grid, args, kwargs),)  # what perfci run reads the compiled kernel from
    return run
