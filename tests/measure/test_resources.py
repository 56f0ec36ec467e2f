"""perfci run's record of the compiled kernels a case timed (perfci/measure/resources.py).

No GPU here: the AMD path is checked on a kernel Triton cross-compiles for gfx942
(the same CompiledKernel type JITFunction.run returns on the device), against
what ``perfci compile`` reports for the same case; the NVIDIA path on a stand-in
with the n_regs / n_spills a loaded kernel carries; the CPU interpreter records each
launch's config and source, and no resources.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfci.compile.arches import ARCHES
from perfci.measure.resources import kernel_record, launch_fields, record_launches, records_from_result
from perfci.model import CaseSpec, KernelRecord

ROOT = Path(__file__).resolve().parents[2]

SPILLING = CaseSpec("matmul_tiled", 4096, 4096, 4096, "bf16",
                    variant={"block_m": 256, "block_n": 256, "epilogue": "bias_gelu"})


def _cross_compile(spec: CaseSpec, arch_name: str):
    """(the planned launch, the CompiledKernel) as perfci compile builds it."""
    from perfci.compile.build import _triton
    from perfci.compile.plan import plan_case
    from perfci.kernel_registry import get_backend

    triton, ast_source, gpu_target = _triton()  # first: it leaves the interpreter off for the compile
    from triton import knobs

    arch = ARCHES[arch_name]
    launch = plan_case(spec, arch, get_backend(spec.kernel))[0]
    fn = getattr(importlib.import_module(launch.module), launch.kernel)
    signature, constexprs, attrs = launch.specialize(arch, bool(knobs.amd.use_buffer_ops))
    kernel = triton.compile(ast_source(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                            target=gpu_target(arch.backend, arch.target_arch, arch.warp_size),
                            options=dict(launch.options))
    return launch, kernel


def compiled_json() -> str:
    """The record and perfci compile's report of SPILLING on gfx942, as JSON (run in a fresh process)."""
    import json
    from dataclasses import asdict

    from perfci.compile.build import compile_case

    launch, kernel = _cross_compile(SPILLING, "gfx942")
    kwargs = {name: value[1] for name, value in launch.params if isinstance(value, tuple)}
    record = kernel_record(kernel, launch.grid, {**kwargs, **dict(launch.options)}, "gfx942")
    report = compile_case(SPILLING, ARCHES["gfx942"]).kernels[0]
    return json.dumps({"record": asdict(record), "report": asdict(report)})


