"""Device ceilings for the '% of roofline' column, and the ridge point.

Two kinds of number live here and the table says which is which:
- measured: read on this project's own hardware, with the command in README;
- datasheet: the vendor's dense peak, a lead only. Real kernels rarely pass
  80% of a datasheet matrix peak, so '% of roofline' against one reads low.
A device missing here gets no roofline column rather than an invented one.
"""
from __future__ import annotations

from dataclasses import dataclass

from perfci.model import CaseSpec


@dataclass(frozen=True)
class Ceiling:
    tflops: dict[str, float]  # dtype -> dense matrix TFLOP/s
    tbps: float  # device-memory bandwidth, bytes read + written, TB/s
    source: str


CEILINGS: dict[str, Ceiling] = {
    # H200 (sm_90): bf16 788 TFLOP/s (torch 8192^3 on random data) and 4.3 TB/s
    # (device-to-device copy) were measured on this project's lent H200;
    # fp16 equals bf16 on Hopper; fp8 and tf32 are datasheet (2x and 0.5x bf16).
    "sm_90": Ceiling(tflops={"bf16": 788.0, "fp16": 788.0, "fp8": 1979.0, "fp32": 494.7},
                     tbps=4.3, source="bf16/fp16 and bandwidth measured on an H200; fp8/tf32 datasheet"),
    # MI300X (gfx942) datasheet: 1307.4 bf16/fp16, 2614.9 fp8 (dense), 163.4 tf32, 5.3 TB/s.
    "gfx942": Ceiling(tflops={"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "fp32": 163.4},
                      tbps=5.3, source="AMD MI300X datasheet (not measured here)"),
    # MI355X (gfx950) datasheet: 2516 bf16/fp16 (dense), 5033 fp8, 8 TB/s.
    "gfx950": Ceiling(tflops={"bf16": 2516.0, "fp16": 2516.0, "fp8": 5033.0, "fp32": 157.3},
                      tbps=8.0, source="AMD MI355X datasheet (not measured here)"),
}


def ceiling_for(arch: str, dtype: str) -> tuple[float, float] | None:
    """(peak TFLOP/s, peak TB/s) for a device and dtype, or None if unknown."""
    ceiling = CEILINGS.get(arch)
    if ceiling is None or dtype not in ceiling.tflops:
        return None
    return ceiling.tflops[dtype], ceiling.tbps


def ridge_flop_per_byte(arch: str, dtype: str) -> float | None:
    """Arithmetic intensity where the case stops being memory-bound."""
    peaks = ceiling_for(arch, dtype)
    if peaks is None:
        return None
    tflops, tbps = peaks
    return tflops / tbps


@dataclass(frozen=True)
class Throughput:
    tflops: float  # 2MNK / time
    tbps: float  # the fewest bytes a GEMM must move / time
    roofline_pct: float | None  # time the device's ceilings allow / measured time; None off the table


def throughput(spec: CaseSpec, median_us: float, peaks: tuple[float, float] | None) -> Throughput:
    """What a case's time means in TFLOP/s, TB/s and percent of the roofline.

    The roofline time is the larger of the case's compute time and its memory
    time at the device's peaks (``peaks`` from :func:`ceiling_for`).
    """
    seconds = median_us * 1e-6
    roofline = None
    if peaks is not None:
        peak_tflops, peak_tbps = peaks
        floor_s = max(spec.flops / (peak_tflops * 1e12), spec.min_bytes / (peak_tbps * 1e12))
        roofline = 100.0 * floor_s / seconds
    return Throughput(spec.flops / seconds / 1e12, spec.min_bytes / seconds / 1e12, roofline)
