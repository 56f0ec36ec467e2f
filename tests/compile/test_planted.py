"""Planted config changes, really cross-compiled, through the resources files and `perfci compile --baseline`.

One prefill case (the 4096x28672x4096 bf16 tile with the erf GELU epilogue) is
compiled with the table's config and with three planted edits, each with a
known effect (docs/compile.md):

- gfx950, BLOCK_N 128 -> 256 (the 256x256 tile the table left because it spilled
  with bias epilogues): 239 VGPR spills under Triton 3.9, a worse case, exit 1;
- gfx942, num_stages 2 -> 3: LDS 48 -> 96 KiB under Triton 3.9, past the 64 KiB a
  workgroup may hold there (occupancy 2 -> 0): worse, exit 1;
- gfx942, GROUP_M 4 -> 8 (tile order only): the config change is reported, the
  resources are the same, exit 0.

And the table's config compiled again without the cache: the same file, an empty diff.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compile.procs import compiler_env

ROOT = Path(__file__).resolve().parents[2]
FILTER = "kernel=matmul_tiled[epilogue=bias_gelu],dtype=bf16"
KEY = "matmul_tiled[epilogue=bias_gelu]  4096x28672x4096  bf16"
PLANTS = {  # name: (arch, config override)
    "base-gfx942": ("gfx942", {}),
    "base-gfx950": ("gfx950", {}),
    "spill-gfx950": ("gfx950", {"BLOCK_N": 256}),
    "stages-gfx942": ("gfx942", {"num_stages": 3}),
    "group-gfx942": ("gfx942", {"GROUP_M": 8}),
}
SCRIPT = """\
import json, sys
from pathlib import Path
from perfci.compile.arches import ARCHES
from perfci.compile.baseline import from_reports, to_json
from perfci.compile.build import compile_cases, compiler_versions
from perfci.compile.cache import DiskCache
from perfci.suites import load_suite, select_cases

out, plants = Path(sys.argv[1]), json.loads(sys.argv[2])
cases = select_cases(load_suite("prefill").cases, sys.argv[3])
disk = DiskCache(out / "cache")
for name, (arch, config) in plants.items():
    reports = compile_cases(cases, [ARCHES[arch]], disk=disk, config=config)
    rf = from_reports(reports, "prefill", arch, compiler_versions(ARCHES[arch]))
    (out / f"{name}.json").write_text(to_json(rf))
"""


def _env() -> dict:
    return compiler_env()


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("planted")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(out), json.dumps(PLANTS), FILTER], capture_output=True,
                          text=True, env=_env(), cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def diff(base: Path, cur: Path, *more: str):
    proc = subprocess.run([sys.executable, "-m", "perfci", "compile", "--baseline", str(base), "--current", str(cur),
                           *more], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def _main_kernel(path: Path) -> dict:
    (case,) = json.loads(path.read_text())["cases"]
    return case["kernels"][0]


@pytest.mark.slow
def test_a_tile_that_spills_on_gfx950_is_worse(planted):
    spill = _main_kernel(planted / "spill-gfx950.json")
    assert spill["config"]["BLOCK_N"] == 256 and spill["spills"] > 0
    code, out, _ = diff(planted / "base-gfx950.json", planted / "spill-gfx950.json")
    assert code == 1
    row = next(line for line in out.splitlines() if KEY in line)
    assert f"spills 0 -> {spill['spills']} registers" in row and "BLOCK_N 128 -> 256" in row
    assert row.rstrip().endswith("worse")


@pytest.mark.slow
def test_more_stages_past_the_lds_budget_is_worse(planted):
    base, cur = _main_kernel(planted / "base-gfx942.json"), _main_kernel(planted / "stages-gfx942.json")
    assert base["shared_bytes"] <= 64 * 1024 < cur["shared_bytes"]
    code, out, _ = diff(planted / "base-gfx942.json", planted / "stages-gfx942.json", "--format", "json")
    assert code == 1
    (case,) = json.loads(out)["diffs"][0]["cases"]
    lds = next(c for c in case["changes"] if c["field"] == "shared_bytes")
    assert (lds["before"], lds["after"], lds["effect"]) == (base["shared_bytes"], cur["shared_bytes"], "worse")
    assert case["verdict"] == "worse" and "num_stages 2 -> 3" in case["summary"]


@pytest.mark.slow
def test_a_config_change_that_keeps_resources_is_reported_and_passes(planted):
    code, out, _ = diff(planted / "base-gfx942.json", planted / "group-gfx942.json")
    assert code == 0
    row = next(line for line in out.splitlines() if KEY in line)
    assert row.split("bf16", 1)[1].split() == ["GROUP_M", "4", "->", "8", "same"]


@pytest.mark.slow
def test_the_same_commit_compiled_again_without_the_cache_diffs_empty(planted):
    proc = subprocess.run(
        [sys.executable, "-m", "perfci", "compile", "prefill", "--arch", "gfx942", "--filter", FILTER, "--no-cache",
         "--baseline", str(planted / "base-gfx942.json")],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=900)
    code, out, err = proc.returncode, proc.stdout, proc.stderr
    assert code == 0, err
    assert out.startswith("no resource changed") and "1 case(s): 0 worse, 0 better, 1 same" in out
