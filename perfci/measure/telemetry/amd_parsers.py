"""Parsers of AMD's tools: amd-smi (text or JSON), the amdsmi module's dicts, rocm-smi --json.

Pure functions, tested against recorded output of the real tools under
``tests/data/telemetry/amd``. The core clock is the *lowest* per-XCD GFX clock:
an MI300X/MI355X has 8 XCDs whose clocks differ by 3-10%, and the slowest one
sets the GEMM's speed (hipblaslt-bench reports "lowest-median-freq").
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from perfci.measure.devices import normalize_gcn_arch
from perfci.measure.telemetry.base import Reading

# =========================================================================== AMD parsers
_AMDSMI_TOP = re.compile(r"^(GPU|CPU)\s*:\s*(\d+)\s*$")
_KEY_VALUE = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")


def _norm_key(key: Any) -> str:
    return re.sub(r"\s+", "_", str(key).strip().lower())


def _amdsmi_text_tree(text: str) -> dict[int, dict[str, Any]]:
    """amd-smi's indented text -> {gpu index: nested dict}, keys lower-cased.

    Leaves stay strings ("113 MHz", "N/A", "[0 %, N/A]"); ``...`` lines (cut by
    the source), CPU blocks and lines without ``key:`` are skipped; a bracketed
    list wrapped over several lines is joined.
    """
    gpus: dict[int, dict[str, Any]] = {}
    stack: list[tuple[int, dict[str, Any]]] = []
    lines = (text or "").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        i += 1
        while line.count("[") > line.count("]") and i < len(lines):
            line += " " + lines[i].strip()
            i += 1
        if not line.strip() or line.strip() == "...":
            continue
        top = _AMDSMI_TOP.match(line)
        if top:
            if top.group(1) == "GPU":
                block: dict[str, Any] = {}
                gpus[int(top.group(2))] = block
                stack = [(0, block)]
            else:
                stack = []  # a CPU block: ignore everything until the next GPU
            continue
        match = _KEY_VALUE.match(line)
        if not match or not stack:
            continue
        indent = len(match.group(1).expandtabs())
        key, value = _norm_key(match.group(2)), match.group(3)
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value == "":
            child: dict[str, Any] = {}
            parent[key] = child
            stack.append((indent, child))
        else:
            parent[key] = value
    return gpus


def _lower_keys(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {_norm_key(k): _lower_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_lower_keys(v) for v in obj]
    return obj


def amdsmi_tree(text: str) -> dict[int, dict[str, Any]]:
    """amd-smi output, text or ``--json`` (6.x list or 7.x ``{"gpu_data": [...]}``) -> {gpu: dict}.

    Never raises: unreadable input gives ``{}``.
    """
    stripped = (text or "").lstrip()
    if not stripped.startswith(("[", "{")):
        try:
            return _amdsmi_text_tree(text)
        except Exception:  # noqa: BLE001 - a parser must not break measurement
            return {}
    try:
        data = json.loads(stripped)
    except ValueError:
        return {}
    if isinstance(data, dict):
        data = data.get("gpu_data", [data] if "gpu" in data else [])
    gpus: dict[int, dict[str, Any]] = {}
    if not isinstance(data, list):
        return gpus
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            continue
        item = _lower_keys(item)
        try:
            index = int(item.get("gpu", position))
        except (TypeError, ValueError):
            index = position
        gpus[index] = item
    return gpus


_UNIT_SCALE = {"w": 1.0, "mw": 1e-3, "uw": 1e-6, "mhz": 1.0, "ghz": 1e3, "khz": 1e-3, "c": 1.0, "°c": 1.0}
# amdsmi marks unsupported 16/32-bit fields with all-ones values.
_AMD_INVALID = {0xFFFF, 0xFFFFFFFF}


def _quantity(leaf: Any) -> float | None:
    """'113 MHz' / {"value": 113, "unit": "MHz"} / 113 -> 113.0 (in W, MHz or °C); junk -> None."""
    unit = ""
    if isinstance(leaf, dict):
        unit = str(leaf.get("unit", "") or "")
        leaf = leaf.get("value")
    if isinstance(leaf, bool) or leaf is None:
        return None
    if isinstance(leaf, (int, float)):
        value = float(leaf)
    else:
        match = re.match(r"\s*(-?\d+(?:\.\d+)?)\s*([^\s\d]*)", str(leaf))
        if not match:
            return None
        value = float(match.group(1))
        unit = unit or match.group(2)
    if value in _AMD_INVALID:
        return None
    return value * _UNIT_SCALE.get(unit.strip().lower(), 1.0)


def _section(tree: Mapping[str, Any], *names: str) -> Mapping[str, Any]:
    for name in names:
        value = tree.get(name)
        if isinstance(value, dict):
            return value
    return {}


@dataclass(frozen=True)
class AmdClocks:
    gpu: int
    gfx_mhz: tuple[float, ...]  # active XCDs in GFX_0.. order; "N/A" padding dropped
    mem_mhz: float | None

    @property
    def core_mhz(self) -> float | None:
        """The slowest XCD's clock: it sets the speed of work spread over all XCDs."""
        return min(self.gfx_mhz) if self.gfx_mhz else None


