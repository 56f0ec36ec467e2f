"""kernels/backends.py (perfci_kernels.backends): the declared list, pure checks, and every backend's own
correctness gate on the CPU."""
import math
import subprocess
import sys

import pytest

from perfci.errors import PerfciError
from perfci.kernel import TOLERANCE, Backend, Unsupported
from perfci.kernel_registry import KernelRegistry
from perfci.model import CaseSpec
from perfci_kernels.backends import BACKENDS

BY_NAME = {b.name: b for b in BACKENDS}


def get_backend(name):
    return BY_NAME[name]

NAMES = ["matmul_tiled", "splitk_decode", "gemv", "matmul_persistent", "torch_matmul", "perfci_canary"]


def _interpreting():
    import os

    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


needs_interpreter = pytest.mark.skipif(not _interpreting(), reason="CPU backend tests need TRITON_INTERPRET=1")


def _rel_err(out, ref):
    import torch

    out64, ref64 = out.detach().double().cpu(), ref.detach().double().cpu()
    if not torch.isfinite(out64).all():
        return math.inf
    return (torch.linalg.vector_norm(out64 - ref64) / torch.linalg.vector_norm(ref64)).item()


def _gate(prepared):
    """What the worker does before timing: poison, run once, compare."""
    prepared.poison()
    prepared.run()
    return _rel_err(prepared.output, prepared.reference())


def test_the_list_is_explicit_and_complete():
    assert [b.name for b in BACKENDS] == NAMES
    for backend in BACKENDS:
        assert isinstance(backend, Backend)
        assert set(backend.dtypes) <= {"fp32", "fp16", "bf16", "fp8"}


def test_the_installed_library_registers_them_and_an_unknown_name_is_one_line():
    # The perfci.kernels entry point of perfci's own distribution (no project modules here).
    registry = KernelRegistry()
    assert {n: r.module for n, r in registry.installed().items() if n in NAMES} == \
        {n: "perfci_kernels.backends" for n in NAMES}
    assert registry.backend("gemv") is BY_NAME["gemv"]
    with pytest.raises(PerfciError, match="unknown kernel 'cublas'; known: gemv, matmul_persistent"):
        registry.backend("cublas")


