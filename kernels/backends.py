"""perfci's own kernels, declared through the public kernel API (perfci.kernel; docs/kernels.md).

:data:`BACKENDS` is the explicit list: the Triton tiled, split-K decode, GEMV
and persistent GEMMs of this package, and ``torch_matmul`` (the vendor library,
cuBLAS / hipBLASLt through torch) as the reference beside them. Installed, this
module is ``perfci_kernels.backends`` (the ``perfci.kernels`` entry point);
in perfci's own checkout ``[tool.perfci] kernels`` names it as
``kernels.backends``, so a bisect or confirm worktree measures its revision's copy.

Importing it imports neither torch nor triton: suites are checked with
``Backend.check_case`` on machines, and in processes, that never touch a GPU.
The prepare functions import the kernels (and through them triton) when a
case is actually run.

Device ``cpu`` means torch tensors on the CPU and Triton kernels through the
interpreter (``TRITON_INTERPRET=1``, set by the caller before triton is first
imported). The interpreter computes bf16 through numpy, which has no bf16, so
bf16 (and fp8) Triton cases are refused there as Unsupported (a skip); the
vendor reference ``torch_matmul`` runs fp32/fp16/bf16 on the CPU.
"""
from __future__ import annotations

from typing import Any

from perfci.kernel import (EPILOGUES, TOLERANCE, LaunchConfig, Prepared, Target, Unsupported, backend,
                           gemm_inputs, poisoner, reference)
from perfci.model import CaseSpec

from . import _configs
from .canary import perfci_canary

TRITON_DTYPES = ("fp32", "fp16", "bf16", "fp8")
DECODE_MAX_M = 64

# Variant key -> KernelConfig field. Variants come from TOML (ints, strings).
_CONFIG_KEYS = {
    "block_m": "BLOCK_M",
    "block_n": "BLOCK_N",
    "block_k": "BLOCK_K",
    "group_m": "GROUP_M",
    "num_warps": "num_warps",
    "num_stages": "num_stages",
    "waves_per_eu": "waves_per_eu",
    "matrix_instr_nonkdim": "matrix_instr_nonkdim",
}
_AMD_KEYS = frozenset({"waves_per_eu", "matrix_instr_nonkdim"})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_pow2(value: Any) -> bool:
    return _is_int(value) and value > 0 and value & (value - 1) == 0


def _check_config(spec: CaseSpec, min_block: int = 16) -> str | None:
    """The variant values every Triton kernel here reads (block sizes, warps, stages, AMD knobs).

    perfci has already checked the dtype, the variant keys and the epilogue
    against each Backend's declaration.
    """
    for key, value in spec.variant.items():
        if key in ("block_m", "block_n", "block_k"):
            if not _is_pow2(value) or value < min_block:
                return f"{spec.kernel}: variant {key} must be a power of two >= {min_block}, got {value!r}"
        elif key == "num_warps":
            if not _is_pow2(value) or value > 32:
                return f"{spec.kernel}: variant num_warps must be a power of two <= 32, got {value!r}"
        elif key in ("num_stages", "group_m", "split_k"):
            if not _is_int(value) or value < 1:
                return f"{spec.kernel}: variant {key} must be a positive integer, got {value!r}"
        elif key == "waves_per_eu":
            if not _is_int(value) or value < 0:
                return f"{spec.kernel}: variant waves_per_eu must be a non-negative integer, got {value!r}"
        elif key == "matrix_instr_nonkdim":
            if value not in (0, 16, 32) or not _is_int(value):
                return f"{spec.kernel}: variant matrix_instr_nonkdim must be 0, 16 or 32, got {value!r}"
        elif key == "m_fast":
            if value not in (0, 1) or not _is_int(value) and not isinstance(value, bool):
                return f"{spec.kernel}: variant m_fast must be 0 or 1, got {value!r}"
    # fp8 matrix instructions consume K in steps of 32 on both vendors.
    if spec.dtype == "fp8" and _is_int(spec.variant.get("block_k")) and spec.variant["block_k"] < 32:
        return f"{spec.kernel}: fp8 needs block_k >= 32, got {spec.variant['block_k']}"
    return None


