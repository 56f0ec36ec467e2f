"""Device-side instruments for the timing loop: a gate, clock stamps, and a timer sleep.

Three tiny Triton kernels, one code path for NVIDIA and AMD (``AMD`` is a
constexpr, so only one vendor's assembly is ever emitted):

* ``gate_kernel`` holds the stream: one program spins on an int32 flag in pinned
  host memory until the host writes the chunk's token, which it does only after
  enqueuing the whole chunk. Host time (a preempted or busy host, a GC pause)
  then never lands between two kernels of a measured operation.
* ``stamp_kernel`` writes (timer, cycles, unit) from every program of a wide
  grid, so a repeat's mean core clock is cycles over time *on the same SM / CU*:
  cycle counters are per unit and are not synchronised (11.6 ms apart across the
  SMs of an H200, benchmarks/results/h200-2026-11-30/probe).
* ``timer_sleep_kernel`` waits a fixed device-timer interval: the fallback gate
  where no mapped memory can be had.

Counters: NVIDIA ``%globaltimer`` (ns) and ``%clock64`` (SM cycles); AMD
``s_memrealtime`` (constant-rate) and ``s_memtime`` (shader cycles). Both are
read in one inline-asm block so nothing is scheduled between the two reads.
"""
from __future__ import annotations

import triton
import triton.language as tl

NV_CLOCKS = tl.constexpr("mov.u64 $0, %globaltimer;\n\tmov.u64 $1, %clock64;")
# Both are scalar-memory reads: wait for them (lgkmcnt) before the registers are used.
AMD_CLOCKS = tl.constexpr("s_memrealtime $0\n\ts_memtime $1\n\ts_waitcnt lgkmcnt(0)")
NV_UNIT = tl.constexpr("mov.u32 $0, %smid;")
# gfx9: HW_ID bits [15:8] hold the CU, SH and SE ids; gfx940+: XCC_ID bits [3:0] the die.
AMD_CU = tl.constexpr("s_getreg_b32 $0, hwreg(HW_REG_HW_ID, 8, 8)")
AMD_XCC = tl.constexpr("s_getreg_b32 $0, hwreg(HW_REG_XCC_ID, 0, 4)")
# Back off between polls; inline asm must return a value, so these return 0.
NV_PAUSE = tl.constexpr("nanosleep.u32 256;\n\tmov.u32 $0, 0;")
AMD_PAUSE = tl.constexpr("s_sleep 2\n\ts_mov_b32 $0, 0")

STAMP_FIELDS = 4  # timer, cycles, unit, (unused)
GATE_FIELDS = 8  # first seen, last seen, polls, timed out, t start, t end, c start, c end


@triton.jit
def _clocks(AMD: tl.constexpr):
    if AMD:
        t, c = tl.inline_asm_elementwise(AMD_CLOCKS, "=s,=s", [], dtype=(tl.int64, tl.int64),
                                         is_pure=False, pack=1)
    else:
        t, c = tl.inline_asm_elementwise(NV_CLOCKS, "=l,=l", [], dtype=(tl.int64, tl.int64),
                                         is_pure=False, pack=1)
    return t, c


