"""Config tables and device facts: deterministic, vendor-correct, no AMD knobs elsewhere."""
import pytest
import torch

from perfci_kernels import _configs
from perfci_kernels._configs import KernelConfig

NV = ("nvidia", "sm_90")
MI300 = ("amd", "gfx942")
MI355 = ("amd", "gfx950")


def test_tables_are_deterministic_and_bucketed_by_m():
    assert _configs.tiled_config(NV, "bf16", 4096, 4096, 4096) == _configs.tiled_config(NV, "bf16", 4096, 4096, 4096)
    big = _configs.tiled_config(NV, "bf16", 4096, 4096, 4096)
    assert (big.BLOCK_M, big.BLOCK_N, big.BLOCK_K, big.GROUP_M, big.num_warps, big.num_stages) == (128, 256, 64, 8, 8, 3)
    assert _configs.tiled_config(NV, "bf16", 64, 4096, 4096).BLOCK_M == 64
    assert _configs.tiled_config(MI300, "bf16", 8192, 8192, 8192).BLOCK_M == 256


def test_amd_knobs_only_reach_hip_launches():
    cfg = _configs.tiled_config(MI300, "fp16", 4096, 4096, 4096)
    assert _configs.launch_options(cfg, MI300) == {
        "num_warps": 8, "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16,
    }
    # The same config launched on NVIDIA must not carry them.
    assert set(_configs.launch_options(cfg, NV)) == {"num_warps", "num_stages"}
    for kind in (NV, ("interpreter", "cpu")):
        for table in (_configs.tiled_config, _configs.persistent_config):
            c = table(kind, "fp16", 32, 4096, 4096)
            assert (c.waves_per_eu, c.matrix_instr_nonkdim, c.kpack) == (None, None, None)
        for c in (_configs.splitk_config(kind, "fp16", 32, 4096, 4096, 132), _configs.gemv_config(kind, "fp16", 4096, 4096, 132)):
            assert (c.waves_per_eu, c.matrix_instr_nonkdim, c.kpack) == (None, None, None)


def test_explicit_amd_knob_is_accepted_on_amd_and_refused_elsewhere():
    base = _configs.tiled_config(MI300, "fp16", 4096, 4096, 4096)
    assert _configs.resolve(base, {"waves_per_eu": 1}, MI300).waves_per_eu == 1
    with pytest.raises(ValueError, match="only exist on AMD"):
        _configs.resolve(_configs.tiled_config(NV, "fp16", 1, 1, 1), {"waves_per_eu": 1}, NV)


def test_whole_kernelconfig_override_replaces_the_default():
    cfg = _configs.resolve(_configs.tiled_config(NV, "fp16", 4096, 4096, 4096), KernelConfig(32, 64, 32), NV)
    assert (cfg.BLOCK_M, cfg.BLOCK_N, cfg.BLOCK_K) == (32, 64, 32)
    with pytest.raises(ValueError, match="dict or KernelConfig"):
        _configs.resolve(cfg, [("BLOCK_M", 16)], NV)


def test_splitk_decode_tables():
    assert _configs.splitk_config(NV, "bf16", 8, 4096, 4096, 132).BLOCK_M == 16
    assert _configs.splitk_config(NV, "bf16", 64, 4096, 4096, 132).BLOCK_N == 64
    assert _configs.splitk_config(NV, "bf16", 64, 14336, 4096, 132).BLOCK_N == 128  # >= 2 waves unsplit
    assert _configs.splitk_config(MI300, "bf16", 64, 4096, 4096, 304).BLOCK_M == 32
    assert _configs.splitk_config(MI300, "bf16", 16, 4096, 4096, 304).BLOCK_M == 16


def test_gemv_block_n_shrinks_to_fill_the_device():
    big = _configs.gemv_config(NV, "bf16", 65536, 4096, sms=132)
    small = _configs.gemv_config(NV, "bf16", 1024, 4096, sms=132)
    assert (big.BLOCK_N, big.BLOCK_K) == (128, 64)
    assert (small.BLOCK_N, small.BLOCK_K) == (8, 1024)


def test_fp8_flavour_per_arch():
    assert _configs.fp8_dtype(("nvidia", "sm_90")) is torch.float8_e4m3fn
    assert _configs.fp8_dtype(("nvidia", "sm_89")) is torch.float8_e4m3fn
    assert _configs.fp8_dtype(("nvidia", "sm_80")) is None
    assert _configs.fp8_dtype(MI300) is torch.float8_e4m3fnuz
    assert _configs.fp8_dtype(MI355) is torch.float8_e4m3fn
    assert _configs.fp8_dtype(("amd", "gfx90a")) is None
    assert _configs.fp8_dtype(("interpreter", "cpu")) is None


def test_cpu_device_kind_follows_interpreter_flag(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _configs.device_kind(torch.device("cpu")) == ("interpreter", "cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert _configs.device_kind(torch.zeros(1)) == ("cpu", "cpu")


def test_importing_kernels_package_does_not_import_triton():
    import subprocess
    import sys

    code = "import sys, perfci_kernels, perfci_kernels._configs; print('triton' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
