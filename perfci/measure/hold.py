"""Holding the device while the host enqueues a repeat, and reading the clock it ran at.

:class:`DeviceHold` is the device side of :mod:`perfci.measure.gating`: it puts
a gate, a post-gate event and clock stamps around every chunk of a repeat (see
:mod:`perfci.measure.probes`), releases the gate once the chunk is enqueued, and
afterwards tells whether a chunk stalled and what the mean core clock was.

Without a usable gate (no pinned host memory, a kernel that does not compile)
it falls back to no gate and says so in :attr:`DeviceHold.notes`; without the
counters it reports no clock and the caller uses telemetry. Never silently.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from perfci.measure import gating
from perfci.measure.probes import gate_kernel, stamp_kernel  # Triton kernels: the worker imports this module only on a GPU

# A host that has not finished enqueuing a chunk after this long is stalled
# anyway; the gate then opens by itself and the repeat is measured again.
GATE_TIMEOUT_S = 1.0
MAX_POLLS = 50_000_000
MAX_CHUNKS = 64
# How long the device timer is watched against the host clock to learn its rate.
TIMER_PROBE_S = 0.1
# Queue entries one timed iteration adds: flush, two marks, and up to three
# kernels per launch (split-K has two).
ENTRIES_PER_ITER = 6
QUEUE_DEPTH = {"nvidia": 1024}  # measured on the H200 (the probe); others: gating.DEFAULT_QUEUE_DEPTH


@dataclass(frozen=True)
class HeldRepeat:
    """What one repeat's holds recorded."""

    stalled: bool
    why: str  # the first stalled chunk's reason, or ""
    clock_mhz: float | None  # mean core clock over the repeat's chunks, from the device counters
    clock_spread: float | None  # across SMs / CUs: near 0 when the counters are sound
    chunks: int


