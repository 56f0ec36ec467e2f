"""A suite case -> the kernel launches ``perfci run`` makes for it on an architecture. Pure.

This mirrors the launchers in ``kernels/`` (``matmul_tiled_launcher``,
``matmul_persistent_launcher``, ``splitk_decode._plan`` + launcher,
``gemv_launcher``) and kernels/backends.py (the operands it builds: A
row-major (M, K), B = w.t() of a contiguous (N, K) weight, C contiguous): the
config comes from the same ``kernels._configs`` functions, called with the
arch's (vendor, arch) kind and CU/SM count, and the arguments are specialized
by the same rules Triton's JIT applies at launch (an int equal to 1 becomes a
constexpr; an int divisible by 16 and every 16-byte-aligned pointer get
``tt.divisibility = 16``; on AMD, with buffer ops on, a pointer whose storage is
< 2 GiB gets ``tt.pointer_range = 32``), so the compiled code is the code the
device would run. tests/compile checks this against the JIT's own rules.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from perfci.compile.arches import Arch
from perfci.model import DTYPE_BYTES, CaseSpec

if TYPE_CHECKING:  # pragma: no cover
    from perfci_kernels import _configs

# perfci's own kernels, planned here from their config tables for any arch; any other kernel's
# launches are captured from its own host code (perfci.compile.capture).
PLANNED_KERNELS = ("matmul_tiled", "matmul_persistent", "splitk_decode", "gemv")
# Backends with no Triton kernel: reported, not compiled.
VENDOR_KERNELS = {"torch_matmul": "vendor library (cuBLAS / hipBLASLt through torch)"}
MAX_INT32 = 2**31 - 1

# kernels/backends.py's variant key -> KernelConfig field.
_CONFIG_KEYS = {"block_m": "BLOCK_M", "block_n": "BLOCK_N", "block_k": "BLOCK_K", "group_m": "GROUP_M",
                "num_warps": "num_warps", "num_stages": "num_stages", "waves_per_eu": "waves_per_eu",
                "matrix_instr_nonkdim": "matrix_instr_nonkdim"}


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
    config: _configs.KernelConfig | None  # the table config (None for helper kernels such as the reduction)

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


def _override(spec: CaseSpec, config: Mapping[str, int] | None = None) -> dict[str, int] | None:
    out = {_CONFIG_KEYS[k]: int(v) for k, v in spec.variant.items() if k in _CONFIG_KEYS}
    out.update({k: int(v) for k, v in (config or {}).items()})
    return out or None


def _kernel_configs():
    """perfci's kernels' config tables, imported when a case is planned: perfci run imports
    this module for its launch records, and must not need perfci's kernels installed to
    measure a team's own (a checkout on PYTHONPATH has them as ``kernels``)."""
    try:
        return importlib.import_module("perfci_kernels._configs")
    except ModuleNotFoundError:
        return importlib.import_module("kernels._configs")


