"""Parsers of compiled artifacts into frozen dataclasses. Pure: text in, numbers out.

AMD: the amdgcn assembly Triton produces (``kernel.asm["amdgcn"]``) ends in an
``.amdgpu_metadata`` YAML block (the HSA code object v5 metadata) with, per
kernel, ``.vgpr_count`` (on gfx90a and later the *unified* count: VGPRs aligned
to 4 plus AGPRs), ``.agpr_count``, ``.sgpr_count``, ``.vgpr_spill_count``,
``.sgpr_spill_count`` and ``.private_segment_fixed_size`` (scratch bytes per
work-item). The compiler's comment lines ``; NumVgprs:`` give the
architectural VGPRs alone. LDS is not there (Triton allocates it dynamically:
``.group_segment_fixed_size`` reads 0); it comes from the metadata's ``shared``.

NVIDIA: ``ptxas -v`` prints ``Used N registers`` and ``B bytes stack frame,
S bytes spill stores, L bytes spill loads`` per function.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_AMD_KEYS = (".vgpr_count", ".agpr_count", ".sgpr_count", ".vgpr_spill_count", ".sgpr_spill_count",
             ".private_segment_fixed_size")


@dataclass(frozen=True)
class AmdResources:
    name: str  # the kernel symbol
    vgprs: int  # architectural VGPRs
    agprs: int  # accumulation registers
    total_vgprs: int  # unified file: what occupancy is computed from
    sgprs: int
    vgpr_spills: int
    sgpr_spills: int
    scratch_bytes: int  # private segment per work-item

    @property
    def spills(self) -> int:
        return self.vgpr_spills + self.sgpr_spills


@dataclass(frozen=True)
class NvidiaResources:
    name: str
    registers: int  # per thread
    stack_bytes: int  # per-thread stack frame (local memory)
    spill_store_bytes: int
    spill_load_bytes: int

    @property
    def spills(self) -> int:
        return self.spill_store_bytes


def _metadata_block(text: str) -> str:
    start = text.find(".amdgpu_metadata")
    end = text.find(".end_amdgpu_metadata", start)
    if start < 0 or end < 0:
        raise ValueError("no .amdgpu_metadata block in the amdgcn text")
    return text[start:end]


def parse_amdgcn(text: str) -> AmdResources:
    """The resources of the (first) kernel in an amdgcn assembly text; ValueError if a field is missing."""
    block = _metadata_block(text)
    # Kernel-level keys sit at indent 4 under "amdhsa.kernels:" (the first one after "  - ");
    # deeper lines are the argument list. A second "  - " starts the next kernel.
    values: dict[str, str] = {}
    entries = 0
    for line in block[block.find("amdhsa.kernels:"):].splitlines()[1:]:
        if line.startswith("  - "):
            entries += 1
            if entries > 1:
                break
            line = "    " + line[4:]
        elif line and not line.startswith(" "):
            break  # the next top-level key (amdhsa.target, ...)
        match = re.match(r"^    (\.[a-z_0-9]+):\s*(.*?)\s*$", line)
        if match:
            values[match.group(1)] = match.group(2)
    missing = [k for k in _AMD_KEYS + (".name",) if k not in values]
    if missing:
        raise ValueError(f"amdgcn metadata lacks {', '.join(missing)}")
    try:
        nums = {k: int(values[k]) for k in _AMD_KEYS}
    except ValueError:
        raise ValueError(f"amdgcn metadata has a non-integer among {', '.join(_AMD_KEYS)}") from None
    arch_vgprs = re.search(r"^; NumVgprs:\s*(\d+)", text, re.M)
    agprs = nums[".agpr_count"]
    total = nums[".vgpr_count"]
    vgprs = int(arch_vgprs.group(1)) if arch_vgprs else max(0, total - agprs)
    return AmdResources(
        name=values[".name"].strip("'\""),
        vgprs=vgprs,
        agprs=agprs,
        total_vgprs=total,
        sgprs=nums[".sgpr_count"],
        vgpr_spills=nums[".vgpr_spill_count"],
        sgpr_spills=nums[".sgpr_spill_count"],
        scratch_bytes=nums[".private_segment_fixed_size"],
    )


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas(log: str) -> NvidiaResources:
    """The resources of the (first) entry function in a ``ptxas -v`` log; ValueError if absent."""
    func = _PTXAS_FUNC.search(log)
    regs = _PTXAS_REGS.search(log)
    stack = _PTXAS_STACK.search(log)
    if not regs or not stack:
        raise ValueError("the ptxas log has no 'Used N registers' / 'bytes stack frame' lines (was -v given?)")
    return NvidiaResources(
        name=func.group(1) if func else "",
        registers=int(regs.group(1)),
        stack_bytes=int(stack.group(1)),
        spill_store_bytes=int(stack.group(2)),
        spill_load_bytes=int(stack.group(3)),
    )