def _gfx_index(key: str) -> int:
    return int(key.rsplit("_", 1)[1]) if key.rsplit("_", 1)[-1].isdigit() else 0


def parse_amdsmi_clock_text(text: str) -> list[AmdClocks]:
    """``amd-smi metric --clock`` (text or JSON) -> one AmdClocks per GPU, in GPU order."""
    out = []
    for gpu, tree in sorted(amdsmi_tree(text).items()):
        clock = _section(tree, "clock")
        if not clock:
            continue
        gfx = []
        for key in sorted((k for k in clock if re.fullmatch(r"gfx(_\d+)?", k)), key=_gfx_index):
            domain = clock[key]
            value = _quantity(domain.get("clk") if isinstance(domain, dict) else domain)
            if value is not None:
                gfx.append(value)
        mem = clock.get("mem_0", clock.get("mem"))
        mem_mhz = _quantity(mem.get("clk") if isinstance(mem, dict) else mem)
        out.append(AmdClocks(gpu=gpu, gfx_mhz=tuple(gfx), mem_mhz=mem_mhz))
    return out


def _status_flag(value: Any) -> bool | None:
    """'THROTTLED'/'UNTHROTTLED', 'ACTIVE'/'NOT ACTIVE', bools -> flag; 'N/A' -> None."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().upper()
    if text in ("THROTTLED", "ACTIVE", "TRUE"):
        return True
    if text in ("UNTHROTTLED", "NOT ACTIVE", "NOT_ACTIVE", "FALSE"):
        return False
    return None


@dataclass(frozen=True)
class AmdPower:
    gpu: int
    power_w: float | None  # socket power
    throttle_status: bool | None  # POWER.THROTTLE_STATUS; N/A on MI300 and newer


def parse_amdsmi_power(text: str) -> list[AmdPower]:
    """``amd-smi metric --power`` (text, 6.x JSON list, 7.x gpu_data JSON) -> one AmdPower per GPU."""
    out = []
    for gpu, tree in sorted(amdsmi_tree(text).items()):
        power = _section(tree, "power")
        if not power:
            continue
        watts = None
        # Names differ between amd-smi versions and between MI300 and older parts.
        for key in ("socket_power", "current_socket_power", "average_socket_power"):
            watts = _quantity(power.get(key))
            if watts is not None:
                break
        out.append(AmdPower(gpu=gpu, power_w=watts, throttle_status=_status_flag(power.get("throttle_status"))))
    return out


@dataclass(frozen=True)
class AmdTemperature:
    gpu: int
    hotspot_c: float | None
    edge_c: float | None
    mem_c: float | None

    @property
    def temp_c(self) -> float | None:
        """Hotspot (junction) when readable: it is what the firmware throttles on."""
        return self.hotspot_c if self.hotspot_c is not None else self.edge_c


def parse_amdsmi_temperature(text: str) -> list[AmdTemperature]:
    """``amd-smi metric --temperature`` (text or JSON) -> one AmdTemperature per GPU."""
    out = []
    for gpu, tree in sorted(amdsmi_tree(text).items()):
        temp = _section(tree, "temperature")
        if not temp:
            continue
        out.append(
            AmdTemperature(
                gpu=gpu,
                hotspot_c=_quantity(temp.get("hotspot", temp.get("junction"))),
                edge_c=_quantity(temp.get("edge")),
                mem_c=_quantity(temp.get("mem", temp.get("memory"))),
            )
        )
    return out


# Violations that mean the firmware held the clock down for power or heat.
# TOTAL_GFX_CLK_BELOW_HOST_LIMIT and LOW_UTILIZATION are ACTIVE on an idle GPU
# (recorded: 100% while idle) and GFX_CLK_BELOW_HOST_LIMIT alone includes that
# case, so none of them is a throttle, just as NVIDIA's "gpu idle" is not.
AMD_THROTTLE_VIOLATIONS = (
    "prochot",
    "ppt",
    "socket_thermal",
    "vr_thermal",
    "hbm_thermal",
    "gfx_clk_below_host_limit_power",
    "gfx_clk_below_host_limit_thermal",
)


@dataclass(frozen=True)
class AmdViolation:
    gpu: int
    throttled: bool | None  # any throttle violation ACTIVE; None when none is readable
    active: tuple[str, ...]  # every ACTIVE violation, throttle or not (e.g. "low_utilization")


def _status_values(value: Any) -> list[bool | None]:
    """A status leaf, a '[ACTIVE, N/A, ...]' list or a per-XCP dict of those -> flags."""
    if isinstance(value, dict):
        flags: list[bool | None] = []
        for inner in value.values():
            flags.extend(_status_values(inner))
        return flags
    if isinstance(value, list):
        return [_status_flag(v) for v in value]
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        return [_status_flag(v) for v in text[1:-1].split(",")]
    return [_status_flag(text)]


def parse_amdsmi_violation(text: str) -> list[AmdViolation]:
    """``amd-smi metric --violation`` / ``--throttle`` (MI300+ THROTTLE section) -> one per GPU.

    On MI300 and newer ``throttle_status`` reads N/A and these ACTIVE/NOT ACTIVE
    violation statuses take its place.
    """
    out = []
    for gpu, tree in sorted(amdsmi_tree(text).items()):
        section = _section(tree, "throttle", "violation")
        if not section:
            continue
        throttle_flags: list[bool] = []
        active: list[str] = []
        for key, value in section.items():
            if not key.endswith("_violation_status"):
                continue
            name = key[: -len("_violation_status")]
            flags = [f for f in _status_values(value) if f is not None]
            if any(flags):
                active.append(name)
            if name in AMD_THROTTLE_VIOLATIONS:
                throttle_flags.extend(flags)
        out.append(
            AmdViolation(gpu=gpu, throttled=any(throttle_flags) if throttle_flags else None, active=tuple(active))
        )
    return out


@dataclass(frozen=True)
class AmdStaticInfo:
    gpu: int
    market_name: str
    gfx_arch: str  # TARGET_GRAPHICS_VERSION, e.g. "gfx942"; "" when absent
    num_compute_units: int | None
    driver_version: str  # DRIVER.VERSION when the output has it


def parse_amdsmi_static_asic(text: str) -> list[AmdStaticInfo]:
    """``amd-smi static [--asic] [--driver]`` (text or JSON) -> one AmdStaticInfo per GPU."""

    out = []
    for gpu, tree in sorted(amdsmi_tree(text).items()):
        asic = _section(tree, "asic")
        driver = _section(tree, "driver")
        if not asic and not driver:
            continue
        cus = _quantity(asic.get("num_compute_units"))
        arch = str(asic.get("target_graphics_version", "") or "")
        out.append(
            AmdStaticInfo(
                gpu=gpu,
                market_name=str(asic.get("market_name", "") or ""),
                gfx_arch=normalize_gcn_arch(arch) if arch.lower().startswith("gfx") else "",
                num_compute_units=int(cus) if cus is not None else None,
                driver_version=str(driver.get("version", "") or ""),
            )
        )
    return out


def amd_reading_from_text(text: str, gpu: int | None = None) -> Reading:
    """One Reading from ``amd-smi metric`` output holding clock/power/temperature/violation sections.

    ``gpu`` picks the GPU block; None takes the first one. Missing sections give None fields.
    """
    def pick(items: Sequence[Any]) -> Any:
        for item in items:
            if gpu is None or item.gpu == gpu:
                return item
        return None

    clocks = pick(parse_amdsmi_clock_text(text))
    power = pick(parse_amdsmi_power(text))
    temp = pick(parse_amdsmi_temperature(text))
    violation = pick(parse_amdsmi_violation(text))
    throttled = violation.throttled if violation is not None else None
    if throttled is None and power is not None:
        throttled = power.throttle_status  # pre-MI300 parts
    reasons = ""
    if violation is not None:
        reasons = ",".join(n for n in violation.active if n in AMD_THROTTLE_VIOLATIONS)
    return Reading(
        sclk_mhz=clocks.core_mhz if clocks else None,
        temp_c=temp.temp_c if temp else None,
        power_w=power.power_w if power else None,
        throttled=throttled,
        reasons=reasons,
    )


@dataclass(frozen=True)
class RocmSmiCard:
    gpu: int
    sclk_mhz: float | None
    mclk_mhz: float | None
    temp_c: float | None  # junction, else edge
    power_w: float | None


def parse_rocm_smi_json(text: str) -> list[RocmSmiCard]:
    """``rocm-smi -a --json`` (or a subset of its flags) -> one RocmSmiCard per ``cardN``.

    rocm-smi reports a single SCLK, not per-XCD clocks: on MI300-class parts it
    is not the lowest XCD, which is why amd-smi is preferred.
    """
    try:
        data = json.loads(text or "")
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    out = []
    for key, card in data.items():
        match = re.fullmatch(r"card(\d+)", str(key))
        if not match or not isinstance(card, dict):
            continue

        def first(*names: str) -> float | None:
            for name in names:
                value = _quantity(str(card.get(name, "")).strip("()"))
                if value is not None:
                    return value
            return None

        out.append(
            RocmSmiCard(
                gpu=int(match.group(1)),
                sclk_mhz=first("sclk clock speed:"),
                mclk_mhz=first("mclk clock speed:"),
                temp_c=first("Temperature (Sensor junction) (C)", "Temperature (Sensor edge) (C)"),
                power_w=first(
                    "Current Socket Graphics Package Power (W)",
                    "Average Graphics Package Power (W)",
                ),
            )
        )
    return sorted(out, key=lambda c: c.gpu)


def amd_reading_from_metrics(metrics: Mapping[str, Any], violation: Mapping[str, Any] | None = None) -> Reading:
    """One Reading from the amdsmi module's ``amdsmi_get_gpu_metrics_info`` dict (+ violation status).

    Per-XCD clocks come from ``current_gfxclks`` (padded with "N/A" or 0xFFFF);
    the lowest valid one is the core clock. Unknown shapes give None fields.
    """
    clocks = metrics.get("current_gfxclks")
    values = [_quantity(v) for v in clocks] if isinstance(clocks, (list, tuple)) else []
    values = [v for v in values if v is not None and v > 0]
    sclk = min(values) if values else _quantity(metrics.get("current_gfxclk"))
    power = _quantity(metrics.get("current_socket_power"))
    if power is None:
        power = _quantity(metrics.get("average_socket_power"))
    temp = _quantity(metrics.get("temperature_hotspot"))
    throttled: bool | None = None
    reasons: list[str] = []
    if violation:
        flags: list[bool] = []
        for key, value in violation.items():
            key = _norm_key(key)
            if not key.startswith("active_"):
                continue
            name = key[len("active_") :].replace("_thrm", "_thermal").replace("_pwr", "")
            if name not in AMD_THROTTLE_VIOLATIONS:
                continue
            found = [f for f in _status_values(value) if f is not None]
            flags.extend(found)
            if any(found):
                reasons.append(name)
        throttled = any(flags) if flags else None
    return Reading(sclk_mhz=sclk, temp_c=temp, power_w=power, throttled=throttled, reasons=",".join(reasons))
