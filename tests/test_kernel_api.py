"""perfci.kernel and perfci.kernel_registry: declaring a kernel, wrapping a plain GEMM, resolving a suite's word.

The CPU runs here go through perfci's own correctness gate (perfci.measure.gate),
as the measuring worker does; tests/kernels/test_install_name.py runs them end
to end with ``perfci run`` in a repository of their own.
"""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

from perfci.errors import PerfciError
from perfci.kernel import TOLERANCE, Backend, Prepared, gemm
from perfci.kernel_registry import KernelRegistry
from perfci.model import CaseSpec


def _unused_prepare(spec, device, seed):  # declarations are checked without ever preparing
    raise AssertionError("not called")


def _gate(prepared):
    import torch

    from perfci.measure.gate import correctness_gate

    _, error, wrong = correctness_gate(torch, prepared, lambda: None)
    return error, wrong


# --------------------------------------------------------------------------- declaring


def test_the_decorator_declares_a_backend_and_the_declaration_is_checked_without_torch():
    code = textwrap.dedent("""
        import sys
        from perfci.kernel import backend
        from perfci.model import CaseSpec

        @backend("mine", dtypes=("fp16", "bf16"), variant_keys={"block_m"}, epilogues=("none", "bias"),
                 check=lambda s: "m too big" if s.m > 64 else None)
        def mine(spec, device, seed):
            '''My GEMM.'''

        def reason(**kw):
            base = dict(kernel="mine", m=16, n=64, k=64, dtype="fp16")
            return mine.check_case(CaseSpec(**{**base, **kw}))

        print(mine.name, mine.description, sorted(mine.accepted_keys))
        print(reason())
        print(reason(dtype="fp32"))
        print(reason(variant={"block_n": 64}))
        print(reason(variant={"epilogue": "bias_gelu"}))
        print(reason(variant={"epilogue": "bias"}))
        print(reason(m=65))
        print("torch" in sys.modules, "triton" in sys.modules)
    """)
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines == [
        "mine My GEMM. ['block_m', 'epilogue']",
        "None",
        "mine does not support dtype fp32 (it takes fp16, bf16)",
        "mine has no variant key(s) block_n (allowed: block_m, epilogue)",
        "mine: variant epilogue must be one of none, bias, got 'bias_gelu'",
        "None",
        "m too big",
        "False False",
    ]


@pytest.mark.parametrize("fields, fragment", [
    ({"name": "has space"}, "the name must start"),
    ({"name": "x[1]"}, "the name must start"),
    ({"dtypes": ("fp64",)}, "dtypes ['fp64']"),
    ({"dtypes": ()}, "non-empty subset"),
    ({"epilogues": ("bias",)}, "must include 'none'"),
    ({"epilogues": ("none", "tanh")}, "must include 'none' and come from"),
    ({"variant_keys": {"epilogue"}}, "declare epilogues=(...)"),
    ({"check": 3}, "check must be callable"),
    ({"prepare": None}, "prepare must be callable"),
])
def test_a_wrong_declaration_says_what_is_wrong(fields, fragment):
    with pytest.raises(ValueError, match="Backend") as err:
        Backend(**{"name": "k", "prepare": _unused_prepare, **fields})
    assert fragment in str(err.value)


def test_prepare_case_refuses_before_preparing_and_wants_a_prepared():
    called = []
    declared = Backend("k", lambda spec, device, seed: called.append(spec) or "not prepared", dtypes=("fp32",))
    with pytest.raises(ValueError, match="does not support dtype fp16"):
        declared.prepare_case(CaseSpec("k", 4, 8, 16, "fp16"), "cpu", 0)
    assert called == []
    with pytest.raises(TypeError, match="prepare returned a str, not a perfci.kernel.Prepared"):
        declared.prepare_case(CaseSpec("k", 4, 8, 16, "fp32"), "cpu", 0)


# --------------------------------------------------------------------------- plain callables


def matmul_into(a, b, out=None):
    """A GEMM that writes into out= (as library kernels do)."""
    import torch

    return torch.matmul(a, b, out=out)


def matmul_fresh(a, b):
    return a @ b


def matmul_of_weight(a, w):
    return a @ w.t()


def writes_nothing(a, b, out):
    return out


def wrong_shape(a, b):
    return (a @ b)[:, 1:]


@pytest.mark.parametrize("fn, layout, takes_out", [
    (matmul_into, "col", True),
    (matmul_fresh, "col", False),
    (matmul_fresh, "row", False),
    (matmul_of_weight, "weight", False),
    ("torch.matmul", "col", True),  # a builtin: no signature; one call with out= decides
])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_a_plain_gemm_passes_the_gate_with_perfcis_inputs(fn, layout, takes_out, dtype):
    import torch

    fn = torch.matmul if fn == "torch.matmul" else fn
    wrapped = gemm(fn, "plain")
    spec = CaseSpec("plain", 5, 24, 40, dtype, {"b_layout": layout})
    assert wrapped.check_case(spec) is None
    prepared = wrapped.prepare_case(spec, "cpu", 3)
    assert isinstance(prepared, Prepared) and prepared.tolerance == TOLERANCE[dtype]
    error, wrong = _gate(prepared)
    assert wrong is None and error <= prepared.tolerance
    assert prepared.result().dtype == {"fp32": torch.float32, "fp16": torch.float16}[dtype]
    # out= callables write the one preallocated buffer; the others hand back a fresh result.
    assert (prepared.output is prepared.result()) == takes_out


