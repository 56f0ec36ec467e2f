"""What ``perfci compile`` found for one case on one arch, and whether it passes. Pure.

A kernel fails when it spills (any VGPR/SGPR spill on AMD, any spill-store
byte on NVIDIA), when its LDS / shared memory exceeds what one workgroup /
block may allocate on the arch, or when it does not compile.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfci.compile.arches import Arch, Occupancy, amd_occupancy, nvidia_occupancy
from perfci.compile.plan import Launch
from perfci.compile.resources import AmdResources, NvidiaResources
from perfci.model import CaseSpec

AMD_KNOBS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")

# Spills perfci accepts for now, each with its bound and reason: (arch, case label prefix) ->
# (most spilled bytes per kernel, why). Anything beyond the bound, or any other problem, fails.
ACCEPTED_SPILLS: dict[tuple[str, str], tuple[int, str]] = {
    ("sm_90", "splitk_decode"): (
        8, "8 B under Triton 3.9's ptxas (13.x) only: Triton 3.6 compiles it spill-free on the H200; there "
           "`perfci confirm --suite decode` measured the spill-free 8-warp alternative 2.8-11% slower on 4 cases "
           "(benchmarks/results/h200-2026-12-01/explain-plugin-warps/r/warps.json), so the 4-warp config stays"),
    ("sm_90", "matmul_tiled[epilogue=bias_gelu]"): (
        128, "100 B under Triton 3.9's ptxas; the H200 measured this case at 1774 us against 1829 us for the "
             "tile without epilogue (baselines/h200/prefill.csv); the fix (the epilogue in tiled_config's key) "
             "waits for an H200 measurement"),
}


@dataclass(frozen=True)
class Compiled:
    """What the IO edge read from one compiled kernel."""

    resources: AmdResources | NvidiaResources
    shared_bytes: int  # metadata["shared"]: LDS / shared memory per workgroup / block
    knobs: tuple[tuple[str, Any], ...]  # effective AMD knobs from the metadata (kpack defaults to 1)


@dataclass(frozen=True)
class KernelReport:
    kernel: str
    config: tuple[tuple[str, Any], ...]
    grid: tuple[int, ...]
    vgprs: int | None
    agprs: int | None
    sgprs: int | None
    registers: int | None  # AMD: unified VGPRs+AGPRs; NVIDIA: registers per thread
    spills: int | None
    spill_unit: str  # "registers" (AMD) or "bytes" (NVIDIA spill stores)
    scratch_bytes: int | None
    shared_bytes: int | None
    occupancy: Occupancy | None
    problems: tuple[str, ...]  # why it fails: spills, shared memory over the limit, compile error


@dataclass(frozen=True)
class CaseReport:
    case: CaseSpec
    arch: str
    kernels: tuple[KernelReport, ...]
    note: str = ""  # vendor cases: why nothing was compiled

    @property
    def status(self) -> str:
        if not self.kernels:
            return "vendor"
        if any(k.problems for k in self.kernels):
            return "accepted" if self.accepted else "fail"
        return "ok"

    @property
    def accepted(self) -> str:
        """Why this case's spills are accepted (:data:`ACCEPTED_SPILLS`), or ""."""
        for (arch, prefix), (most, why) in ACCEPTED_SPILLS.items():
            if self.arch == arch and self.case.label.startswith(prefix) and all(
                    all(p.startswith("spills") for p in k.problems) and (k.spills or 0) <= most
                    for k in self.kernels):
                return why
        return ""


def launch_config(launch: Launch, knobs: tuple[tuple[str, Any], ...] = ()) -> tuple[tuple[str, Any], ...]:
    """The config a reader wants to see: blocks, warps, stages and the AMD knobs in effect."""
    cfg = launch.config
    items: dict[str, Any] = {}
    if cfg is not None:
        items.update(BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K)
        if launch.kernel in ("matmul_tiled_kernel", "matmul_persistent_kernel"):
            items["GROUP_M"] = cfg.GROUP_M
    else:
        items.update({name: value[1] for name, value in launch.params
                      if isinstance(value, tuple) and value[0] == "constexpr" and name.isupper()})
    options = dict(launch.options)
    items["num_warps"] = options.get("num_warps", dict(knobs).get("num_warps"))  # a team's launch may leave it to Triton
    items["num_stages"] = options.get("num_stages", dict(knobs).get("num_stages"))
    for name, value in knobs:
        if name in AMD_KNOBS:
            items[name] = value
    return tuple(items.items())


