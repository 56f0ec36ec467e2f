"""Device ceilings for the '% of roofline' column, the ridge point, and the clock rule.

The clock rule (:func:`clock_exponent`: how far a case's time follows the core
clock) lives here, at the top layer, because compare and history both judge
cases by it and neither may import the other's package.

Two kinds of number live here and the table says which is which:
- measured: read on this project's own hardware, with the command in README;
- datasheet: the vendor's dense peak, a lead only. Real kernels rarely pass
  80% of a datasheet matrix peak, so '% of roofline' against one reads low.
A device missing here gets no roofline column rather than an invented one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from perfci.model import DTYPE_BYTES, OUT_DTYPE_BYTES, CaseSpec


@dataclass(frozen=True)
class Ceiling:
    tflops: dict[str, float]  # dtype -> dense matrix TFLOP/s
    tbps: float  # device-memory bandwidth, bytes read + written, TB/s
    source: str


CEILINGS: dict[str, Ceiling] = {
    # H200 (sm_90): bf16 788 TFLOP/s (torch 8192^3 on random data) and 4.3 TB/s
    # (device-to-device copy) were measured on an H200 this project borrowed;
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


def clock_exponent(arch: str, dtype: str, m: int | None, n: int | None, k: int | None,
                   elem_bytes: float, out_bytes: float) -> float | None:
    """How strongly a case's time follows the core clock: 1 compute-bound, 0 memory-bound.

    Arithmetic intensity 2MNK / bytes against the arch's ridge point: at or above
    2^1.5 ≈ 2.8x the ridge the case is compute-bound (time ∝ 1/clock, so it is
    compared in cycles); at or below ridge / 2.8 it is memory-bound (the core
    clock does not set its time, so it is not scaled). The band is that wide
    because achieved peaks sit below datasheet ones by different amounts for
    compute and memory, which moves each kernel's real ridge. In between, where a kernel is
    partly limited by both, the exponent rises linearly in log(intensity) —
    scaling those cases fully or not at all would leave half a clock swing in
    them either way. ``None`` when the arch or the shape is unknown.
    """
    ridge = ridge_flop_per_byte(arch, dtype)
    if ridge is None or not (m and n and k):
        return None
    nbytes = (m * k + k * n) * elem_bytes + m * n * out_bytes
    ai = 2.0 * m * n * k / nbytes
    x = math.log2(ai / ridge)
    return min(1.0, max(0.0, (x + BAND_OCTAVES) / (2.0 * BAND_OCTAVES)))


# Half-width, in octaves of arithmetic intensity, of the band around the ridge
# where a kernel is limited by both compute and memory.
BAND_OCTAVES = 1.5
# Clock exponents strictly inside (BAND_LOW, BAND_HIGH) are "transition band".
BAND_LOW, BAND_HIGH = 0.0, 1.0


def in_transition_band(exponent: float | None) -> bool:
    """Whether a case is limited by both compute and memory (gets the band floors)."""
    return exponent is not None and BAND_LOW < exponent < BAND_HIGH


def case_clock_exponent(arch: str, dtype: str, m: int | None, n: int | None, k: int | None) -> float | None:
    """:func:`clock_exponent` of a GEMM case, with its dtype's element and output sizes."""
    return clock_exponent(arch, dtype, m, n, k, DTYPE_BYTES.get(dtype, 2), OUT_DTYPE_BYTES.get(dtype, 2))


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
