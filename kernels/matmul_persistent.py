"""
Persistent GEMM
===============

A tiled GEMM launches one program per output tile and lets the hardware
scheduler hand them out. A persistent GEMM launches one program per SM/CU
instead (``min(num_sms, num_tiles)`` of them), and each program loops over
tiles ``start, start + NUM_PROGRAMS, ...``. That removes the tail of
per-program launch and prologue costs and leaves the tile order under the
kernel's control. This is the non-TMA persistent kernel of Triton tutorial 09,
without autotuning, with strided B and without the ``flatten=True`` loop hint
(not available in every Triton this must run on).

Tiles are visited in the same grouped order as :mod:`kernels.matmul_tiled`
(:func:`kernels.matmul_tiled.grouped_tile`), so the programs resident at one
moment work on neighbouring tiles and share ``A`` rows and ``B`` columns in L2.
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import _configs
from .matmul_tiled import check_bias, grouped_tile, matmul_tile


@triton.jit
def matmul_persistent_kernel(
    # Pointers to matrices
    a_ptr, b_ptr, c_ptr, bias_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    # Meta-parameters
    NUM_PROGRAMS: tl.constexpr,  # the stride of the tile loop; must equal the grid size
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPILOGUE: tl.constexpr,
):
    """Program p computes tiles p, p + NUM_PROGRAMS, p + 2 * NUM_PROGRAMS, ..."""
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n

    for tile_id in range(start_pid, num_tiles, NUM_PROGRAMS):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        matmul_tile(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE)


def matmul_persistent(a, b, *, bias=None, epilogue: str = "none", out=None, config=None, num_programs=None):
    """``act(a @ b + bias)`` with one program per SM/CU looping over tiles.

    Same arguments as :func:`kernels.matmul_tiled.matmul_tiled`, plus
    num_programs: grid size (default: the device's SM/CU count, capped at the
    number of tiles; the interpreter pretends to have 4).
    """
    return matmul_persistent_launcher(
        a, b, bias=bias, epilogue=epilogue, out=out, config=config, num_programs=num_programs
    )()


def matmul_persistent_launcher(a, b, *, bias=None, epilogue: str = "none", out=None, config=None, num_programs=None):
    """Check and bind everything once; return a zero-argument call that only launches (for timing)."""
    # (1) Check the inputs.
    M, N, K, out_dtype, kind = _configs.check_gemm_operands(a, b, "matmul_persistent")
    check_bias(bias, epilogue, N, out_dtype, a.device, "matmul_persistent")
    dtype_key = _configs.dtype_name(a.dtype)
    cfg = _configs.resolve(_configs.persistent_config(kind, dtype_key, M, N, K), config, kind)
    if num_programs is not None and (not isinstance(num_programs, int) or isinstance(num_programs, bool) or num_programs < 1):
        raise ValueError(f"num_programs must be a positive integer, got {num_programs!r}.")
    # (2) Allocate the output, or take the caller's.
    c = _configs.check_out(out, M, N, out_dtype, a.device, "matmul_persistent")
    # (3) Bind the launch: one program per SM/CU, never more programs than tiles.
    num_tiles = triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)
    programs = min(num_programs or _configs.num_sms(a.device), num_tiles)
    launch = matmul_persistent_kernel[(programs,)]
    args = (
        a, b, c, bias if bias is not None else c,  # unused pointer when EPILOGUE == "none"
        M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
    )
    kwargs = dict(
        NUM_PROGRAMS=programs,
        BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K,
        GROUP_M=cfg.GROUP_M,
        EPILOGUE=epilogue,
        **_configs.launch_options(cfg, kind),
    )

    def run():
        launch(*args, **kwargs)
        return c

    run.launches = ((matmul_persistent_kernel, (programs,), args, kwargs),)  # what perfci run reads the compiled kernel from
    return run
