"""The kernels perfci can benchmark, and how to turn a case into a timeable call.

A suite names a kernel (``splitk_decode``) and a variant (``{m_fast: 1}``); the
measurement engine needs a zero-argument call that launches exactly that
kernel into preallocated buffers, plus what it takes to check the output.
:class:`Backend` is that translation for one kernel and :data:`BACKENDS` is the
explicit registry: a literal dict, so the list of benchmarkable kernels is read
in one place rather than discovered by import side effects.

This module imports neither torch nor triton at import time: suites are
validated (``Backend.check``) on machines, and in processes, that never touch
a GPU. ``prepare`` imports them when a case is actually run.

Device ``cpu`` means torch tensors on the CPU and Triton kernels through the
interpreter (``TRITON_INTERPRET=1``, set by the caller before triton is first
imported). The interpreter computes bf16 through numpy, which has no bf16, so
bf16 (and fp8) Triton cases are refused there with a ValueError; the vendor
reference ``torch_matmul`` runs fp32/fp16/bf16 on the CPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from perfci.errors import PerfciError
from perfci.model import CaseSpec

if TYPE_CHECKING:  # pragma: no cover
    import torch


@dataclass
class Prepared:
    run: Callable[[], object]  # zero-arg thunk: ONE launch of the case into preallocated buffers (the timed region; no allocation, no host sync inside)
    output: "torch.Tensor"  # the tensor run() writes
    reference: Callable[[], "torch.Tensor"]  # float32 reference of the same function on the same inputs
    tolerance: float  # max allowed ||out - ref|| / ||ref|| for this dtype and K
    poison: Callable[[], None]  # fill output (and any workspace) with NaN, so unwritten elements fail the check


@dataclass(frozen=True)
class Backend:
    name: str  # the suite's kernel name, e.g. "splitk_decode"
    description: str
    dtypes: tuple[str, ...]  # subset of ("fp32","fp16","bf16","fp8")
    variant_keys: frozenset[str]  # allowed variant keys
    check: Callable[[CaseSpec], "str | None"]  # PURE (no torch import): why this kernel can't take the case, or None
    prepare: Callable[[CaseSpec, "torch.device", int], Prepared]  # (spec, device, seed) -> Prepared


# ---------------------------------------------------------------------------
# Tolerances
# ---------------------------------------------------------------------------
# The reference is computed from the very same (already rounded) inputs in
# float64, so the only differences a correct kernel shows are (a) rounding of
# each product when the inputs are narrower than the multiplier, (b) fp32
# accumulation, and (c) the final cast of C. For random-normal inputs those
# errors are independent across the K terms, so the error of a dot product
# grows like sqrt(K), exactly as its magnitude does: the *relative* error does
# not grow with K, and no K scaling is applied. The numbers are ~10x the
# dominant term:
#   fp32: torch/Triton may run fp32 GEMMs as tf32 (10-bit mantissa, unit
#         roundoff 2^-11 ~ 4.9e-4 per operand)             -> 5e-3
#   fp16: exact products, fp16 output (2^-11 ~ 4.9e-4)       -> 1e-2
#   bf16: exact products, bf16 output (2^-8 ~ 3.9e-3)        -> 2e-2
#   fp8:  exact products, bf16 output (3.9e-3); the looser gate leaves room
#         for vendor fp8 paths that accumulate in reduced precision
#         ("fast accumulation")                               -> 8e-2
# A wrong kernel (missing tile, wrong K slice, transposed operand) gives
# relative errors of order 1, or NaN from the poisoned output, far above these.
TOLERANCE = {"fp32": 5e-3, "fp16": 1e-2, "bf16": 2e-2, "fp8": 8e-2}

TRITON_DTYPES = ("fp32", "fp16", "bf16", "fp8")
EPILOGUES = ("none", "bias", "bias_relu", "bias_silu", "bias_gelu")
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


def _check_common(spec: CaseSpec, backend_dtypes: tuple[str, ...], keys: frozenset[str], min_block: int = 16) -> str | None:
    """Shape, dtype and variant-value checks every backend shares."""
    for dim in ("m", "n", "k"):
        value = getattr(spec, dim)
        if not _is_int(value) or value < 1:
            return f"{spec.kernel}: {dim} must be a positive integer, got {value!r}"
    if spec.dtype not in backend_dtypes:
        return f"{spec.kernel} does not support dtype {spec.dtype} (it takes {', '.join(backend_dtypes)})"
    unknown = sorted(set(spec.variant) - keys)
    if unknown:
        allowed = ", ".join(sorted(keys)) or "none"
        return f"{spec.kernel} has no variant key(s) {', '.join(unknown)} (allowed: {allowed})"
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
        elif key == "epilogue":
            if value not in EPILOGUES:
                return f"{spec.kernel}: variant epilogue must be one of {', '.join(EPILOGUES)}, got {value!r}"
    # fp8 matrix instructions consume K in steps of 32 on both vendors.
    if spec.dtype == "fp8" and _is_int(spec.variant.get("block_k")) and spec.variant["block_k"] < 32:
        return f"{spec.kernel}: fp8 needs block_k >= 32, got {spec.variant['block_k']}"
    return None


def _config_from_variant(variant) -> dict[str, int]:
    return {_CONFIG_KEYS[k]: int(v) for k, v in variant.items() if k in _CONFIG_KEYS}


# ---------------------------------------------------------------------------
# Shared preparation: inputs, reference, Prepared.
# ---------------------------------------------------------------------------


class Unsupported(ValueError):
    """The case cannot run on this device by its own declaration (fp8 without fp8 units,
    bf16 in the interpreter): the worker records a ``skip``. Any other error in a
    case's preparation (a bad seed, a kernel's own check) is an ``error``, never a skip,
    so a run cannot go green by skipping what it failed to measure."""


def _refuse_on_cpu(spec: CaseSpec, device, triton_kernel: bool) -> None:
    """Unsupported for cases this device cannot run (the worker records them as skips)."""
    amd_only = sorted(set(spec.variant) & _AMD_KEYS)
    if amd_only:
        from kernels import _configs

        vendor, arch = _configs.device_kind(device)
        if vendor != "amd":  # a suite may carry AMD knobs for its MI300 cases
            raise Unsupported(f"config field(s) {amd_only} only exist on AMD (HIP) devices, and this device "
                              f"is {vendor} {arch}.")
    if device.type != "cpu":
        return
    if triton_kernel:
        if spec.dtype == "bf16":
            raise Unsupported("bf16 Triton kernels are unreliable in the interpreter (numpy has no bf16); run this case on a GPU.")
        if spec.dtype == "fp8":
            raise Unsupported("fp8 Triton kernels need a GPU with fp8 matrix units; the CPU interpreter has none.")
    elif spec.dtype == "fp8":
        raise Unsupported("torch_matmul fp8 uses torch._scaled_mm, which needs an fp8-capable GPU, not the CPU.")


def _make_inputs(spec: CaseSpec, device, seed: int, *, bias: bool):
    """Fresh random-normal operands: a (M, K), the (N, K) weight w, optional bias (N,).

    Zeros or constants would make the GPU draw less power and clock higher
    (AMD reports >20% speed differences from input values alone), so the
    inputs are always normal. The weight is scaled by 1/sqrt(K) so each
    output is ~N(0, 1) and fp16 cannot overflow however long K is. fp8 inputs
    are cast from unscaled normals: e4m3 has too little range below 1 to hold
    N(0, 1/K) values without flushing many to zero, and its bf16 output has
    range to spare for the ~sqrt(K)-sized results.
    """
    import torch

    from kernels import _configs

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    m, n, k = spec.m, spec.n, spec.k
    if spec.dtype == "fp8":
        fp8 = _configs.fp8_dtype(_configs.device_kind(device))
        if fp8 is None:
            vendor, arch = _configs.device_kind(device)
            raise Unsupported(f"{vendor} {arch} has no fp8 matrix units, so fp8 cases cannot run here.")
        a = torch.randn((m, k), generator=gen, device=device).to(fp8)
        w = torch.randn((n, k), generator=gen, device=device).to(fp8)
        out_dtype = torch.bfloat16
    else:
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[spec.dtype]
        a = torch.randn((m, k), generator=gen, device=device).to(dtype)
        w = (torch.randn((n, k), generator=gen, device=device) * (1.0 / math.sqrt(k))).to(dtype)
        out_dtype = dtype
    b_vec = torch.randn((n,), generator=gen, device=device).to(out_dtype) if bias else None
    return a, w, b_vec, out_dtype


def _reference(a, w, bias, epilogue: str):
    """float32 act(a @ w.T + bias), computed in float64 on the inputs' device.

    float64 sidesteps any tf32/reduced-precision setting a torch fp32 matmul
    might pick up, and H200/MI300-class GPUs run it fast enough for a check.
    """
    import torch

    def ref() -> "torch.Tensor":
        r = a.to(torch.float64) @ w.to(torch.float64).t()
        if bias is not None:
            r = r + bias.to(torch.float64)
        if epilogue == "bias_relu":
            r = torch.relu(r)
        elif epilogue == "bias_silu":
            r = torch.nn.functional.silu(r)
        elif epilogue == "bias_gelu":
            r = torch.nn.functional.gelu(r)
        return r.to(torch.float32)

    return ref


def _poisoner(*tensors):
    def poison() -> None:
        for t in tensors:
            t.fill_(float("nan"))

    return poison


# ---------------------------------------------------------------------------
# matmul_tiled
# ---------------------------------------------------------------------------

_TILED_KEYS = frozenset({"epilogue", "group_m", "block_m", "block_n", "block_k", "num_warps", "num_stages"} | _AMD_KEYS)


def _check_tiled(spec: CaseSpec) -> str | None:
    return _check_common(spec, TRITON_DTYPES, _TILED_KEYS)


def _prepare_tiled(spec: CaseSpec, device, seed: int) -> Prepared:
    reason = _check_tiled(spec)
    if reason:
        raise ValueError(reason)
    _refuse_on_cpu(spec, device, triton_kernel=True)
    import torch

    from kernels.matmul_tiled import matmul_tiled_launcher

    epilogue = str(spec.variant.get("epilogue", "none"))
    a, w, bias, out_dtype = _make_inputs(spec, device, seed, bias=epilogue != "none")
    b = w.t()
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    config = _config_from_variant(spec.variant) or None
    # Checks and argument binding happen here, once; run is the bare launch.
    run = matmul_tiled_launcher(a, b, bias=bias, epilogue=epilogue, out=out, config=config)
    return Prepared(run, out, _reference(a, w, bias, epilogue), TOLERANCE[spec.dtype], _poisoner(out))


# ---------------------------------------------------------------------------
# splitk_decode
# ---------------------------------------------------------------------------

_SPLITK_KEYS = frozenset({"m_fast", "split_k", "block_m", "block_n", "block_k", "num_warps", "num_stages"} | _AMD_KEYS)


def _check_splitk(spec: CaseSpec) -> str | None:
    reason = _check_common(spec, TRITON_DTYPES, _SPLITK_KEYS)
    if reason:
        return reason
    if spec.m > DECODE_MAX_M:
        return f"splitk_decode is a decode kernel for m <= {DECODE_MAX_M}, got m={spec.m}"
    return None


def _prepare_splitk(spec: CaseSpec, device, seed: int) -> Prepared:
    reason = _check_splitk(spec)
    if reason:
        raise ValueError(reason)
    _refuse_on_cpu(spec, device, triton_kernel=True)
    import torch

    from kernels.splitk_decode import alloc_workspace, splitk_decode_launcher

    a, w, _, out_dtype = _make_inputs(spec, device, seed, bias=False)
    b = w.t()
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    m_fast = bool(int(spec.variant.get("m_fast", 1)))
    split_k = int(spec.variant["split_k"]) if "split_k" in spec.variant else None
    config = _config_from_variant(spec.variant) or None
    # Allocated here, outside the timed region, and sized by the same planner
    # the kernel uses.
    workspace = alloc_workspace(a, b, split_k=split_k, config=config)
    run = splitk_decode_launcher(a, b, m_fast=m_fast, split_k=split_k, out=out, workspace=workspace, config=config)
    return Prepared(run, out, _reference(a, w, None, "none"), TOLERANCE[spec.dtype], _poisoner(out, workspace))


# ---------------------------------------------------------------------------
# gemv
# ---------------------------------------------------------------------------

_GEMV_KEYS = frozenset({"block_n", "block_k", "num_warps", "num_stages", "waves_per_eu"})


def _check_gemv(spec: CaseSpec) -> str | None:
    reason = _check_common(spec, TRITON_DTYPES, _GEMV_KEYS, min_block=1)
    if reason:
        return reason
    if spec.m != 1:
        return f"gemv takes exactly one row (m=1), got m={spec.m}"
    return None


def _prepare_gemv(spec: CaseSpec, device, seed: int) -> Prepared:
    reason = _check_gemv(spec)
    if reason:
        raise ValueError(reason)
    _refuse_on_cpu(spec, device, triton_kernel=True)
    import torch

    from kernels.gemv import gemv_launcher

    a, w, _, out_dtype = _make_inputs(spec, device, seed, bias=False)
    b = w.t()
    out = torch.empty((1, spec.n), dtype=out_dtype, device=device)
    config = _config_from_variant(spec.variant) or None
    run = gemv_launcher(a, b, out=out, config=config)
    return Prepared(run, out, _reference(a, w, None, "none"), TOLERANCE[spec.dtype], _poisoner(out))


# ---------------------------------------------------------------------------
# matmul_persistent
# ---------------------------------------------------------------------------

_PERSISTENT_KEYS = frozenset({"block_m", "block_n", "block_k", "group_m", "num_warps", "num_stages"} | _AMD_KEYS)


def _check_persistent(spec: CaseSpec) -> str | None:
    return _check_common(spec, TRITON_DTYPES, _PERSISTENT_KEYS)


def _prepare_persistent(spec: CaseSpec, device, seed: int) -> Prepared:
    reason = _check_persistent(spec)
    if reason:
        raise ValueError(reason)
    _refuse_on_cpu(spec, device, triton_kernel=True)
    import torch

    from kernels.matmul_persistent import matmul_persistent_launcher

    a, w, _, out_dtype = _make_inputs(spec, device, seed, bias=False)
    b = w.t()
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    config = _config_from_variant(spec.variant) or None
    run = matmul_persistent_launcher(a, b, out=out, config=config)
    return Prepared(run, out, _reference(a, w, None, "none"), TOLERANCE[spec.dtype], _poisoner(out))


# ---------------------------------------------------------------------------
# torch_matmul: the vendor library (cuBLAS / hipBLASLt) through torch
# ---------------------------------------------------------------------------


def _check_torch(spec: CaseSpec) -> str | None:
    reason = _check_common(spec, TRITON_DTYPES, frozenset())
    if reason:
        return reason
    # torch._scaled_mm requires both dimensions of its column-major B to be
    # multiples of 16.
    if spec.dtype == "fp8" and (spec.n % 16 or spec.k % 16):
        return f"torch_matmul fp8 (torch._scaled_mm) needs n and k to be multiples of 16, got n={spec.n}, k={spec.k}"
    return None


def _prepare_torch(spec: CaseSpec, device, seed: int) -> Prepared:
    reason = _check_torch(spec)
    if reason:
        raise ValueError(reason)
    _refuse_on_cpu(spec, device, triton_kernel=False)
    import torch

    a, w, _, out_dtype = _make_inputs(spec, device, seed, bias=False)
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

    return Prepared(run, out, _reference(a, w, None, "none"), TOLERANCE[spec.dtype], _poisoner(out))


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------

BACKENDS: dict[str, Backend] = {
    "matmul_tiled": Backend(
        name="matmul_tiled",
        description="Triton tiled GEMM, grouped launch order, fused bias/activation epilogues",
        dtypes=TRITON_DTYPES,
        variant_keys=_TILED_KEYS,
        check=_check_tiled,
        prepare=_prepare_tiled,
    ),
    "splitk_decode": Backend(
        name="splitk_decode",
        description="Triton split-K decode GEMM (M <= 64) with fp32 workspace and reduction; m_fast grid order",
        dtypes=TRITON_DTYPES,
        variant_keys=_SPLITK_KEYS,
        check=_check_splitk,
        prepare=_prepare_splitk,
    ),
    "gemv": Backend(
        name="gemv",
        description="Triton GEMV for M = 1 (vector units, no tl.dot)",
        dtypes=TRITON_DTYPES,
        variant_keys=_GEMV_KEYS,
        check=_check_gemv,
        prepare=_prepare_gemv,
    ),
    "matmul_persistent": Backend(
        name="matmul_persistent",
        description="Triton persistent GEMM: one program per SM/CU looping over tiles in grouped order",
        dtypes=TRITON_DTYPES,
        variant_keys=_PERSISTENT_KEYS,
        check=_check_persistent,
        prepare=_prepare_persistent,
    ),
    "torch_matmul": Backend(
        name="torch_matmul",
        description="vendor reference: torch.matmul (cuBLAS / hipBLASLt); fp8 via torch._scaled_mm with unit scales",
        dtypes=TRITON_DTYPES,
        variant_keys=frozenset(),
        check=_check_torch,
        prepare=_prepare_torch,
    ),
}


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise PerfciError(f"unknown kernel '{name}'; known: {', '.join(sorted(BACKENDS))}") from None


def check_case(spec: CaseSpec) -> str | None:
    """Why no registered kernel can take ``spec``, or None (pure: suites call it without a GPU)."""
    backend = BACKENDS.get(spec.kernel)
    if backend is None:
        return f"unknown kernel '{spec.kernel}'; known: {', '.join(sorted(BACKENDS))}"
    return backend.check(spec)