def _config_from_variant(variant) -> dict[str, int]:
    return {_CONFIG_KEYS[k]: int(v) for k, v in variant.items() if k in _CONFIG_KEYS}


# ---------------------------------------------------------------------------
# What each Triton kernel launches with on a Target (Backend.configs): perfci compile plans
# these for any arch, from this revision's tables, through the launchers' own config functions.
# ---------------------------------------------------------------------------


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _wanted(spec: CaseSpec, override) -> dict[str, int] | None:
    """The case's variant as config fields, ``override`` on top; None when neither sets one."""
    out = _config_from_variant(spec.variant)
    out.update({k: int(v) for k, v in (override or {}).items()})
    return out or None


def _launch(module: str, kernel: str, cfg: _configs.KernelConfig, kind, values=()) -> LaunchConfig:
    return LaunchConfig(f"{__package__}.{module}", kernel, cfg, tuple(_configs.launch_options(cfg, kind).items()),
                        tuple(values))


def _tiled_configs(spec: CaseSpec, target: Target, override=None) -> tuple[LaunchConfig, ...]:
    kind = target.kind
    default = _configs.tiled_config(kind, spec.dtype, spec.m, spec.n, spec.k)
    return (_launch("matmul_tiled", "matmul_tiled_kernel", _configs.resolve(default, _wanted(spec, override), kind),
                    kind),)


def _persistent_configs(spec: CaseSpec, target: Target, override=None) -> tuple[LaunchConfig, ...]:
    kind = target.kind
    default = _configs.persistent_config(kind, spec.dtype, spec.m, spec.n, spec.k)
    return (_launch("matmul_persistent", "matmul_persistent_kernel",
                    _configs.resolve(default, _wanted(spec, override), kind), kind),)


def _gemv_configs(spec: CaseSpec, target: Target, override=None) -> tuple[LaunchConfig, ...]:
    kind = target.kind
    default = _configs.gemv_config(kind, spec.dtype, spec.n, spec.k, target.units)
    return (_launch("gemv", "gemv_kernel", _configs.resolve(default, _wanted(spec, override), kind, min_block=1),
                    kind),)


# splitk_decode.py's reduction: one program per this many outputs, 4 warps.
SPLITK_REDUCE_BLOCK, SPLITK_REDUCE_WARPS = 1024, 4


def _splitk_configs(spec: CaseSpec, target: Target, override=None) -> tuple[LaunchConfig, ...]:
    """splitk_decode.py's _plan: the partial-product kernel (split: how many K slices, k_per_split:
    each slice's K), then the reduction."""
    kind, m, n, k = target.kind, spec.m, spec.n, spec.k
    default = _configs.splitk_config(kind, spec.dtype, m, n, k, target.units)
    cfg = _configs.resolve(default, _wanted(spec, override), kind)
    k_tiles = _cdiv(k, cfg.BLOCK_K)
    split_k = int(spec.variant["split_k"]) if "split_k" in spec.variant else \
        _configs.splitk_split(_cdiv(m, cfg.BLOCK_M) * _cdiv(n, cfg.BLOCK_N), k_tiles, target.units)
    k_per_split = _cdiv(k_tiles, min(split_k, k_tiles)) * cfg.BLOCK_K
    values = (("split", _cdiv(k, k_per_split)), ("k_per_split", k_per_split))
    return (_launch("splitk_decode", "splitk_partial_kernel", cfg, kind, values),
            LaunchConfig(f"{__package__}.splitk_decode", "splitk_reduce_kernel", None,
                         (("num_warps", SPLITK_REDUCE_WARPS),), (("block", SPLITK_REDUCE_BLOCK),)))