def test_the_layouts_hand_b_over_as_declared():
    import torch

    seen = {}

    def spy(a, b):
        seen["b"] = b
        return a @ b if b.shape[0] == a.shape[1] else a @ b.t()

    for layout, shape, contiguous in [("col", (40, 24), False), ("row", (40, 24), True), ("weight", (24, 40), True)]:
        gemm(spy, "spy", b_layout=layout).prepare_case(CaseSpec("spy", 5, 24, 40, "fp32"), "cpu", 0).run()
        assert tuple(seen["b"].shape) == shape and seen["b"].is_contiguous() == contiguous
        assert seen["b"].dtype == torch.float32


@pytest.mark.parametrize("fn, message", [
    (writes_nothing, None),  # the NaN poison stays: infinite error
    (wrong_shape, "the kernel's output has shape (5, 23); the case needs (5, 24)"),
    (lambda a, b: None, "the kernel's output is a NoneType, not a tensor"),
])
def test_a_plain_gemm_that_is_wrong_fails_the_gate(fn, message):
    prepared = gemm(fn, "bad").prepare_case(CaseSpec("bad", 5, 24, 40, "fp32"), "cpu", 0)
    error, wrong = _gate(prepared)
    assert math.isinf(error) and wrong == message


def test_gemm_refuses_what_it_cannot_feed():
    with pytest.raises(ValueError, match="fp8"):
        gemm(matmul_fresh, "x", dtypes=("fp16", "fp8"))
    with pytest.raises(ValueError, match="b_layout 'nk'"):
        gemm(matmul_fresh, "x", b_layout="nk")
    with pytest.raises(TypeError, match="not callable"):
        gemm(3, "x")
    reason = gemm(matmul_fresh, "x").check_case(CaseSpec("x", 4, 8, 16, "fp16", {"b_layout": "diag"}))
    assert reason == "x: variant b_layout must be one of col, row, weight, got 'diag'"
    assert gemm(matmul_fresh).name == "tests.test_kernel_api:matmul_fresh"


# --------------------------------------------------------------------------- resolving a suite's word


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project root with uniquely named kernel modules (module caches are per process)."""
    counter = [0]

    def write(body: str) -> str:
        counter[0] += 1
        name = f"kapi_{tmp_path.name.replace('-', '_')}_{counter[0]}"
        (tmp_path / f"{name}.py").write_text(body)
        return name

    monkeypatch.setattr(sys, "path", list(sys.path))  # the registry puts the root first; undone after
    return tmp_path, write


DECLARE = """\
from perfci.kernel import Backend, gemm


def mm(a, b):
    return a @ b
