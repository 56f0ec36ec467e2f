"""A suite case -> the kernel launches ``perfci run`` makes for it on an architecture. Pure.

This mirrors the launchers in ``kernels/`` (``matmul_tiled_launcher``,
``matmul_persistent_launcher``, ``splitk_decode._plan`` + launcher,
``gemv_launcher``) and kernels/backends.py (the operands it builds: A
row-major (M, K), B = w.t() of a contiguous (N, K) weight, C contiguous): the
configs are the ones the kernel declares through the kernel API
(``Backend.configs``, for the arch's (vendor, arch) kind and CU/SM count), so
the revision that declares the backend is the one planned, and the arguments are specialized
by the same rules Triton's JIT applies at launch (an int equal to 1 becomes a
constexpr; an int divisible by 16 and every 16-byte-aligned pointer get
``tt.divisibility = 16``; on AMD, with buffer ops on, a pointer whose storage is
< 2 GiB gets ``tt.pointer_range = 32``), so the compiled code is the code the
device would run. tests/compile checks this against the JIT's own rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from perfci.compile.arches import Arch
from perfci.kernel import Backend, LaunchConfig, Target
from perfci.model import DTYPE_BYTES, CaseSpec

# perfci's own kernels, planned here for any arch from the configs their Backend declares; any
# other kernel's launches are captured from its own host code (perfci.compile.capture).
PLANNED_KERNELS = ("matmul_tiled", "matmul_persistent", "splitk_decode", "gemv")
# Backends with no Triton kernel: reported, not compiled.
VENDOR_KERNELS = {"torch_matmul": "vendor library (cuBLAS / hipBLASLt through torch)"}
MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class Ptr:
    dtype: str  # triton element type: bf16, fp32, fp8e4nv, ...
    nbytes: int  # size of the tensor's storage


@dataclass(frozen=True)
class Launch:
    """One ``kernel[grid](*args, **constexprs, **options)`` call."""

    module: str  # "perfci_kernels.matmul_tiled"
    kernel: str  # "matmul_tiled_kernel"
    params: tuple[tuple[str, Any], ...]  # every parameter in order: Ptr, int (runtime) or ("constexpr", value)
    options: tuple[tuple[str, Any], ...]  # num_warps, num_stages, AMD knobs
    grid: tuple[int, ...]
    config: Any  # the kernel's declared config (None for helper kernels such as the reduction)

    def specialize(self, arch: Arch, buffer_ops: bool = True):
        """(signature, constexprs, attrs) for ``ASTSource``, by the JIT's specialization rules."""
        signature: dict[str, str] = {}
        constexprs: dict[tuple[int, ...], Any] = {}
        attrs: dict[tuple[int, ...], list] = {}
        for i, (name, value) in enumerate(self.params):
            if isinstance(value, tuple) and value[0] == "constexpr":
                signature[name] = "constexpr"
                constexprs[(i,)] = value[1]
            elif isinstance(value, Ptr):
                signature[name] = "*" + value.dtype
                spec = [["tt.divisibility", 16]]  # torch allocations are 256-byte aligned
                if arch.vendor == "amd" and buffer_ops and value.nbytes <= MAX_INT32:
                    spec.append(["tt.pointer_range", 32])
                attrs[(i,)] = spec
            elif isinstance(value, bool):
                signature[name] = "u1"
            elif isinstance(value, float):  # the JIT passes a Python float as fp32
                signature[name] = "fp32"
            elif value == 1:
                signature[name] = "constexpr"
                constexprs[(i,)] = 1
            else:
                signature[name] = "i32" if -2**31 <= value <= MAX_INT32 else "i64"
                if value % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
        return signature, constexprs, attrs


def _c(value: Any) -> tuple[str, Any]:
    return ("constexpr", value)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def element_types(dtype: str, arch: Arch) -> tuple[str, str]:
    """(input, output) triton element types of a case's tensors on ``arch``."""
    if dtype == "fp8":
        # gfx942 takes float8_e4m3fnuz (fp8e4b8); gfx950 and NVIDIA the OCP e4m3fn (fp8e4nv).
        return ("fp8e4b8" if arch.name == "gfx942" else "fp8e4nv"), "bf16"
    return dtype, dtype


