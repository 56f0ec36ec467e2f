"""perfci's kernels install as ``perfci_kernels``: a kernel team's own ``kernels`` package is the one imported.

The end-to-end run measures, in a throwaway repository of its own, the team's
kernel (declared in its ``kernels`` package through [tool.perfci]), perfci's
installed ``torch_matmul``, and plain GEMM callables by import path, good and
bad, through ``perfci run --device cpu``.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    # perfci as installed, nothing of this checkout on the path.
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=120)


def test_the_package_list_holds_every_package_and_kernels_installs_as_perfci_kernels():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "perfci").rglob("__init__.py")}
    data = {"perfci.builtin_suites": "suites", "perfci.builtin_baselines": "baselines"}  # folders of data
    assert set(tool["packages"]) == found | {"perfci_kernels"} | set(data)
    assert tool["package-dir"] == {"perfci_kernels": "kernels", **data}


def test_perfci_kernels_imports_from_anywhere_and_kernels_does_not(tmp_path):
    ok = _python("import perfci_kernels.backends as b; print(b.__file__)", tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert Path(ok.stdout.strip()) == ROOT / "kernels" / "backends.py"
    missing = _python("import kernels", tmp_path)
    assert missing.returncode == 1 and "ModuleNotFoundError: No module named 'kernels'" in missing.stderr


TEAM_KERNELS = '''\
"""The team's own kernels package: the name perfci must not shadow."""
WHO = "team"
'''
TEAM_BACKENDS = '''\
import kernels
from perfci.kernel import gemm

assert kernels.WHO == "team", kernels.__file__  # imported in the measuring worker too


def team_gemm(a, b, out=None):
    import torch

    return torch.matmul(a, b, out=out)


BACKENDS = [gemm(team_gemm, "team_gemm", dtypes=("fp32", "fp16"))]
'''
GEMMS = '''\
def matmul_into(a, b, out):
    import torch

    return torch.mm(a, b, out=out)


def raises(a, b):
    raise RuntimeError("kernel exploded")


def wrong_shape(a, b):
    return (a @ b)[:, :-1]


def writes_nothing(a, b, out):
    return out
'''
SUITE = '''\
name = "team"
devices = ["cpu", "cuda"]
dtype = "fp32"

[[cases]]
kernel = ["team_gemm", "torch_matmul", "torch:matmul", "gemms:matmul_into",
          "gemms:raises", "gemms:wrong_shape", "gemms:writes_nothing"]
M = 4
N = 16
K = 32
'''


def team_repo(tmp_path: Path) -> Path:
    top = tmp_path / "team"
    files = {"kernels/__init__.py": TEAM_KERNELS, "kernels/perf.py": TEAM_BACKENDS, "gemms.py": GEMMS,
             "bench/team.toml": SUITE,
             "pyproject.toml": '[project]\nname = "team"\n\n[tool.perfci]\nsuites = "bench"\n'
                               'kernels = ["kernels.perf"]\n'}
    for rel, text in files.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    return top


def test_a_repository_with_its_own_kernels_package_imports_its_own(tmp_path):
    top = team_repo(tmp_path)
    proc = _python("import kernels, perfci, perfci_kernels; print(kernels.WHO, kernels.__file__)", top)
    assert proc.stdout.split() == ["team", str(top / "kernels" / "__init__.py")], proc.stderr
    listed = subprocess.run([sys.executable, "-m", "perfci", "config"], cwd=top / "bench", env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    lines = [line.split() for line in listed.stdout.splitlines()]
    assert ["team_gemm", "kernels.perf"] in lines and ["torch_matmul", "perfci_kernels.backends"] in lines


@pytest.mark.slow
def test_perfci_run_measures_the_teams_kernel_and_plain_callables_by_import_path(tmp_path):
    top = team_repo(tmp_path)
    out = tmp_path / "r.csv"
    proc = subprocess.run([sys.executable, "-m", "perfci", "run", "team", "--device", "cpu", "--out", str(out),
                           "--repeats", "2", "--iters", "60"], cwd=top, env=_env(), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr  # the broken callables fail or error: never green
    rows = {r["kernel"]: r for r in csv.DictReader(out.open())}
    for good in ("team_gemm", "torch_matmul", "torch:matmul", "gemms:matmul_into"):
        assert rows[good]["status"] == "ok", rows[good]["message"]
        assert float(rows[good]["median_us"]) > 0 and float(rows[good]["rel_error"]) <= 5e-3
    assert rows["gemms:raises"]["status"] == "error"
    assert "RuntimeError: kernel exploded" in rows["gemms:raises"]["message"]
    assert rows["gemms:wrong_shape"]["status"] == "fail"
    assert "output has shape (4, 15); the case needs (4, 16)" in rows["gemms:wrong_shape"]["message"]
    assert rows["gemms:writes_nothing"]["status"] == "fail"
    assert "elements left unwritten" in rows["gemms:writes_nothing"]["message"]
