"""The gate and stall logic on the CPU: pure decisions, and perfci's timing loop on a simulated device.

The simulated device is a small discrete-event model. The host pays ``launch_us``
per enqueue (plus any injected host load); the device runs entries in order, none
before it was enqueued; a spin gate ends at its release or its timeout; a sleep
gate after a fixed time; a full queue makes an enqueue block until the device
retires an entry, as a launch does when the stream's queue is full. perfci's
own :func:`time_iterations` drives it through a hold that judges chunks with
:func:`gating.judge_chunk`, the rule the GPU hold uses.
"""
from __future__ import annotations

import math
import random
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from perfci.measure import gating
from perfci.measure.gating import ChunkVerdict, GateRecord, Stamp, judge_chunk, plan_chunks
from perfci.measure.timing import time_iterations

INF = math.inf
TRUE_OP_US = 8.0  # split-K: partial 6 us + reduce 2 us, one device span


# --------------------------------------------------------------------------- pure decisions


def test_plan_fits_half_the_queue_and_is_balanced():
    assert plan_chunks(70, 6, 1024) == [70]  # 6*70 + 4 = 424 <= 512
    assert plan_chunks(70, 5, 256) == [24, 23, 23]  # (128 - 4) // 5 = 24 a chunk
    for depth in (64, 100, 300, 1000):
        for iters in (1, 7, 70, 71):
            plan = plan_chunks(iters, 5, depth)
            assert sum(plan) == iters and max(plan) - min(plan) <= 1
            assert max(plan) * 5 + gating.CHUNK_OVERHEAD_ENTRIES <= depth * gating.QUEUE_SAFETY


def test_plan_refuses_a_queue_too_small_for_one_iteration():
    with pytest.raises(ValueError):
        plan_chunks(10, 5, 16)
    assert plan_chunks(0, 5, 1024) == []


def record(first, last, timed_out):
    return GateRecord(first, last, 3, timed_out, 1000, 1100)


def test_judging_a_chunk():
    assert judge_chunk(True).stalled and not judge_chunk(False).stalled
    assert judge_chunk(False, record(0, 5, False), 5) == ChunkVerdict(False, "held until released")
    assert judge_chunk(True, record(0, 0, True), 5).stalled  # the gate gave up before the host finished
    assert not judge_chunk(False, record(0, 0, True), 5).stalled
    assert judge_chunk(True, record(0, 5, False), 5).stalled  # passed a gate never released
    with pytest.raises(ValueError):
        GateRecord.from_row([1, 2, 3])


def wide_stamp(t_ns, offsets, hz, units, rng):
    out = []
    for unit in units:
        t = t_ns + rng.uniform(0, 2000)  # the programs of a wide stamp land a little apart
        out.append(Stamp(int(t), int(offsets[unit] + t * hz / 1e9), unit))
    return out


def test_the_clock_pairs_stamps_of_one_unit_whatever_the_counters_offsets():
    rng = random.Random(1)
    hz = 1.98e9
    offsets = {unit: rng.randrange(0, 10**12) for unit in range(132)}  # unsynchronised per SM
    starts = wide_stamp(1_000_000, offsets, hz, range(132), rng)
    ends = wide_stamp(6_000_000, offsets, hz, [u for u in range(132) if u % 7], rng)  # some SMs missed
    clock = gating.chunk_clock(starts, ends, timer_hz=1e9)
    assert clock.hz == pytest.approx(hz, rel=1e-3) and clock.units == len([u for u in range(132) if u % 7])
    naive = (ends[-1].cycles - starts[0].cycles) / (ends[-1].timer - starts[0].timer) * 1e9
    assert abs(naive / hz - 1) > 0.5  # what pairing across units would have said
    with pytest.raises(ValueError):
        gating.chunk_clock([Stamp(0, 0, 1)], [Stamp(10, 10, 2)], 1e9)


def test_a_repeat_clock_weights_chunks_by_their_span():
    fast = gating.ChunkClock(2e9, 1e-3, 1, 0.0)
    slow = gating.ChunkClock(1e9, 3e-3, 1, 0.0)
    assert gating.repeat_clock_mhz([fast, slow]) == pytest.approx(1250.0)
    assert gating.repeat_clock_mhz([]) is None


def test_stamp_rows_skip_programs_that_never_wrote():
    assert gating.stamps_from_rows([5, 9, 3, 0, 0, 0, 0, 0, 7, 11, 0, 0]) == [Stamp(5, 9, 3), Stamp(7, 11, 0)]


@pytest.mark.parametrize("measured, vendor, nominal", [
    (999_824_052.0, "nvidia", 1e9), (0.96e9, "nvidia", 1e9), (100.9e6, "amd", 100e6), (25.1e6, "amd", 25e6),
    (61e6, "amd", 61e6), (0.88e9, "nvidia", 0.88e9)])
def test_timer_rate_snaps_to_the_nominal_one(measured, vendor, nominal):
    assert gating.snap_timer_hz(measured, vendor) == nominal


# --------------------------------------------------------------------------- a simulated device


@dataclass
class Entry:
    kind: str  # kernel | mark | spin | sleep
    duration: float
    ready: float  # host time when it was enqueued
    token: int | None = None