def test_module_and_checks_need_no_torch():
    code = (
        "import sys; from perfci_kernels.backends import BACKENDS; from perfci.model import CaseSpec; "
        "[b.check_case(CaseSpec(b.name, 1, 64, 64, 'fp16')) for b in BACKENDS]; "
        "print('torch' in sys.modules, 'triton' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]


# (kernel, m, n, k, dtype, variant) -> CPU-sized cases with masked edges.
CPU_CASES = [
    ("matmul_tiled", 37, 45, 70, {}),
    ("matmul_tiled", 20, 24, 40, {"epilogue": "bias_gelu", "group_m": 1, "block_n": 32}),
    ("matmul_tiled", 20, 24, 40, {"epilogue": "bias_silu"}),
    ("splitk_decode", 17, 40, 100, {"m_fast": 0}),
    ("splitk_decode", 64, 40, 100, {"m_fast": 1, "split_k": 3}),
    ("splitk_decode", 1, 24, 50, {"block_k": 32}),
    ("gemv", 1, 45, 70, {}),
    ("gemv", 1, 17, 33, {"block_n": 4, "block_k": 16}),
    ("matmul_persistent", 50, 61, 40, {}),
    ("torch_matmul", 37, 45, 70, {}),
]


@needs_interpreter
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("kernel, m, n, k, variant", CPU_CASES)
def test_backend_passes_its_own_gate_on_cpu(kernel, m, n, k, variant, dtype):
    import torch

    spec = CaseSpec(kernel, m, n, k, dtype, variant)
    backend = get_backend(kernel)
    assert backend.check_case(spec) is None
    prepared = backend.prepare_case(spec, torch.device("cpu"), 1234)
    error = _gate(prepared)
    assert error <= prepared.tolerance
    assert prepared.tolerance == TOLERANCE[dtype]
    # The run thunk writes the same buffer every time: nothing is allocated in it.
    ptr = prepared.output.data_ptr()
    prepared.run()
    assert prepared.output.data_ptr() == ptr


@needs_interpreter
def test_torch_matmul_bf16_on_cpu():
    import torch

    prepared = get_backend("torch_matmul").prepare_case(CaseSpec("torch_matmul", 8, 16, 32, "bf16"), torch.device("cpu"), 0)
    assert _gate(prepared) <= prepared.tolerance


@needs_interpreter
def test_inputs_are_seeded_random_normals():
    import torch

    spec = CaseSpec("torch_matmul", 64, 64, 64, "fp32")
    p1 = get_backend("torch_matmul").prepare_case(spec, torch.device("cpu"), 7)
    p2 = get_backend("torch_matmul").prepare_case(spec, torch.device("cpu"), 7)
    p3 = get_backend("torch_matmul").prepare_case(spec, torch.device("cpu"), 8)
    r1, r2, r3 = p1.reference(), p2.reference(), p3.reference()
    assert torch.equal(r1, r2)
    assert not torch.equal(r1, r3)
    # ~N(0, 1) outputs: the weight's 1/sqrt(K) scaling keeps fp16 far from overflow.
    assert 0.5 < r1.std().item() < 2.0


class _OneProgramShort:
    """Stands in for a JIT kernel and launches it with its largest grid axis cut by one.

    That is what a broken config or grid computation does: some tiles are never
    written, and only the NaN poison can reveal it."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        grid = list(grid)
        axis = grid.index(max(grid))
        grid[axis] -= 1
        return self.kernel[tuple(grid)]


@needs_interpreter
@pytest.mark.parametrize(
    "kernel, module, attr",
    [
        ("matmul_tiled", "perfci_kernels.matmul_tiled", "matmul_tiled_kernel"),
        ("splitk_decode", "perfci_kernels.splitk_decode", "splitk_partial_kernel"),
        ("gemv", "perfci_kernels.gemv", "gemv_kernel"),
        ("matmul_persistent", "perfci_kernels.matmul_persistent", "matmul_persistent_kernel"),
    ],
)
def test_broken_launch_is_caught_by_poison(kernel, module, attr, monkeypatch):
    import importlib

    import torch

    spec = CaseSpec(kernel, 1 if kernel == "gemv" else 32, 32, 64, "fp32")
    healthy = get_backend(kernel).prepare_case(spec, torch.device("cpu"), 0)
    assert _gate(healthy) <= healthy.tolerance
    # prepare binds the kernel, so patch before preparing the broken case.
    mod = importlib.import_module(module)
    monkeypatch.setattr(mod, attr, _OneProgramShort(getattr(mod, attr)))
    broken = get_backend(kernel).prepare_case(spec, torch.device("cpu"), 0)
    assert _gate(broken) == math.inf


@needs_interpreter
@pytest.mark.parametrize("kernel", ["matmul_tiled", "splitk_decode", "gemv", "matmul_persistent"])
@pytest.mark.parametrize("dtype, match", [("bf16", "bf16 Triton kernels are unreliable in the interpreter"), ("fp8", "fp8")])
def test_cpu_refuses_bf16_and_fp8_triton_cases(kernel, dtype, match):
    import torch

    spec = CaseSpec(kernel, 1, 32, 32, dtype)
    with pytest.raises(ValueError, match=match):
        get_backend(kernel).prepare_case(spec, torch.device("cpu"), 0)


@needs_interpreter
def test_cpu_refuses_torch_fp8():
    import torch

    with pytest.raises(ValueError, match="_scaled_mm"):
        get_backend("torch_matmul").prepare_case(CaseSpec("torch_matmul", 16, 32, 32, "fp8"), torch.device("cpu"), 0)


@needs_interpreter
def test_amd_variant_on_non_hip_device_is_refused():
    import torch

    spec = CaseSpec("matmul_tiled", 16, 16, 16, "fp32", {"waves_per_eu": 2})
    assert get_backend("matmul_tiled").check_case(spec) is None  # the suite may target MI300
    # prepare raises Unsupported, which the worker records as a skip on this device.
    with pytest.raises(Unsupported, match="only exist on AMD"):
        get_backend("matmul_tiled").prepare_case(spec, torch.device("cpu"), 0)


@pytest.mark.parametrize(
    "spec, fragment",
    [
        (CaseSpec("gemv", 2, 64, 64, "fp16"), "exactly one row (m=1), got m=2"),
        (CaseSpec("splitk_decode", 65, 64, 64, "fp16"), "m <= 64, got m=65"),
        (CaseSpec("matmul_tiled", 0, 64, 64, "fp16"), "m must be a positive integer"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "int8"), "does not support dtype int8"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "fp16", {"m_fast": 1}), "no variant key(s) m_fast"),
        (CaseSpec("torch_matmul", 16, 64, 64, "fp16", {"block_m": 64}), "allowed: none"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "fp16", {"epilogue": "tanh"}), "epilogue must be one of"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "fp16", {"block_k": 48}), "power of two >= 16"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "fp16", {"block_k": "64"}), "power of two"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "fp8", {"block_k": 16}), "fp8 needs block_k >= 32"),
        (CaseSpec("splitk_decode", 16, 64, 64, "fp16", {"m_fast": 2}), "m_fast must be 0 or 1"),
        (CaseSpec("splitk_decode", 16, 64, 64, "fp16", {"split_k": 0}), "split_k must be a positive integer"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "fp16", {"num_warps": 3}), "num_warps must be a power of two"),
        (CaseSpec("matmul_tiled", 16, 64, 64, "fp16", {"matrix_instr_nonkdim": 8}), "must be 0, 16 or 32"),
        (CaseSpec("torch_matmul", 16, 72, 40, "fp8"), "multiples of 16"),
    ],
)
def test_check_rejects_with_a_reason(spec, fragment):
    reason = get_backend(spec.kernel).check_case(spec)
    assert reason is not None and fragment in reason
    # prepare_case refuses the same case with the same words, before touching a device.
    with pytest.raises(ValueError) as err:
        get_backend(spec.kernel).prepare_case(spec, "cpu", 0)
    assert str(err.value) == reason


@pytest.mark.parametrize("name", NAMES)
def test_check_accepts_a_plain_case(name):
    spec = CaseSpec(name, 1, 4096, 4096, "bf16")
    assert get_backend(name).check_case(spec) is None


# --- On a real GPU (skipped here) ---------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8"])
@pytest.mark.parametrize(
    "kernel, m, n, k, variant",
    [
        ("matmul_tiled", 1000, 1024, 2048, {"epilogue": "bias_silu"}),
        ("matmul_persistent", 2048, 2048, 2048, {}),
        ("splitk_decode", 64, 1024, 6144, {"m_fast": 1}),
        ("splitk_decode", 64, 1024, 6144, {"m_fast": 0}),
        ("gemv", 1, 4096, 4096, {}),
        ("torch_matmul", 512, 1024, 2048, {}),
    ],
)
def test_backend_passes_its_own_gate_on_gpu(kernel, m, n, k, variant, dtype):
    import torch

    spec = CaseSpec(kernel, m, n, k, dtype, variant)
    try:
        prepared = get_backend(kernel).prepare_case(spec, torch.device("cuda", 0), 0)
    except ValueError as err:
        # Only fp8 may be refused, and only on a GPU without fp8 units.
        assert dtype == "fp8" and "fp8" in str(err)
        return
    error = _gate(prepared)
    torch.cuda.synchronize()
    assert error <= prepared.tolerance
    # The thunk must be capturable in a CUDA graph (no allocation, no sync).
    graph = torch.cuda.CUDAGraph()
    prepared.poison()
    with torch.cuda.graph(graph):
        prepared.run()
    graph.replay()
    torch.cuda.synchronize()
    assert _rel_err(prepared.output, prepared.reference()) <= prepared.tolerance
