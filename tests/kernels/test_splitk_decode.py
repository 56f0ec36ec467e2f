"""splitk_decode in the Triton interpreter: M edges, grid order, K slicing, workspace, errors."""
import pytest
import torch

from perfci_kernels import _configs
from perfci_kernels.splitk_decode import alloc_workspace, splitk_decode, splitk_partial_kernel, splitk_reduce_kernel

TOL = {torch.float32: 1e-5, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("M", [1, 15, 16, 17, 33, 64])
def test_matches_reference_across_m_edges(M, dtype, operands, reference, rel_err):
    # N=40 and K=100 are not multiples of the 16-wide interpreter blocks.
    a, w = operands(M, 40, 100, dtype)
    c = splitk_decode(a, w.t())
    assert c.shape == (M, 40) and c.dtype == dtype
    assert rel_err(c, reference(a, w)) < TOL[dtype]


@pytest.mark.parametrize("M", [5, 48])
def test_m_fast_orders_give_identical_results(M, operands):
    # Both orders run the same programs with the same K slices, so the results
    # must agree bit for bit; M=48 has three M tiles, where the orders differ.
    a, w = operands(M, 48, 96, torch.float16)
    out0 = splitk_decode(a, w.t(), m_fast=False, split_k=3)
    out1 = splitk_decode(a, w.t(), m_fast=True, split_k=3)
    assert torch.equal(out0, out1)


@pytest.mark.parametrize("split_k, K", [(3, 100), (4, 100), (2, 17), (7, 48), (64, 40)])
def test_k_not_a_multiple_of_block_k_times_split(split_k, K, operands, reference, rel_err):
    # 100 = 6.25 blocks of 16: slices are rounded up to whole blocks, so the
    # last slice is short; split_k=64 > K tiles must shrink, not write zeros.
    a, w = operands(9, 24, K, torch.float32)
    ws = alloc_workspace(a, w.t(), split_k=split_k)
    assert ws.shape[0] <= min(split_k, -(-K // 16)) and ws.shape[1:] == (9, 24)
    c = splitk_decode(a, w.t(), split_k=split_k, workspace=ws)
    assert rel_err(c, reference(a, w)) < TOL[torch.float32]


def test_default_split_fills_the_pretend_sms(operands):
    # The interpreter pretends to have 4 SMs: one M tile x one N tile needs 8
    # K slices to give each of them two programs (K=256 has 16 blocks, so
    # the two-blocks-per-slice floor allows 8).
    a, w = operands(4, 16, 256, torch.float32)
    assert alloc_workspace(a, w.t()).shape == (8, 4, 16)


def test_workspace_and_out_are_used_in_place(operands, reference, rel_err):
    a, w = operands(8, 32, 64, torch.float32)
    ws = alloc_workspace(a, w.t(), split_k=2)
    ws.fill_(float("nan"))
    out = torch.full((8, 32), float("nan"))
    splitk_decode(a, w.t(), split_k=2, out=out, workspace=ws)
    assert rel_err(out, reference(a, w)) < TOL[torch.float32]
    assert torch.isfinite(ws).all()  # every slice was written


def test_reduce_over_unwritten_slice_is_caught_by_poison(operands, reference, rel_err):
    # A reduction that sums one slice more than the partial kernel wrote (a
    # mismatched SPLIT_K) reads a poisoned slice, and NaN reaches C.
    a, w = operands(8, 16, 64, torch.float32)
    ws = torch.full((3, 8, 16), float("nan"))
    out = torch.full((8, 16), float("nan"))
    splitk_partial_kernel[(1, 1, 2)](
        a, w.t(), ws, 8, 16, 64, 32,
        a.stride(0), a.stride(1), w.t().stride(0), w.t().stride(1), ws.stride(0), ws.stride(1), ws.stride(2),
        BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, M_FAST=True,
    )
    splitk_reduce_kernel[(1,)](ws, out, 8 * 16, ws.stride(0), SPLIT_K=3, BLOCK=256)
    assert rel_err(out, reference(a, w)) == float("inf")
    # ...and the correct SPLIT_K on the same workspace passes.
    splitk_reduce_kernel[(1,)](ws, out, 8 * 16, ws.stride(0), SPLIT_K=2, BLOCK=256)
    assert rel_err(out, reference(a, w)) < 1e-5


def test_m_above_64_is_refused():
    with pytest.raises(ValueError, match="M <= 64, got M=65"):
        splitk_decode(torch.randn(65, 32), torch.randn(32, 16))
    with pytest.raises(ValueError, match="M <= 64"):
        alloc_workspace(torch.randn(65, 32), torch.randn(32, 16))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(split_k=0), "split_k must be a positive integer"),
        (dict(split_k=2.0), "split_k must be a positive integer"),
        (dict(workspace=torch.empty(2, 4, 16, dtype=torch.float16)), "workspace must be a contiguous float32"),
        (dict(split_k=2, workspace=torch.empty(1, 4, 16)), "workspace must be"),
        (dict(workspace=torch.empty(2, 4, 15)), "workspace must be"),
        (dict(config={"waves_per_eu": 1}), "only exist on AMD"),
        (dict(config={"SPLIT_K": 0}), "SPLIT_K must be a positive integer"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        splitk_decode(torch.randn(4, 32), torch.randn(32, 16), **kwargs)


def test_config_split_is_honoured(operands):
    a, w = operands(4, 16, 256, torch.float32)
    assert alloc_workspace(a, w.t(), config={"SPLIT_K": 2}).shape[0] == 2
    # The keyword wins over the config field.
    assert alloc_workspace(a, w.t(), split_k=3, config={"SPLIT_K": 2}).shape[0] == 3


def test_split_heuristic_is_bounded():
    assert _configs.splitk_split(num_programs_mn=2, k_tiles=100, sms=132) == 32  # capped workspace
    assert _configs.splitk_split(num_programs_mn=300, k_tiles=100, sms=132) == 1  # already two waves
    assert _configs.splitk_split(num_programs_mn=16, k_tiles=6, sms=304) == 3  # >= 2 K blocks per slice
