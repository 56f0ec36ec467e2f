"""Telemetry parsers against recorded tool output, sources with fake tools, and the Sampler.

Every expected number below was read by hand from the file under
tests/data/telemetry/ that the test parses (see SOURCES.md there).
"""
from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import pytest

from perfci.measure import telemetry
from perfci.measure.telemetry import NullSource, Reading, Sampler, open_source, summarize
from perfci.measure.telemetry import amd as amd_telemetry
from perfci.measure.telemetry import nvidia as nvidia_telemetry
from perfci.measure.telemetry.amd import AmdSmiCliSource
from perfci.measure.telemetry.amd_parsers import (
    amd_reading_from_metrics,
    amd_reading_from_text,
    parse_amdsmi_clock_text,
    parse_amdsmi_power,
    parse_amdsmi_static_asic,
    parse_amdsmi_temperature,
    parse_amdsmi_violation,
    parse_rocm_smi_json,
)
from perfci.measure.telemetry.nvidia import decode_nvidia_reasons, parse_nvidia_smi_csv, resolve_nvidia_target

DATA = Path(__file__).resolve().parents[1] / "data" / "telemetry"


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# =========================================================================== summarize
def test_summarize_takes_median_clock_max_temp_median_power_and_any_throttle():
    readings = [
        Reading(sclk_mhz=1500, temp_c=60, power_w=500, throttled=False),
        Reading(sclk_mhz=1300, temp_c=71, power_w=700, throttled=True, reasons="sw_power_cap"),
        Reading(sclk_mhz=1400, temp_c=65, power_w=600, throttled=False),
        Reading(sclk_mhz=1450, temp_c=None, power_w=None, throttled=None),
    ]
    summary = summarize(readings)
    assert summary.sclk_mhz == 1425.0  # median of 1300, 1400, 1450, 1500
    assert summary.temp_c == 71
    assert summary.power_w == 600.0  # median of the three readable values
    assert summary.throttled is True
    assert summary.samples == 4


def test_summarize_without_values_gives_none_not_false():
    # "could not tell" must stay distinguishable from "was not throttled".
    summary = summarize([Reading(), Reading()])
    assert (summary.sclk_mhz, summary.temp_c, summary.power_w, summary.throttled) == (None, None, None, None)
    assert summary.samples == 2
    assert summarize([]).samples == 0


def test_summarize_all_unthrottled_is_false():
    assert summarize([Reading(throttled=False), Reading(throttled=None)]).throttled is False


# =========================================================================== NVIDIA
def test_nvidia_reason_bits_idle_is_not_a_throttle_but_power_cap_is():
    assert decode_nvidia_reasons(0x1) == (False, "gpu_idle")
    assert decode_nvidia_reasons(0x2) == (False, "applications_clocks_setting")
    assert decode_nvidia_reasons(0x4) == (True, "sw_power_cap")
    for bit in (0x8, 0x20, 0x40, 0x80):  # hw slowdown, sw/hw thermal, power brake
        assert decode_nvidia_reasons(bit)[0] is True
    assert decode_nvidia_reasons(0x0) == (False, "")
    assert decode_nvidia_reasons(None) == (None, "")
    assert decode_nvidia_reasons(0x1 | 0x800) == (False, "gpu_idle,0x800")


def test_nvidia_reason_bits_match_recorded_nvml_constants():
    constants = {}
    for line in recorded("nvidia/nvml-h200.txt").splitlines():
        if line.startswith("nvmlClocksEventReason") and "=" in line:
            name, value = line.split("=")
            constants[name.strip()] = int(value, 16)
    assert constants["nvmlClocksEventReasonSwPowerCap"] == 0x4
    expected_throttle = (
        constants["nvmlClocksEventReasonSwPowerCap"]
        | constants["nvmlClocksEventReasonHwSlowdown"]
        | constants["nvmlClocksEventReasonHwThermalSlowdown"]
        | constants["nvmlClocksEventReasonSwThermalSlowdown"]
        | constants["nvmlClocksEventReasonHwPowerBrakeSlowdown"]
    )
    assert nvidia_telemetry.NVML_THROTTLE_MASK == expected_throttle


