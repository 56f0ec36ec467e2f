"""The timing loop, and the clocks it can read.

There is exactly one loop (:func:`time_iterations`). A backend hands it a
zero-argument callable that launches the case once into preallocated buffers;
everything else (inputs, outputs, graph capture, the cache-flush buffer, the
gate) is set up before the loop starts, so only the launch sits between the two
marks.

On a GPU the marks are device events, read after one synchronisation at the
end, and every chunk of launches is enqueued while the device is held by a gate
(:mod:`perfci.measure.hold`): the device starts the chunk only once the host has
queued all of it, so host time (a busy or preempted host) never lands between
the kernels of a measured operation, split-K's two kernels included. The cache
flush before each launch stays outside the marks.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from statistics import median  # noqa: F401 - the loop's statistic, re-exported
from typing import Callable, ContextManager, Iterator, Protocol, Sequence


class Hold(Protocol):
    """Holds the device while a chunk of launches is enqueued (see :mod:`perfci.measure.hold`)."""

    def chunks(self, iters: int) -> list[int]: ...
    def held(self) -> ContextManager[None]: ...


class _Unheld:
    def chunks(self, iters: int) -> list[int]:
        return [iters]

    @contextmanager
    def held(self) -> Iterator[None]:
        yield


UNHELD = _Unheld()  # the CPU: launches run as they are made, nothing to hold


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


class ProfilerMarks:
    """Kernel durations from the device profiler (CUPTI on NVIDIA, roctracer on ROCm).

    Device events bracket more than the kernel: on an H200 the event pair around
    a launch reads ~4 µs more than the kernel itself ran (the dispatch of the
    grid and the events' own processing): a decode GEMM of 5-15 µs reads 1.3 to
    2 times its kernel time. The profiler's per-kernel timestamps hold only the kernels; a launch's
    value is the sum of its kernels' durations
    (a split-K GEMM and its reduction count together). The profiler is switched
    on at the first start mark and read once at the end, so it adds nothing
    between launches.
    """

    def __init__(self, n: int, torch_module, is_separator: Callable[[str], bool] | None = None):
        self._n = n
        self._torch = torch_module
        self._is_separator = is_separator or is_flush_kernel
        self._profiler = None

    def start(self, i: int) -> None:
        if self._profiler is None:
            from torch.profiler import ProfilerActivity, profile  # lazy: torch

            self._profiler = profile(activities=[ProfilerActivity.CUDA])
            self._profiler.__enter__()

    def stop(self, i: int) -> None:
        pass

    def elapsed_us(self) -> list[float]:
        self._torch.cuda.synchronize()
        self._profiler.__exit__(None, None, None)
        kernels = [(e.time_range.start, e.name, float(e.device_time))
                   for e in self._profiler.events() if e.device_type.name == "CUDA"]
        return kernel_time_per_launch(kernels, self._n, self._is_separator)


def is_flush_kernel(name: str) -> bool:
    """Kernels between the timed launches: the cache flush (``zero_()`` on a scratch
    buffer: torch's fill kernel, or a memset) and the gate and clock stamps."""
    lowered = name.lower()
    return any(part in lowered for part in ("fill", "memset", "gate_kernel", "stamp_kernel", "timer_sleep_kernel"))


def kernel_time_per_launch(kernels: Sequence[tuple[float, str, float]], n: int,
                           is_separator: Callable[[str], bool]) -> list[float]:
    """Group profiled kernels into launches and sum each launch's durations.

    ``kernels`` are (start, name, duration_us). Launches are the runs of
    consecutive non-flush kernels, since a flush precedes every launch (the
    first one may fall before the profiler started, which changes nothing).
    """
    groups: list[list[float]] = []
    open_group = False
    for _, name, duration in sorted(kernels):
        if is_separator(name):
            open_group = False
            continue
        if not open_group:
            groups.append([])
            open_group = True
        groups[-1].append(duration)
    if len(groups) != n:
        raise RuntimeError(f"the profiler saw {len(groups)} launches where {n} were timed; "
                           f"use --timer events for this case")
    return [sum(group) for group in groups]


def time_iterations(run: Callable[[], object], marks: Marks, iters: int,
                    flush: Callable[[], object] | None = None, hold: Hold | None = None) -> list[float]:
    """Time ``iters`` launches of ``run``; the flush before each stays outside the marks."""
    hold = hold or UNHELD
    i = 0
    for chunk in hold.chunks(iters):
        with hold.held():  # the device starts the chunk once all of it is queued
            for _ in range(chunk):
                if flush is not None:
                    flush()
                marks.start(i)
                run()
                marks.stop(i)
                i += 1
    return marks.elapsed_us()


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

# Warm-up batches grow towards this long: long enough that the clock read after
# one reflects the load rather than the gaps between batches (NVML samples the
# clock every few ms), short enough that three agreeing readings come quickly.
WARMUP_BATCH_S = 0.025


def warm_up(run, flush, sync, source, min_s: float, max_s: float) -> dict:
    """Launch in growing batches until the clock settles (or ``max_s`` passes).

    Each batch is synchronised, so the host never queues seconds of work ahead
    of the device.
    """
    clocks: list[float | None] = []
    start = time.perf_counter()
    batch, batches = 1, 0
    while True:
        t0 = time.perf_counter()
        for _ in range(batch):
            if flush is not None:
                flush()
            run()
        sync()
        took = time.perf_counter() - t0
        batches += 1
        clocks.append(source.read().sclk_mhz)
        elapsed = time.perf_counter() - start
        no_clock = all(c is None for c in clocks)
        if elapsed >= max_s:
            break
        if elapsed >= min_s and (clock_settled(clocks) or (no_clock and batches >= 3)):
            break
        batch = max(1, min(batch * 4, int(batch * WARMUP_BATCH_S / took) if took > 0 else batch * 4))
    settled = clock_settled(clocks)
    return {"seconds": round(time.perf_counter() - start, 3), "batches": batches,
            "settled": settled, "last_sclk_mhz": clocks[-1] if clocks else None}
