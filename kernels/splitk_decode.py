"""
Split-K decode GEMM
===================

During LLM decode, ``A`` has M = 1..64 rows (one per token in flight) and the
weight ``B`` is large, so the GEMM is a stream of ``B`` through the SMs/CUs. A
tiled kernel launches only ``cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)`` programs,
which for small N leaves most of the GPU idle. Split-K cuts K into ``SPLIT_K``
slices as well, so every SM/CU gets a share of the weight stream:

1. :func:`splitk_partial_kernel` computes, for each (M tile, N tile, K slice),
   the fp32 partial product and writes it to ``workspace[split, M, N]``.
2. :func:`splitk_reduce_kernel` sums the ``SPLIT_K`` partials into ``C`` and
   casts once.

Two kernels instead of ``tl.atomic_add`` because atomics make the summation
order, and so the low bits of ``C``, differ from run to run; a benchmark's
correctness gate should see the same numbers every night.

Grid order: ``m_fast``
----------------------
Grid axis 0 varies fastest in launch order. With ``m_fast=True`` the M tiles
sit on axis 0 (grid ``(num_m, num_n, split)``), so the programs that need the
same ``B`` block are launch-order neighbours, run in the same wave, and the
second read of that block hits L2. With ``m_fast=False`` (grid
``(num_n, split, num_m)``) the twin of a program is ``num_n * split`` positions
later, often a whole wave later, after the block was evicted. This only
matters with more than one M tile and more than one wave of programs; the two
orders compute identical results (seed 002 measured 6-12% on MI210 at M=64).

The workspace is allocated by :func:`alloc_workspace` so that a benchmark can
do it once, outside the timed region.
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import _configs

MAX_M = 64


@triton.jit
def splitk_partial_kernel(
    # Pointers to matrices
    a_ptr, b_ptr, ws_ptr,
    # Matrix dimensions
    M, N, K,
    K_PER_SPLIT,  # K elements per slice, a multiple of BLOCK_K
    # Strides
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_ws_s, stride_ws_m, stride_ws_n,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    M_FAST: tl.constexpr,
):
    """One program: workspace[pid_k, M tile, N tile] = A[M tile, K slice] @ B[K slice, N tile]."""
    # The decoding must mirror the wrapper's grid tuple exactly.
    if M_FAST:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        pid_k = tl.program_id(2)
    else:
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        pid_m = tl.program_id(2)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Wrapped M/N offsets keep edge loads in bounds; the store mask drops them.
    offs_am = offs_m % M
    offs_bn = offs_n % N
    k_start = pid_k * K_PER_SPLIT
    offs_k = k_start + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K_PER_SPLIT, BLOCK_K):
        # Slices are whole BLOCK_K steps, so only the global end of K needs a
        # mask: the last slice may be short or (never, by the wrapper) empty.
        k_mask = offs_k + k < K
        a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    ws_ptrs = ws_ptr + pid_k * stride_ws_s + offs_m[:, None] * stride_ws_m + offs_n[None, :] * stride_ws_n
    tl.store(ws_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def splitk_reduce_kernel(
    # Pointers
    ws_ptr, c_ptr,
    # Dimensions: the workspace slices and C are contiguous (M, N), read as flat MN.
    MN, stride_ws_s,
    # Meta-parameters
    SPLIT_K: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """C.flat[block] = sum over s of workspace[s].flat[block], summed in a fixed order."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(ws_ptr + s * stride_ws_s + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _plan(a, b, split_k, config):
    """Check the operands and settle every launch parameter; shared with alloc_workspace."""
    M, N, K, out_dtype, kind = _configs.check_gemm_operands(a, b, "splitk_decode")
    if M > MAX_M:
        raise ValueError(f"splitk_decode is a decode kernel for M <= {MAX_M}, got M={M}; use matmul_tiled.")
    if split_k is not None and (not isinstance(split_k, int) or isinstance(split_k, bool) or split_k < 1):
        raise ValueError(f"split_k must be a positive integer, got {split_k!r}.")
    dtype_key = _configs.dtype_name(a.dtype)
    sms = _configs.num_sms(a.device)
    cfg = _configs.resolve(_configs.splitk_config(kind, dtype_key, M, N, K, sms), config, kind)
    k_tiles = triton.cdiv(K, cfg.BLOCK_K)
    num_m = triton.cdiv(M, cfg.BLOCK_M)
    num_n = triton.cdiv(N, cfg.BLOCK_N)
    if split_k is None:
        explicit = config is not None and (
            isinstance(config, _configs.KernelConfig) or "SPLIT_K" in config
        )
        split_k = cfg.SPLIT_K if explicit else _configs.splitk_split(num_m * num_n, k_tiles, sms)
    # Round each slice up to whole BLOCK_K steps, then drop slices that would
    # start past K: an empty slice would write zeros and waste a program.
    k_per_split = triton.cdiv(k_tiles, min(split_k, k_tiles)) * cfg.BLOCK_K
    split = triton.cdiv(K, k_per_split)
    return M, N, K, out_dtype, kind, cfg, num_m, num_n, split, k_per_split