def _refuse_on_device(spec: CaseSpec, device, triton_kernel: bool) -> None:
    """Unsupported for cases this device cannot run (the worker records them as skips)."""
    amd_only = sorted(set(spec.variant) & _AMD_KEYS)
    if amd_only:
        vendor, arch = _configs.device_kind(device)
        if vendor != "amd":  # a suite may carry AMD knobs for its MI300 cases
            raise Unsupported(f"config field(s) {amd_only} only exist on AMD (HIP) devices, and this device "
                              f"is {vendor} {arch}.")
    if spec.dtype == "fp8" and device.type != "cpu" and _configs.fp8_dtype(_configs.device_kind(device)) is None:
        vendor, arch = _configs.device_kind(device)
        raise Unsupported(f"{vendor} {arch} has no fp8 matrix units, so fp8 cases cannot run here.")
    if device.type != "cpu":
        return
    if triton_kernel:
        if spec.dtype == "bf16":
            raise Unsupported("bf16 Triton kernels are unreliable in the interpreter (numpy has no bf16); run this case on a GPU.")
        if spec.dtype == "fp8":
            raise Unsupported("fp8 Triton kernels need a GPU with fp8 matrix units; the CPU interpreter has none.")
    elif spec.dtype == "fp8":
        raise Unsupported("torch_matmul fp8 uses torch._scaled_mm, which needs an fp8-capable GPU, not the CPU.")


def _inputs(spec: CaseSpec, device, seed: int, *, bias: bool = False):
    fp8 = _configs.fp8_dtype(_configs.device_kind(device)) if spec.dtype == "fp8" else None
    return gemm_inputs(spec, device, seed, bias=bias, fp8_dtype=fp8)


# ---------------------------------------------------------------------------
# matmul_tiled
# ---------------------------------------------------------------------------

_TILED_KEYS = frozenset({"group_m", "block_m", "block_n", "block_k", "num_warps", "num_stages"} | _AMD_KEYS)


@backend("matmul_tiled", description="Triton tiled GEMM, grouped launch order, fused bias/activation epilogues",
         dtypes=TRITON_DTYPES, variant_keys=_TILED_KEYS, epilogues=EPILOGUES, check=_check_config,
         configs=_tiled_configs)
def matmul_tiled(spec: CaseSpec, device, seed: int) -> Prepared:
    _refuse_on_device(spec, device, triton_kernel=True)
    import torch

    from .matmul_tiled import matmul_tiled_launcher

    epilogue = str(spec.variant.get("epilogue", "none"))
    a, w, bias, out_dtype = _inputs(spec, device, seed, bias=epilogue != "none")
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    config = _config_from_variant(spec.variant) or None
    # Checks and argument binding happen here, once; run is the bare launch.
    run = matmul_tiled_launcher(a, w.t(), bias=bias, epilogue=epilogue, out=out, config=config)
    return Prepared(run, out, reference(a, w, bias, epilogue), TOLERANCE[spec.dtype], poisoner(out))


# ---------------------------------------------------------------------------
# splitk_decode
# ---------------------------------------------------------------------------

_SPLITK_KEYS = frozenset({"m_fast", "split_k", "block_m", "block_n", "block_k", "num_warps", "num_stages"} | _AMD_KEYS)


def _check_splitk(spec: CaseSpec) -> str | None:
    reason = _check_config(spec)
    if reason:
        return reason
    if spec.m > DECODE_MAX_M:
        return f"splitk_decode is a decode kernel for m <= {DECODE_MAX_M}, got m={spec.m}"
    return None


@backend("splitk_decode",
         description="Triton split-K decode GEMM (M <= 64) with fp32 workspace and reduction; m_fast grid order",
         dtypes=TRITON_DTYPES, variant_keys=_SPLITK_KEYS, check=_check_splitk, configs=_splitk_configs)
def splitk_decode(spec: CaseSpec, device, seed: int) -> Prepared:
    _refuse_on_device(spec, device, triton_kernel=True)
    import torch

    from .splitk_decode import alloc_workspace, splitk_decode_launcher

    a, w, _, out_dtype = _inputs(spec, device, seed)
    b = w.t()
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    m_fast = bool(int(spec.variant.get("m_fast", 1)))
    split_k = int(spec.variant["split_k"]) if "split_k" in spec.variant else None
    config = _config_from_variant(spec.variant) or None
    # Allocated here, outside the timed region, and sized by the same planner
    # the kernel uses.
    workspace = alloc_workspace(a, b, split_k=split_k, config=config)
    run = splitk_decode_launcher(a, b, m_fast=m_fast, split_k=split_k, out=out, workspace=workspace, config=config)
    return Prepared(run, out, reference(a, w), TOLERANCE[spec.dtype], poisoner(out, workspace))


