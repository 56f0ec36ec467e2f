"""Fixtures for the kernel tests.

These tests run the kernels on CPU tensors through the Triton interpreter
(tests/conftest.py sets TRITON_INTERPRET=1 before anything imports triton).
On a GPU host run with TRITON_INTERPRET=0, the CPU tests cannot launch and are
skipped; the ``gpu``-marked ones run compiled.
"""
import os

import pytest


def pytest_collection_modifyitems(config, items):
    interpreting = os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")
    if interpreting:
        return
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason="CPU kernel tests need TRITON_INTERPRET=1")
    for item in items:
        if str(item.fspath).startswith(here) and not item.get_closest_marker("gpu"):
            item.add_marker(skip)


def _rel_err(out, ref):
    """||out - ref|| / ||ref|| in float64; any NaN/inf in out (an unwritten element) is infinite."""
    import torch

    out64, ref64 = out.detach().double().cpu(), ref.detach().double().cpu()
    if not torch.isfinite(out64).all():
        return float("inf")
    return (torch.linalg.vector_norm(out64 - ref64) / torch.linalg.vector_norm(ref64)).item()


@pytest.fixture
def rel_err():
    return _rel_err


@pytest.fixture
def operands():
    """make(M, N, K, dtype, device="cpu", seed=0) -> (a (M,K), w (N,K)); use b = w.t().

    Random normal, never zeros, with w scaled by 1/sqrt(K) so outputs are ~N(0,1)."""
    import torch

    def make(M, N, K, dtype, device="cpu", seed=0):
        gen = torch.Generator(device=device).manual_seed(seed)
        a = torch.randn((M, K), generator=gen, device=device).to(dtype)
        w = (torch.randn((N, K), generator=gen, device=device) / K**0.5).to(dtype)
        return a, w

    return make


@pytest.fixture
def reference():
    """ref(a, w, bias=None, epilogue="none") -> float64 act(a @ w.T + bias)."""
    import torch

    def ref(a, w, bias=None, epilogue="none"):
        r = a.double() @ w.double().t()
        if bias is not None:
            r = r + bias.double()
        return {
            "none": lambda x: x,
            "bias": lambda x: x,
            "bias_relu": torch.relu,
            "bias_silu": torch.nn.functional.silu,
            "bias_gelu": torch.nn.functional.gelu,
        }[epilogue](r)

    return ref
