"""Environment collection: pure helpers, and collect_environment with a stand-in torch."""
from __future__ import annotations

import datetime as dt
import json
import re
import sys
import types
from pathlib import Path

import pytest

from perfci import envinfo
from perfci.envinfo import (
    MiB,
    collect_environment,
    device_cache_bytes,
    flush_bytes,
    git_sha,
    gpu_lock_name,
    normalize_arch,
    normalize_gcn_arch,
    parse_nvidia_smi_version,
    parse_rocm_smi_driver,
    physical_device,
    sm_arch,
    visible_devices,
)

DATA = Path(__file__).parent / "data" / "telemetry"


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


# --------------------------------------------------------------------------- version parsers
def test_parse_nvidia_smi_version_recorded():
    info = parse_nvidia_smi_version((DATA / "nvidia" / "nvidia-smi-version.txt").read_text())
    assert info == {"driver": "580.159.04", "nvml": "580.159", "cuda": "13.0"}
    assert parse_nvidia_smi_version("") == {}


def test_parse_rocm_smi_driver_recorded():
    data = json.loads((DATA / "amd" / "rocm-smi-all-json-mi100-rocm602.json").read_text())
    assert parse_rocm_smi_driver(data) == "6.3.6"
    assert parse_rocm_smi_driver({}) == ""
    assert parse_rocm_smi_driver(None) == ""


# --------------------------------------------------------------------------- git
def test_git_sha_clean_dirty_and_not_a_repo(tmp_path):
    git = pytest.importorskip("git")
    assert git_sha(str(tmp_path)) == ""
    repo = git.Repo.init(tmp_path)
    (tmp_path / "a.txt").write_text("1")
    repo.index.add(["a.txt"])
    actor = git.Actor("perfci test", "test@example.invalid")
    commit = repo.index.commit("first", author=actor, committer=actor)
    assert git_sha(str(tmp_path)) == commit.hexsha
    (tmp_path / "untracked.csv").write_text("results")
    assert git_sha(str(tmp_path)) == commit.hexsha  # result files do not make a run dirty
    (tmp_path / "a.txt").write_text("2")
    assert git_sha(str(tmp_path)) == commit.hexsha + "-dirty"


def test_git_sha_without_gitpython_is_empty(monkeypatch):
    monkeypatch.setitem(sys.modules, "git", None)
    assert git_sha() == ""


# --------------------------------------------------------------------------- collect_environment
def test_collect_environment_cpu(monkeypatch, tmp_path):
    import torch

    import perfci

    monkeypatch.chdir(tmp_path)  # not a repository
    env = collect_environment("cpu")
    assert (env.arch, env.vendor, env.driver, env.runtime) == ("cpu", "cpu", "", "")
    assert env.torch == torch.__version__
    assert env.perfci == perfci.__version__
    assert env.git_sha == ""
    assert env.host
    stamp = dt.datetime.fromisoformat(env.timestamp)
    assert stamp.utcoffset() == dt.timedelta(0) and stamp.microsecond == 0
    assert abs((dt.datetime.now(dt.timezone.utc) - stamp).total_seconds()) < 60


def test_collect_environment_rejects_unknown_device():
    with pytest.raises(ValueError):
        collect_environment("tpu")


def fake_torch(*, cuda=None, hip=None, props=None):
    torch = types.ModuleType("torch")
    torch.__version__ = "2.13.0+fake"
    torch.version = types.SimpleNamespace(cuda=cuda, hip=hip)
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda i: props)
    return torch


def test_collect_environment_rocm_reports_gfx_arch_and_hip_runtime(monkeypatch):
    props = types.SimpleNamespace(name="AMD Instinct MI300X", gcnArchName="gfx942:sramecc+:xnack-", L2_cache_size=4 * MiB)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(hip="6.3.42131-fa1d09cbd", props=props))
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(envinfo.shutil, "which", lambda tool: None)  # no amd-smi / rocm-smi
    env = collect_environment("cuda")
    assert (env.device_name, env.arch, env.vendor) == ("AMD Instinct MI300X", "gfx942", "amd")
    assert env.runtime == "hip 6.3.42131-fa1d09cbd"
    assert env.torch == "2.13.0+fake"
    assert env.driver == ""


def test_collect_environment_rocm_driver_from_amd_smi_static(monkeypatch):
    props = types.SimpleNamespace(name="AMD Instinct MI300A", gcnArchName="gfx942:sramecc+:xnack-")
    monkeypatch.setitem(sys.modules, "torch", fake_torch(hip="7.1.0", props=props))
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    recorded = (DATA / "amd" / "amd-smi-static-mi300a-gfx942-rocm7.1-docs.txt").read_text()
    monkeypatch.setattr(envinfo, "_run", lambda cmd: recorded if cmd[0] == "amd-smi" else "")
    assert collect_environment("cuda").driver == "6.14.4"


def test_collect_environment_cuda_reports_sm_arch_and_driver(monkeypatch):
    props = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, L2_cache_size=50 * MiB)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda="12.8", props=props))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    recorded = (DATA / "nvidia" / "nvidia-smi-version.txt").read_text()
    monkeypatch.setattr(envinfo, "_run", lambda cmd: recorded if cmd == ["nvidia-smi", "--version"] else "")
    env = collect_environment("cuda")
    assert (env.device_name, env.arch, env.vendor, env.runtime) == ("NVIDIA H200", "sm_90", "nvidia", "cuda 12.8")
    assert env.driver == "580.159.04"