def plan_case(spec: CaseSpec, arch: Arch, config: Mapping[str, int] | None = None) -> tuple[Launch, ...]:
    """The launches of ``spec`` on ``arch``; () for a vendor kernel; ValueError as the launcher raises it.

    ``config`` (KernelConfig fields: ``{"BLOCK_N": 256, "num_stages": 4}``) overrides the
    table's config on top of the case's variant, the case keeping its key: what a config
    edit in kernels/_configs.py would compile to, without editing it.
    """
    if spec.kernel in VENDOR_KERNELS:
        return ()
    _configs = _kernel_configs()
    kind = arch.kind
    m, n, k = spec.m, spec.n, spec.k
    ein, eout = element_types(spec.dtype, arch)
    bin_, bout = DTYPE_BYTES[spec.dtype], (2 if spec.dtype == "fp8" else DTYPE_BYTES[spec.dtype])
    a, b, c = Ptr(ein, m * k * bin_), Ptr(ein, n * k * bin_), Ptr(eout, m * n * bout)
    override = _override(spec, config)
    if spec.kernel in ("matmul_tiled", "matmul_persistent"):
        epilogue = str(spec.variant.get("epilogue", "none"))
        bias = Ptr(eout, n * bout) if epilogue != "none" else c
        head = (("a_ptr", a), ("b_ptr", b), ("c_ptr", c), ("bias_ptr", bias), ("M", m), ("N", n), ("K", k),
                ("stride_am", k), ("stride_ak", 1), ("stride_bk", 1), ("stride_bn", k),
                ("stride_cm", n), ("stride_cn", 1))
        if spec.kernel == "matmul_tiled":
            cfg = _configs.resolve(_configs.tiled_config(kind, spec.dtype, m, n, k), override, kind)
            tiles = _cdiv(m, cfg.BLOCK_M) * _cdiv(n, cfg.BLOCK_N)
            extra: tuple = ()
            module, name, grid = "perfci_kernels.matmul_tiled", "matmul_tiled_kernel", (tiles,)
        else:
            cfg = _configs.resolve(_configs.persistent_config(kind, spec.dtype, m, n, k), override, kind)
            tiles = _cdiv(m, cfg.BLOCK_M) * _cdiv(n, cfg.BLOCK_N)
            programs = min(arch.units, tiles)
            extra = (("NUM_PROGRAMS", _c(programs)),)
            module, name, grid = "perfci_kernels.matmul_persistent", "matmul_persistent_kernel", (programs,)
        params = head + extra + (("BLOCK_M", _c(cfg.BLOCK_M)), ("BLOCK_N", _c(cfg.BLOCK_N)),
                                 ("BLOCK_K", _c(cfg.BLOCK_K)), ("GROUP_M", _c(cfg.GROUP_M)),
                                 ("EPILOGUE", _c(epilogue)))
        return (Launch(module, name, params, tuple(_configs.launch_options(cfg, kind).items()), grid, cfg),)
    if spec.kernel == "splitk_decode":
        return _plan_splitk(spec, arch, a, b, c, override)
    if spec.kernel == "gemv":
        default = _configs.gemv_config(kind, spec.dtype, n, k, arch.units)
        cfg = _configs.resolve(default, override, kind, min_block=1)
        params = (("a_ptr", a), ("b_ptr", b), ("c_ptr", c), ("N", n), ("K", k), ("stride_ak", 1),
                  ("stride_bk", 1), ("stride_bn", k), ("stride_cn", 1),
                  ("BLOCK_N", _c(cfg.BLOCK_N)), ("BLOCK_K", _c(cfg.BLOCK_K)))
        return (Launch("perfci_kernels.gemv", "gemv_kernel", params, tuple(_configs.launch_options(cfg, kind).items()),
                       (_cdiv(n, cfg.BLOCK_N),), cfg),)
    raise ValueError(f"perfci compile does not know the kernel '{spec.kernel}'")


def _plan_splitk(spec: CaseSpec, arch: Arch, a: Ptr, b: Ptr, c: Ptr, override) -> tuple[Launch, ...]:
    """kernels/splitk_decode.py's _plan and launcher: the partial-product kernel, then the reduction."""
    _configs = _kernel_configs()
    kind, m, n, k = arch.kind, spec.m, spec.n, spec.k
    cfg = _configs.resolve(_configs.splitk_config(kind, spec.dtype, m, n, k, arch.units), override, kind)
    k_tiles = _cdiv(k, cfg.BLOCK_K)
    num_m, num_n = _cdiv(m, cfg.BLOCK_M), _cdiv(n, cfg.BLOCK_N)
    split_k = int(spec.variant["split_k"]) if "split_k" in spec.variant else \
        _configs.splitk_split(num_m * num_n, k_tiles, arch.units)
    k_per_split = _cdiv(k_tiles, min(split_k, k_tiles)) * cfg.BLOCK_K
    split = _cdiv(k, k_per_split)
    m_fast = bool(int(spec.variant.get("m_fast", 1)))
    ws = Ptr("fp32", split * m * n * 4)
    partial = (("a_ptr", a), ("b_ptr", b), ("ws_ptr", ws), ("M", m), ("N", n), ("K", k),
               ("K_PER_SPLIT", k_per_split), ("stride_am", k), ("stride_ak", 1), ("stride_bk", 1),
               ("stride_bn", k), ("stride_ws_s", m * n), ("stride_ws_m", n), ("stride_ws_n", 1),
               ("BLOCK_M", _c(cfg.BLOCK_M)), ("BLOCK_N", _c(cfg.BLOCK_N)), ("BLOCK_K", _c(cfg.BLOCK_K)),
               ("M_FAST", _c(m_fast)))
    grid = (num_m, num_n, split) if m_fast else (num_n, split, num_m)
    block = 1024
    reduce = (("ws_ptr", ws), ("c_ptr", c), ("MN", m * n), ("stride_ws_s", m * n),
              ("SPLIT_K", _c(split)), ("BLOCK", _c(block)))
    return (
        Launch("perfci_kernels.splitk_decode", "splitk_partial_kernel", partial,
               tuple(_configs.launch_options(cfg, kind).items()), grid, cfg),
        Launch("perfci_kernels.splitk_decode", "splitk_reduce_kernel", reduce, (("num_warps", 4),),
               (_cdiv(m * n, block),), None),
    )
