"""Pure device facts: arch names, visible devices, lock names, cache and flush sizes."""
from __future__ import annotations

import re

import pytest

from perfci.measure.devices import (
    MiB,
    device_cache_bytes,
    flush_bytes,
    gpu_lock_name,
    normalize_arch,
    normalize_gcn_arch,
    physical_device,
    sm_arch,
    visible_devices,
)

# --------------------------------------------------------------------------- arch
@pytest.mark.parametrize(
    "raw, expected",
    [("gfx942:sramecc+:xnack-", "gfx942"), ("gfx950:sramecc+:xnack-", "gfx950"), ("gfx90a", "gfx90a"), ("", "")],
)
def test_gcn_arch_feature_flags_are_stripped(raw, expected):
    assert normalize_gcn_arch(raw) == expected


def test_sm_arch_and_normalize_arch():
    assert sm_arch(9, 0) == "sm_90"
    assert sm_arch(10, 0) == "sm_100"
    assert normalize_arch("9.0") == "sm_90"
    assert normalize_arch("SM_90") == "sm_90"
    assert normalize_arch("gfx942:sramecc+:xnack-") == "gfx942"


# --------------------------------------------------------------------------- visible devices
def test_visible_devices_unset_means_no_restriction():
    assert visible_devices({}) == []
    assert physical_device(3, {}) == "3"


def test_cuda_visible_devices_indices_uuids_and_stop_at_invalid_entry():
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "2, 3"}) == ["2", "3"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "GPU-8c1f,1"}) == ["GPU-8c1f", "1"]
    # CUDA ignores everything from the first invalid entry on.
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}) == ["0", "2"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_nvidia_ignores_hip_variables():
    env = {"CUDA_VISIBLE_DEVICES": "5", "HIP_VISIBLE_DEVICES": "1"}
    assert visible_devices(env, "nvidia") == ["5"]
    assert physical_device(0, env, "nvidia") == "5"


def test_amd_hip_indexes_into_rocr_list():
    env = {"ROCR_VISIBLE_DEVICES": "4,6,7", "HIP_VISIBLE_DEVICES": "2,0"}
    assert visible_devices(env) == ["7", "4"]
    assert physical_device(1, env) == "4"


def test_amd_rocr_alone_and_hip_alone_and_cuda_alias():
    assert visible_devices({"ROCR_VISIBLE_DEVICES": "3"}) == ["3"]
    assert visible_devices({"HIP_VISIBLE_DEVICES": "1,2"}) == ["1", "2"]
    # HIP honours CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset.
    assert visible_devices({"ROCR_VISIBLE_DEVICES": "4,6", "CUDA_VISIBLE_DEVICES": "1"}) == ["6"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "1"}, "amd") == ["1"]


def test_amd_hip_index_beyond_rocr_list_is_dropped():
    assert visible_devices({"ROCR_VISIBLE_DEVICES": "4", "HIP_VISIBLE_DEVICES": "0,1"}) == ["4"]


# --------------------------------------------------------------------------- lock name
def test_gpu_lock_name_defaults_and_first_entry():
    assert gpu_lock_name({}) == "0"
    assert gpu_lock_name({"HIP_VISIBLE_DEVICES": "3,1"}) == "3"
    assert gpu_lock_name({"CUDA_VISIBLE_DEVICES": "2,1"}) == "2"
    assert gpu_lock_name({"CUDA_VISIBLE_DEVICES": "GPU-8c1f-aa"}) == "GPU-8c1f-aa"


def test_gpu_lock_name_follows_rocr_to_the_physical_gpu():
    # Both processes run on physical GPU 2, so they must take the same lock.
    assert gpu_lock_name({"ROCR_VISIBLE_DEVICES": "2"}) == gpu_lock_name({"HIP_VISIBLE_DEVICES": "2"}) == "2"
    assert gpu_lock_name({"ROCR_VISIBLE_DEVICES": "5,2", "HIP_VISIBLE_DEVICES": "1"}) == "2"


def test_gpu_lock_name_is_filename_safe():
    name = gpu_lock_name({"CUDA_VISIBLE_DEVICES": "MIG-GPU/1:2"})
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", name)


# --------------------------------------------------------------------------- cache / flush
class Props:
    def __init__(self, l2):
        self.L2_cache_size = l2


def test_device_cache_bytes_uses_mall_on_mi300_and_mi355():
    # torch reports MI300X's 4 MB per-XCD L2; the 256 MB MALL is what must be flushed.
    assert device_cache_bytes(Props(4 * MiB), "gfx942:sramecc+:xnack-") == 256 * MiB
    assert device_cache_bytes(Props(4 * MiB), "gfx950") == 256 * MiB


def test_device_cache_bytes_uses_l2_elsewhere():
    assert device_cache_bytes(Props(50 * MiB), "sm_90") == 50 * MiB
    assert device_cache_bytes(Props(8 * MiB), "gfx90a") == 8 * MiB
    assert device_cache_bytes(None, "cpu") == 0


def test_flush_bytes_is_twice_llc_with_256_mib_floor():
    assert flush_bytes(256 * MiB) == 512 * MiB
    assert flush_bytes(200 * MiB) == 400 * MiB
    assert flush_bytes(50 * MiB) == 256 * MiB
    assert flush_bytes(0) == 256 * MiB
