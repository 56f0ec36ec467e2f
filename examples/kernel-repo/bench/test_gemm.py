"""gemmlab's GEMM as pytest benchmarks (perfci's ``perfci_benchmark`` fixture).

    pytest bench/ --perfci-device cpu --perfci-out cur.csv

`perfci nightly gemm --bench 'pytest bench/ -q --perfci-out {out}'` runs this
file as the night's source; confirm and bisect run it again with
``$PERFCI_CASES`` set, and the fixture then measures only the listed cases.
"""
from __future__ import annotations

import pytest
import torch

from kernels.gemm import matmul

SHAPES = [(16, 16, 32)]


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul(perfci_benchmark, m, n, k):
    device = perfci_benchmark.device
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn((m, k), generator=gen, device=device)
    b = torch.randn((k, n), generator=gen, device=device) / k ** 0.5
    out = torch.empty((m, n), device=device)
    # repeats=3: Triton's interpreter is slow, and a night runs this file many times; on a GPU
    # leave the default (7).
    perfci_benchmark(matmul, a, b, kwargs={"out": out}, kernel="gemmlab_matmul", shape=(m, n, k),
                     dtype=torch.float32, reference=lambda a, b, out: a.double() @ b.double(),
                     repeats=3 if device == "cpu" else None)
