"""Environment collection: version parsers, git, and collect_environment with a stand-in torch."""
from __future__ import annotations

import datetime as dt
import json

import sys
import types
from pathlib import Path

import pytest

from perfci.measure import envinfo
from perfci.measure.devices import MiB
from perfci.measure.envinfo import (
    collect_environment,
    git_sha,
    parse_nvidia_smi_version,
    parse_rocm_smi_driver,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "telemetry"


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
def test_git_sha_clean_dirty_and_not_a_repo(tmp_path, monkeypatch):
    monkeypatch.delenv("PERFCI_GIT_SHA", raising=False)
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
    monkeypatch.delenv("PERFCI_GIT_SHA", raising=False)
    monkeypatch.setitem(sys.modules, "git", None)
    assert git_sha() == ""


def test_a_tree_copied_without_git_takes_the_sha_it_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCI_GIT_SHA", "0123abcd")
    assert git_sha(str(tmp_path)) == "0123abcd"  # not a repository: the caller's word
    git = pytest.importorskip("git")
    repo = git.Repo.init(tmp_path)
    (tmp_path / "a.txt").write_text("1")
    repo.index.add(["a.txt"])
    actor = git.Actor("perfci test", "test@example.invalid")
    commit = repo.index.commit("first", author=actor, committer=actor)
    assert git_sha(str(tmp_path)) == commit.hexsha  # a real checkout always wins


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
