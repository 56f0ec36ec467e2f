"""NVIDIA telemetry: NVML through pynvml (optional package nvidia-ml-py), else the nvidia-smi CLI.

The CSV parser and the reason decoder are pure and tested against recorded
output of an H200 under ``tests/data/telemetry/nvidia``.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from perfci.measure.devices import physical_device
from perfci.measure.telemetry.base import NULL_READING, Reading, _run_cli, _SourceBase


# =========================================================================== NVIDIA
# Clock event ("throttle") reason bits, stable NVML ABI; values recorded from an
# H200 in tests/data/telemetry/nvidia/nvml-h200.txt.
NVML_REASON_NAMES = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean "the clock is lower than the workload asked for". Idle and
# the applications-clocks setting are the user's/driver's choice, not a throttle.
NVML_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def decode_nvidia_reasons(mask: int | None) -> tuple[bool | None, str]:
    """NVML/nvidia-smi reason bitmask -> (throttled, readable names)."""
    if mask is None:
        return None, ""
    names = [name for bit, name in sorted(NVML_REASON_NAMES.items()) if mask & bit]
    unknown = mask & ~sum(NVML_REASON_NAMES)
    if unknown:
        names.append(hex(unknown))
    return bool(mask & NVML_THROTTLE_MASK), ",".join(names)


NVIDIA_SMI_FIELDS = ("clocks.sm", "temperature.gpu", "power.draw", "clocks_event_reasons.active")
# nvidia-smi prints some query fields under a longer name in the csv header.
_NVSMI_HEADER_ALIASES = {
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
}


def _leading_float(text: str) -> float | None:
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", text or "")
    return float(match.group(1)) if match else None


def _parse_hex(text: str) -> int | None:
    try:
        return int(text.strip(), 16)
    except (ValueError, AttributeError):
        return None


def parse_nvidia_smi_csv(text: str, fields: Sequence[str] = NVIDIA_SMI_FIELDS) -> list[Reading]:
    """``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` -> one Reading per row.

    With a header, columns are found by name (``[MHz]``-style units stripped,
    ``timestamp`` and unknown columns ignored); without one they must be in
    ``fields`` order. ``[N/A]``/``[Not Supported]`` cells become None. Rows that
    do not fit are skipped; junk gives ``[]``.
    """
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return []
    columns = [c.strip() for c in lines[0].split(",")]
    has_header = not any(_leading_float(c) is not None or c.lower().startswith("0x") for c in columns)
    if has_header:
        bare = [re.sub(r"\s*\[.*?\]\s*$", "", c) for c in columns]
        names = [_NVSMI_HEADER_ALIASES.get(c, c) for c in bare]
        if not set(names) & set(NVIDIA_SMI_FIELDS):
            return []  # not a query we understand (or not nvidia-smi output at all)
        lines = lines[1:]
    else:
        names = list(fields)
    readings = []
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(names):
            continue
        row = dict(zip(names, cells))
        throttled, reasons = decode_nvidia_reasons(_parse_hex(row.get("clocks_event_reasons.active", "")))
        readings.append(
            Reading(
                sclk_mhz=_leading_float(row.get("clocks.sm", "")),
                temp_c=_leading_float(row.get("temperature.gpu", "")),
                power_w=_leading_float(row.get("power.draw", "")),
                throttled=throttled,
                reasons=reasons,
            )
        )
    return readings


def _torch_nvidia_uuid(visible_index: int) -> str | None:
    """``GPU-<uuid>`` of torch's device ``visible_index``, or None when torch cannot say."""
    try:
        import torch  # lazy: torch

        if not torch.version.cuda or not torch.cuda.is_available():
            return None
        uuid = str(torch.cuda.get_device_properties(visible_index).uuid)
    except Exception:  # noqa: BLE001 - older torch has no .uuid; any failure means "unknown"
        return None
    if not uuid:
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def resolve_nvidia_target(visible_index: int, env: Mapping[str, str], torch_uuid: str | None) -> str:
    """Which physical GPU NVML must open for torch's device ``visible_index``.

    A UUID is preferred: CUDA numbers GPUs fastest-first unless
    CUDA_DEVICE_ORDER=PCI_BUS_ID, while NVML numbers them by PCI bus, so a bare
    index can name a different GPU in the two. Order: torch's UUID, then the
    CUDA_VISIBLE_DEVICES entry (index or UUID), then the index itself.
    """
    if torch_uuid:
        return torch_uuid
    return physical_device(visible_index, env, "nvidia")


class NvmlSource(_SourceBase):
    """NVML through pynvml: SM clock, GPU temperature, power, clock event reasons."""

    def __init__(self, target: str) -> None:
        super().__init__()
        import pynvml  # type: ignore[import-not-found]

        self._nvml = pynvml
        pynvml.nvmlInit()
        try:
            self._handle = self._open(target)
        except Exception:
            pynvml.nvmlShutdown()
            raise
        self.name = f"nvml:{target}"
        self._reasons_fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons"
        )
        self._closed = False

    def _open(self, target: str) -> Any:
        nv = self._nvml
        if target.isdigit():
            return nv.nvmlDeviceGetHandleByIndex(int(target))
        try:
            handle = nv.nvmlDeviceGetHandleByUUID(target)
        except nv.NVMLError:
            # CUDA accepts a unique UUID prefix in CUDA_VISIBLE_DEVICES; NVML wants it whole.
            handle = None
            for i in range(nv.nvmlDeviceGetCount()):
                candidate = nv.nvmlDeviceGetHandleByIndex(i)
                uuid = nv.nvmlDeviceGetUUID(candidate)
                uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
                if uuid.startswith(target):
                    handle = candidate
                    break
            if handle is None:
                raise
        # A MIG instance has no clocks of its own: read its parent GPU.
        try:
            if nv.nvmlDeviceIsMigDeviceHandle(handle):
                handle = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        except Exception:  # noqa: BLE001 - old drivers lack MIG calls
            pass
        return handle

    def _try(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - one unreadable field must not lose the others
            self._note(what, exc)
            return None

    def read(self) -> Reading:
        if self._closed:
            return NULL_READING
        nv, h = self._nvml, self._handle
        sclk = self._try("clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        temp = self._try("temperature", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        power_mw = self._try("power", nv.nvmlDeviceGetPowerUsage, h)
        mask = self._try("clock event reasons", self._reasons_fn, h)
        throttled, reasons = decode_nvidia_reasons(mask)
        return Reading(
            sclk_mhz=float(sclk) if sclk is not None else None,
            temp_c=float(temp) if temp is not None else None,
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            throttled=throttled,
            reasons=reasons,
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass


class NvidiaSmiSource(_SourceBase):
    """``nvidia-smi --query-gpu`` per read: slow (tens of ms), used only without pynvml."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.name = f"nvidia-smi:{target}"
        self._cmd = [
            "nvidia-smi",
            "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS),
            "--format=csv,noheader,nounits",
            "-i",
            target,
        ]

    def read(self) -> Reading:
        try:
            rows = parse_nvidia_smi_csv(_run_cli(self._cmd))
        except Exception as exc:  # noqa: BLE001
            self._note("query", exc)
            return NULL_READING
        return rows[0] if rows else NULL_READING