def plan_case(spec: CaseSpec, arch: Arch, backend: Backend,
              config: Mapping[str, int] | None = None) -> tuple[Launch, ...]:
    """The launches of ``spec`` on ``arch``; () for a vendor kernel; ValueError as the launcher raises it.

    The configs come from ``backend.configs`` (the kernel API): the revision that
    declared the backend is the one planned, as ``perfci run`` measures it.
    ``config`` (KernelConfig fields: ``{"BLOCK_N": 256, "num_stages": 4}``) overrides
    the table's config on top of the case's variant, the case keeping its key: what a
    config edit in kernels/_configs.py would compile to, without editing it.
    """
    if spec.kernel in VENDOR_KERNELS:
        return ()
    if backend.configs is None:
        raise ValueError(f"kernel '{spec.kernel}' declares no configs to plan")
    declared = {d.kernel: d for d in backend.configs(spec, Target(arch.vendor, arch.name, arch.units), config)}
    m, n, k = spec.m, spec.n, spec.k
    ein, eout = element_types(spec.dtype, arch)
    bin_, bout = DTYPE_BYTES[spec.dtype], (2 if spec.dtype == "fp8" else DTYPE_BYTES[spec.dtype])
    a, b, c = Ptr(ein, m * k * bin_), Ptr(ein, n * k * bin_), Ptr(eout, m * n * bout)
    if spec.kernel in ("matmul_tiled", "matmul_persistent"):
        epilogue = str(spec.variant.get("epilogue", "none"))
        bias = Ptr(eout, n * bout) if epilogue != "none" else c
        head = (("a_ptr", a), ("b_ptr", b), ("c_ptr", c), ("bias_ptr", bias), ("M", m), ("N", n), ("K", k),
                ("stride_am", k), ("stride_ak", 1), ("stride_bk", 1), ("stride_bn", k),
                ("stride_cm", n), ("stride_cn", 1))
        d = _one(declared, f"{spec.kernel}_kernel")
        cfg = d.config
        tiles = _cdiv(m, cfg.BLOCK_M) * _cdiv(n, cfg.BLOCK_N)
        if spec.kernel == "matmul_tiled":
            extra: tuple = ()
            grid: tuple[int, ...] = (tiles,)
        else:
            programs = min(arch.units, tiles)
            extra = (("NUM_PROGRAMS", _c(programs)),)
            grid = (programs,)
        params = head + extra + (("BLOCK_M", _c(cfg.BLOCK_M)), ("BLOCK_N", _c(cfg.BLOCK_N)),
                                 ("BLOCK_K", _c(cfg.BLOCK_K)), ("GROUP_M", _c(cfg.GROUP_M)),
                                 ("EPILOGUE", _c(epilogue)))
        return (Launch(d.module, d.kernel, params, d.options, grid, cfg),)
    if spec.kernel == "splitk_decode":
        return _plan_splitk(spec, a, b, c, declared)
    if spec.kernel == "gemv":
        d = _one(declared, "gemv_kernel")
        cfg = d.config
        params = (("a_ptr", a), ("b_ptr", b), ("c_ptr", c), ("N", n), ("K", k), ("stride_ak", 1),
                  ("stride_bk", 1), ("stride_bn", k), ("stride_cn", 1),
                  ("BLOCK_N", _c(cfg.BLOCK_N)), ("BLOCK_K", _c(cfg.BLOCK_K)))
        return (Launch(d.module, d.kernel, params, d.options, (_cdiv(n, cfg.BLOCK_N),), cfg),)
    raise ValueError(f"perfci compile does not know the kernel '{spec.kernel}'")


def _one(declared: Mapping[str, LaunchConfig], kernel: str) -> LaunchConfig:
    if kernel not in declared:
        raise ValueError(f"the kernel's configs declare no launch of {kernel} (they declare "
                         f"{', '.join(declared) or 'none'})")
    return declared[kernel]


def _plan_splitk(spec: CaseSpec, a: Ptr, b: Ptr, c: Ptr,
                 declared: Mapping[str, LaunchConfig]) -> tuple[Launch, ...]:
    """kernels/splitk_decode.py's launcher: the partial-product kernel, then the reduction."""
    m, n, k = spec.m, spec.n, spec.k
    part, red = _one(declared, "splitk_partial_kernel"), _one(declared, "splitk_reduce_kernel")
    cfg, values = part.config, dict(part.values)
    split, k_per_split, block = values["split"], values["k_per_split"], dict(red.values)["block"]
    num_m, num_n = _cdiv(m, cfg.BLOCK_M), _cdiv(n, cfg.BLOCK_N)
    m_fast = bool(int(spec.variant.get("m_fast", 1)))
    ws = Ptr("fp32", split * m * n * 4)
    partial = (("a_ptr", a), ("b_ptr", b), ("ws_ptr", ws), ("M", m), ("N", n), ("K", k),
               ("K_PER_SPLIT", k_per_split), ("stride_am", k), ("stride_ak", 1), ("stride_bk", 1),
               ("stride_bn", k), ("stride_ws_s", m * n), ("stride_ws_m", n), ("stride_ws_n", 1),
               ("BLOCK_M", _c(cfg.BLOCK_M)), ("BLOCK_N", _c(cfg.BLOCK_N)), ("BLOCK_K", _c(cfg.BLOCK_K)),
               ("M_FAST", _c(m_fast)))
    grid = (num_m, num_n, split) if m_fast else (num_n, split, num_m)
    reduce = (("ws_ptr", ws), ("c_ptr", c), ("MN", m * n), ("stride_ws_s", m * n),
              ("SPLIT_K", _c(split)), ("BLOCK", _c(block)))
    return (
        Launch(part.module, part.kernel, partial, part.options, grid, cfg),
        Launch(red.module, red.kernel, reduce, red.options, (_cdiv(m * n, block),), None),
    )
