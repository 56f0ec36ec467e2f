"""matmul_tiled in the Triton interpreter: values, epilogues, edges, and every ValueError."""
import pytest
import torch

from perfci_kernels import _configs
from perfci_kernels.matmul_tiled import EPILOGUES, matmul_tiled, matmul_tiled_kernel

# The interpreter computes fp32 dots in fp32 and fp16 dots exactly with an fp16
# output, so the bounds are a few output roundings (fp16: 2^-11 ~ 4.9e-4).
TOL = {torch.float32: 1e-5, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_epilogues_match_reference(dtype, epilogue, operands, reference, rel_err):
    # 37 x 45 x 70: none is a multiple of the 16x16x16 interpreter blocks, so
    # every edge mask (M, N, K) is exercised.
    a, w = operands(37, 45, 70, dtype)
    bias = torch.randn(45).to(dtype) if epilogue != "none" else None
    c = matmul_tiled(a, w.t(), bias=bias, epilogue=epilogue)
    assert c.shape == (37, 45) and c.dtype == dtype and c.is_contiguous()
    assert rel_err(c, reference(a, w, bias, epilogue)) < TOL[dtype]


def test_activations_change_the_result(operands, reference, rel_err):
    # Guards against an epilogue that silently skips the activation: relu of a
    # ~N(0,1) output differs from the plain bias result by O(1).
    a, w = operands(32, 32, 32, torch.float32)
    bias = torch.randn(32)
    plain = matmul_tiled(a, w.t(), bias=bias, epilogue="bias")
    relu = matmul_tiled(a, w.t(), bias=bias, epilogue="bias_relu")
    assert rel_err(plain, reference(a, w, bias, "bias_relu")) > 0.1
    assert rel_err(relu, reference(a, w, bias, "bias_relu")) < 1e-5


def test_row_major_b_and_group_m_one(operands, reference, rel_err):
    # A contiguous (K, N) B has the opposite strides of w.t(); GROUP_M=1 is the
    # plain row-major order; neither may change the numbers.
    a, w = operands(50, 33, 40, torch.float32)
    b = w.t().contiguous()
    c = matmul_tiled(a, b, config={"GROUP_M": 1, "BLOCK_M": 32})
    assert rel_err(c, reference(a, w)) < 1e-5


def test_out_is_written_in_place(operands, reference, rel_err):
    a, w = operands(20, 20, 20, torch.float16)
    out = torch.full((20, 20), float("nan"), dtype=torch.float16)
    c = matmul_tiled(a, w.t(), out=out)
    assert c.data_ptr() == out.data_ptr()
    assert rel_err(out, reference(a, w)) < TOL[torch.float16]


def test_skipped_tile_is_caught_by_poison(operands, reference, rel_err):
    # A launch one program short (a broken grid/config) leaves the last tile
    # unwritten; poisoning the output with NaN must make that fail the check.
    a, w = operands(32, 32, 16, torch.float32)
    out = torch.full((32, 32), float("nan"))
    matmul_tiled_kernel[(3,)](
        a, w.t(), out, out, 32, 32, 16,
        a.stride(0), a.stride(1), w.t().stride(0), w.t().stride(1), out.stride(0), out.stride(1),
        BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1, EPILOGUE="none",
    )
    assert torch.isnan(out).sum() == 16 * 16
    assert rel_err(out, reference(a, w)) == float("inf")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(config={"waves_per_eu": 2}), "only exist on AMD"),
        (dict(config={"matrix_instr_nonkdim": 16}), "only exist on AMD"),
        (dict(config={"kpack": 2}), "only exist on AMD"),
        (dict(config={"BLOCK_Q": 16}), "unknown config field"),
        (dict(config={"BLOCK_M": 24}), "power of two"),
        (dict(config={"BLOCK_K": 8}), "power of two >= 16"),
        (dict(epilogue="bias_tanh", bias=torch.zeros(16)), "epilogue must be one of"),
        (dict(epilogue="bias"), "needs a bias"),
        (dict(bias=torch.zeros(16)), "epilogue is 'none'"),
        (dict(epilogue="bias", bias=torch.zeros(15)), r"contiguous \(16,\) vector"),
        (dict(epilogue="bias", bias=torch.zeros(16, dtype=torch.float16)), "output dtype"),
        (dict(out=torch.empty(16, 15)), r"\(16, 16\) tensor"),
        (dict(out=torch.empty(16, 16, dtype=torch.float16)), "out must be torch.float32"),
        (dict(out=torch.empty(16, 32)[:, ::2]), "contiguous"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    a = torch.randn(16, 16)
    b = torch.randn(16, 16)
    with pytest.raises(ValueError, match=match):
        matmul_tiled(a, b, **kwargs)


@pytest.mark.parametrize(
    "a, b, match",
    [
        (torch.randn(4, 8), torch.randn(9, 4), "inner dimensions differ"),
        (torch.randn(4, 8, 1), torch.randn(8, 4), "2-D"),
        (torch.randn(4, 8), torch.randn(8, 4).half(), "same dtype"),
        (torch.randint(0, 3, (4, 8)), torch.randint(0, 3, (8, 4)), "supports float32"),
        (torch.randn(4, 8).to(torch.float8_e4m3fn), torch.randn(8, 4).to(torch.float8_e4m3fn), "no fp8"),
        (torch.randn(0, 8), torch.randn(8, 4), ">= 1"),
    ],
)
def test_bad_operands_raise_value_error(a, b, match):
    with pytest.raises(ValueError, match=match):
        matmul_tiled(a, b)


def test_cpu_without_interpreter_is_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1 is not set"):
        matmul_tiled(torch.randn(16, 16), torch.randn(16, 16))


def test_interpreter_uses_small_single_stage_config():
    cfg = _configs.tiled_config(("interpreter", "cpu"), "fp32", 4096, 4096, 4096)
    assert (cfg.BLOCK_M, cfg.BLOCK_N, cfg.BLOCK_K, cfg.num_stages) == (16, 16, 16, 1)