def test_nvidia_smi_csv_with_header_and_units():
    [reading] = parse_nvidia_smi_csv(recorded("nvidia/nvidia-smi-query-h200-idle.csv"))
    assert reading == Reading(sclk_mhz=375.0, temp_c=35.0, power_w=110.50, throttled=False, reasons="gpu_idle")


def test_nvidia_smi_csv_noheader_nounits_uses_the_given_field_order():
    text = recorded("nvidia/nvidia-smi-query-h200-idle-noheader-nounits.csv")
    # This capture also asked for clocks.mem, so it has 5 columns.
    fields = ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", "clocks_event_reasons.active")
    [reading] = parse_nvidia_smi_csv(text, fields)
    assert reading == Reading(sclk_mhz=345.0, temp_c=35.0, power_w=109.53, throttled=False, reasons="gpu_idle")
    # With perfci's own 4-field order the row does not fit and is skipped, not misread.
    assert parse_nvidia_smi_csv(text) == []


def test_nvidia_smi_csv_under_load_shows_power_cap_throttle():
    readings = parse_nvidia_smi_csv(recorded("nvidia/nvidia-smi-query-h200-load.csv"))
    assert len(readings) == 8
    assert [r.sclk_mhz for r in readings] == [345.0] * 6 + [1500.0, 1485.0]
    assert [r.throttled for r in readings] == [False] * 6 + [True, True]
    assert readings[-1] == Reading(sclk_mhz=1485.0, temp_c=51.0, power_w=538.14, throttled=True, reasons="sw_power_cap")
    summary = summarize(readings)
    assert summary.sclk_mhz == 345.0 and summary.temp_c == 51.0 and summary.throttled is True


def test_nvidia_smi_csv_not_available_cells_become_none():
    [reading] = parse_nvidia_smi_csv("1980, [N/A], [Not Supported], [N/A]\n")
    assert reading == Reading(sclk_mhz=1980.0)


def test_resolve_nvidia_target_prefers_torch_uuid_then_visible_entry():
    env = {"CUDA_VISIBLE_DEVICES": "2,GPU-0a1b"}
    assert resolve_nvidia_target(0, env, "GPU-ffff") == "GPU-ffff"
    assert resolve_nvidia_target(0, env, None) == "2"
    assert resolve_nvidia_target(1, env, None) == "GPU-0a1b"
    assert resolve_nvidia_target(1, {}, None) == "1"


class FakeNVMLError(Exception):
    pass


def make_fake_pynvml(uuids: list[str], fail_power: bool = False) -> types.ModuleType:
    """A pynvml stand-in returning the values recorded in nvidia/nvml-h200.txt."""
    nv = types.ModuleType("pynvml")
    nv.NVMLError = FakeNVMLError
    nv.NVML_CLOCK_SM = 1
    nv.NVML_TEMPERATURE_GPU = 0
    nv.opened = []
    nv.init_count = 0

    def init():
        nv.init_count += 1

    def shutdown():
        nv.init_count -= 1

    def by_index(i):
        nv.opened.append(i)
        return ("handle", i)

    def by_uuid(uuid):
        if uuid not in uuids:
            raise FakeNVMLError("not found")
        return by_index(uuids.index(uuid))

    def power(handle):
        if fail_power:
            raise FakeNVMLError("Not Supported")
        return 100002  # mW

    nv.nvmlInit = init
    nv.nvmlShutdown = shutdown
    nv.nvmlDeviceGetCount = lambda: len(uuids)
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    nv.nvmlDeviceGetUUID = lambda h: uuids[h[1]]
    nv.nvmlDeviceGetHandleByUUID = by_uuid
    nv.nvmlDeviceIsMigDeviceHandle = lambda h: False
    nv.nvmlDeviceGetClockInfo = lambda h, clock: 345 if clock == nv.NVML_CLOCK_SM else 3201
    nv.nvmlDeviceGetTemperature = lambda h, sensor: 35
    nv.nvmlDeviceGetPowerUsage = power
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x1
    nv.by_index = by_index
    nv.nvmlDeviceGetHandleByIndex = by_index
    return nv


