"""Telemetry's data types, the source protocol, and the Sampler that polls a source.

A :class:`Sampler` polls a :class:`TelemetrySource` on a background thread
while the measurement loop runs; each repeat opens a window and gets back a
:class:`WindowSummary` (median clock, max temperature, median power, throttled
if any sample was). Vendor sources live in :mod:`.nvidia` and :mod:`.amd`;
:func:`perfci.measure.telemetry.open_source` picks one.
"""
from __future__ import annotations

import logging
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

log = logging.getLogger("perfci.measure.telemetry")

DEFAULT_INTERVAL_S = 0.005
CLI_TIMEOUT_S = 5.0


# =========================================================================== data
@dataclass(frozen=True)
class Reading:
    """One instantaneous sample; None where the source cannot read a value."""

    sclk_mhz: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    throttled: bool | None = None
    reasons: str = ""  # readable, comma separated (e.g. "sw_power_cap")


@dataclass(frozen=True)
class WindowSummary:
    """What the samples taken during one repeat add up to."""

    sclk_mhz: float | None  # median of the samples
    temp_c: float | None  # max
    power_w: float | None  # median
    throttled: bool | None  # True if any sample was; None if no sample could tell
    samples: int


NULL_READING = Reading()


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def summarize(readings: Sequence[Reading]) -> WindowSummary:
    """Fold samples into one summary; None fields are ignored per field."""
    clocks = [r.sclk_mhz for r in readings if r.sclk_mhz is not None]
    temps = [r.temp_c for r in readings if r.temp_c is not None]
    powers = [r.power_w for r in readings if r.power_w is not None]
    flags = [r.throttled for r in readings if r.throttled is not None]
    return WindowSummary(
        sclk_mhz=_median(clocks),
        temp_c=max(temps) if temps else None,
        power_w=_median(powers),
        throttled=any(flags) if flags else None,
        samples=len(readings),
    )


@runtime_checkable
class TelemetrySource(Protocol):
    name: str

    def read(self) -> Reading: ...

    def close(self) -> None: ...


class _SourceBase:
    """Shared 'fail once, then degrade' bookkeeping."""

    name = "base"

    def __init__(self) -> None:
        self.problem = ""  # first reason a read failed, for the run log

    def _note(self, what: str, exc: BaseException | str) -> None:
        if not self.problem:
            self.problem = f"{self.name}: {what}: {exc}"
            log.warning("telemetry degraded: %s", self.problem)

    def close(self) -> None:
        pass


class NullSource(_SourceBase):
    """Reads nothing: all fields None. Used on CPU and when no tool is available."""

    def __init__(self, why: str = "") -> None:
        super().__init__()
        self.name = "null"
        self.problem = why

    def read(self) -> Reading:
        return NULL_READING


class CpuFreqSource(_SourceBase):
    """Current CPU frequency (psutil) as the 'core clock' of a CPU run."""

    def __init__(self) -> None:
        super().__init__()
        import psutil  # noqa: F401  (fail at open time, not per read)

        self.name = "psutil"

    def read(self) -> Reading:
        try:
            import psutil  # lazy: psutil

            freq = psutil.cpu_freq()
            return Reading(sclk_mhz=float(freq.current) if freq and freq.current else None)
        except Exception as exc:  # noqa: BLE001 - never raise during measurement
            self._note("cpu_freq", exc)
            return NULL_READING


# =========================================================================== sampler
class Window:
    """Samples between ``Sampler.window()`` and ``stop()``; also a context manager."""

    def __init__(self, sampler: "Sampler") -> None:
        self._sampler = sampler
        self._t0 = time.monotonic()
        self.summary: WindowSummary | None = None

    def stop(self) -> WindowSummary:
        if self.summary is None:
            self.summary = self._sampler._close_window(self, self._t0, time.monotonic())
        return self.summary

    def __enter__(self) -> "Window":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Sampler:
    """Polls ``source`` every ``interval_s`` on a daemon thread.

    ::

        with Sampler(source) as sampler:
            w = sampler.window(); run_repeat(); summary = w.stop()
            with sampler.window() as w2: run_repeat()
            summary2 = w2.summary

    A window holds the samples whose read *finished* inside it. A window too
    short to catch one (or a slow CLI source) gets the latest sample taken
    before it ended instead, so a repeat is never left without a value when the
    source can read one. Samples are kept only while a window is open, so a
    long run does not grow memory. With ``interval_s`` 0 there is no thread: each
    window reads the source once, when it closes (the least a poller can cost).
    """

    def __init__(self, source: TelemetrySource, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.source = source
        self.interval_s = max(0.0, float(interval_s))
        self.errors: list[str] = []  # distinct failures of source.read(), first occurrence each
        self._samples: list[tuple[float, Reading]] = []
        self._open_windows = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> "Sampler":
        if self._thread is None and self.interval_s > 0:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="perfci-telemetry", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, 20 * self.interval_s) + CLI_TIMEOUT_S)
            self._thread = None

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- windows
    def window(self) -> Window:
        with self._lock:
            self._open_windows += 1
        return Window(self)

    def _close_window(self, window: Window, t0: float, t1: float) -> WindowSummary:
        if self.interval_s <= 0:
            with self._lock:
                self._open_windows = max(0, self._open_windows - 1)
            return summarize([self._read()])
        with self._lock:
            inside = [r for t, r in self._samples if t0 <= t <= t1]
            if not inside:
                before = [r for t, r in self._samples if t <= t1]
                inside = before[-1:]
            self._open_windows = max(0, self._open_windows - 1)
            if self._open_windows == 0:
                self._samples = self._samples[-1:]
        return summarize(inside)

    def latest(self) -> Reading | None:
        with self._lock:
            return self._samples[-1][1] if self._samples else None

    def _read(self) -> Reading:
        try:
            reading = self.source.read()
            if not isinstance(reading, Reading):
                raise TypeError(f"read() returned {type(reading).__name__}, not Reading")
        except Exception as exc:  # noqa: BLE001 - a broken source must not end sampling
            message = f"{type(exc).__name__}: {exc}"
            if message not in self.errors:
                self.errors.append(message)
                log.warning("telemetry source %s failed: %s", getattr(self.source, "name", "?"), message)
            reading = NULL_READING
        return reading

    # -- thread
    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            reading = self._read()
            # Stamped when the value arrived: a slow CLI read describes the GPU
            # as of its end more than as of its start.
            finished = time.monotonic()
            with self._lock:
                if self._open_windows:
                    self._samples.append((finished, reading))
                else:
                    self._samples = [(finished, reading)]
            elapsed = finished - started
            self._stop.wait(max(0.0, self.interval_s - elapsed))


def _run_cli(cmd: Sequence[str]) -> str:
    """stdout of a telemetry CLI; raises on a missing tool, a timeout or a failure."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[:200]}")
    return proc.stdout
