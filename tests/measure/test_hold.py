"""The device hold where the gate or the counters cannot work: a note, a fallback, never silence."""
from __future__ import annotations

import types

import torch

from perfci.measure.hold import DeviceHold


def fake_cuda_torch(pin_memory_works: bool):
    """torch as DeviceHold sees it on a GPU, with CPU tensors underneath (no GPU here)."""
    fake = types.SimpleNamespace()
    fake.int64, fake.int32 = torch.int64, torch.int32
    fake.device = lambda kind, index=0: torch.device("cpu")
    fake.zeros = lambda *a, device=None, **kw: torch.zeros(*a, **kw)
    fake.cuda = types.SimpleNamespace(
        current_device=lambda: 0, synchronize=lambda: None,
        get_device_properties=lambda device: types.SimpleNamespace(multi_processor_count=4),
        Event=lambda: types.SimpleNamespace(record=lambda: None, query=lambda: True))
    if not pin_memory_works:
        def zeros(*a, device=None, **kw):
            tensor = torch.zeros(*a, **kw)
            if device is None:  # the host-side flag
                return types.SimpleNamespace(pin_memory=lambda: (_ for _ in ()).throw(
                    RuntimeError("no pinned memory on this device")))
            return tensor
        fake.zeros = zeros
    return fake


def test_without_pinned_memory_the_gate_is_off_and_says_why():
    hold = DeviceHold(fake_cuda_torch(pin_memory_works=False), "nvidia", "spin")
    assert hold.gate == "none"
    assert any("no device gate" in note and "no pinned memory" in note for note in hold.notes)


def test_without_counters_the_clock_comes_from_telemetry_and_says_so():
    # The clock-stamp kernel cannot run on a CPU tensor (no GPU, or the interpreter
    # has no inline assembly): exactly a device without the counters.
    hold = DeviceHold(fake_cuda_torch(pin_memory_works=True), "nvidia", "spin")
    assert hold.clock is False
    assert any("clock comes from telemetry" in note for note in hold.notes)


def test_asking_for_no_gate_is_not_a_fallback():
    hold = DeviceHold(fake_cuda_torch(pin_memory_works=True), "nvidia", "none")
    assert hold.gate == "none"
    assert not any("gate" in note for note in hold.notes)