def kernel_report(launch: Launch, arch: Arch, compiled: Compiled) -> KernelReport:
    res = compiled.resources
    num_warps = int(dict(launch.options).get("num_warps", 4))
    problems: list[str] = []
    shared = compiled.shared_bytes
    if isinstance(res, AmdResources):
        occ = amd_occupancy(arch, res.total_vgprs, shared, num_warps)
        if res.spills:
            problems.append(f"spills {res.vgpr_spills} VGPRs, {res.sgpr_spills} SGPRs ({res.scratch_bytes} B scratch)")
        regs: dict[str, Any] = dict(vgprs=res.vgprs, agprs=res.agprs, sgprs=res.sgprs, registers=res.total_vgprs,
                                    spills=res.spills, spill_unit="registers", scratch_bytes=res.scratch_bytes)
    else:
        occ = nvidia_occupancy(arch, res.registers, shared, num_warps)
        if res.spills:
            problems.append(f"spills {res.spill_store_bytes} B of stores ({res.stack_bytes} B stack)")
        regs = dict(vgprs=None, agprs=None, sgprs=None, registers=res.registers, spills=res.spills,
                    spill_unit="bytes", scratch_bytes=res.stack_bytes)
    if shared > arch.shared_per_block:
        problems.append(f"shared memory {shared} B > {arch.shared_per_block} B per block on {arch.name}")
    return KernelReport(kernel=launch.kernel, config=launch_config(launch, compiled.knobs), grid=launch.grid,
                        shared_bytes=shared, occupancy=occ, problems=tuple(problems), **regs)


def error_report(launch: Launch, message: str) -> KernelReport:
    return KernelReport(kernel=launch.kernel, config=launch_config(launch), grid=launch.grid, vgprs=None,
                        agprs=None, sgprs=None, registers=None, spills=None, spill_unit="", scratch_bytes=None,
                        shared_bytes=None, occupancy=None, problems=(f"compile error: {message}",))


def case_json(report: CaseReport) -> dict[str, Any]:
    """One entry of the json ``cases`` list: the main kernel's fields flat, every kernel under ``kernels``."""
    spec = report.case
    out: dict[str, Any] = {"kernel": spec.label, "group": spec.group, "shape": spec.shape, "dtype": spec.dtype,
                           "arch": report.arch, "status": report.status}
    out.update(kernels_json(report.kernels))
    if report.note or report.accepted:
        out["note"] = report.note or f"accepted spill: {report.accepted}"
    return out


def kernels_json(reports: tuple[KernelReport, ...]) -> dict[str, Any]:
    """A case's main kernel's fields flat, every problem, and every kernel under ``kernels``."""
    kernels = [kernel_json(k) for k in reports]
    main = kernels[0] if kernels else {}
    out: dict[str, Any] = {key: main.get(key) for key in (
        "config", "vgprs", "sgprs", "agprs", "registers", "spills", "spill_unit", "scratch_bytes", "shared_bytes",
        "occupancy")}
    out["problems"] = [p for k in kernels for p in k["problems"]]
    out["kernels"] = kernels
    return out


def kernel_json(k: KernelReport) -> dict[str, Any]:
    occ = k.occupancy
    return {
        "kernel": k.kernel, "config": dict(k.config), "grid": list(k.grid), "vgprs": k.vgprs, "agprs": k.agprs,
        "sgprs": k.sgprs, "registers": k.registers, "spills": k.spills, "spill_unit": k.spill_unit,
        "scratch_bytes": k.scratch_bytes, "shared_bytes": k.shared_bytes,
        "occupancy": None if occ is None else {"value": occ.value, "unit": occ.unit, "by_registers": occ.by_registers,
                                               "by_shared": occ.by_shared, "limiter": occ.limiter},
        "problems": list(k.problems),
    }
