"""The IO edge: compile each planned launch with ``triton.compile`` for the target and read its resources.

Runs on any machine: ``triton.compile(ASTSource(...), target=GPUTarget(...))``
cross-compiles for HIP and CUDA without a GPU. AMD resources come from the
amdgcn text; NVIDIA ones from running the ptxas Triton ships with ``-v`` on the
PTX (the same flags Triton's own ptxas call uses; Triton discards that log).
Launches that specialize identically compile once per process, and once per
cache directory across processes (:mod:`perfci.compile.cache`).
"""
from __future__ import annotations

import functools
import importlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Mapping

from perfci.compile.arches import Arch
from perfci.compile.cache import DiskCache, entry_key
from perfci.compile.capture import FUNCTIONS, NotPlannable, capture_case
from perfci.compile.plan import PLANNED_KERNELS, VENDOR_KERNELS, Launch, plan_case
from perfci.compile.report import AMD_KNOBS, CaseReport, Compiled, KernelReport, error_report, kernel_report
from perfci.compile.resources import parse_amdgcn, parse_ptxas
from perfci.errors import PerfciError
from perfci.kernel import Backend
from perfci.kernel_registry import get_backend
from perfci.model import CaseSpec

_CACHE: dict[tuple, "Compiled | str"] = {}


def use_the_jit() -> None:
    """Compiling (and capturing a team's launches) needs Triton's JIT functions, not the interpreter's:
    call before anything imports a kernel module."""
    if os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes"):
        if "triton" not in sys.modules:
            os.environ.pop("TRITON_INTERPRET")


def _triton():
    use_the_jit()
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, without its warning
    try:
        import triton  # lazy: triton
        from triton.backends.compiler import GPUTarget  # lazy: triton
        from triton.compiler import ASTSource  # lazy: triton
    except ImportError as err:
        raise PerfciError(f"perfci compile needs triton ({err})") from None
    return triton, ASTSource, GPUTarget


def _ptxas_resources(ptx: str, arch: Arch, fp_fusion: bool):
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability  # lazy: triton

    ptxas = get_ptxas(arch.target_arch).path
    with tempfile.TemporaryDirectory(prefix="perfci-ptxas-") as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [ptxas, "-lineinfo", *([] if fp_fusion else ["--fmad=false"]), "-v", "--regAllocOptLevel=2",
               f"--gpu-name={sm_arch_from_capability(arch.target_arch)}", src, "-o", os.path.join(tmp, "k.o")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"ptxas failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return parse_ptxas(proc.stdout + proc.stderr)


@functools.lru_cache(maxsize=None)
def _backend_hash(arch: Arch) -> str:
    """Triton's own hash of the target's code generator: the ptxas version on NVIDIA, the LLVM revision on AMD."""
    _, _, GPUTarget = _triton()
    target = GPUTarget(arch.backend, arch.target_arch, arch.warp_size)
    if arch.vendor == "amd":
        from triton.backends.amd.compiler import HIPBackend as Backend  # lazy: triton
    else:
        from triton.backends.nvidia.compiler import CUDABackend as Backend  # type: ignore[assignment]
    return str(Backend(target).hash())


def compiler_versions(arch: Arch) -> dict[str, str]:
    """The compilers that produce ``arch``'s code here: what a resources file records."""
    triton, _, _ = _triton()
    out = {"triton": str(triton.__version__)}
    backend = _backend_hash(arch)
    if arch.vendor == "nvidia":
        found = re.search(r"release [\d.]+, V([\d.]+)", backend)
        out["ptxas"] = found.group(1) if found else backend.split("-")[0].strip()
    else:
        found = re.search(r"\)-([0-9a-f]{7,})", backend)
        if found:
            out["amd_codegen"] = found.group(1)
    return out


def _jit_function(module: str, kernel: str):
    """The JIT function a Launch names: one captured from a team's launch, or a module's attribute."""
    found = FUNCTIONS.get((module, kernel))
    return found if found is not None else getattr(importlib.import_module(module), kernel)


@functools.lru_cache(maxsize=None)
def _source_of(module: str, kernel: str) -> str:
    """What the kernel's code depends on: the JIT's cache_key covers the functions it calls."""
    key = getattr(_jit_function(module, kernel), "cache_key", None)
    if isinstance(key, str) and key:
        return key
    return Path(importlib.import_module(module).__file__ or "").read_text(encoding="utf-8")


def compile_launch(launch: Launch, arch: Arch, disk: DiskCache | None = None) -> "Compiled | str":
    """The compiled kernel's resources, or the compile error's text (one line)."""
    triton, ASTSource, GPUTarget = _triton()
    from triton import knobs  # lazy: triton

    fn = _jit_function(launch.module, launch.kernel)
    signature, constexprs, attrs = launch.specialize(arch, bool(knobs.amd.use_buffer_ops))
    if list(signature) != list(fn.arg_names):
        return f"the plan's parameters {list(signature)} are not {launch.kernel}'s {list(fn.arg_names)}"
    key = (arch.name, launch.module, launch.kernel, tuple(signature.items()), tuple(sorted(constexprs.items())),
           repr(sorted(attrs.items())), launch.options)
    if key in _CACHE:
        return _CACHE[key]
    disk_key = ""
    if disk is not None:
        disk_key = entry_key(_source_of(launch.module, launch.kernel), (key, _backend_hash(arch)),
                             compiler_versions(arch))
        found = disk.get(disk_key)
        if found is not None:
            _CACHE[key] = found
            return found
    target = GPUTarget(arch.backend, arch.target_arch, arch.warp_size)
    try:
        kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                                target=target, options=dict(launch.options))
        md = kernel.metadata
        if arch.vendor == "amd":
            resources = parse_amdgcn(kernel.asm["amdgcn"])
            knob_values = tuple((k, getattr(md, k, None)) for k in AMD_KNOBS) + (("num_stages", md.num_stages),
                                                                                 ("num_warps", md.num_warps))
        else:
            resources = _ptxas_resources(kernel.asm["ptx"], arch, bool(md.enable_fp_fusion))
            knob_values = (("num_stages", md.num_stages), ("num_warps", md.num_warps))
        result: "Compiled | str" = Compiled(resources, int(md.shared), knob_values)
    except Exception as err:  # noqa: BLE001 - any compiler failure is a finding about this case, not a crash
        text = " ".join(str(err).split()) or type(err).__name__
        result = f"{type(err).__name__}: {text[:300]}"
    _CACHE[key] = result
    if disk is not None:
        disk.put(disk_key, result)
    return result