def in_fresh_process(function: str) -> dict:
    """JSON from ``function`` of this module, run where the kernels are decorated for compiling,
    not for the interpreter (tests/conftest.py sets TRITON_INTERPRET=1 here)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", f"from tests.measure.test_resources import {function}; "
                           f"print({function}())"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_spilling_gfx942_kernel_records_what_perfci_compile_reports():
    data = in_fresh_process("compiled_json")
    rec = data["record"]
    record = KernelRecord(rec["name"], tuple(map(tuple, rec["launch"])), tuple(map(tuple, rec["resources"])))
    report = data["report"]
    assert record.name == "matmul_tiled_kernel"
    assert int(record.value("spills")) == report["spills"] > 0  # fails if spills read 0
    assert int(record.value("regs")) == report["registers"] and int(record.value("vgprs")) == report["vgprs"]
    assert int(record.value("shared")) == report["shared_bytes"] > 0
    assert int(record.value("occupancy")) == report["occupancy"]["value"]
    assert record.value("occ_limit") == report["occupancy"]["limiter"]
    assert record.value("grid") == "256x1x1"  # 16 x 16 tiles of 256 x 256
    assert (record.value("BLOCK_M"), record.value("BLOCK_N"), record.value("num_warps")) == ("256", "256", "8")
    assert record.value("waves_per_eu") == "2" and record.value("num_stages") != ""
    assert "EPILOGUE" not in dict(record.launch)  # only integer constexprs are config


def test_nvidia_reads_the_loaded_kernels_registers_and_occupancy():
    kernel = SimpleNamespace(name="gemv_kernel", asm={"ptx": ""}, n_regs=168, n_spills=0,
                             metadata=SimpleNamespace(shared=98304, num_warps=8, num_stages=3))
    record = kernel_record(kernel, (1024,), {"BLOCK_N": 128, "num_warps": 8}, "sm_90")
    assert dict(record.resources) == {"regs": "168", "spills": "0", "shared": "98304",
                                      "occupancy": "8", "occ_limit": "registers"}  # 168 x 32 regs a warp: 12 warps, 1 block of 8
    assert dict(record.launch) == {"grid": "1024x1x1", "BLOCK_N": "128", "num_warps": "8", "num_stages": "3"}
    # an arch the occupancy tables do not know: the counts, no occupancy
    assert "occupancy" not in dict(kernel_record(kernel, (1,), {}, "sm_80").resources)


def test_launch_fields_take_metadata_over_arguments():
    md = SimpleNamespace(num_warps=4, num_stages=2, waves_per_eu=0, matrix_instr_nonkdim=16, kpack=1)
    fields = launch_fields((2, 3), {"BLOCK_K": 64, "M_FAST": True, "num_warps": 8, "lower": 1}, md)
    assert fields == {"grid": "2x3x1", "BLOCK_K": "64", "M_FAST": "1", "num_warps": "4", "num_stages": "2",
                      "waves_per_eu": "0", "matrix_instr_nonkdim": "16", "kpack": "1"}


def _prepared(launches):
    def run():
        return None

    run.launches = launches
    return SimpleNamespace(run=run)


def test_record_launches_reads_every_kernel_and_never_raises():
    kernel = SimpleNamespace(name="k", asm={}, n_regs=32, n_spills=4, metadata=SimpleNamespace(shared=0, num_warps=4))
    good = SimpleNamespace(warmup=lambda *a, grid, **kw: kernel)
    out = record_launches(_prepared(((good, (8,), (1,), {"BLOCK": 1024}),) * 2), "sm_90", True)
    assert [k["name"] for k in out["kernels"]] == ["k", "k"]
    assert out["kernels"][0]["resources"]["spills"] == "4"
    records = records_from_result(out)
    assert records[0].value("BLOCK") == "1024" and records[0].value("regs") == "32"

    def boom(*a, grid, **kw):
        raise RuntimeError("no device")

    note = record_launches(_prepared(((SimpleNamespace(warmup=boom), (1,), (), {}),)), "sm_90", True)
    assert note == {"kernels_note": "compiled resources not read (RuntimeError: no device)"}
    # The interpreter compiles nothing: the launch as its host code passed it, no resources.
    cpu = record_launches(_prepared(((good, (8,), (), {"BLOCK": 1024, "num_warps": 4}),)), "cpu", False)
    assert cpu["kernels"][0]["launch"] == {"grid": "8x1x1", "BLOCK": "1024", "num_warps": "4"}
    assert cpu["kernels"][0]["resources"] == {}
    assert records_from_result({}) == ()


@pytest.mark.parametrize("kernel, n_launches", [("matmul_tiled", 1), ("splitk_decode", 2), ("gemv", 1),
                                                ("matmul_persistent", 1), ("torch_matmul", 0)])
def test_launchers_name_their_launches_and_the_interpreter_records_their_configs(kernel, n_launches, monkeypatch):
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from perfci.kernel_registry import get_backend

    spec = CaseSpec(kernel, 1 if kernel == "gemv" else 16, 64, 64, "fp32")
    prepared = get_backend(kernel).prepare(spec, torch.device("cpu"), 0)
    launches = getattr(prepared.run, "launches", ())
    assert len(launches) == n_launches
    for fn, grid, args, kwargs in launches:
        assert callable(getattr(fn, "warmup", None)) and len(grid) >= 1 and args
    kernels = records_from_result(record_launches(prepared, "cpu", False))
    assert [k.name for k in kernels] == [fn.__name__ for fn, *_ in launches]
    for k, (_, _, _, kwargs) in zip(kernels, launches):
        assert k.resources == () and len(k.source) == 16 and k.value("grid")
        assert {key: value for key, value in k.config} == {
            key: str(int(v)) for key, v in kwargs.items()
            if isinstance(v, int) and (key.isupper() or key in ("num_warps", "num_stages"))}


TEAM_KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * 2.0, mask=offs < n)


def scale(x, y, block):  # the config as a team's autotuner would have chosen it (none runs on the CPU)
    scale_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
"""


def test_a_team_s_kernel_in_the_interpreter_has_its_config_and_source_recorded(tmp_path, monkeypatch):
    # Two configs of one source give one source hash; the same kernel with its body changed another.
    import importlib.util

    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")

    def load(name: str, text: str):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    team, changed = load("team_a", TEAM_KERNEL), load("team_b", TEAM_KERNEL.replace("x * 2.0", "x * 3.0"))
    x, y = torch.randn(100), torch.empty(100)

    def recorded(module, block):
        (k,) = records_from_result(record_launches(SimpleNamespace(run=lambda: module.scale(x, y, block)),
                                                   "cpu", False))
        return k

    small, large, other = recorded(team, 32), recorded(team, 64), recorded(changed, 32)
    assert small.name == "scale_kernel" and small.launch == (("grid", "4x1x1"), ("BLOCK", "32"))
    assert large.config == (("BLOCK", "64"),) and large.value("grid") == "2x1x1"
    assert small.source == large.source != other.source != ""
    assert torch.equal(y, x * 3.0)  # the observed run still ran the kernel


def test_the_runner_carries_the_workers_kernel_records_into_the_result(tmp_path):
    # What a worker on a GPU writes: the case's compiled kernels, which must reach the CSV's columns.
    import json

    from perfci.measure.runner import _collect
    from perfci.model import CaseSpec

    data = {"status": "ok", "iters": 70, "repeats": [{"median_us": 10.0}],
            "kernels": [{"name": "gemv_kernel", "launch": {"grid": "48x1x1", "num_warps": 4},
                         "resources": {"registers": 40, "spills": 0}}]}
    (tmp_path / "res.json").write_text(json.dumps(data))
    result, _ = _collect(CaseSpec("gemv", 1, 1024, 6144, "bf16"), 0, tmp_path / "res.json", tmp_path / "log")
    (record,) = result.kernels
    assert record.name == "gemv_kernel" and dict(record.launch)["grid"] == "48x1x1"
    assert dict(record.resources) == {"registers": "40", "spills": "0"}


