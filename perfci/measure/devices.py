"""Pure facts about devices: arch names, which GPU a process sees, cache and flush sizes.

A leaf module: plain values in, plain values out, no imports from the rest of
perfci, so both the environment collector and the telemetry sources use it.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

MiB = 1024 * 1024

# MI300X / MI300A / MI325X (gfx942) and MI350X / MI355X (gfx950) put a 256 MB
# MALL ("Infinity Cache") behind the per-XCD L2. torch (hipDeviceProp) reports
# only the 4 MB L2 of one XCD, so a flush sized from it evicts nothing that
# matters (pytorch/pytorch#192159: a 1.64x spread between kernels collapsed to
# 2.6%). On these chips the MALL is the last level to flush.
MALL_BYTES_BY_ARCH = {"gfx942": 256 * MiB, "gfx950": 256 * MiB}

# Triton's do_bench flushes 256 MiB on every backend; we never flush less.
FLUSH_FLOOR_BYTES = 256 * MiB



# --------------------------------------------------------------------------- arch strings
def normalize_gcn_arch(gcn_arch_name: str) -> str:
    """``gfx942:sramecc+:xnack-`` -> ``gfx942`` (the feature flags are not the arch)."""
    return (gcn_arch_name or "").strip().split(":", 1)[0].lower()


def sm_arch(major: int, minor: int) -> str:
    """Compute capability (9, 0) -> ``sm_90``."""
    return f"sm_{int(major)}{int(minor)}"


def normalize_arch(value: str) -> str:
    """Any arch spelling we meet -> the canonical form used in results.

    ``gfx942:sramecc+:xnack-`` -> ``gfx942``, ``9.0`` -> ``sm_90``, ``SM_90`` -> ``sm_90``;
    anything else is returned lower-cased and stripped.
    """
    text = (value or "").strip()
    if text.lower().startswith("gfx"):
        return normalize_gcn_arch(text)
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if match:
        return sm_arch(int(match.group(1)), int(match.group(2)))
    return text.lower()


# --------------------------------------------------------------------------- visible devices
def _split_visible(value: str) -> list[str]:
    """Parse one ``*_VISIBLE_DEVICES`` value the way the runtimes do.

    Entries are comma separated; the runtime stops at the first invalid entry
    (``0,2,-1,1`` exposes only 0 and 2), so we do the same. UUID entries
    (``GPU-...``, ``MIG-...``) are kept as they are.
    """
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            break
        if entry.lstrip("-").isdigit():
            if int(entry) < 0:
                break
            entries.append(str(int(entry)))
        else:
            entries.append(entry)
    return entries


def visible_devices(env: Mapping[str, str], vendor: str | None = None) -> list[str]:
    """Physical device ids (indices or UUIDs) in visible order; ``[]`` when nothing restricts visibility.

    NVIDIA: ``CUDA_VISIBLE_DEVICES`` alone. AMD: ``ROCR_VISIBLE_DEVICES`` picks
    physical GPUs first, then ``HIP_VISIBLE_DEVICES`` (or, when that is unset,
    ``CUDA_VISIBLE_DEVICES``, which HIP honours too) indexes *into that list*.
    With ``vendor=None`` AMD rules apply when a HIP/ROCR variable is set.
    An empty result also covers ``CUDA_VISIBLE_DEVICES=""`` (no GPU at all):
    then nothing is benchmarked on a GPU and the mapping is never used.
    """
    if vendor is None:
        vendor = "amd" if ("HIP_VISIBLE_DEVICES" in env or "ROCR_VISIBLE_DEVICES" in env) else "nvidia"
    if vendor != "amd":
        return _split_visible(env.get("CUDA_VISIBLE_DEVICES", "")) if "CUDA_VISIBLE_DEVICES" in env else []

    rocr = _split_visible(env["ROCR_VISIBLE_DEVICES"]) if "ROCR_VISIBLE_DEVICES" in env else None
    hip_var = "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in env else "CUDA_VISIBLE_DEVICES"
    hip = _split_visible(env[hip_var]) if hip_var in env else None
    if hip is None:
        return rocr or []
    if rocr is None:
        return hip
    composed: list[str] = []
    for entry in hip:
        # HIP indices count the devices ROCR left visible, not physical GPUs.
        if entry.isdigit() and int(entry) < len(rocr):
            composed.append(rocr[int(entry)])
        else:
            break
    return composed


def physical_device(visible_index: int, env: Mapping[str, str], vendor: str | None = None) -> str:
    """The physical id (index or UUID, as a string) of torch's device ``visible_index``."""
    devices = visible_devices(env, vendor)
    if 0 <= visible_index < len(devices):
        return devices[visible_index]
    return str(visible_index)


def gpu_lock_name(env: Mapping[str, str]) -> str:
    """A stable, filename-safe name for the physical GPU this process would use.

    The first visible device after composing ROCR/HIP/CUDA visibility (not just
    the first entry of one variable): with ``ROCR_VISIBLE_DEVICES=2`` and no HIP
    variable the process runs on physical GPU 2, and its lock must collide with
    a process started with ``HIP_VISIBLE_DEVICES=2``. Default ``"0"``.
    """
    devices = visible_devices(env)
    name = devices[0] if devices else "0"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# --------------------------------------------------------------------------- cache sizes
def device_cache_bytes(props: Any, arch: str) -> int:
    """Bytes of last-level cache a cold-cache flush must evict (0 when unknown).

    ``props`` is ``torch.cuda.get_device_properties(i)`` (or anything with an
    ``L2_cache_size`` attribute, or None on CPU).
    """
    mall = MALL_BYTES_BY_ARCH.get(normalize_arch(arch))
    if mall is not None:
        return mall
    try:
        return max(0, int(getattr(props, "L2_cache_size", 0) or 0))
    except (TypeError, ValueError):
        return 0


def flush_bytes(llc_bytes: int) -> int:
    """Size of the buffer written between timed iterations to empty the caches.

    2x the last-level cache, per the methodology (CUTLASS: footprint >= 2x L2,
    so replacement policy and set conflicts cannot leave operands resident). The
    256 MiB floor keeps the flush kernel long enough that the host-side launch
    overhead of the next (timed) kernel is hidden behind it instead of landing
    inside the event window; it is also what triton.testing.do_bench uses.
    """
    return max(2 * max(0, int(llc_bytes)), FLUSH_FLOOR_BYTES)