class SimDevice:
    def __init__(self, gate: str, launch_us=5.0, query_us=0.5, timeout_us=20_000.0, sleep_us=0.0,
                 queue_depth: int | None = None):
        self.gate = gate
        self.launch_us, self.query_us, self.timeout_us, self.sleep_us = launch_us, query_us, timeout_us, sleep_us
        self.queue_depth = queue_depth
        self.host = 0.0
        self.entries: list[Entry] = []
        self.released: dict[int, float] = {}
        self.blocked = 0

    def ends(self) -> list[float]:
        device, out = 0.0, []
        for e in self.entries:
            start = max(device, e.ready)
            if e.kind == "spin":
                end = min(max(start, self.released.get(e.token, INF)), start + self.timeout_us)
            elif e.kind == "sleep":
                end = start + self.sleep_us
            else:
                end = start + e.duration
            out.append(end)
            device = end
        return out

    def enqueue(self, kind: str, duration: float = 0.0, token: int | None = None) -> int:
        if self.queue_depth is not None:
            pending = sorted(t for t in self.ends() if t > self.host)
            if len(pending) >= self.queue_depth:  # the launch call blocks until an entry retires
                self.host = pending[len(pending) - self.queue_depth]
                self.blocked += 1
        self.host += self.launch_us
        self.entries.append(Entry(kind, duration, self.host, token))
        return len(self.entries) - 1


class SimHold:
    """The Hold protocol on the simulated device, judging chunks as perfci's DeviceHold does."""

    def __init__(self, dev: SimDevice, entries_per_iter: int = 5, plan_depth: int | None = 4096):
        self.dev, self.entries_per_iter, self.plan_depth = dev, entries_per_iter, plan_depth
        self.verdicts: list[ChunkVerdict] = []
        self.token = 0

    def chunks(self, iters):
        return plan_chunks(iters, self.entries_per_iter, self.plan_depth)

    @contextmanager
    def held(self):
        dev = self.dev
        self.token += 1
        if dev.gate == "spin":
            dev.enqueue("spin", token=self.token)
        elif dev.gate == "sleep":
            dev.enqueue("sleep")
        passed = dev.enqueue("mark")
        yield
        dev.host += dev.query_us
        self.verdicts.append(judge_chunk(dev.ends()[passed] <= dev.host))  # queried before the release
        if dev.gate == "spin":
            dev.host += 0.1
            dev.released[self.token] = dev.host

    @property
    def stalled(self) -> bool:
        return any(v.stalled for v in self.verdicts)


class SimMarks:
    def __init__(self, dev: SimDevice, n: int):
        self.dev, self.starts, self.stops = dev, [0] * n, [0] * n

    def start(self, i):
        self.starts[i] = self.dev.enqueue("mark")

    def stop(self, i):
        self.stops[i] = self.dev.enqueue("mark")

    def elapsed_us(self):
        ends = self.dev.ends()
        return [ends[b] - ends[a] for a, b in zip(self.starts, self.stops)]


def measure(dev: SimDevice, host_load_us=0.0, every=1, plan_depth=4096, iters=70):
    """perfci's timing loop over a split-K op whose host is descheduled between its two kernels."""
    hold = SimHold(dev, plan_depth=plan_depth)
    count = [0]

    def splitk():
        dev.enqueue("kernel", 6.0)
        if host_load_us and count[0] % every == 0:
            dev.host += host_load_us  # the worst moment: between partial and reduce
        dev.enqueue("kernel", 2.0)
        count[0] += 1

    spans = time_iterations(splitk, SimMarks(dev, iters), iters, flush=lambda: dev.enqueue("kernel", 30.0),
                            hold=hold)
    return hold, spans


def test_ungated_under_host_load_the_detector_fires_and_host_time_leaks_in():
    hold, spans = measure(SimDevice("none"), host_load_us=200.0)
    assert hold.stalled
    assert max(spans) > TRUE_OP_US + 100


def test_the_spin_gate_keeps_host_load_out_of_every_span():
    hold, spans = measure(SimDevice("spin"), host_load_us=200.0)
    assert not hold.stalled
    assert spans == pytest.approx([TRUE_OP_US] * 70)


def test_a_sleep_gate_too_short_for_the_enqueue_is_caught():
    hold, spans = measure(SimDevice("sleep", sleep_us=40_000.0), host_load_us=200.0)
    assert not hold.stalled and spans == pytest.approx([TRUE_OP_US] * 70)
    hold, spans = measure(SimDevice("sleep", sleep_us=2_000.0), host_load_us=200.0)
    assert hold.stalled and max(spans) > TRUE_OP_US + 100
    hold, _ = measure(SimDevice("sleep", sleep_us=3_000.0), host_load_us=5_000.0, every=60)  # one late hiccup
    assert hold.stalled


def test_a_chunk_larger_than_the_queue_times_the_gate_out_and_chunking_fixes_it():
    dev = SimDevice("spin", queue_depth=128, timeout_us=5_000.0)
    hold, _ = measure(dev, plan_depth=None and 4096 or 100_000)  # one chunk of 350 entries > 128
    assert dev.blocked > 0 and hold.stalled
    dev = SimDevice("spin", queue_depth=128, timeout_us=5_000.0)
    hold, spans = measure(dev, plan_depth=128, host_load_us=50.0)
    assert len(hold.verdicts) > 1 and not hold.stalled and dev.blocked == 0
    assert spans == pytest.approx([TRUE_OP_US] * 70)
