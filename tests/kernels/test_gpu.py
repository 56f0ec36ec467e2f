"""Compiled kernels on a real GPU against torch.matmul (skipped without one).

Run on a GPU host with ``TRITON_INTERPRET=0 python -m pytest -m gpu``.
These cover what the interpreter cannot: bf16 (numpy has no bf16), fp8, the
vendor's default configs and the AMD knobs on HIP.
"""
import pytest
import torch

pytestmark = pytest.mark.gpu

# Relative Frobenius error vs a float64 reference on the same rounded inputs:
# fp32 may run as tf32, bf16 and fp8 outputs round to bf16 (2^-8).
TOL = {torch.float32: 5e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}
SHAPES = [(1, 4096, 4096), (16, 1280, 8192), (64, 6144, 768), (500, 1000, 1000), (2048, 2048, 2048)]


def _fp8():
    from perfci_kernels import _configs

    return _configs.fp8_dtype(_configs.device_kind(torch.device("cuda")))


def _check(fn, M, N, K, dtype, tol, operands, reference, rel_err):
    a, w = operands(M, N, K, dtype, device="cuda")
    c = fn(a, w.t())
    torch.cuda.synchronize()
    assert rel_err(c, reference(a, w)) < tol
    vendor = torch.matmul(a, w.t())
    assert rel_err(c, vendor.float()) < 2 * tol


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M, N, K", SHAPES)
def test_tiled_and_persistent(M, N, K, dtype, operands, reference, rel_err):
    from perfci_kernels.matmul_persistent import matmul_persistent
    from perfci_kernels.matmul_tiled import matmul_tiled

    _check(matmul_tiled, M, N, K, dtype, TOL[dtype], operands, reference, rel_err)
    _check(matmul_persistent, M, N, K, dtype, TOL[dtype], operands, reference, rel_err)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M", [1, 4, 16, 33, 64])
@pytest.mark.parametrize("N, K", [(1024, 6144), (6144, 768), (192, 6144)])
def test_splitk_decode_both_orders(M, N, K, dtype, operands, reference, rel_err):
    from perfci_kernels.splitk_decode import splitk_decode

    a, w = operands(M, N, K, dtype, device="cuda")
    c0 = splitk_decode(a, w.t(), m_fast=False)
    c1 = splitk_decode(a, w.t(), m_fast=True)
    assert torch.equal(c0, c1)
    assert rel_err(c1, reference(a, w)) < TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("N, K", [(4096, 4096), (192, 6144), (100, 1000)])
def test_gemv(N, K, dtype, operands, reference, rel_err):
    from perfci_kernels.gemv import gemv

    _check(gemv, 1, N, K, dtype, TOL[dtype], operands, reference, rel_err)


@pytest.mark.parametrize("epilogue", ["bias", "bias_relu", "bias_silu", "bias_gelu"])
def test_tiled_epilogues_bf16(epilogue, operands, reference, rel_err):
    from perfci_kernels.matmul_tiled import matmul_tiled

    a, w = operands(300, 520, 1000, torch.bfloat16, device="cuda")
    bias = torch.randn(520, device="cuda").to(torch.bfloat16)
    c = matmul_tiled(a, w.t(), bias=bias, epilogue=epilogue)
    assert rel_err(c, reference(a, w, bias, epilogue)) < 2e-2


@pytest.mark.parametrize("kernel", ["matmul_tiled", "matmul_persistent", "splitk_decode", "gemv"])
def test_fp8_matches_reference_or_is_refused(kernel, reference, rel_err):
    import importlib

    fn = getattr(importlib.import_module(f"perfci_kernels.{kernel}"), kernel)
    fp8 = _fp8()
    M = 1 if kernel == "gemv" else 32
    a32 = torch.randn(M, 1024, device="cuda")
    w32 = torch.randn(512, 1024, device="cuda")
    if fp8 is None:
        with pytest.raises(ValueError, match="fp8"):
            fn(a32.to(torch.float8_e4m3fn), w32.to(torch.float8_e4m3fn).t())
        return
    a, w = a32.to(fp8), w32.to(fp8)
    c = fn(a, w.t())
    assert c.dtype == torch.bfloat16
    assert rel_err(c, reference(a, w)) < 2e-2


def test_amd_knobs_follow_the_backend():
    import triton

    from perfci_kernels.matmul_tiled import matmul_tiled

    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    hip = triton.runtime.driver.active.get_current_target().backend == "hip"
    assert hip == bool(torch.version.hip)
    if hip:
        matmul_tiled(a, b, config={"waves_per_eu": 1, "matrix_instr_nonkdim": 32})
    else:
        with pytest.raises(ValueError, match="only exist on AMD"):
            matmul_tiled(a, b, config={"waves_per_eu": 1})
