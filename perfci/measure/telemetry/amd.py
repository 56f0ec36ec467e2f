"""AMD telemetry sources: the amdsmi module, else the amd-smi CLI, else rocm-smi --json.

What their output means is parsed in :mod:`perfci.measure.telemetry.amd_parsers`.
"""
from __future__ import annotations

from perfci.measure.telemetry.amd_parsers import (
    amd_reading_from_metrics, amd_reading_from_text, amdsmi_tree, parse_rocm_smi_json,
)
from perfci.measure.telemetry.base import NULL_READING, Reading, _run_cli, _SourceBase

# =========================================================================== AMD sources
class AmdSmiModuleSource(_SourceBase):
    """The ``amdsmi`` Python module (ships with ROCm): gpu_metrics + violation status."""

    def __init__(self, physical_index: int) -> None:
        super().__init__()
        import amdsmi  # type: ignore[import-not-found]

        self._amdsmi = amdsmi
        amdsmi.amdsmi_init()
        try:
            self._handle = amdsmi.amdsmi_get_processor_handles()[physical_index]
        except Exception:
            amdsmi.amdsmi_shut_down()
            raise
        self.name = f"amdsmi:{physical_index}"
        self._closed = False

    def read(self) -> Reading:
        if self._closed:
            return NULL_READING
        sm = self._amdsmi
        try:
            metrics = sm.amdsmi_get_gpu_metrics_info(self._handle)
        except Exception as exc:  # noqa: BLE001
            self._note("gpu metrics", exc)
            return NULL_READING
        violation = None
        if hasattr(sm, "amdsmi_get_violation_status"):
            try:
                violation = sm.amdsmi_get_violation_status(self._handle)
            except Exception as exc:  # noqa: BLE001 - pre-MI300 parts lack it
                self._note("violation status", exc)
        return amd_reading_from_metrics(metrics if isinstance(metrics, dict) else {}, violation)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._amdsmi.amdsmi_shut_down()
            except Exception:  # noqa: BLE001
                pass


class AmdSmiCliSource(_SourceBase):
    """``amd-smi metric`` per read. Slow (a Python process per call, ~0.3-1 s): a fallback."""

    # --violation (ROCm 7) was --throttle before; try both, then go without.
    _VARIANTS = (("--violation",), ("--throttle",), ())

    def __init__(self, physical_index: int) -> None:
        super().__init__()
        self.name = f"amd-smi:{physical_index}"
        self._gpu = physical_index
        self._variant = 0

    def read(self) -> Reading:
        while self._variant < len(self._VARIANTS):
            extra = self._VARIANTS[self._variant]
            cmd = ["amd-smi", "metric", "-g", str(self._gpu), "--clock", "--power", "--temperature", *extra]
            try:
                text = _run_cli(cmd)
            except RuntimeError as exc:  # this amd-smi rejects the flag: try the next spelling
                self._variant += 1
                if self._variant == len(self._VARIANTS):
                    self._note("metric", exc)
                continue
            except Exception as exc:  # noqa: BLE001 - timeout, tool gone
                self._note("metric", exc)
                return NULL_READING
            tree = amdsmi_tree(text)
            # With -g N the block is usually labelled N; if not, take the only one.
            return amd_reading_from_text(text, self._gpu if self._gpu in tree else None)
        return NULL_READING


class RocmSmiSource(_SourceBase):
    """``rocm-smi --json`` per read: the last resort on AMD (single SCLK, not per XCD)."""

    def __init__(self, physical_index: int) -> None:
        super().__init__()
        self.name = f"rocm-smi:{physical_index}"
        self._gpu = physical_index
        self._cmd = ["rocm-smi", "-d", str(physical_index), "--showclocks", "--showtemp", "--showpower", "--json"]

    def read(self) -> Reading:
        try:
            cards = parse_rocm_smi_json(_run_cli(self._cmd))
        except Exception as exc:  # noqa: BLE001
            self._note("query", exc)
            return NULL_READING
        card = next((c for c in cards if c.gpu == self._gpu), cards[0] if cards else None)
        if card is None:
            return NULL_READING
        return Reading(sclk_mhz=card.sclk_mhz, temp_c=card.temp_c, power_w=card.power_w)
