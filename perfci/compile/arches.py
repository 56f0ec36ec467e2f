"""The architectures ``perfci compile`` targets, and the occupancy that follows from resources.

Pure: no triton, no torch. Every number has its source in docs/compile.md.

AMD CDNA3 (gfx942, MI300X) and CDNA4 (gfx950, MI355X): a CU has 4 SIMDs; each
SIMD has a unified 512-entry-per-lane VGPR file for wave64 that holds both the
architectural VGPRs and the AGPRs (accumulation registers), allocated in
granules of 8; at most 8 waves per SIMD. A workgroup's waves are spread over
the CU's 4 SIMDs, and the CU's LDS (64 KiB on gfx942, 160 KiB on gfx950) is
shared by the workgroups resident on it.

NVIDIA sm_90 (H100/H200): 65536 32-bit registers per SM, allocated per warp
in units of 256; at most 64 warps and 32 blocks per SM; 228 KiB shared memory
per SM, at most 227 KiB per block, and 1 KiB per block reserved by the system.
"""
from __future__ import annotations

from dataclasses import dataclass

from perfci.errors import PerfciError


@dataclass(frozen=True)
class Arch:
    name: str  # what the user types: gfx942, gfx950, sm_90
    vendor: str  # "amd" or "nvidia": the vendor kernels._configs keys its tables by
    backend: str  # triton GPUTarget backend: "hip" or "cuda"
    target_arch: object  # GPUTarget arch: "gfx942" or 90
    warp_size: int
    units: int  # CUs (AMD) or SMs (NVIDIA) of the reference device: what num_sms() returns there
    device: str  # the device the unit count is taken from
    shared_per_unit: int  # LDS per CU / shared memory per SM, bytes
    shared_per_block: int  # the most one workgroup / block may allocate, bytes
    max_waves: int  # AMD: waves per SIMD; NVIDIA: warps per SM
    registers: int  # AMD: VGPRs per SIMD lane (wave64); NVIDIA: registers per SM
    reg_granule: int  # AMD: VGPRs per allocation granule; NVIDIA: registers per warp allocation unit
    max_blocks: int = 0  # NVIDIA: resident blocks per SM
    block_reserved: int = 0  # NVIDIA: shared memory the system reserves per block

    @property
    def kind(self) -> tuple[str, str]:
        """What kernels._configs.device_kind returns on this device."""
        return (self.vendor, self.name)


KIB = 1024
ARCHES: dict[str, Arch] = {
    "gfx942": Arch("gfx942", "amd", "hip", "gfx942", 64, 304, "MI300X", 64 * KIB, 64 * KIB, 8, 512, 8),
    "gfx950": Arch("gfx950", "amd", "hip", "gfx950", 64, 256, "MI355X", 160 * KIB, 160 * KIB, 8, 512, 8),
    "sm_90": Arch("sm_90", "nvidia", "cuda", 90, 32, 132, "H200", 228 * KIB, 227 * KIB, 64, 65536, 256,
                  max_blocks=32, block_reserved=KIB),
}


def parse_arches(text: str) -> tuple[Arch, ...]:
    """``gfx942,sm_90`` -> the Arch entries, in order, without repeats; one-line error otherwise."""
    names = [part.strip() for part in str(text).split(",") if part.strip()]
    if not names:
        raise PerfciError(f"--arch '{text}' names no architecture; known: {', '.join(ARCHES)}")
    unknown = [n for n in names if n not in ARCHES]
    if unknown:
        raise PerfciError(f"unknown --arch '{unknown[0]}'; known: {', '.join(ARCHES)}")
    return tuple(ARCHES[n] for n in dict.fromkeys(names))


@dataclass(frozen=True)
class Occupancy:
    value: int  # AMD: waves per SIMD; NVIDIA: warps per SM
    unit: str  # "waves/SIMD" or "warps/SM"
    by_registers: int
    by_shared: int
    limiter: str  # "registers", "shared", "waves" (the hardware cap) or "blocks"


def _round_up(x: int, granule: int) -> int:
    return -(-x // granule) * granule


def amd_occupancy(arch: Arch, total_vgprs: int, shared_bytes: int, num_warps: int) -> Occupancy:
    """Waves per SIMD from the unified VGPR file (VGPRs + AGPRs) and from the CU's LDS.

    ``total_vgprs`` is the unified count (``.vgpr_count`` in the metadata on
    gfx90a and later: architectural VGPRs aligned to 4 plus AGPRs).
    """
    alloc = _round_up(max(total_vgprs, 1), arch.reg_granule)
    by_regs = min(arch.max_waves, arch.registers // alloc)
    if shared_bytes > 0:
        groups = arch.shared_per_unit // shared_bytes
        by_lds = min(arch.max_waves, (groups * num_warps) // 4)  # a workgroup's waves spread over 4 SIMDs
    else:
        by_lds = arch.max_waves
    value = min(by_regs, by_lds)
    limiter = "waves" if value == arch.max_waves else ("registers" if by_regs <= by_lds else "shared")
    return Occupancy(value, "waves/SIMD", by_regs, by_lds, limiter)


def nvidia_occupancy(arch: Arch, registers: int, shared_bytes: int, num_warps: int) -> Occupancy:
    """Warps per SM from the register file, shared memory, and the warp and block caps."""
    per_warp = _round_up(max(registers, 1) * arch.warp_size, arch.reg_granule)
    blocks_regs = (arch.registers // per_warp) // num_warps
    per_block_smem = shared_bytes + arch.block_reserved
    blocks_smem = arch.shared_per_unit // per_block_smem if shared_bytes > 0 else arch.max_blocks
    blocks_warps = arch.max_waves // num_warps
    blocks = min(blocks_regs, blocks_smem, blocks_warps, arch.max_blocks)
    value = blocks * num_warps
    if blocks == blocks_warps and blocks <= min(blocks_regs, blocks_smem):
        limiter = "waves"
    elif blocks == blocks_regs and blocks_regs <= blocks_smem:
        limiter = "registers"
    elif blocks == blocks_smem:
        limiter = "shared"
    else:
        limiter = "blocks"
    return Occupancy(value, "warps/SM", min(blocks_regs, arch.max_blocks) * num_warps,
                     min(blocks_smem, arch.max_blocks) * num_warps, limiter)
