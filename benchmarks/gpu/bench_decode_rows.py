"""The decode suite's split-K, torch_matmul and GEMV rows through the pytest plugin, beside ``perfci run`` (GPU).

Run it by naming the file (its name is not ``test_*.py``, so neither ``python -m
pytest`` nor ``pytest benchmarks/`` collects it); benchmarks/gpu/plugin_vs_run.sh does::

    TRITON_INTERPRET=0 python3 -m pytest benchmarks/gpu/bench_decode_rows.py --perfci-out plugin.csv
    perfci run decode --filter 'group~decode-*' --seed 2 --out run.csv
    perfci compare run.csv plugin.csv

One source of truth: the cases are the suite's own, read with perfci's loader
and selected with ``perfci run --filter``'s function, and each case's call is
built by the suite backend's own ``prepare`` (same inputs for the same seed,
the (K, N) ``w.t()`` weight view, preallocated output and split-K workspace,
the same float64 reference and tolerance), so the plugin times exactly the
thunk the worker times. The key is ``spec.label`` (``splitk_decode[m_fast=0]``),
``spec.shape`` and ``spec.dtype``, as ``perfci run`` writes them.

Environment (defaults are the H200 comparison):
  PERFCI_BENCH_SUITE   suite name or .toml path   (decode)
  PERFCI_BENCH_FILTER  perfci run --filter text    (group~decode-*)
  PERFCI_BENCH_SEED    input seed; pass the same to perfci run --seed (2)

What differs from the worker, by the plugin's design (docs/pytest.md): all cases
run in this one pytest process (perfci run's default ``shared`` isolation also
measures case after case in one worker), the output is poisoned once through
``setup=`` rather than by the worker's gate, and the rows carry suite
``pytest`` with an empty group and weight 1 (the fixture takes neither).
"""
from __future__ import annotations

import gc
import os

import pytest

from perfci.suites import load_suite, project_root, select_cases

SUITE = os.environ.get("PERFCI_BENCH_SUITE", "decode")
FILTER = os.environ.get("PERFCI_BENCH_FILTER", "group~decode-*")
SEED = int(os.environ.get("PERFCI_BENCH_SEED", "2"))

_suite = load_suite(SUITE, project_root(os.path.dirname(os.path.abspath(__file__))))
CASES = select_cases(_suite.cases, FILTER)
if not CASES:
    raise RuntimeError(f"no case of suite {_suite.name!r} matches filter {FILTER!r}")


@pytest.mark.parametrize("spec", CASES, ids=[f"{c.label}-{c.shape}-{c.dtype}" for c in CASES])
def test_case(perfci_benchmark, spec):
    import torch

    from perfci.kernel import Unsupported
    from perfci.kernel_registry import get_backend

    device = perfci_benchmark.device
    if device not in _suite.devices:  # perfci run refuses such a run outright
        pytest.skip(f"suite {_suite.name!r} is sized for {', '.join(_suite.devices)}, not {device}")
    torch_device = torch.device("cuda", 0) if device == "cuda" else torch.device("cpu")
    try:
        prepared = get_backend(spec.kernel).prepare(spec, torch_device, SEED)
    except Unsupported as err:  # a 'skip' row, as perfci run records it
        perfci_benchmark.unsupported(str(err), kernel=spec.label, shape=(spec.m, spec.n, spec.k), dtype=spec.dtype,
                                     group=spec.group, weight=spec.weight)
    try:
        perfci_benchmark(prepared.run, kernel=spec.label, shape=(spec.m, spec.n, spec.k), dtype=spec.dtype,
                         reference=prepared.reference, tolerance=prepared.tolerance, setup=prepared.poison,
                         group=spec.group, weight=spec.weight)
    finally:
        # As the worker does between cases: the next case's buffers are placed afresh.
        del prepared
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
