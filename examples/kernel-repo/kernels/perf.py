"""gemmlab's kernels as perfci sees them: what a suite may name (``[tool.perfci] kernels``).

Cheap to import (no torch, no triton): perfci imports it to check a suite
anywhere, and imports kernels.gemm only inside ``prepare``, in the process that
measures.
"""
from __future__ import annotations

from perfci.kernel import TOLERANCE, Prepared, backend, gemm_inputs, poisoner, reference


@backend("gemmlab_matmul", description="gemmlab's tiled Triton GEMM", dtypes=("fp32", "fp16"))
def gemmlab_matmul(spec, device, seed):
    import torch

    from kernels.gemm import matmul

    a, w, _, out_dtype = gemm_inputs(spec, device, seed)  # random normal A (M, K) and weight (N, K)
    b = w.t().contiguous()  # the kernel takes B as a row-major (K, N) matrix
    out = torch.empty((spec.m, spec.n), dtype=out_dtype, device=device)
    return Prepared(run=lambda: matmul(a, b, out=out), output=out, reference=reference(a, w),
                    tolerance=TOLERANCE[spec.dtype], poison=poisoner(out))


BACKENDS = [gemmlab_matmul]