class DeviceHold:
    """Gate, post-gate event and clock stamps around each chunk of a repeat on the current GPU.

    Args:
        torch: the torch module (imported by the worker).
        vendor: "nvidia" or "amd" (selects the counters' assembly).
        gate: "spin" (hold on a pinned flag) or "none" (no hold; the stall detector
            still runs, and fires whenever the device outran the host).
    """

    def __init__(self, torch, vendor: str, gate: str = "spin"):
        self._torch = torch
        self._amd = vendor == "amd"
        self._queue_depth = QUEUE_DEPTH.get(vendor)
        self.notes: list[str] = []
        device = torch.device("cuda", torch.cuda.current_device())
        self._grid = 2 * torch.cuda.get_device_properties(device).multi_processor_count
        self._stamps = torch.zeros(2 * MAX_CHUNKS * self._grid * 4, dtype=torch.int64, device=device)
        self._gate_records = torch.zeros(MAX_CHUNKS * 8, dtype=torch.int64, device=device)
        self._token = 0
        self._open: list[tuple[int, object]] = []  # (token, post-gate event) per chunk of this repeat
        self.timer_hz = 0.0
        self.clock = self._start_counters(vendor)
        self.gate = self._start_gate(gate)

    # -- setup: each part falls back on its own, with a note
    def _start_counters(self, vendor: str) -> bool:
        torch = self._torch
        try:
            probe = torch.zeros(8, dtype=torch.int64, device=self._stamps.device)
            stamp_kernel[(1,)](probe, AMD=self._amd, num_warps=1)  # compiles: never inside the interval
            torch.cuda.synchronize()
            # Both host readings are taken just after a synchronisation returns, so the
            # launch and the return latencies fall on both ends alike. (Taking the first
            # before a launch made a busy host's launch latency look like device time:
            # timer rates 9-12% low on the H200, and clocks with them.)
            host0 = time.perf_counter()
            time.sleep(TIMER_PROBE_S)
            stamp_kernel[(1,)](probe[4:], AMD=self._amd, num_warps=1)
            torch.cuda.synchronize()
            host_s = time.perf_counter() - host0
            t0, c0, _, _, t1, c1 = probe.tolist()[:6]
        except Exception as err:  # noqa: BLE001 - no counters here: telemetry gives the clock
            self.notes.append(f"device clock counters unavailable ({type(err).__name__}: {err}); "
                              f"the clock comes from telemetry")
            return False
        if t1 <= t0 or c1 <= c0:
            self.notes.append("device clock counters did not advance; the clock comes from telemetry")
            return False
        measured = (t1 - t0) / host_s
        self.timer_hz = gating.snap_timer_hz(measured, vendor)
        if self.timer_hz == measured:
            self.notes.append(f"the device timer ran at {measured / 1e6:.1f} MHz against the host clock, "
                              f"no known rate; the clock comes from telemetry")
            return False
        return True

    def _start_gate(self, gate: str) -> str:
        if gate == "none":
            return "none"
        torch = self._torch
        try:
            self._flag = torch.zeros(1, dtype=torch.int32).pin_memory()
            # First launch compiles; release it before it starts so it never waits.
            self._token += 1
            self._flag[0] = self._token
            gate_kernel[(1,)](self._flag, self._gate_records, 0, self._token, self._timeout_ticks(), MAX_POLLS,
                              AMD=self._amd, num_warps=1)
            torch.cuda.synchronize()
            first_seen = int(self._gate_records[0].item())
        except Exception as err:  # noqa: BLE001 - e.g. no pinned memory: time without a gate, and say so
            self.notes.append(f"no device gate ({type(err).__name__}: {err}); launches are timed ungated, "
                              f"and the stalls column says when the host fell behind")
            return "none"
        if first_seen != self._token:
            self.notes.append("the gate could not read its flag in host memory; timed ungated")
            return "none"
        return "spin"

    def _timeout_ticks(self) -> int:
        return int(GATE_TIMEOUT_S * (self.timer_hz or 1e9))

    # -- the timing loop's side
    def chunks(self, iters: int) -> list[int]:
        return gating.plan_chunks(iters, ENTRIES_PER_ITER, self._queue_depth)

    def begin_repeat(self) -> None:
        self._open = []

    @contextmanager
    def held(self) -> Iterator[None]:
        """Enqueue the chunk inside this block; the device starts it only when the block ends."""
        torch = self._torch
        index = len(self._open)
        if index >= MAX_CHUNKS:
            raise RuntimeError(f"a repeat of more than {MAX_CHUNKS} chunks")
        self._token += 1
        token = self._token
        if self.gate == "spin":
            gate_kernel[(1,)](self._flag, self._gate_records, index, token, self._timeout_ticks(), MAX_POLLS,
                              AMD=self._amd, num_warps=1)
        passed = torch.cuda.Event()
        passed.record()
        if self.clock:
            stamp_kernel[(self._grid,)](self._stamp_slot(2 * index), AMD=self._amd, num_warps=1)
        try:
            yield
        finally:
            if self.clock:
                stamp_kernel[(self._grid,)](self._stamp_slot(2 * index + 1), AMD=self._amd, num_warps=1)
            # The stall detector: had the device passed the gate before the enqueue ended?
            self._open.append((token, passed.query()))
            if self.gate == "spin":
                self._flag[0] = token  # release, whatever happened in the block

    def _stamp_slot(self, slot: int):
        size = self._grid * 4
        return self._stamps[slot * size:(slot + 1) * size]

    def report(self) -> HeldRepeat:
        """After the repeat's marks were read (the device is idle): stalls and the clock."""
        records = self._gate_records.tolist() if self.gate == "spin" else None
        stamps = self._stamps[:2 * len(self._open) * self._grid * 4].tolist() if self.clock else None
        stalled, why, clocks = False, "", []
        for index, (token, passed) in enumerate(self._open):
            record = gating.GateRecord.from_row(records[index * 8:index * 8 + 8]) if records else None
            verdict = gating.judge_chunk(passed, record, token if record else None)
            if verdict.stalled and not stalled:
                stalled, why = True, verdict.reason
            if stamps is not None:
                size = self._grid * 4
                start = gating.stamps_from_rows(stamps[2 * index * size:(2 * index + 1) * size])
                end = gating.stamps_from_rows(stamps[(2 * index + 1) * size:(2 * index + 2) * size])
                try:
                    clocks.append(gating.chunk_clock(start, end, self.timer_hz))
                except ValueError:
                    pass
        clock = gating.repeat_clock_mhz(clocks) if clocks else None
        spread = max((c.spread for c in clocks), default=None)
        return HeldRepeat(stalled, why, clock, spread, len(self._open))