def alloc_workspace(a, b, *, split_k=None, config=None):
    """The fp32 ``[split, M, N]`` workspace :func:`splitk_decode` needs for these operands.

    Call it during benchmark setup so the timed call allocates nothing.
    """
    import torch

    M, N, _, _, _, _, _, _, split, _ = _plan(a, b, split_k, config)
    return torch.empty((split, M, N), dtype=torch.float32, device=a.device)


def splitk_decode(a, b, *, m_fast: bool = True, split_k=None, out=None, workspace=None, config=None):
    """``a @ b`` for M <= 64 by split-K: fp32 partials, then a fixed-order reduction.

    a: (M, K) with M <= 64; b: (K, N), any strides (typically ``w.t()``);
    m_fast: put M tiles on grid axis 0 (see the module docstring);
    split_k: number of K slices (default: enough to fill every SM/CU);
    out: optional (M, N) contiguous output; workspace: optional fp32 tensor from
    :func:`alloc_workspace` (allocated here when omitted);
    config: dict or KernelConfig overriding the table.
    """
    return splitk_decode_launcher(
        a, b, m_fast=m_fast, split_k=split_k, out=out, workspace=workspace, config=config
    )()


def splitk_decode_launcher(a, b, *, m_fast: bool = True, split_k=None, out=None, workspace=None, config=None):
    """Check and bind everything once; return a zero-argument call that only launches (for timing).

    Decode GEMMs take 5-20 us, about what the Python checks cost, so a timed
    region that re-ran the checks would measure the host instead of the GPU.
    """
    import torch

    # (1) Check the inputs and settle the launch parameters.
    M, N, K, out_dtype, kind, cfg, num_m, num_n, split, k_per_split = _plan(a, b, split_k, config)
    # (2) Allocate, or take the caller's buffers.
    c = _configs.check_out(out, M, N, out_dtype, a.device, "splitk_decode")
    if workspace is None:
        workspace = torch.empty((split, M, N), dtype=torch.float32, device=a.device)
    elif (
        not isinstance(workspace, torch.Tensor)
        or workspace.dtype != torch.float32
        or workspace.dim() != 3
        or workspace.shape[0] < split
        or tuple(workspace.shape[1:]) != (M, N)
        or not workspace.is_contiguous()
        or workspace.device != a.device
    ):
        raise ValueError(
            f"splitk_decode: workspace must be a contiguous float32 ({split}, {M}, {N}) tensor on {a.device}; "
            "allocate it with alloc_workspace()."
        )
    # (3) Bind the two launches: partial products, then the reduction.
    grid = (num_m, num_n, split) if m_fast else (num_n, split, num_m)
    partial = splitk_partial_kernel[grid]
    partial_args = (
        a, b, workspace,
        M, N, K,
        k_per_split,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        workspace.stride(0), workspace.stride(1), workspace.stride(2),
    )
    partial_kwargs = dict(
        BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K,
        M_FAST=bool(m_fast),
        **_configs.launch_options(cfg, kind),
    )
    # The reduction is a plain elementwise pass; its block size is not worth a knob.
    block = 256 if kind[0] == "interpreter" else 1024
    reduce_grid = (triton.cdiv(M * N, block),)
    reduce = splitk_reduce_kernel[reduce_grid]
    reduce_args = (workspace, c, M * N, workspace.stride(0))
    reduce_kwargs = dict(SPLIT_K=split, BLOCK=block, num_warps=4 if kind[0] != "interpreter" else 1)

    def run():
        partial(*partial_args, **partial_kwargs)
        reduce(*reduce_args, **reduce_kwargs)
        return c

    # What perfci run reads the compiled kernels from.
    run.launches = ((splitk_partial_kernel, grid, partial_args, partial_kwargs),
                    (splitk_reduce_kernel, reduce_grid, reduce_args, reduce_kwargs))
    return run
