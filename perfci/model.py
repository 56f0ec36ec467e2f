"""Plain data shared by every part of perfci.

Frozen dataclasses only: no files, no torch, no printing. The run pipeline
produces :class:`CaseResult`; ``perfci compare`` and ``perfci bisect`` consume
it through :mod:`perfci.results`.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

STATUSES = ("ok", "fail", "error", "timeout", "skip")
DTYPES = ("fp32", "fp16", "bf16", "fp8")
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
# Outputs of fp8 GEMMs are written in bf16, as every fp8 kernel here does.
OUT_DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 2}


def shape_key(m: int, n: int, k: int) -> str:
    return f"{m}x{n}x{k}"


def kernel_label(kernel: str, variant: Mapping[str, object]) -> str:
    """``splitk_decode`` + {m_fast: 1} -> ``splitk_decode[m_fast=1]``.

    The label is the ``kernel`` column of the results CSV, so two variants of one
    kernel are two distinct cases in every comparison.
    """
    if not variant:
        return kernel
    inner = ",".join(f"{k}={variant[k]}" for k in sorted(variant))
    return f"{kernel}[{inner}]"


@dataclass(frozen=True)
class CaseSpec:
    """One benchmark case as a suite declares it."""

    kernel: str
    m: int
    n: int
    k: int
    dtype: str
    variant: Mapping[str, object] = field(default_factory=dict)
    weight: float = 1.0
    group: str = ""  # the suite row this case came from ("qkv", "o", ...)

    @property
    def label(self) -> str:
        return kernel_label(self.kernel, self.variant)

    @property
    def shape(self) -> str:
        return shape_key(self.m, self.n, self.k)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.label, self.shape, self.dtype)

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def min_bytes(self) -> float:
        """Fewest bytes a GEMM must move: read A and B once, write C once."""
        eb = DTYPE_BYTES[self.dtype]
        return (self.m * self.k + self.k * self.n) * eb + self.m * self.n * OUT_DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class RepeatSample:
    """One of the (default 7) repeats of a case: N timed iterations."""

    median_us: float
    iters_us: tuple[float, ...] = ()
    sclk_mhz: float | None = None  # median core clock during the repeat
    temp_c: float | None = None
    power_w: float | None = None
    throttled: bool | None = None
    stalled: bool = False  # the device reached work the host had not finished enqueuing
    clock_source: str = ""  # where sclk_mhz came from: device (its counters), nvml, amdsmi, ...


@dataclass(frozen=True)
class KernelRecord:
    """One compiled kernel a case launched, as ``perfci run`` read it on the device.

    ``launch``: grid, block sizes, num_warps, num_stages and the AMD knobs;
    ``resources``: regs (NVIDIA: per thread; AMD: the unified VGPR+AGPR count),
    vgprs/agprs/sgprs (AMD), spills, scratch, shared (bytes), occupancy and
    occ_limit (what bounds it). Values are text, as in the CSV; absent when unknown.
    ``source``: a hash of the kernel's source apart from its config (Triton's
    ``cache_key`` of the JIT function, or its source text in the interpreter), so
    that "config changed, source unchanged" (an autotuner's flip) is decidable;
    "" when not recorded. For an autotuned kernel the hash covers the autotuner's
    configs and key as well (``autotuned``).
    """

    name: str
    launch: tuple[tuple[str, str], ...] = ()
    resources: tuple[tuple[str, str], ...] = ()
    source: str = ""
    autotuned: bool = False  # launched by an autotuner: its config may differ from process to process

    @property
    def config(self) -> tuple[tuple[str, str], ...]:
        """The launch without its grid: the block sizes, warps and stages an autotuner chooses."""
        return tuple((k, v) for k, v in self.launch if k != "grid")

    def value(self, key: str) -> str:
        """``key`` from launch or resources ("" when not recorded)."""
        return dict(self.launch).get(key) or dict(self.resources).get(key) or ""


@dataclass(frozen=True)
class CaseResult:
    """What one case produced: a time, or the reason it has none."""

    spec: CaseSpec
    status: str  # one of STATUSES
    repeats: tuple[RepeatSample, ...] = ()
    iters: int = 0
    message: str = ""  # why a case failed / errored / was skipped
    rel_error: float | None = None  # correctness gate's ||out-ref||/||ref||
    timer: str = ""  # profiler | events | host: what the times are
    gate: str = ""  # spin | none: how the device was held while a repeat was enqueued
    stalls: int = 0  # repeat attempts that stalled (each was measured again, within a bound)
    kernels: tuple[KernelRecord, ...] = ()  # compiled kernels timed (empty: CPU interpreter, vendor library)

    @property
    def clock_source(self) -> str:
        """The repeats' clock source, or ``mixed:a/b`` when they differ."""
        sources = sorted({r.clock_source for r in self.repeats if r.clock_source})
        return sources[0] if len(sources) == 1 else ("mixed:" + "/".join(sources) if sources else "")

    @property
    def median_us(self) -> float | None:
        if self.status != "ok" or not self.repeats:
            return None
        return statistics.median(r.median_us for r in self.repeats)


@dataclass(frozen=True)
class Environment:
    """Where a run happened. Every field is a string so it round-trips through CSV."""

    device_name: str = ""
    arch: str = ""  # sm_90, gfx942, gfx950, cpu
    vendor: str = ""  # nvidia, amd, cpu
    driver: str = ""
    runtime: str = ""  # CUDA or HIP runtime version
    torch: str = ""
    triton: str = ""
    perfci: str = ""
    git_sha: str = ""
    host: str = ""
    timestamp: str = ""  # ISO 8601, UTC


@dataclass(frozen=True, slots=True)  # slots: a million rows without a million __dict__s
class ResultRow:
    """One case as read back from a results file (perfci or FlyDSL)."""

    kernel: str
    shape: str
    dtype: str
    status: str
    m: int | None = None
    n: int | None = None
    k: int | None = None
    median_us: float | None = None
    repeats_us: tuple[float, ...] = ()
    iters: int = 0
    tflops: float | None = None
    tbps: float | None = None
    sclk_mhz: tuple[float | None, ...] = ()
    throttled: tuple[bool | None, ...] = ()
    weight: float = 1.0
    arch: str = ""
    device_name: str = ""
    git_sha: str = ""
    message: str = ""
    line: int = 0  # line in the source file, for error messages downstream
    timer: str = ""  # events | profiler | host; empty in files written before the column
    clock_source: str = ""  # device | nvml | amdsmi | ...; empty before schema 2
    stalls: int = 0  # repeat attempts that stalled while measuring this case
    roofline_pct: float | None = None
    # The run's software and time, for the reports' identity lines (empty when unknown).
    driver: str = ""
    runtime: str = ""
    torch: str = ""
    triton: str = ""
    timestamp: str = ""
    power_w: tuple[float | None, ...] = ()  # per repeat, as read (not checked against the repeats)
    kernels: tuple[KernelRecord, ...] = ()  # launch and resources columns; empty in older files

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kernel, self.shape, self.dtype)


@dataclass(frozen=True)
class ResultTable:
    path: str
    format: str  # "perfci" | "flydsl"
    rows: tuple[ResultRow, ...] = field(default_factory=tuple)

    @property
    def has_repeats(self) -> bool:
        return any(len(r.repeats_us) > 1 for r in self.rows)

    def by_key(self) -> dict[tuple[str, str, str], ResultRow]:
        return {r.key: r for r in self.rows}


def column_mode(cells: Iterable[Mapping[str, str]], column: str, skip_empty: bool = False) -> str:
    """The value of ``column`` most of a run's rows hold (its suite, commit, device; every row repeats it);
    "" when no row does. ``skip_empty``: the most common of the non-empty values."""
    values = [v for v in (str(c.get(column) or "").strip() for c in cells) if v or not skip_empty]
    return Counter(values).most_common(1)[0][0] if values else ""
