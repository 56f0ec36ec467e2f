"""matmul_persistent in the Triton interpreter: tile loop, epilogues, edges."""
import pytest
import torch

from perfci_kernels.matmul_persistent import matmul_persistent, matmul_persistent_kernel

TOL = {torch.float32: 1e-5, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("num_programs", [None, 1, 3, 5])
def test_more_tiles_than_programs(num_programs, dtype, operands, reference, rel_err):
    # 50 x 61 in 16x16 tiles is 4 x 4 = 16 tiles; the interpreter's default
    # is 4 programs, so every program loops; 3 and 5 do not divide 16, so some
    # programs run one tile more than others.
    a, w = operands(50, 61, 40, dtype)
    c = matmul_persistent(a, w.t(), num_programs=num_programs)
    assert c.shape == (50, 61) and c.dtype == dtype
    assert rel_err(c, reference(a, w)) < TOL[dtype]


@pytest.mark.parametrize("epilogue", ["bias", "bias_silu", "bias_gelu"])
def test_epilogues(epilogue, operands, reference, rel_err):
    a, w = operands(33, 20, 24, torch.float32)
    bias = torch.randn(20)
    c = matmul_persistent(a, w.t(), bias=bias, epilogue=epilogue, num_programs=2)
    assert rel_err(c, reference(a, w, bias, epilogue)) < 1e-5


def test_more_programs_than_tiles_is_capped(operands, reference, rel_err):
    a, w = operands(16, 16, 16, torch.float32)
    c = matmul_persistent(a, w.t(), num_programs=64)
    assert rel_err(c, reference(a, w)) < 1e-5


def test_grid_smaller_than_loop_stride_is_caught_by_poison(operands, reference, rel_err):
    # A grid of 3 programs stepping by NUM_PROGRAMS=4 never visits tiles 3, 7,
    # 11, 15; the poisoned output must expose them.
    a, w = operands(64, 64, 16, torch.float32)
    out = torch.full((64, 64), float("nan"))
    b = w.t()
    matmul_persistent_kernel[(3,)](
        a, b, out, out, 64, 64, 16,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        NUM_PROGRAMS=4, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=4, EPILOGUE="none",
    )
    assert torch.isnan(out).sum() == 4 * 16 * 16
    assert rel_err(out, reference(a, w)) == float("inf")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_programs=0), "num_programs must be a positive integer"),
        (dict(config={"matrix_instr_nonkdim": 32}), "only exist on AMD"),
        (dict(epilogue="bias"), "needs a bias"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        matmul_persistent(torch.randn(16, 16), torch.randn(16, 16), **kwargs)