@triton.jit
def _unit(AMD: tl.constexpr):
    if AMD:
        cu = tl.inline_asm_elementwise(AMD_CU, "=s", [], dtype=tl.int32, is_pure=False, pack=1)
        xcc = tl.inline_asm_elementwise(AMD_XCC, "=s", [], dtype=tl.int32, is_pure=False, pack=1)
        unit = (xcc << 8) | cu
    else:
        unit = tl.inline_asm_elementwise(NV_UNIT, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return unit


@triton.jit
def _pause(AMD: tl.constexpr):
    if AMD:
        zero = tl.inline_asm_elementwise(AMD_PAUSE, "=s", [], dtype=tl.int32, is_pure=False, pack=1)
    else:
        zero = tl.inline_asm_elementwise(NV_PAUSE, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return zero


@triton.jit
def _poll(ptr, AMD: tl.constexpr):
    # A load re-issued on every call that bypasses the caches. On AMD, Triton 3.6
    # drops `volatile` (the loop would read the flag once, from the scalar cache);
    # ".cv" gives `global_load_dword ... sc0 sc1`. On NVIDIA `volatile` gives
    # LDG.E.STRONG.SYS, and adding ".cv" makes ptxas refuse the load.
    if AMD:
        value = tl.load(ptr, volatile=True, cache_modifier=".cv")
    else:
        value = tl.load(ptr, volatile=True)
    return value


@triton.jit
def stamp_kernel(out_ptr, AMD: tl.constexpr):
    """Each program writes (timer, cycles, unit) to ``out[pid * 4 :]``."""
    pid = tl.program_id(0)
    t, c = _clocks(AMD)
    unit = _unit(AMD)
    tl.store(out_ptr + pid * 4 + 0, t)
    tl.store(out_ptr + pid * 4 + 1, c)
    tl.store(out_ptr + pid * 4 + 2, unit.to(tl.int64))


@triton.jit(do_not_specialize=["slot", "token", "timeout_ticks", "max_polls"])
def gate_kernel(flag_ptr, out_ptr, slot, token, timeout_ticks, max_polls, AMD: tl.constexpr):
    """Spin until ``flag[0] >= token``; record what happened in ``out[slot * 8 :]``.

    Bounded twice, by a device-timer timeout and a poll count, so a host that
    never releases (a bug, a killed process) cannot hang the GPU. The token grows
    with every chunk, so the flag never needs resetting.
    """
    t0, c0 = _clocks(AMD)
    flag = _poll(flag_ptr, AMD)
    first = flag
    t1 = t0
    c1 = c0
    polls = 0
    while (flag < token) & ((t1 - t0) < timeout_ticks) & (polls < max_polls):
        zero = _pause(AMD)
        flag = _poll(flag_ptr, AMD) + zero
        t1, c1 = _clocks(AMD)
        polls += 1
    record = out_ptr + slot * 8
    tl.store(record + 0, first.to(tl.int64))
    tl.store(record + 1, flag.to(tl.int64))
    tl.store(record + 2, polls.to(tl.int64))
    tl.store(record + 3, (flag < token).to(tl.int64))
    tl.store(record + 4, t0)
    tl.store(record + 5, t1)
    tl.store(record + 6, c0)
    tl.store(record + 7, c1)


@triton.jit(do_not_specialize=["duration_ticks", "max_polls"])
def timer_sleep_kernel(out_ptr, duration_ticks, max_polls, AMD: tl.constexpr):
    """Wait ``duration_ticks`` of the device timer (not cycles: its length must not follow the clock)."""
    t0, c0 = _clocks(AMD)
    t1 = t0
    c1 = c0
    polls = 0
    while ((t1 - t0) < duration_ticks) & (polls < max_polls):
        zero = _pause(AMD)
        t1, c1 = _clocks(AMD)
        t1 = t1 + zero
        polls += 1
    tl.store(out_ptr + 0, t0)
    tl.store(out_ptr + 1, t1)
    tl.store(out_ptr + 2, c0)
    tl.store(out_ptr + 3, c1)


# Triton signatures, for compiling these kernels ahead of time for a named target
# (tests/measure/test_probes.py cross-compiles them for sm_90, gfx942 and gfx950).
SIGNATURES = {
    "stamp_kernel": {"out_ptr": "*i64", "AMD": "constexpr"},
    "gate_kernel": {"flag_ptr": "*i32", "out_ptr": "*i64", "slot": "i32", "token": "i32",
                    "timeout_ticks": "i64", "max_polls": "i32", "AMD": "constexpr"},
    "timer_sleep_kernel": {"out_ptr": "*i64", "duration_ticks": "i64", "max_polls": "i32", "AMD": "constexpr"},
}
KERNELS = {"stamp_kernel": stamp_kernel, "gate_kernel": gate_kernel, "timer_sleep_kernel": timer_sleep_kernel}
