"""Session-wide test setup shared by every test module.

Triton picks the CPU interpreter when a kernel is *decorated*, i.e. when a
kernels module is first imported, so TRITON_INTERPRET must be set before any
test imports one. On a GPU host, run the GPU tests compiled with
``TRITON_INTERPRET=0 python -m pytest -m gpu``.

Tests marked ``slow`` (whole nights, live confirms, benchmark sessions, the smoke
suite: 10 s to 3 minutes each on a 2-core machine) are left out of
``python -m pytest`` by pyproject.toml's ``-m 'not slow'``; ``python -m pytest -m slow``
runs them, ``-m ""`` runs everything. CI (.ci/run) runs both and prints how long each took.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if not torch.cuda.is_available():
        reason = "needs a CUDA or ROCm GPU"
    elif os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        reason = "TRITON_INTERPRET is set; run GPU tests with TRITON_INTERPRET=0"
    else:
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason=reason))