def compile_case(spec: CaseSpec, arch: Arch, disk: DiskCache | None = None,
                 config: Mapping[str, int] | None = None) -> CaseReport:
    """One case on one arch. ``config`` overrides the table's config, the case keeping its key."""
    if spec.kernel in VENDOR_KERNELS:
        return CaseReport(spec, arch.name, (), note=f"not compiled: {VENDOR_KERNELS[spec.kernel]}")
    # The kernel as the project here declares it: its own revision's kernels (perfci's own checkout
    # names them as kernels.backends), else the installed library that declares the name.
    backend = get_backend(spec.kernel)
    try:
        if spec.kernel in PLANNED_KERNELS and backend.configs is not None:
            launches = plan_case(spec, arch, backend, config)
        else:
            launches = _captured(spec, config, backend)
    except NotPlannable as err:
        # this machine cannot make the launch (a launcher that wants a GPU): nothing to compare, not a finding
        return CaseReport(spec, arch.name, (), note=f"not compiled: the launch cannot be recorded here: {err}")
    except ValueError as err:
        return CaseReport(spec, arch.name, (KernelReport(
            kernel=spec.kernel, config=(), grid=(), vgprs=None, agprs=None, sgprs=None, registers=None, spills=None,
            spill_unit="", scratch_bytes=None, shared_bytes=None, occupancy=None,
            problems=(f"no launch: {err}",)),))
    if not launches:
        return CaseReport(spec, arch.name, (), note="not compiled: its launch made no Triton kernel call")
    reports = []
    for launch in launches:
        compiled = compile_launch(launch, arch, disk)
        reports.append(error_report(launch, compiled) if isinstance(compiled, str)
                       else kernel_report(launch, arch, compiled))
    return CaseReport(spec, arch.name, tuple(reports))


_CAPTURED: dict[tuple, "tuple[Launch, ...] | NotPlannable"] = {}


def _captured(spec: CaseSpec, config: Mapping[str, int] | None, backend: Backend) -> tuple[Launch, ...]:
    """A kernel perfci did not write: its launches as its own host code makes them (the same on every arch)."""
    if config:
        raise ValueError("a config override applies to perfci's own kernels' tables, not to this kernel")
    key = (spec.kernel, spec.shape, spec.dtype, tuple(sorted(spec.variant.items())))
    if key not in _CAPTURED:
        try:
            _CAPTURED[key] = capture_case(backend, spec)
        except NotPlannable as err:
            _CAPTURED[key] = err  # the same on every arch: recorded once
    found = _CAPTURED[key]
    if isinstance(found, NotPlannable):
        raise found
    return found


def compile_cases(cases: Iterable[CaseSpec], arches: Iterable[Arch],
                  progress: Callable[[CaseReport], None] | None = None, disk: DiskCache | None = None,
                  config: Mapping[str, int] | None = None) -> list[CaseReport]:
    cases = list(cases)
    out = []
    for arch in arches:
        for spec in cases:
            report = compile_case(spec, arch, disk, config)
            out.append(report)
            if progress:
                progress(report)
    return out