"""


def test_an_import_path_names_a_callable_or_a_backend(project):
    root, write = project
    module = write(DECLARE + "DECLARED = gemm(mm, 'declared', dtypes=('fp32',))\nNUMBER = 7\n")
    registry = KernelRegistry(root=root, installed=False)
    plain = registry.backend(f"{module}:mm")
    assert plain.name == f"{module}:mm" and plain.dtypes == ("fp32", "fp16", "bf16")
    assert registry.backend(f"{module}:DECLARED").dtypes == ("fp32",)
    assert registry.check(CaseSpec(f"{module}:DECLARED", 4, 8, 16, "fp16")) == \
        f"{module}:DECLARED does not support dtype fp16 (it takes fp32)"
    assert registry.backend("torch:matmul").name == "torch:matmul"


@pytest.mark.parametrize("word, fragment", [
    ("no_such_module_anywhere:gemm", "cannot import no_such_module_anywhere (ModuleNotFoundError: No module named"),
    ("{m}:missing", "{m} has no attribute missing"),
    ("{m}:NUMBER", "{m}.NUMBER is of type int, neither a perfci.kernel.Backend nor a callable"),
    ("{m}:", "an import path is package.module:object"),
    ("{m}:mm:x", "an import path is package.module:object"),
    ("{m}_raising:mm", "(RuntimeError: no GPU here)"),
    ("not_registered", "unknown kernel 'not_registered'; known: none (or give an import path"),
])
def test_a_word_that_names_nothing_runnable_is_one_line(project, word, fragment):
    root, write = project
    module = write(DECLARE + "NUMBER = 7\n")
    (root / f"{module}_raising.py").write_text("raise RuntimeError('no GPU here')\n")
    registry = KernelRegistry(root=root, installed=False)
    reason = registry.check(CaseSpec(word.format(m=module), 4, 8, 16, "fp32"))
    assert fragment.format(m=module) in reason and "\n" not in reason
    with pytest.raises(PerfciError):
        registry.backend(word.format(m=module))


EXITS_AT_IMPORT = [
    ("import sys\nsys.exit(0)\n", "(it called sys.exit(0) while importing)"),
    ("import sys\nsys.exit()\n", "(it called sys.exit(None) while importing)"),
    ("raise SystemExit('kernels need a GPU')\n", "(it called sys.exit('kernels need a GPU') while importing)"),
    ("import pytest\npytest.skip('no GPU', allow_module_level=True)\n", "(Skipped: no GPU)"),
    ("class Odd(BaseException):\n    pass\nraise Odd('odd')\n", "(Odd: odd)"),
]


@pytest.mark.parametrize("body, fragment", EXITS_AT_IMPORT, ids=["exit-0", "exit", "exit-message", "pytest-skip",
                                                                  "base-exception"])
def test_a_kernel_module_that_exits_or_skips_at_import_is_one_line_naming_it(project, body, fragment):
    root, write = project
    module = write(body)
    listed = KernelRegistry([module], root, installed=False)
    with pytest.raises(PerfciError) as listed_err:
        listed.project()
    assert f"cannot import {module} {fragment}" in listed_err.value.message
    path = KernelRegistry(root=root, installed=False)
    reason = path.check(CaseSpec(f"{module}:mm", 4, 8, 16, "fp32"))
    assert reason.startswith(f"kernel '{module}:mm': cannot import {module} ") and fragment in reason


def test_ctrl_c_while_a_kernel_module_imports_stays_an_interruption(project):
    root, write = project
    module = write("raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        KernelRegistry([module], root, installed=False).project()


def test_project_modules_declare_explicitly_and_a_name_twice_is_an_error(project):
    root, write = project
    first = write(DECLARE + "BACKENDS = [gemm(mm, 'same'), gemm(mm, 'only_first')]\n")
    second = write(DECLARE + "BACKENDS = (gemm(mm, 'same'),)\n")
    ok = KernelRegistry([first], root, installed=False)
    assert sorted(ok.project()) == ["only_first", "same"] and ok.project()["same"].module == first
    twice = KernelRegistry([first, second], root, installed=False)
    for _ in range(2):  # and again: a failed load leaves no half registry behind
        with pytest.raises(PerfciError, match=f"kernel 'same' is declared twice, by {first} and {second}"):
            twice.backend("only_first")


@pytest.mark.parametrize("body, fragment", [
    (DECLARE, "declares no BACKENDS"),
    (DECLARE + "BACKENDS = mm\n", "BACKENDS must be a list"),
    (DECLARE + "BACKENDS = [mm]\n", "BACKENDS[0] is a function, not a perfci.kernel.Backend; wrap a plain GEMM"),
    (DECLARE + "BACKENDS = [gemm(mm, 'a:b')]\n", "kernel name 'a:b' holds ':'"),
    (DECLARE + "BACKENDS = [Backend('x y', mm)]\n", "cannot import"),
])
def test_a_kernel_module_that_declares_wrongly_is_one_line(project, body, fragment):
    root, write = project
    module = write(body)
    with pytest.raises(PerfciError) as err:
        KernelRegistry([module], root, where="pyproject.toml: tool.perfci.kernels", installed=False).project()
    assert fragment in err.value.message and "\n" not in err.value.message


def test_a_project_kernel_shadows_an_installed_one_of_the_same_name(project):
    root, write = project
    module = write(DECLARE + "BACKENDS = [gemm(mm, 'torch_matmul')]\n")
    registry = KernelRegistry([module], root)
    assert registry.backend("torch_matmul").description.startswith("plain GEMM callable")
    listed = {r.backend.name: (r.module, r.shadows) for r in registry.catalogue()}
    assert listed["torch_matmul"] == (module, "perfci_kernels.backends")
    assert listed["gemv"] == ("perfci_kernels.backends", "")  # what the project does not declare stays installed


def test_two_installed_libraries_declaring_one_name_refuse_it_and_keep_the_rest(project, monkeypatch):
    from perfci import kernel_registry

    root, write = project
    lib_a = write(DECLARE + "BACKENDS = [gemm(mm, 'shared'), gemm(mm, 'only_a')]\n")
    lib_b = write(DECLARE + "BACKENDS = [gemm(mm, 'shared')]\n")
    broken = write("raise ImportError('needs a GPU driver')\n")
    sys.path.insert(0, str(root))  # installed libraries are on the path already

    class EntryPoint:
        def __init__(self, value):
            self.value = value

        def load(self):
            import importlib

            return importlib.import_module(self.value)

    monkeypatch.setattr(kernel_registry, "_entry_points", lambda: [EntryPoint(lib_a), EntryPoint(lib_b),
                                                                   EntryPoint(broken)])
    registry = KernelRegistry(root=root)
    assert registry.backend("only_a").name == "only_a"
    assert registry.check(CaseSpec("shared", 4, 8, 16, "fp32")) == (
        f"kernel 'shared' is declared by two installed libraries ({lib_a}, {lib_b}); uninstall one, "
        f"or declare the one you mean in [tool.perfci] kernels")
    assert f"kernel libraries that failed to import: {broken}: ImportError: needs a GPU driver" in \
        registry.check(CaseSpec("nowhere", 4, 8, 16, "fp32"))
