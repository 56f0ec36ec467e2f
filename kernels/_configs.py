"""
Device detection and deterministic launch configurations
=========================================================

perfci compares runs of the same kernel night after night, so a kernel must
launch with the *same* configuration every time it sees the same problem.
``triton.autotune`` breaks that: it re-benchmarks on every fresh process and
can pick a different winner from one run to the next, and the comparison then
measures the autotuner's noise. Instead, every kernel here looks its
configuration up in a small table keyed by vendor/arch, dtype and an M bucket
(the way ROCm/aiter keys its ``M_LEQ_64/128/...`` JSON configs), and the
caller may override single fields through ``config=``.

This module also owns the two facts every wrapper needs about a device:

- :func:`device_kind`: ``("nvidia", "sm_90")``, ``("amd", "gfx942")``,
  ``("interpreter", "cpu")`` for CPU tensors under ``TRITON_INTERPRET=1``, or
  ``("cpu", "cpu")`` for CPU tensors without it (no Triton kernel can run).
- :func:`fp8_dtype`: which float8 flavour the device's matrix units take, or
  ``None`` when it has none.

Nothing here imports triton; torch is imported lazily so the config tables
can be read without it.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

# Knobs only the AMD backend (HIPOptions) understands. Passing one to the NVIDIA
# launcher is an error there, and silently dropping one would make a user
# believe an MI300 tuning experiment ran when it did not, so both are refused.
AMD_ONLY_KNOBS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")


@dataclass(frozen=True)
class KernelConfig:
    """Every launch parameter a kernel here can take.

    Not every kernel reads every field (GEMV has no BLOCK_M, only split-K reads
    SPLIT_K). The AMD-only knobs stay ``None`` unless the device is HIP.
    """

    BLOCK_M: int = 16
    BLOCK_N: int = 16
    BLOCK_K: int = 16
    GROUP_M: int = 8
    SPLIT_K: int = 1
    num_warps: int = 4
    num_stages: int = 2
    waves_per_eu: int | None = None
    matrix_instr_nonkdim: int | None = None
    kpack: int | None = None


FIELD_NAMES = tuple(f.name for f in fields(KernelConfig))


def is_interpreting() -> bool:
    # Triton itself accepts "1", "true", "on" (knobs.env_bool); mirror that.
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


@functools.lru_cache(maxsize=None)
def _gpu_kind(index: int) -> tuple[str, str]:
    import torch

    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        # gcnArchName looks like "gfx942:sramecc+:xnack-"; the features do not
        # change which instructions or configs apply.
        return "amd", props.gcnArchName.split(":")[0]
    return "nvidia", f"sm_{props.major}{props.minor}"


def device_kind(device: Any) -> tuple[str, str]:
    """(vendor, arch) for a torch device or tensor: see the module docstring."""
    import torch

    if isinstance(device, torch.Tensor):
        device = device.device
    device = torch.device(device)
    if device.type == "cpu":
        return ("interpreter", "cpu") if is_interpreting() else ("cpu", "cpu")
    if device.type != "cuda":
        return device.type, device.type
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _gpu_kind(index)


@functools.lru_cache(maxsize=None)
def _gpu_sm_count(index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(index).multi_processor_count


def num_sms(device: Any) -> int:
    """Streaming multiprocessors (NVIDIA) or compute units (AMD) on ``device``.

    The interpreter pretends to have 4, so that the persistent kernel and the
    split-K heuristic see more tiles than programs even on tiny test shapes.
    """
    import torch

    if isinstance(device, torch.Tensor):
        device = device.device
    device = torch.device(device)
    if device.type != "cuda":
        return 4
    return _gpu_sm_count(device.index if device.index is not None else torch.cuda.current_device())


def fp8_dtype(kind: tuple[str, str]):
    """The float8 e4m3 dtype the device's matrix units take, or None.

    NVIDIA has fp8 tensor cores from Ada/Hopper (cc 8.9). MI300 (gfx942) uses the
    "fnuz" encoding (no negative zero, bias 8); MI350 (gfx950) switched to the
    OCP e4m3fn encoding that NVIDIA uses.
    """
    import torch

    vendor, arch = kind
    if vendor == "nvidia":
        cc = int(arch.removeprefix("sm_").rstrip("a") or 0)
        return torch.float8_e4m3fn if cc >= 89 else None
    if vendor == "amd":
        if arch == "gfx942":
            return torch.float8_e4m3fnuz
        if arch == "gfx950":
            return torch.float8_e4m3fn
    return None


def _is_pow2(x: int) -> bool:
    return isinstance(x, int) and x > 0 and (x & (x - 1)) == 0


def resolve(default: KernelConfig, override: Any, kind: tuple[str, str], *, min_block: int = 16) -> KernelConfig:
    """Apply the caller's ``config=`` (dict, KernelConfig or None) to a table default.

    Raises ValueError for an unknown field, a non-power-of-two block, or an
    AMD-only knob on a device that is not HIP. ``min_block`` is 16 for kernels
    that call ``tl.dot`` (its smallest supported tile) and 1 for GEMV.
    """
    if override is None:
        cfg = default
    else:
        if isinstance(override, KernelConfig):
            # A whole KernelConfig replaces the table default field for field.
            items = {f: getattr(override, f) for f in FIELD_NAMES}
        elif isinstance(override, Mapping):
            items = dict(override)
        else:
            raise ValueError(f"config must be a dict or KernelConfig, not {type(override).__name__}.")
        unknown = sorted(set(items) - set(FIELD_NAMES))
        if unknown:
            raise ValueError(f"unknown config field(s) {unknown}; known fields are {list(FIELD_NAMES)}.")
        if kind[0] != "amd":
            bad = [k for k in AMD_ONLY_KNOBS if items.get(k) is not None]
            if bad:
                raise ValueError(
                    f"config field(s) {bad} only exist on AMD (HIP) devices, and this device is {kind[0]} {kind[1]}."
                )
        cfg = replace(default, **items)
    for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        value = getattr(cfg, name)
        if not _is_pow2(value) or value < min_block:
            raise ValueError(f"{name} must be a power of two >= {min_block}, got {value!r}.")
    if not _is_pow2(cfg.num_warps):
        raise ValueError(f"num_warps must be a power of two, got {cfg.num_warps!r}.")
    if not (isinstance(cfg.GROUP_M, int) and cfg.GROUP_M >= 1):
        raise ValueError(f"GROUP_M must be a positive integer, got {cfg.GROUP_M!r}.")
    if not (isinstance(cfg.SPLIT_K, int) and cfg.SPLIT_K >= 1):
        raise ValueError(f"SPLIT_K must be a positive integer, got {cfg.SPLIT_K!r}.")
    if not (isinstance(cfg.num_stages, int) and cfg.num_stages >= 1):
        raise ValueError(f"num_stages must be a positive integer, got {cfg.num_stages!r}.")
    return cfg


def launch_options(cfg: KernelConfig, kind: tuple[str, str]) -> dict[str, int]:
    """Keyword arguments for ``kernel[grid](..., **options)``.

    The AMD knobs appear only on HIP: the NVIDIA launcher rejects unknown
    options, and :func:`resolve` already refused explicit ones elsewhere.
    """
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    if kind[0] == "amd":
        for knob in AMD_ONLY_KNOBS:
            value = getattr(cfg, knob)
            if value is not None:
                options[knob] = value
    return options


# ---------------------------------------------------------------------------
# Operand checks shared by every GEMM wrapper.
# ---------------------------------------------------------------------------


def check_gemm_operands(a, b, kernel: str):
    """Validate ``a (M, K)`` and ``b (K, N)``; return (M, N, K, out_dtype, kind).

    Raises ValueError with one sentence for the first problem found.
    """
    import torch

    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise ValueError(f"{kernel} takes torch tensors a and b.")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"{kernel} needs 2-D a (M, K) and b (K, N), got shapes {tuple(a.shape)} and {tuple(b.shape)}.")
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"{kernel}: inner dimensions differ, a is {tuple(a.shape)} and b is {tuple(b.shape)}.")
    if min(M, N, K) < 1:
        raise ValueError(f"{kernel}: every dimension must be >= 1, got M={M}, N={N}, K={K}.")
    if a.device != b.device:
        raise ValueError(f"{kernel}: a is on {a.device} but b is on {b.device}.")
    if a.dtype != b.dtype:
        raise ValueError(f"{kernel}: a is {a.dtype} but b is {b.dtype}; both must have the same dtype.")
    kind = device_kind(a.device)
    if kind[0] == "cpu":
        raise ValueError(
            f"{kernel}: tensors are on the CPU but TRITON_INTERPRET=1 is not set, so no Triton kernel can run there."
        )
    if kind[0] not in ("nvidia", "amd", "interpreter"):
        raise ValueError(f"{kernel}: device type {a.device.type} is not supported.")
    fp8_types = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
    if a.dtype in fp8_types:
        wanted = fp8_dtype(kind)
        if wanted is None:
            raise ValueError(f"{kernel}: {kind[0]} {kind[1]} has no fp8 matrix instructions.")
        if a.dtype != wanted:
            raise ValueError(f"{kernel}: {kind[1]} takes {wanted} for fp8, got {a.dtype}.")
        out_dtype = torch.bfloat16
    elif a.dtype in (torch.float32, torch.float16, torch.bfloat16):
        out_dtype = a.dtype
    else:
        raise ValueError(f"{kernel} supports float32, float16, bfloat16 and float8 e4m3, got {a.dtype}.")
    return M, N, K, out_dtype, kind


def check_out(out, M: int, N: int, dtype, device, kernel: str):
    """Return ``out`` if it is a usable (M, N) contiguous output, else raise ValueError."""
    import torch

    if out is None:
        return torch.empty((M, N), dtype=dtype, device=device)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N):
        raise ValueError(f"{kernel}: out must be a ({M}, {N}) tensor, got {getattr(out, 'shape', type(out).__name__)}.")
    if out.dtype != dtype:
        raise ValueError(f"{kernel}: out must be {dtype}, got {out.dtype}.")
    if out.device != device:
        raise ValueError(f"{kernel}: out is on {out.device} but the inputs are on {device}.")
    if not out.is_contiguous():
        raise ValueError(f"{kernel}: out must be contiguous.")
    return out


def dtype_name(dtype) -> str:
    import torch

    return {
        torch.float32: "fp32",
        torch.float16: "fp16",
        torch.bfloat16: "bf16",
        torch.float8_e4m3fn: "fp8",
        torch.float8_e4m3fnuz: "fp8",
    }[dtype]


# ---------------------------------------------------------------------------
# Config tables. Keyed by (vendor, dtype name) and an M bucket; the first row
# whose bound is >= M wins. The interpreter uses tiny blocks and one stage so
# that CPU tests run in seconds and still cross tile edges.
# ---------------------------------------------------------------------------

_INTERP = KernelConfig(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, num_warps=1, num_stages=1)
_BIG = 1 << 62

# Tiled (prefill) GEMM.
# NVIDIA sm_90: 128x256x64, GROUP_M=8, 8 warps, 3 stages is the bf16 shape
# Triton's tutorials and tritonbench converge on for H100/H200 (fits 228 KB of
# shared memory with 3 stages); small M halves BLOCK_M so fewer rows are masked.
# fp32 runs as tf32, whose operands are twice as wide, so BLOCK_K halves to stay
# inside shared memory. fp8 doubles BLOCK_K for the same byte footprint.
# AMD gfx942/gfx950: aiter's a16w16 tables use 256x256x64 (256x128 here, see the row), GROUP_M=4, 8 warps,
# 2 stages (the AMD guide: "num_stages=2 for a single GEMM"), waves_per_eu=2 and
# 16x16 MFMA (matrix_instr_nonkdim=16: "typically outperforms" 32x32 on MI300).
_TILED = {
    ("nvidia", "16bit"): (
        (64, KernelConfig(64, 128, 64, GROUP_M=8, num_warps=4, num_stages=4)),
        (_BIG, KernelConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=3)),
    ),
    ("nvidia", "fp32"): (
        (64, KernelConfig(64, 128, 32, GROUP_M=8, num_warps=4, num_stages=4)),
        (_BIG, KernelConfig(128, 128, 32, GROUP_M=8, num_warps=8, num_stages=3)),
    ),
    ("nvidia", "fp8"): (
        (64, KernelConfig(64, 128, 128, GROUP_M=8, num_warps=4, num_stages=4)),
        (_BIG, KernelConfig(128, 256, 128, GROUP_M=8, num_warps=8, num_stages=3)),
    ),
    ("amd", "16bit"): (
        (64, KernelConfig(64, 128, 64, GROUP_M=4, num_warps=4, num_stages=2, waves_per_eu=2, matrix_instr_nonkdim=16)),
        (256, KernelConfig(128, 128, 64, GROUP_M=4, num_warps=4, num_stages=2, waves_per_eu=2, matrix_instr_nonkdim=16)),
        # 256x128, not aiter's 256x256: `perfci compile prefill --arch gfx942,gfx950` showed the
        # 256x256x64 8-warp tile spilling under waves_per_eu=2's 256-VGPR budget: gfx942 25 VGPRs
        # (plain; 232 with the GELU epilogue), gfx950 8-239 VGPRs with the bias epilogues.
        # 256x128x64 compiles spill-free on both (gfx942 176-200 VGPRs, gfx950 126 VGPRs + 16-72 AGPRs).
        (_BIG, KernelConfig(256, 128, 64, GROUP_M=4, num_warps=8, num_stages=2, waves_per_eu=2, matrix_instr_nonkdim=16)),
    ),
    ("amd", "fp32"): (
        (64, KernelConfig(64, 64, 32, GROUP_M=4, num_warps=4, num_stages=2, waves_per_eu=2, matrix_instr_nonkdim=16)),
        (_BIG, KernelConfig(128, 128, 32, GROUP_M=4, num_warps=8, num_stages=2, waves_per_eu=2, matrix_instr_nonkdim=16)),
    ),
    ("amd", "fp8"): (
        (64, KernelConfig(64, 128, 128, GROUP_M=4, num_warps=4, num_stages=2, waves_per_eu=2, matrix_instr_nonkdim=16)),
        # 256x128x128, not 256x256x128: on gfx942 the 256x256 fp8 tile spilled 30 VGPRs
        # (perfci compile prefill --arch gfx942); 256x128 compiles spill-free on gfx942 and gfx950.
        (_BIG, KernelConfig(256, 128, 128, GROUP_M=4, num_warps=8, num_stages=2, waves_per_eu=2, matrix_instr_nonkdim=16)),
    ),
}


def _dtype_class(dtype_key: str) -> str:
    return "16bit" if dtype_key in ("fp16", "bf16") else dtype_key


def _lookup(table, kind: tuple[str, str], dtype_key: str, m: int) -> KernelConfig:
    vendor = kind[0]
    if vendor not in ("nvidia", "amd"):
        return _INTERP
    for bound, cfg in table[(vendor, _dtype_class(dtype_key))]:
        if m <= bound:
            return cfg
    raise AssertionError("config table has no catch-all row")  # unreachable: last bound is _BIG


def tiled_config(kind: tuple[str, str], dtype_key: str, m: int, n: int, k: int) -> KernelConfig:
    """Default for :mod:`kernels.matmul_tiled` (and the persistent kernel)."""
    return _lookup(_TILED, kind, dtype_key, m)


# Persistent GEMM: tutorial 09's non-TMA defaults on NVIDIA (128x256x64, 8 warps,
# 3 stages for 16-bit; 128x256x128 for fp8). On AMD, 256x256 tiles leave too few
# tiles per CU on mid-size shapes for the persistent loop to balance, so it uses
# the 128x128 row of the tiled table.
def persistent_config(kind: tuple[str, str], dtype_key: str, m: int, n: int, k: int) -> KernelConfig:
    if kind[0] == "amd":
        return _lookup(_TILED, kind, dtype_key, min(m, 256))
    return _lookup(_TILED, kind, dtype_key, max(m, 65))


# Split-K decode GEMM (M <= 64). One M tile of 16 rows covers M <= 16 with no
# wasted MMA rows (16 is the smallest tl.dot tile). On AMD, M in 17..64 uses
# BLOCK_M=32 (aiter's M_LEQ_64 rows use 16 or 32; 32x32 MFMA tiles give two M
# tiles for M=64, the case seed 002 measured m_fast on). BLOCK_K is long because
# decode is a weight stream: each program should issue big, K-contiguous loads.
# SPLIT_K is filled in by :func:`splitk_split` from the SM/CU count.
def splitk_config(kind: tuple[str, str], dtype_key: str, m: int, n: int, k: int, sms: int) -> KernelConfig:
    vendor = kind[0]
    if vendor not in ("nvidia", "amd"):
        return _INTERP
    bytes_per = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[dtype_key]
    block_k = {4: 64, 2: 128, 1: 256}[bytes_per]
    if vendor == "nvidia":
        # Wide N already gives >= 2 waves without splitting; then a 16x128 tile
        # with half the K depth measured ~20% faster on H200 (64x14336x4096 bf16:
        # 57 us vs 72 us), since each program re-reads A for fewer N columns.
        if -(-m // 16) * -(-n // 64) >= 2 * sms:
            return KernelConfig(BLOCK_M=16, BLOCK_N=128, BLOCK_K=block_k // 2, num_warps=4, num_stages=4)
        # 4 warps: on the H200 (triton 3.6, spill-free there) `perfci confirm --suite decode` measured
        # 8 warps 2.8-11% slower on four cases (1x4096x14336 +3.4%, 64x1024x6144 +11%). Triton 3.9's
        # ptxas spills 8 B of this config (`perfci compile decode --arch sm_90`), accepted in
        # perfci/compile/report.py for that reason.
        return KernelConfig(BLOCK_M=16, BLOCK_N=64, BLOCK_K=block_k, num_warps=4, num_stages=4)
    block_m = 16 if m <= 16 else 32
    return KernelConfig(
        BLOCK_M=block_m,
        BLOCK_N=64,
        BLOCK_K=2 * block_k,
        num_warps=4,
        num_stages=2,
        waves_per_eu=2,
        matrix_instr_nonkdim=16,
    )


def splitk_split(num_programs_mn: int, k_tiles: int, sms: int) -> int:
    """Split count so that (M tiles x N tiles x split) covers every SM/CU twice.

    Two programs per SM/CU let one program's loads overlap the other's tail;
    on an H200 (bf16, M=32..64, N=1024..4096) doubling the one-wave split cut
    the kernel time by 10-15%. More splits only add fp32 partial traffic. Each
    split keeps at least two BLOCK_K steps so the pipeline has something to
    overlap, and 32 caps the workspace.
    """
    want = -(-2 * sms // max(1, num_programs_mn))
    return max(1, min(want, max(1, k_tiles // 2), 32))


# GEMV (M = 1): no tl.dot, so BLOCK_N can be small. Each program reads BLOCK_N
# rows of the (N, K) weight along K, BLOCK_K contiguous elements at a time;
# BLOCK_N shrinks until there are >= 2 programs per SM/CU, because a GEMV is
# pure weight streaming and idle SMs are lost bandwidth.
def gemv_config(kind: tuple[str, str], dtype_key: str, n: int, k: int, sms: int) -> KernelConfig:
    if kind[0] not in ("nvidia", "amd"):
        return KernelConfig(BLOCK_M=1, BLOCK_N=8, BLOCK_K=16, num_warps=1, num_stages=1)
    block_n = 128
    while block_n > 8 and -(-n // block_n) < 2 * sms:
        block_n //= 2
    # Keep the per-program tile at 8K elements (4K for fp32): on H200 (bf16,
    # 4096x4096) 8x1024 ran in 19 us vs 24.5 us for 8x512, and 32x1024 spilled
    # registers (132 us).
    elems = 4096 if dtype_key == "fp32" else 8192
    block_k = min(1024, elems // block_n)
    if kind[0] == "amd":
        return KernelConfig(BLOCK_M=1, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4, num_stages=2, waves_per_eu=2)
    return KernelConfig(BLOCK_M=1, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4, num_stages=3)
