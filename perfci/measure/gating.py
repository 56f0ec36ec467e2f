"""The decisions of a held repeat, on plain values: chunks, stalls, and the clock it ran at.

A repeat is ``iters`` iterations of (flush, start mark, the operation's kernels,
end mark). It is enqueued in chunks that fit the device's queue; each chunk sits
behind a gate that holds the device until the host has enqueued all of it, and
between two clock stamps::

    gate(k) -> post-gate mark -> stamp -> [flush, start, kernels, end] x n_k -> stamp
    host: enqueue chunk k; stalled = post-gate mark already done?; release gate k

Pure: the device side (:mod:`perfci.measure.hold`) feeds these functions numbers,
and the CPU tests feed them numbers from a simulated device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Sequence

# A launch that finds the queue full blocks the host; under a gate that never
# opens until the host has finished, that is a wait until the gate's timeout. So
# a chunk may fill at most half of the queue. The H200 queued 1020 entries before
# a launch blocked (benchmarks/results/h200-2026-11-30/probe); other devices are
# assumed to hold 512 until measured.
QUEUE_SAFETY = 0.5
DEFAULT_QUEUE_DEPTH = 512
CHUNK_OVERHEAD_ENTRIES = 4  # gate, post-gate mark, two stamps


def plan_chunks(iters: int, entries_per_iter: int, queue_depth: int | None = None) -> list[int]:
    """Split ``iters`` iterations into balanced chunks that fit half the device queue.

    ``entries_per_iter``: what one iteration queues (flush, two marks, the kernels).
    """
    if iters <= 0:
        return []
    if entries_per_iter <= 0:
        raise ValueError("entries_per_iter must be positive")
    budget = int((queue_depth or DEFAULT_QUEUE_DEPTH) * QUEUE_SAFETY) - CHUNK_OVERHEAD_ENTRIES
    per_chunk = budget // entries_per_iter
    if per_chunk < 1:
        raise ValueError(f"a queue of {queue_depth} entries cannot hold one iteration of {entries_per_iter}")
    count = math.ceil(iters / per_chunk)
    base, extra = divmod(iters, count)  # sizes differ by one at most
    return [base + (1 if i < extra else 0) for i in range(count)]


@dataclass(frozen=True)
class GateRecord:
    """What ``gate_kernel`` wrote for one chunk."""

    first_seen: int  # the flag when the device reached the gate
    last_seen: int
    polls: int
    timed_out: bool
    t_start: int  # device timer ticks
    t_end: int

    @classmethod
    def from_row(cls, row: Sequence[int]) -> "GateRecord":
        if len(row) < 6:
            raise ValueError(f"a gate record has at least 6 fields, got {len(row)}")
        return cls(int(row[0]), int(row[1]), int(row[2]), bool(row[3]), int(row[4]), int(row[5]))


@dataclass(frozen=True)
class ChunkVerdict:
    stalled: bool
    reason: str


def judge_chunk(device_passed_gate: bool, gate: GateRecord | None = None, token: int | None = None) -> ChunkVerdict:
    """Did the device reach the chunk's work before the host had enqueued all of it?

    ``device_passed_gate`` is the post-gate mark's state read when the enqueue
    ended, before the release: the one rule for every kind of gate (and for no
    gate, where it is almost always true). A spin gate's own record, read later,
    says why it let go.
    """
    if gate is not None and token is not None:
        if gate.timed_out or gate.last_seen < token:
            if device_passed_gate:
                return ChunkVerdict(True, "the gate timed out before the host finished enqueuing")
            return ChunkVerdict(False, "the gate timed out after the enqueue ended")
        if device_passed_gate:
            return ChunkVerdict(True, "the device passed a gate that was never released")
        return ChunkVerdict(False, "held until released")
    if device_passed_gate:
        return ChunkVerdict(True, "the device ran the chunk before the host finished enqueuing it")
    return ChunkVerdict(False, "the device was still held when the enqueue ended")


@dataclass(frozen=True)
class Stamp:
    """One program of a wide stamp: device timer, cycle counter, and the SM / CU it ran on."""

    timer: int
    cycles: int
    unit: int


def stamps_from_rows(values: Sequence[int], fields: int = 4) -> list[Stamp]:
    """A flat buffer of (timer, cycles, unit, _) rows -> stamps; rows never written are skipped."""
    rows = [values[i:i + fields] for i in range(0, len(values) - fields + 1, fields)]
    return [Stamp(int(r[0]), int(r[1]), int(r[2])) for r in rows if r[0] or r[1]]


@dataclass(frozen=True)
class ChunkClock:
    hz: float  # median over units of cycles / time on one unit
    seconds: float  # the chunk's span, for weighting
    units: int
    spread: float  # (max - min) / median across units: near 0 when the counters are sound


def chunk_clock(starts: Sequence[Stamp], ends: Sequence[Stamp], timer_hz: float) -> ChunkClock:
    """Mean core clock between two wide stamps, pairing only stamps of the same unit.

    Per unit, the earliest start and the latest end; cycles are never
    subtracted across units, whose counters are not synchronised.
    """
    first: dict[int, Stamp] = {}
    for s in starts:
        if s.unit not in first or s.timer < first[s.unit].timer:
            first[s.unit] = s
    last: dict[int, Stamp] = {}
    for s in ends:
        if s.unit not in last or s.timer > last[s.unit].timer:
            last[s.unit] = s
    rates = []
    for unit in first.keys() & last.keys():
        ticks = last[unit].timer - first[unit].timer
        cycles = last[unit].cycles - first[unit].cycles
        if ticks > 0 and cycles > 0:
            rates.append(cycles / ticks * timer_hz)
    if not rates:
        raise ValueError("no SM / CU appears in both stamps with time between them")
    mid = median(rates)
    span = (max(s.timer for s in ends) - min(s.timer for s in starts)) / timer_hz
    return ChunkClock(mid, max(span, 0.0), len(rates), (max(rates) - min(rates)) / mid)


def repeat_clock_mhz(chunks: Sequence[ChunkClock]) -> float | None:
    """The repeat's mean clock: chunks weighted by their span (the gate waits are outside them)."""
    total = sum(c.seconds for c in chunks)
    if not chunks or total <= 0:
        return None
    return sum(c.hz * c.seconds for c in chunks) / total / 1e6


def snap_timer_hz(measured_hz: float, vendor: str) -> float:
    """The device timer's nominal rate from a rough measurement against the host clock.

    NVIDIA's %globaltimer counts nanoseconds (PTX ISA). AMD's s_memrealtime runs at a
    fixed rate per chip (100 MHz on gfx942 by LLVM's table). The measurement only
    picks among the known rates, within 5%: a busy host's latencies are in it. A
    measurement near none of them is returned as it is, and the caller distrusts it.
    """
    known = (1e9,) if vendor == "nvidia" else (100e6, 25e6)
    for nominal in known:
        if abs(measured_hz / nominal - 1.0) <= 0.05:
            return nominal
    return measured_hz


# A repeat that stalled is measured again, at most this many times more.
MAX_EXTRA_ATTEMPTS = 2
