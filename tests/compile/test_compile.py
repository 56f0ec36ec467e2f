"""perfci compile: every decode/prefill case cross-compiles for gfx942, gfx950 and sm_90 without
spilling; the resource parsers on real compiler output; a kernel made to spill exits 1; bad input exits 2."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.compile.arches import ARCHES, amd_occupancy, nvidia_occupancy, parse_arches
from perfci.compile.plan import Launch, Ptr
from perfci.compile.resources import parse_amdgcn, parse_ptxas
from tests.compile.procs import compiler_env

DATA = Path(__file__).resolve().parents[1] / "data" / "compile"
ALL = tuple(ARCHES.values())
# Accepted for now (perfci/compile/report.py ACCEPTED_SPILLS, docs/compile.md): on sm_90 under Triton 3.9's
# ptxas the 128x256 tile with the erf GELU epilogue spills 100 B and the H200-measured 16x64 4-warp split-K
# config 8 B. Nothing fails.
KNOWN_FAILING = {"decode": set(), "prefill": set()}
ACCEPTED = {"decode": lambda r: r.arch == "sm_90" and r.case.label.startswith("splitk_decode"),
            "prefill": lambda r: r.arch == "sm_90" and (r.case.label == "matmul_tiled[epilogue=bias_gelu]"
                                                        or r.case.label.startswith("splitk_decode"))}


ROOT = Path(__file__).resolve().parents[2]


def _compiler_env() -> dict:
    return compiler_env()


def run_compile(argv, capsys=None):
    """`perfci compile ARGV` as a user runs it: (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "perfci", "compile", *argv], capture_output=True, text=True,
                          env=_compiler_env(), cwd=ROOT, timeout=900)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def suite_reports(tmp_path_factory):
    """decode and prefill compiled once for the three arches, in a process of their own."""
    out = tmp_path_factory.mktemp("compile") / "reports.pickle"
    script = ("import pickle, sys\n"
              "from perfci.compile.arches import ARCHES\n"
              "from perfci.compile.build import compile_cases\n"
              "from perfci.suites import load_suite\n"
              "reports = {n: compile_cases(load_suite(n).cases, tuple(ARCHES.values())) for n in ('decode', 'prefill')}\n"
              "pickle.dump(reports, open(sys.argv[1], 'wb'))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True,
                          env=_compiler_env(), cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return pickle.loads(out.read_bytes())


@pytest.mark.parametrize("suite", ["decode", "prefill"])
def test_every_case_compiles_for_every_arch_without_spill_or_overflow(suite_reports, suite):
    reports = suite_reports[suite]
    assert {r.arch for r in reports} == {"gfx942", "gfx950", "sm_90"}
    triton_cases = [r for r in reports if r.case.kernel != "torch_matmul"]
    assert len(triton_cases) >= 3 * 20
    failing = {(r.arch, r.case.label, r.case.shape, r.case.dtype) for r in triton_cases if r.status == "fail"}
    assert failing == KNOWN_FAILING[suite]
    for r in triton_cases:
        arch = ARCHES[r.arch]
        if r.status == "accepted":
            assert ACCEPTED[suite](r) and r.accepted and any(k.spills for k in r.kernels)
            continue
        for k in r.kernels:
            assert k.spills == 0 and 0 <= k.shared_bytes <= arch.shared_per_block
            assert k.registers and k.registers > 0 and 1 <= k.occupancy.value
            if arch.vendor == "amd":
                assert k.vgprs > 0 and k.sgprs > 0 and k.registers >= k.vgprs + k.agprs - 3
    vendor = [r for r in reports if r.case.kernel == "torch_matmul"]
    assert vendor and all(r.status == "vendor" and "vendor library" in r.note for r in vendor)


def test_split_k_reports_both_of_its_kernels(suite_reports):
    splitk = [r for r in suite_reports["decode"] if r.case.kernel == "splitk_decode"]
    assert {tuple(k.kernel for k in r.kernels) for r in splitk} == {("splitk_partial_kernel", "splitk_reduce_kernel")}


def test_golden_gfx942_text_reads_its_spills():
    res = parse_amdgcn((DATA / "matmul_tiled_256x256x64_bf16_w8_s2_wpe2_gfx942_spills.amdgcn").read_text())
    assert (res.name, res.vgprs, res.agprs, res.total_vgprs, res.sgprs) == ("matmul_tiled_kernel", 256, 0, 256, 35)
    assert (res.vgpr_spills, res.sgpr_spills, res.scratch_bytes, res.spills) == (25, 0, 104, 25)


def test_golden_gfx950_text_separates_vgprs_and_agprs():
    res = parse_amdgcn((DATA / "matmul_tiled_256x256x64_bf16_w8_s2_wpe2_gfx950.amdgcn").read_text())
    assert (res.vgprs, res.agprs, res.total_vgprs, res.sgprs, res.spills, res.scratch_bytes) == (128, 128, 256, 40, 0, 0)
    # 256 unified registers per lane -> 2 waves per SIMD; 132 KiB of LDS of 160 -> one 8-wave group per CU
    occ = amd_occupancy(ARCHES["gfx950"], res.total_vgprs, 135104, 8)
    assert (occ.by_registers, occ.by_shared, occ.value) == (2, 2, 2)


def test_amdgcn_without_metadata_is_an_error():
    with pytest.raises(ValueError, match="amdgpu_metadata"):
        parse_amdgcn("s_endpgm\n")
    text = (DATA / "matmul_tiled_256x256x64_bf16_w8_s2_wpe2_gfx950.amdgcn").read_text()
    with pytest.raises(ValueError, match="vgpr_spill_count"):
        parse_amdgcn(text.replace(".vgpr_spill_count", ".vgpr_spill_xx"))


def test_ptxas_log():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : Function properties for k\n"
           "    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
           "ptxas info    : Used 64 registers, used 1 barriers, 8 bytes cumulative stack size\n")
    res = parse_ptxas(log)
    assert (res.name, res.registers, res.stack_bytes, res.spills, res.spill_load_bytes) == ("k", 64, 8, 8, 8)
    with pytest.raises(ValueError):
        parse_ptxas("ptxas info : nothing\n")


