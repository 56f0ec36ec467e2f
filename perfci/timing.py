"""The timing loop, and the two clocks it can read.

There is exactly one loop (:func:`time_iterations`). A backend hands it a
zero-argument callable that launches the case once into preallocated buffers;
everything else (inputs, outputs, graph capture, the cache-flush buffer) is set
up before the loop starts, so only the launch sits between the two marks.

On a GPU the marks are device events, read after one synchronisation at the
end, so host-side Python never stretches a sample. The cache flush is enqueued
just before the start mark: while the device is busy zeroing a buffer of at
least twice the last-level cache, the host has time to enqueue the start event,
the launch and the stop event, so the kernel starts the instant the flush ends
and host launch overhead never enters the measured interval.
"""
from __future__ import annotations

import time
from typing import Callable, Protocol, Sequence


class Marks(Protocol):
    """Start/stop marks for ``n`` iterations, resolved to microseconds at the end."""

    def start(self, i: int) -> None: ...
    def stop(self, i: int) -> None: ...
    def elapsed_us(self) -> list[float]: ...


class HostMarks:
    """``perf_counter`` marks, for synchronous devices (the CPU, the interpreter)."""

    def __init__(self, n: int, clock: Callable[[], int] = time.perf_counter_ns):
        self._clock = clock
        self._t0 = [0] * n
        self._t1 = [0] * n

    def start(self, i: int) -> None:
        self._t0[i] = self._clock()

    def stop(self, i: int) -> None:
        self._t1[i] = self._clock()

    def elapsed_us(self) -> list[float]:
        return [(b - a) / 1e3 for a, b in zip(self._t0, self._t1)]


class EventMarks:
    """Device-event marks (``torch.cuda.Event``; HIP events on ROCm)."""

    def __init__(self, n: int, torch_module):
        self._torch = torch_module
        new = lambda: torch_module.cuda.Event(enable_timing=True)  # noqa: E731
        self._t0 = [new() for _ in range(n)]
        self._t1 = [new() for _ in range(n)]

    def start(self, i: int) -> None:
        self._t0[i].record()

    def stop(self, i: int) -> None:
        self._t1[i].record()

    def elapsed_us(self) -> list[float]:
        self._torch.cuda.synchronize()
        return [a.elapsed_time(b) * 1e3 for a, b in zip(self._t0, self._t1)]


def time_iterations(run: Callable[[], object], marks: Marks, iters: int,
                    flush: Callable[[], object] | None = None) -> list[float]:
    """Time ``iters`` launches of ``run``; the flush before each stays outside the marks."""
    for i in range(iters):
        if flush is not None:
            flush()
        marks.start(i)
        run()
        marks.stop(i)
    return marks.elapsed_us()


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of no values")
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def clock_settled(clocks_mhz: Sequence[float | None], window: int = 3, tolerance: float = 0.01) -> bool:
    """True when the last ``window`` clock readings agree within ``tolerance``.

    Warm-up runs until this holds (or a time cap), because the first hundreds of
    milliseconds of load are when boost clocks fall to the power-capped level:
    an H200 under a bf16 GEMM goes from 1980 MHz to about 1500.
    """
    recent = [c for c in clocks_mhz[-window:] if c is not None]
    if len(recent) < window:
        return False
    lo, hi = min(recent), max(recent)
    return (hi - lo) <= tolerance * hi
