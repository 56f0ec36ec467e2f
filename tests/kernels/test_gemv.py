"""gemv in the Triton interpreter."""
import pytest
import torch

from perfci_kernels.gemv import gemv

TOL = {torch.float32: 1e-5, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("N, K", [(1, 1), (45, 70), (64, 128), (9, 300)])
def test_matches_reference(N, K, dtype, operands, reference, rel_err):
    a, w = operands(1, N, K, dtype)
    c = gemv(a, w.t())
    assert c.shape == (1, N) and c.dtype == dtype
    assert rel_err(c, reference(a, w)) < TOL[dtype]


def test_small_blocks_and_row_major_b(operands, reference, rel_err):
    # BLOCK_N below 16 is legal here (no tl.dot); a row-major B has K stride N.
    a, w = operands(1, 21, 50, torch.float32)
    c = gemv(a, w.t().contiguous(), config={"BLOCK_N": 4, "BLOCK_K": 32})
    assert rel_err(c, reference(a, w)) < 1e-5


def test_out_is_written_in_place(operands, reference, rel_err):
    a, w = operands(1, 30, 40, torch.float16)
    out = torch.full((1, 30), float("nan"), dtype=torch.float16)
    gemv(a, w.t(), out=out)
    assert rel_err(out, reference(a, w)) < TOL[torch.float16]


@pytest.mark.parametrize("M", [0, 2, 16])
def test_m_other_than_one_is_refused(M):
    with pytest.raises(ValueError, match="M=1|>= 1"):
        gemv(torch.randn(M, 8), torch.randn(8, 4))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(config={"waves_per_eu": 2}), "only exist on AMD"),
        (dict(config={"BLOCK_N": 3}), "power of two"),
        (dict(out=torch.empty(4)), r"\(1, 4\) tensor"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gemv(torch.randn(1, 8), torch.randn(8, 4), **kwargs)


def test_bad_dtype_is_refused():
    with pytest.raises(ValueError, match="supports float32"):
        gemv(torch.ones(1, 8, dtype=torch.float64), torch.ones(8, 4, dtype=torch.float64))