def test_occupancy_arithmetic():
    gfx942 = ARCHES["gfx942"]
    assert amd_occupancy(gfx942, 100, 0, 4).value == 4  # 100 -> 104 allocated; 512 // 104
    assert amd_occupancy(gfx942, 96, 0, 4).value == 5
    assert amd_occupancy(gfx942, 64, 0, 4).value == 8  # capped at 8 waves per SIMD
    assert amd_occupancy(gfx942, 64, 40 * 1024, 4).value == 1  # one 40 KiB group per 64 KiB CU, 4 waves / 4 SIMDs
    h = ARCHES["sm_90"]
    occ = nvidia_occupancy(h, 255, 147456, 8)  # 8160 -> 8192 registers per warp: 8 warps; one block of 145 KiB
    assert (occ.value, occ.by_registers) == (8, 8)
    assert nvidia_occupancy(h, 32, 0, 4).value == 64


def test_specialization_follows_the_jit():
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    values = [1, 16, 6144, 7, 224, 2**31]
    launch = Launch("m", "k", tuple((f"x{i}", v) for i, v in enumerate(values)) + (("p", Ptr("bf16", 64)),), (), (1,),
                    None)
    signature, constexprs, attrs = launch.specialize(ARCHES["sm_90"])
    for i, v in enumerate(values):
        kind, spec = native_specialize_impl(BaseBackend, v, False, True, True)
        assert signature[f"x{i}"] == kind
        assert ((i,) in constexprs) == (kind == "constexpr")
        assert ((i,) in attrs) == (spec == "D")
    assert signature["p"] == "*bf16"
    assert attrs[(len(values),)] == [["tt.divisibility", 16]]
    _, _, amd_attrs = launch.specialize(ARCHES["gfx942"])
    assert amd_attrs[(len(values),)] == [["tt.divisibility", 16], ["tt.pointer_range", 32]]


def test_a_kernel_made_to_spill_reads_spills_and_exits_1(tmp_path):
    suite = tmp_path / "spill.toml"
    suite.write_text('name = "spill"\ndevices = ["cuda"]\ndtype = "bf16"\n[[cases]]\nkernel = "matmul_tiled"\n'
                     'variants = [{block_m = 256, block_n = 256, epilogue = "bias_gelu"}]\n'
                     'M = 4096\nN = 4096\nK = 4096\n')
    code, out, _ = run_compile([str(suite), "--arch", "gfx942", "--format", "json"])
    case = json.loads(out)["cases"][0]
    assert code == 1
    assert case["status"] == "fail" and case["spills"] > 0 and case["scratch_bytes"] > 0
    assert case["config"]["BLOCK_M"] == 256 and case["config"]["waves_per_eu"] == 2
    assert {"kernel", "shape", "dtype", "arch", "config", "vgprs", "sgprs", "agprs", "spills", "scratch_bytes",
            "shared_bytes", "occupancy"} <= set(case)


def test_table_and_exit_0_on_a_clean_case():
    code, out, _ = run_compile(["decode", "--arch", "gfx950", "--filter", "kernel=gemv"])
    assert code == 0
    assert "gemv" in out and "4 case(s): 4 ok" in out


@pytest.mark.parametrize("argv, needle", [
    (["decode", "--arch", "gfx1100"], "unknown --arch 'gfx1100'"),
    (["decode", "--arch", ","], "names no architecture"),
    (["nosuchsuite", "--arch", "gfx942"], "unknown suite 'nosuchsuite'"),
    (["decode", "--arch", "sm_90", "--filter", "M>100000"], "matches no case"),
])
def test_bad_input_is_one_line_exit_2(argv, needle):
    code, out, err = run_compile(argv)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_parse_arches_keeps_order_and_drops_repeats():
    assert [a.name for a in parse_arches("sm_90, gfx942,sm_90")] == ["sm_90", "gfx942"]