# ---------------------------------------------------------------------------
# gemv
# ---------------------------------------------------------------------------

_GEMV_KEYS = frozenset({"block_n", "block_k", "num_warps", "num_stages", "waves_per_eu"})


def _check_gemv(spec: CaseSpec) -> str | None:
    reason = _check_config(spec, min_block=1)
    if reason:
        return reason
    if spec.m != 1:
        return f"gemv takes exactly one row (m=1), got m={spec.m}"
    return None


@backend("gemv", description="Triton GEMV for M = 1 (vector units, no tl.dot)",
         dtypes=TRITON_DTYPES, variant_keys=_GEMV_KEYS, check=_check_gemv, configs=_gemv_configs)
def gemv(spec: CaseSpec, device, seed: int) -> Prepared:
    _refuse_on_device(spec, device, triton_kernel=True)
    import torch

    from .gemv import gemv_launcher

    a, w, _, out_dtype = _inputs(spec, device, seed)
    out = torch.empty((1, spec.n), dtype=out_dtype, device=device)
    config = _config_from_variant(spec.variant) or None
    run = gemv_launcher(a, w.t(), out=out, config=config)
    return Prepared(run, out, reference(a, w), TOLERANCE[spec.dtype], poisoner(out))


# ---------------------------------------------------------------------------
# matmul_persistent
# ---------------------------------------------------------------------------

_PERSISTENT_KEYS = frozenset({"block_m", "block_n", "block_k", "group_m", "num_warps", "num_stages"} | _AMD_KEYS)


@backend("matmul_persistent",
         description="Triton persistent GEMM: one program per SM/CU looping over tiles in grouped order",
         dtypes=TRITON_DTYPES, variant_keys=_PERSISTENT_KEYS, check=_check_config,
         configs=_persistent_configs)
def matmul_persistent(spec: CaseSpec, device, seed: int) -> Prepared:
    _refuse_on_device(spec, device, triton_kernel=True)
    import torch

    from .matmul_persistent import matmul_persistent_launcher

    a, w, _, out_dtype = _inputs(spec, device, seed)
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    config = _config_from_variant(spec.variant) or None
    run = matmul_persistent_launcher(a, w.t(), out=out, config=config)
    return Prepared(run, out, reference(a, w), TOLERANCE[spec.dtype], poisoner(out))


# ---------------------------------------------------------------------------
# torch_matmul: the vendor library (cuBLAS / hipBLASLt) through torch
# ---------------------------------------------------------------------------


def _check_torch(spec: CaseSpec) -> str | None:
    # torch._scaled_mm requires both dimensions of its column-major B to be
    # multiples of 16.
    if spec.dtype == "fp8" and (spec.n % 16 or spec.k % 16):
        return f"torch_matmul fp8 (torch._scaled_mm) needs n and k to be multiples of 16, got n={spec.n}, k={spec.k}"
    return None


@backend("torch_matmul",
         description="vendor reference: torch.matmul (cuBLAS / hipBLASLt); fp8 via torch._scaled_mm with unit scales",
         dtypes=TRITON_DTYPES, check=_check_torch)
def torch_matmul(spec: CaseSpec, device, seed: int) -> Prepared:
    _refuse_on_device(spec, device, triton_kernel=False)
    import torch

    a, w, _, out_dtype = _inputs(spec, device, seed)
    b = w.t()  # column-major (K, N): what _scaled_mm requires, and nn.Linear's layout
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    if spec.dtype == "fp8":
        # Unit scales: the benchmark measures the GEMM, not the scaling, and
        # the reference then needs no scale either.
        one = torch.ones((), dtype=torch.float32, device=device)

        def run():
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=out)

    else:

        def run():
            return torch.matmul(a, b, out=out)

    return Prepared(run, out, reference(a, w), TOLERANCE[spec.dtype], poisoner(out))


# The explicit list perfci reads (docs/kernels.md): nothing here is found by scanning.
BACKENDS = (matmul_tiled, splitk_decode, gemv, matmul_persistent, torch_matmul, perfci_canary)
