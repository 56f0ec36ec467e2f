"""Per-repeat GPU telemetry: core clock, temperature, power and a throttle flag.

A :class:`Sampler` polls a :class:`TelemetrySource` on a background thread
while the measurement loop runs; each repeat opens a window and gets back a
:class:`WindowSummary` (median clock, max temperature, median power, throttled
if any sample was). The numbers let ``perfci compare`` tell a slower kernel from
a slower clock.

Sources, best first:

* NVIDIA: NVML through ``pynvml`` (package nvidia-ml-py, optional), else the
  ``nvidia-smi`` CLI, else nothing.
* AMD: the ``amdsmi`` Python module, else the ``amd-smi`` CLI, else ``rocm-smi
  --json``, else nothing. The core clock is the *lowest* per-XCD GFX clock:
  an MI300X/MI355X has 8 XCDs whose clocks differ by 3-10%, and the slowest
  one sets the GEMM's speed (hipblaslt-bench reports "lowest-median-freq").
* CPU: ``psutil.cpu_freq`` if available, else nothing.

Nothing here raises during measurement: a source that fails degrades to
``None`` fields and records the reason once (``source.problem`` and a
warning on the ``perfci.measure.telemetry`` logger).

The text/JSON parsers are pure functions, tested against recorded output of
the real tools under ``tests/data/telemetry``.
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Iterable, Mapping

from perfci.measure.devices import physical_device
from perfci.measure.telemetry.amd import AmdSmiCliSource, AmdSmiModuleSource, RocmSmiSource
from perfci.measure.telemetry.base import (
    DEFAULT_INTERVAL_S, NULL_READING, CpuFreqSource, NullSource, Reading, Sampler, TelemetrySource,
    Window, WindowSummary, log, summarize,
)
from perfci.measure.telemetry.nvidia import NvidiaSmiSource, NvmlSource, _torch_nvidia_uuid, resolve_nvidia_target

__all__ = [
    "DEFAULT_INTERVAL_S", "NULL_READING", "CpuFreqSource", "NullSource", "Reading", "Sampler",
    "TelemetrySource", "Window", "WindowSummary", "open_source", "summarize",
]


# =========================================================================== factory
def _first_working(candidates: Iterable[tuple[str, Any]]) -> tuple[TelemetrySource | None, list[str]]:
    why = []
    for label, factory in candidates:
        try:
            return factory(), why
        except Exception as exc:  # noqa: BLE001 - try the next way of reading the GPU
            why.append(f"{label}: {type(exc).__name__}: {exc}")
    return None, why


def open_source(vendor: str, device_index: int = 0, env: Mapping[str, str] | None = None) -> TelemetrySource:
    """The best telemetry source for torch's device ``device_index`` (visible numbering).

    ``vendor`` is "nvidia", "amd" or "cpu". Never fails for a known vendor: with
    no usable tool it returns a :class:`NullSource` whose ``problem`` says why.
    """
    env = os.environ if env is None else env
    if vendor == "cpu":
        source, why = _first_working([("psutil", CpuFreqSource)])
        return source or NullSource("; ".join(why))
    if vendor == "nvidia":
        target = resolve_nvidia_target(device_index, env, _torch_nvidia_uuid(device_index))
        candidates: list[tuple[str, Any]] = [("pynvml", lambda: NvmlSource(target))]
        if shutil.which("nvidia-smi"):
            candidates.append(("nvidia-smi", lambda: NvidiaSmiSource(target)))
    elif vendor == "amd":
        physical = physical_device(device_index, env, "amd")
        if not physical.isdigit():
            return NullSource(f"cannot map AMD device {physical!r} to an amd-smi index")
        index = int(physical)
        candidates = [("amdsmi", lambda: AmdSmiModuleSource(index))]
        if shutil.which("amd-smi"):
            candidates.append(("amd-smi", lambda: AmdSmiCliSource(index)))
        if shutil.which("rocm-smi"):
            candidates.append(("rocm-smi", lambda: RocmSmiSource(index)))
    else:
        raise ValueError(f"open_source: vendor must be 'nvidia', 'amd' or 'cpu', got {vendor!r}")
    source, why = _first_working(candidates)
    if source is None:
        log.warning("no %s telemetry: %s", vendor, "; ".join(why) or "no tool found")
        return NullSource("; ".join(why) or "no tool found")
    return source
