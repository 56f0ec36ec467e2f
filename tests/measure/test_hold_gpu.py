"""The device hold on a real GPU: a busy host stays out of a two-kernel operation's time.

A split-K-like operation (a batched matmul, then a reduction) whose host is
descheduled for 200 us between its two kernels, as a busy CI host does. Run
with ``TRITON_INTERPRET=0 python -m pytest -m gpu``.
"""
from __future__ import annotations

import statistics
import time

import pytest

pytestmark = pytest.mark.gpu


def spin_us(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


@pytest.fixture(scope="module")
def splitk():
    import torch

    a = torch.randn(64, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    part = torch.empty(4, 64, 4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(64, 4096, device="cuda", dtype=torch.bfloat16)
    ar, br = a.view(64, 4, 2048).transpose(0, 1), b.view(4, 2048, 4096)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def op(host_load_us: float = 0.0):
        def run():
            torch.bmm(ar, br, out=part)
            if host_load_us:
                spin_us(host_load_us)
            torch.sum(part, dim=0, out=out)
        return run

    return torch, op, flush.zero_


def measure(torch, run, flush, gate: str):
    from perfci.measure.hold import DeviceHold
    from perfci.measure.timing import EventMarks, time_iterations

    vendor = "amd" if torch.version.hip else "nvidia"
    hold = DeviceHold(torch, vendor, gate)
    hold.begin_repeat()
    times = time_iterations(run, EventMarks(70, torch), 70, flush, hold)
    return hold, times, hold.report()


def test_ungated_the_detector_fires_and_host_time_leaks_in(splitk):
    torch, op, flush = splitk
    _, quiet, _ = measure(torch, op(), flush, "spin")
    hold, loaded, held = measure(torch, op(host_load_us=200.0), flush, "none")
    assert hold.gate == "none" and held.stalled
    assert statistics.median(loaded) > statistics.median(quiet) + 100.0


def test_the_spin_gate_keeps_a_busy_host_out(splitk):
    torch, op, flush = splitk
    _, quiet, _ = measure(torch, op(), flush, "spin")
    hold, loaded, held = measure(torch, op(host_load_us=200.0), flush, "spin")
    assert hold.gate == "spin", hold.notes
    assert not held.stalled, held.why
    assert statistics.median(loaded) == pytest.approx(statistics.median(quiet), rel=0.05)
    assert max(loaded) < 2 * statistics.median(quiet)


def test_the_device_clock_is_plausible_and_agrees_across_sms(splitk):
    torch, op, flush = splitk
    hold, _, held = measure(torch, op(), flush, "spin")
    assert hold.clock, hold.notes
    assert 300.0 < held.clock_mhz < 3500.0
    assert held.clock_spread < 0.02
