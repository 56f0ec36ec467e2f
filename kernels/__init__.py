"""Triton GEMM kernels that perfci benchmarks.

Every kernel computes ``C[M, N] = A[M, K] @ B[K, N]`` where ``A`` is row-major
and ``B`` is the ``(K, N)`` view of a contiguous ``(N, K)`` weight (``w.t()``,
the ``nn.Linear`` layout); accumulation is fp32 and ``C`` has ``A``'s dtype
(bf16 for fp8 inputs).

Installed, this folder is the package ``perfci_kernels`` (a name no kernel
team's own ``kernels`` package collides with); its modules import one another
relatively, so the same code also imports as ``kernels`` from a checkout of
perfci, which is how a bisect or confirm worktree measures its own revision.

- :mod:`kernels.backends`: the five kernels declared for perfci (perfci.kernel's API).
- :mod:`kernels.matmul_tiled`: tiled GEMM, grouped launch order, fused epilogues.
- :mod:`kernels.splitk_decode`: split-K GEMM for decode (M <= 64) plus its reduction.
- :mod:`kernels.gemv`: the M = 1 path.
- :mod:`kernels.matmul_persistent`: one program per SM/CU looping over tiles.
- :mod:`kernels._configs`: vendor/arch detection and the deterministic config tables.

Nothing here imports triton at package import: the caller decides whether
``TRITON_INTERPRET=1`` is set before triton is first imported.
"""