def test_nvml_source_reads_recorded_h200_values_on_the_mapped_gpu(monkeypatch):
    fake = make_fake_pynvml(["GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = open_source("nvidia", 1, env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert source.name == "nvml:3"
    assert fake.opened == [3]  # visible device 1 is physical GPU 3
    assert source.read() == Reading(sclk_mhz=345.0, temp_c=35.0, power_w=100.002, throttled=False, reasons="gpu_idle")
    source.close()
    assert fake.init_count == 0


def test_nvml_source_resolves_a_uuid_prefix_from_cuda_visible_devices(monkeypatch):
    fake = make_fake_pynvml(["GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333"])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = open_source("nvidia", 0, env={"CUDA_VISIBLE_DEVICES": "GPU-cccc"})
    assert source.name == "nvml:GPU-cccc"
    assert source.read().sclk_mhz == 345.0
    assert fake.nvmlDeviceGetUUID(("handle", 2)) == "GPU-cccc-3333"
    source.close()


def test_nvml_field_failure_keeps_other_fields_and_is_recorded_once(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(["GPU-aaaa"], fail_power=True))
    source = open_source("nvidia", 0, env={})
    with caplog.at_level("WARNING", logger="perfci.measure.telemetry"):
        first, second = source.read(), source.read()
    assert first == second == Reading(sclk_mhz=345.0, temp_c=35.0, power_w=None, throttled=False, reasons="gpu_idle")
    assert "power" in source.problem
    assert len([r for r in caplog.records if "degraded" in r.getMessage()]) == 1
    source.close()


def test_nvidia_without_pynvml_falls_back_to_nvidia_smi(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    monkeypatch.setattr(telemetry.shutil, "which", lambda tool: "/usr/bin/nvidia-smi" if tool == "nvidia-smi" else None)
    calls = []
    # The recorded idle noheader/nounits row without its clocks.mem column,
    # i.e. what perfci's 4-field query prints.
    monkeypatch.setattr(nvidia_telemetry, "_run_cli", lambda cmd: calls.append(cmd) or "345, 35, 109.53, 0x0000000000000001\n")
    source = open_source("nvidia", 0, env={"CUDA_VISIBLE_DEVICES": "GPU-9f"})
    assert source.name == "nvidia-smi:GPU-9f"
    assert source.read() == Reading(sclk_mhz=345.0, temp_c=35.0, power_w=109.53, throttled=False, reasons="gpu_idle")
    assert calls[0][-2:] == ["-i", "GPU-9f"]
    assert "--format=csv,noheader,nounits" in calls[0]


def test_nvidia_with_no_tool_at_all_is_a_null_source(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(telemetry.shutil, "which", lambda tool: None)
    source = open_source("nvidia", 0, env={})
    assert isinstance(source, NullSource)
    assert "pynvml" in source.problem
    assert source.read() == Reading()


def test_nvidia_smi_failure_degrades_to_none(monkeypatch):
    def boom(cmd):
        raise TimeoutError("nvidia-smi hung")

    monkeypatch.setattr(nvidia_telemetry, "_run_cli", boom)
    source = nvidia_telemetry.NvidiaSmiSource("0")
    assert source.read() == Reading()
    assert "hung" in source.problem


# =========================================================================== AMD amd-smi text/JSON
def test_amdsmi_clock_8_xcds_core_clock_is_the_slowest_xcd():
    [gpu0] = parse_amdsmi_clock_text(recorded("amd/amd-smi-metric-clock-8gfx-mi300-rocm6.1.1-changelog.txt"))
    assert gpu0.gpu == 0
    # GFX_0..GFX_7 as recorded: all 113 MHz except GFX_2 at 112 MHz.
    assert gpu0.gfx_mhz == (113.0, 113.0, 112.0, 113.0, 113.0, 113.0, 113.0, 113.0)
    assert gpu0.core_mhz == 112.0
    assert gpu0.mem_mhz == 900.0  # MEM_0, not a VCLK/DCLK


def test_amdsmi_clock_ignores_na_padded_xcds():
    # A partitioned GPU pads the XCDs it does not own with N/A (SOURCES.md notes).
    text = (
        "GPU: 3\n    CLOCK:\n"
        "        GFX_0:\n            CLK: 1420 MHz\n"
        "        GFX_1:\n            CLK: 1395 MHz\n"
        "        GFX_2:\n            CLK: N/A\n"
        "        GFX_3:\n            CLK: N/A\n"
        "        MEM_0:\n            CLK: N/A\n"
    )
    [clocks] = parse_amdsmi_clock_text(text)
    assert (clocks.gpu, clocks.gfx_mhz, clocks.core_mhz, clocks.mem_mhz) == (3, (1420.0, 1395.0), 1395.0, None)


def test_amdsmi_clock_json_shapes_6x_list_and_7x_gpu_data():
    clock = '{"clock": {"gfx_0": {"clk": {"value": 1500, "unit": "MHz"}}, "gfx_1": {"clk": {"value": 1480, "unit": "MHz"}},' \
        ' "gfx_2": {"clk": "N/A"}, "mem_0": {"clk": {"value": 1300, "unit": "MHz"}}}}'
    v6 = '[{"gpu": 0, ' + clock[1:] + "]"
    v7 = '{"gpu_data": [{"gpu": 5, ' + clock[1:] + "]}"
    assert parse_amdsmi_clock_text(v6)[0].core_mhz == 1480.0
    [gpu5] = parse_amdsmi_clock_text(v7)
    assert (gpu5.gpu, gpu5.gfx_mhz, gpu5.mem_mhz) == (5, (1500.0, 1480.0), 1300.0)


def test_amdsmi_power_text_navi_with_throttle_status():
    power = parse_amdsmi_power(recorded("amd/amd-smi-metric-power-navi-rocm6.1.2-changelog.txt"))
    assert [(p.gpu, p.power_w, p.throttle_status) for p in power] == [(0, 11.0, False), (1, 17.0, False)]


def test_amdsmi_power_json_6x_list_of_value_unit():
    [power] = parse_amdsmi_power(recorded("amd/amd-smi-metric-power-json-rocm6.1.0-changelog.json"))
    assert (power.gpu, power.power_w, power.throttle_status) == (0, 10.0, False)


def test_amdsmi_power_json_7x_gpu_data_and_milliwatts():
    text = '{"gpu_data": [{"gpu": 2, "power": {"socket_power": {"value": 734000, "unit": "mW"}, "throttle_status": "N/A"}}]}'
    [power] = parse_amdsmi_power(text)
    assert (power.gpu, power.power_w, power.throttle_status) == (2, 734.0, None)


def test_amdsmi_full_metric_mi300x_gives_clock_power_hotspot():
    text = recorded("amd/amd-smi-metric-abridged-mi300x-rocm7.1-changelog.txt")
    [temp] = parse_amdsmi_temperature(text)
    assert (temp.hotspot_c, temp.edge_c, temp.temp_c) == (37.0, None, 37.0)  # EDGE is N/A on MI300X
    # GFX_0 CLK 132 MHz (the only XCD the cut sample shows), SOCKET_POWER 140 W;
    # the THROTTLE section holds only counters, so throttling is unknown, not False.
    assert amd_reading_from_text(text) == Reading(sclk_mhz=132.0, temp_c=37.0, power_w=140.0, throttled=None)


def test_amdsmi_throttle_mi300_all_not_active():
    violations = parse_amdsmi_violation(recorded("amd/amd-smi-metric-throttle-mi300-rocm6.3-changelog.txt"))
    assert [(v.gpu, v.throttled, v.active) for v in violations] == [(0, False, ()), (1, False, ())]


def test_amdsmi_violation_idle_low_utilization_is_not_a_throttle():
    [violation] = parse_amdsmi_violation(recorded("amd/amd-smi-metric-violation-mi300-dpx-rocm7.0-changelog.txt"))
    # Recorded idle: TOTAL_GFX_CLK_BELOW_HOST_LIMIT and LOW_UTILIZATION are ACTIVE
    # on every XCC; PPT/thermal/prochot and the power/thermal host-limit ones are not.
    assert violation.active == ("total_gfx_clk_below_host_limit", "low_utilization")
    assert violation.throttled is False


def test_amdsmi_violation_active_ppt_is_a_throttle():
    text = recorded("amd/amd-smi-metric-violation-mi300-dpx-rocm7.0-changelog.txt").replace(
        "PPT_VIOLATION_STATUS: NOT ACTIVE", "PPT_VIOLATION_STATUS: ACTIVE"
    )
    [violation] = parse_amdsmi_violation(text)
    assert violation.throttled is True and "ppt" in violation.active
    assert amd_reading_from_text(text).reasons == "ppt"


def test_amdsmi_violation_per_xcc_thermal_host_limit_is_a_throttle():
    text = recorded("amd/amd-smi-metric-violation-mi300-dpx-rocm7.0-changelog.txt").replace(
        "XCP_1: [NOT ACTIVE, NOT ACTIVE, NOT ACTIVE, NOT ACTIVE, N/A, N/A, N/A, N/A]\n"
        "        TOTAL_GFX",
        "XCP_1: [NOT ACTIVE, NOT ACTIVE, ACTIVE, NOT ACTIVE, N/A, N/A, N/A, N/A]\n"
        "        TOTAL_GFX",
    )
    assert text.count("XCP_1: [NOT ACTIVE, NOT ACTIVE, ACTIVE") == 1  # the edit hit the thermal status
    [violation] = parse_amdsmi_violation(text)
    assert violation.throttled is True
    assert "gfx_clk_below_host_limit_thermal" in violation.active


def test_amdsmi_static_asic_mi308x():
    [info] = parse_amdsmi_static_asic(recorded("amd/amd-smi-static-asic-mi308x-gfx942-rocm6.3-changelog.txt"))
    assert (info.gpu, info.market_name, info.gfx_arch, info.num_compute_units, info.driver_version) == (
        0, "MI308X", "gfx942", 20, "")


def test_amdsmi_static_mi300a_skips_the_cpu_block_and_reads_driver():
    [info] = parse_amdsmi_static_asic(recorded("amd/amd-smi-static-mi300a-gfx942-rocm7.1-docs.txt"))
    assert (info.gpu, info.market_name, info.gfx_arch, info.num_compute_units, info.driver_version) == (
        0, "AMD Instinct MI300A", "gfx942", 228, "6.14.4")


def test_amdsmi_static_partition_only_output_has_no_asic_info():
    assert parse_amdsmi_static_asic(recorded("amd/amd-smi-static-partition-cpx-rocm6.3-changelog.txt")) == []


def test_amdsmi_parsers_ignore_unrelated_sections():
    usage = recorded("amd/amd-smi-metric-usage-xcp-mi300-rocm6.3-changelog.txt")
    pcie = recorded("amd/amd-smi-metric-pcie-rocm6.3-changelog.txt")
    for text in (usage, pcie):
        assert parse_amdsmi_clock_text(text) == []
        assert parse_amdsmi_power(text) == []
        assert amd_reading_from_text(text) == Reading()


def test_rocm_smi_json_602_per_card():
    cards = parse_rocm_smi_json(recorded("amd/rocm-smi-all-json-mi100-rocm602.json"))
    assert [c.gpu for c in cards] == [0, 1, 2, 3]
    # card0: sclk "(300Mhz)", mclk "(1200Mhz)", junction 55.0, average power 36.0 W.
    assert (cards[0].sclk_mhz, cards[0].mclk_mhz, cards[0].temp_c, cards[0].power_w) == (300.0, 1200.0, 55.0, 36.0)
    assert (cards[1].temp_c, cards[1].power_w) == (58.0, 44.0)
    assert (cards[3].temp_c, cards[3].power_w) == (53.0, 39.0)


def test_rocm_smi_json_571_older_key_set():
    cards = parse_rocm_smi_json(recorded("amd/rocm-smi-all-json-mi100-rocm571.json"))
    assert len(cards) == 6
    assert (cards[0].sclk_mhz, cards[0].temp_c, cards[0].power_w) == (300.0, 34.0, 39.0)


def test_amdsmi_module_metrics_take_lowest_valid_xcd():
    # No recorded amdsmi-module output exists; this dict follows
    # amdsmi_get_gpu_metrics_info's field names, padded as the CLI pads.
    metrics = {
        "current_gfxclks": [1410, 1382, 1400, 1395, "N/A", "N/A", 65535, 65535],
        "current_socket_power": 612,
        "temperature_hotspot": 78,
    }
    violation = {"active_ppt_pwr": True, "active_socket_thrm": False, "active_low_utilization": "N/A"}
    assert amd_reading_from_metrics(metrics, violation) == Reading(
        sclk_mhz=1382.0, temp_c=78.0, power_w=612.0, throttled=True, reasons="ppt"
    )
    assert amd_reading_from_metrics({"current_gfxclks": "N/A", "current_socket_power": 65535}) == Reading()


# =========================================================================== AMD sources
def test_amd_cli_source_maps_rocr_and_hip_to_physical_and_falls_back_on_flags(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(telemetry.shutil, "which", lambda tool: "/opt/rocm/bin/amd-smi" if tool == "amd-smi" else None)
    text = recorded("amd/amd-smi-metric-abridged-mi300x-rocm7.1-changelog.txt")
    calls = []

    def fake_cli(cmd):
        calls.append(cmd)
        if "--violation" in cmd:  # an amd-smi older than ROCm 7 rejects the flag
            raise RuntimeError("unrecognized arguments: --violation")
        return text

    monkeypatch.setattr(amd_telemetry, "_run_cli", fake_cli)
    # ROCR exposes physical 4 and 6; HIP's index 1 is therefore physical 6.
    source = open_source("amd", 0, env={"ROCR_VISIBLE_DEVICES": "4,6", "HIP_VISIBLE_DEVICES": "1"})
    assert isinstance(source, AmdSmiCliSource) and source.name == "amd-smi:6"
    assert source.read() == Reading(sclk_mhz=132.0, temp_c=37.0, power_w=140.0, throttled=None)
    assert calls[0][:4] == ["amd-smi", "metric", "-g", "6"]
    assert "--throttle" in calls[1]
    source.read()
    assert len(calls) == 3  # the working spelling is remembered


def test_amd_module_source_with_fake_amdsmi(monkeypatch):
    fake = types.ModuleType("amdsmi")
    fake.state = {"init": 0}
    fake.amdsmi_init = lambda: fake.state.__setitem__("init", fake.state["init"] + 1)
    fake.amdsmi_shut_down = lambda: fake.state.__setitem__("init", fake.state["init"] - 1)
    fake.amdsmi_get_processor_handles = lambda: ["h0", "h1", "h2"]
    fake.amdsmi_get_gpu_metrics_info = lambda h: {"current_gfxclks": [1500, 1450] if h == "h2" else [1]}
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    source = open_source("amd", 0, env={"HIP_VISIBLE_DEVICES": "2"})
    assert source.name == "amdsmi:2"
    assert source.read().sclk_mhz == 1450.0
    source.close()
    assert fake.state["init"] == 0


def test_amd_with_no_tool_is_a_null_source(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(telemetry.shutil, "which", lambda tool: None)
    source = open_source("amd", 0, env={})
    assert isinstance(source, NullSource) and source.read() == Reading()


def test_rocm_smi_source_reads_its_card(monkeypatch):
    monkeypatch.setattr(amd_telemetry, "_run_cli", lambda cmd: recorded("amd/rocm-smi-all-json-mi100-rocm602.json"))
    assert amd_telemetry.RocmSmiSource(1).read() == Reading(sclk_mhz=300.0, temp_c=58.0, power_w=44.0)


def test_open_source_cpu_and_unknown_vendor():
    assert open_source("cpu").read().throttled is None
    with pytest.raises(ValueError):
        open_source("intel")


# =========================================================================== malformed input
MALFORMED = [
    "",
    "garbage\n\x00\xff",
    "GPU: 0\n",
    "GPU: 0\n    CLOCK:\n        GFX_0:\n            CLK: N/A\n    POWER:\n        SOCKET_POWER: N/A\n",
    "GPU: x\n    CLOCK: 5\n    POWER: [1, 2\n",
    "{not json",
    "[1, 2, null]",
    '{"gpu_data": "nope"}',
    '[{"gpu": "zero", "clock": [], "power": {"socket_power": {"value": "hot"}}, "temperature": 3}]',
    '{"card0": "x", "card1": {"sclk clock speed:": "(fast)"}}',
    "clocks.sm [MHz], power.draw [W]\n1980 MHz\n",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_parsers_never_raise_and_give_no_values_on_malformed_input(text):
    for clocks in parse_amdsmi_clock_text(text):
        assert clocks.core_mhz is None and clocks.mem_mhz is None
    for power in parse_amdsmi_power(text):
        assert power.power_w is None and power.throttle_status is None
    for temp in parse_amdsmi_temperature(text):
        assert temp.temp_c is None
    for violation in parse_amdsmi_violation(text):
        assert violation.throttled is None
    for info in parse_amdsmi_static_asic(text):
        assert info.gfx_arch == "" and info.num_compute_units is None
    for card in parse_rocm_smi_json(text):
        assert (card.sclk_mhz, card.temp_c, card.power_w) == (None, None, None)
    assert parse_nvidia_smi_csv(text) == []
    assert amd_reading_from_text(text) == Reading()


# =========================================================================== Sampler
class ScriptedSource:
    """Serves a fixed script of readings (or exceptions to raise) once ``gate`` opens.

    After the script it sets ``done`` and blocks until ``release``, so a window
    opened before ``gate`` and stopped after ``done`` holds exactly the script.
    """

    name = "scripted"

    def __init__(self, script):
        self.script = list(script)
        self.gate, self.done, self.release = threading.Event(), threading.Event(), threading.Event()

    def read(self):
        self.gate.wait(5)
        if not self.script:
            self.done.set()
            self.release.wait(5)
            return Reading()
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self):
        self.release.set()


def run_window(script):
    source = ScriptedSource(script)
    with Sampler(source, interval_s=0.0005) as sampler:
        window = sampler.window()
        source.gate.set()
        assert source.done.wait(5), "sampler never finished the script"
        summary = window.stop()
        source.release.set()
    return summary, sampler


def test_sampler_window_summarizes_exactly_the_samples_taken_inside_it():
    summary, _ = run_window(
        [
            Reading(sclk_mhz=1500, temp_c=60, power_w=500, throttled=False),
            Reading(sclk_mhz=1400, temp_c=72, power_w=650, throttled=False),
            Reading(sclk_mhz=None, temp_c=None, power_w=None, throttled=None),
            Reading(sclk_mhz=1450, temp_c=66, power_w=700, throttled=True, reasons="sw_power_cap"),
            Reading(sclk_mhz=1300, temp_c=64, power_w=600, throttled=False),
        ]
    )
    assert summary.samples == 5
    assert summary.sclk_mhz == 1425.0  # median of 1300, 1400, 1450, 1500
    assert summary.temp_c == 72
    assert summary.power_w == 625.0  # median of 500, 600, 650, 700
    assert summary.throttled is True


def test_sampler_survives_a_source_that_raises_inside_read():
    summary, sampler = run_window(
        [RuntimeError("driver hiccup"), Reading(sclk_mhz=1000), RuntimeError("driver hiccup"), Reading(sclk_mhz=1100)]
    )
    # Both good readings after the failures were still collected.
    assert summary.sclk_mhz == 1050.0
    assert summary.samples == 4  # the failed reads count as empty samples
    assert sampler.errors == ["RuntimeError: driver hiccup"]  # recorded once


def test_sampler_window_as_context_manager_and_short_window_falls_back_to_latest():
    class Constant:
        name = "constant"

        def read(self):
            return Reading(sclk_mhz=1234.0, throttled=False)

        def close(self):
            pass

    # A 10 s interval: one read at start, then none during the tiny window.
    with Sampler(Constant(), interval_s=10.0) as sampler:
        for _ in range(500):
            if sampler.latest() is not None:
                break
            threading.Event().wait(0.01)
        with sampler.window() as window:
            pass
    assert window.summary is not None
    assert (window.summary.sclk_mhz, window.summary.samples) == (1234.0, 1)


def test_sampler_with_null_source_gives_none_fields():
    with Sampler(NullSource(), interval_s=0.001) as sampler:
        window = sampler.window()
        threading.Event().wait(0.02)
        summary = window.stop()
    assert summary.samples >= 1
    assert (summary.sclk_mhz, summary.temp_c, summary.power_w, summary.throttled) == (None, None, None, None)