def observed_json() -> str:
    """record_launches on a kernel perfci did not write (no ``run.launches``), on a stand-in device (fresh process)."""
    import importlib.util

    import torch
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    spec = importlib.util.spec_from_file_location("team_tuned", ROOT / "tests" / "data" / "compile" / "team_tuned.py")
    team = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(team)

    def device(self, *args, grid, warmup, **kwargs):  # the GPU's launcher: a compiled kernel per launch
        return SimpleNamespace(name=self.fn.__name__, asm={}, n_regs=40 + kwargs["BLOCK_N"] // 32, n_spills=0,
                               metadata=SimpleNamespace(shared=0, num_warps=kwargs["num_warps"], num_stages=3))

    JITFunction.run = device
    Autotuner.run = lambda self, *a, **kw: self.fn.run(*a, **kw, **self.configs[1].all_kwargs())  # "tuned"
    a, b = torch.randn(4, 32), torch.randn(32, 64)
    return json.dumps(record_launches(SimpleNamespace(run=lambda: team.tuned_mm(a, b)), "sm_90", True))


def test_a_kernel_perfci_did_not_write_has_its_launches_observed_and_recorded():
    kernels = in_fresh_process("observed_json")["kernels"]
    assert [k["name"] for k in kernels] == ["rowdot_kernel"]  # the launch the autotuner chose, once
    launch, resources = kernels[0]["launch"], kernels[0]["resources"]
    assert (launch["grid"], launch["BLOCK_N"], launch["BLOCK_K"], launch["num_warps"]) == ("4x1x1", "64", "16", "4")
    assert resources["regs"] == "42" and resources["occupancy"] != ""
    assert len(kernels[0]["source"]) == 16  # the JIT function's cache_key and its autotuner's configs, hashed
    assert kernels[0]["autotuned"] is True


def library_cache_json() -> str:
    """record_launches where a library launches a kernel from its own cache of compiled kernels (fresh process)."""
    from triton.compiler.compiler import CompiledKernel

    CompiledKernel.__getitem__ = lambda self, grid: (lambda *args: None)  # the GPU's launcher
    cached = object.__new__(CompiledKernel)  # as FlagGems' LibEntry keeps it after the first call
    cached.name, cached.asm, cached.n_regs, cached.n_spills = "mm_kernel", {}, 128, 0
    cached.metadata = SimpleNamespace(shared=65536, num_warps=8, num_stages=3)
    cached.src = SimpleNamespace(fn=SimpleNamespace(arg_names=["a", "b", "c", "BLOCK_M", "BLOCK_N"],
                                                    cache_key="9f86d081884c7d65"),  # the JIT function's
                                 constants={(3,): 128, (4,): 64})
    return json.dumps(record_launches(SimpleNamespace(run=lambda: cached[(32, 64, 1)]("a", "b", "c")), "sm_90", True))


def test_a_kernel_a_library_launches_from_its_own_cache_is_recorded_with_its_config():
    kernels = in_fresh_process("library_cache_json")["kernels"]
    assert [k["name"] for k in kernels] == ["mm_kernel"]
    launch, resources = kernels[0]["launch"], kernels[0]["resources"]
    assert (launch["grid"], launch["BLOCK_M"], launch["BLOCK_N"], launch["num_warps"]) == ("32x64x1", "128", "64", "8")
    assert (resources["regs"], resources["shared"]) == ("128", "65536")
    # its source: the hash of the JIT function's cache_key, the same whatever config the library chose
    assert kernels[0]["source"] == hashlib.sha256(b"9f86d081884c7d65").hexdigest()[:16]
    assert kernels[0]["autotuned"] is False  # no autotuner wraps it


TUNED_KERNEL = """\
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def tuned_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)
"""


def test_a_library_s_cached_kernel_is_known_autotuned_by_the_autotuner_that_wraps_it(tmp_path, monkeypatch):
    # A library launches its compiled kernel from a cache of its own after the first call: no autotuner
    # runs then, but one (Triton's, or the library's built on it) still wraps the JIT function.
    import importlib.util

    from perfci.compile.capture import _Compiled
    from perfci.measure.resources import source_id, tuner_of

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / "lib_tuned.py"
    path.write_text(TUNED_KERNEL)
    spec = importlib.util.spec_from_file_location("lib_tuned", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tuner = module.tuned_kernel
    cached = _Compiled(SimpleNamespace(name="tuned_kernel", src=SimpleNamespace(fn=tuner.fn)))
    assert tuner_of(cached) is tuner
    assert tuner_of(tuner.fn) is None  # launched as it is, never seen under an autotuner: its host code chose
    # The autotuner's configs are part of the source: another list of configs is another source.
    hashed = source_id(cached, tuner)
    assert hashed != source_id(cached) != ""
    tuner.configs = tuner.configs[:1]
    assert source_id(cached, tuner) != hashed
