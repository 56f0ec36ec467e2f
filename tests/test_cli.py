"""perfci's exit-code contract where the command itself is not to blame: a reader that closes the
pipe early, and code perfci calls that exits or raises what is not an Exception."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfci import cli
from perfci.compare import cli as compare_cli

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "compare"


def closed_pipe_run(*args: object, stderr_too: bool = False) -> subprocess.CompletedProcess:
    """``python -m perfci ARGS | true``, deterministic: the pipe's reader is gone before perfci starts."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=ROOT, stdout=write_end,
                              stderr=write_end if stderr_too else subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)


def test_a_regression_still_exits_1_when_the_reader_closed_stdout():
    done = closed_pipe_run("compare", DATA / "base.csv", DATA / "cur_regressed.csv")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_a_regression_still_exits_1_when_stdout_and_stderr_are_both_closed():
    done = closed_pipe_run("compare", DATA / "base.csv", DATA / "cur_regressed.csv", "--format", "markdown",
                           stderr_too=True)
    assert done.returncode == 1


def test_no_regression_still_exits_0_when_the_reader_closed_stdout():
    done = closed_pipe_run("compare", DATA / "aa_base.csv", DATA / "aa_cur.csv")
    assert done.returncode == 0, done.stderr


def test_a_bad_input_still_exits_2_when_both_streams_are_closed(tmp_path):
    done = closed_pipe_run("compare", tmp_path / "missing.csv", DATA / "aa_cur.csv", stderr_too=True)
    assert done.returncode == 2


@pytest.mark.slow  # one case through the measuring worker: about 15 s on a 2-core machine
def test_a_broken_case_of_perfci_run_still_exits_1_when_the_reader_closed_stdout(tmp_path):
    suite = tmp_path / "broken.toml"
    # math.sqrt(a, b) raises TypeError: the case is an error, the run exits 1.
    suite.write_text('name = "broken"\ndevices = ["cpu"]\n\n[[cases]]\nkernel = "math:sqrt"\n'
                     'M = 16\nN = 16\nK = 32\ndtype = "fp32"\n')
    done = closed_pipe_run("run", suite, "--device", "cpu", "--out", tmp_path / "r.csv", "--format", "table")
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("raised", [SystemExit(0), SystemExit(None), SystemExit("bye"), GeneratorExit()],
                         ids=["exit-0", "exit-None", "exit-message", "base-exception"])
def test_a_stray_system_exit_from_called_code_is_an_internal_error_never_0(monkeypatch, capsys, raised):
    def handler(args):
        raise raised

    monkeypatch.setattr(compare_cli, "main", handler)  # add_parser registers the module's main
    code = cli.main(["compare", str(DATA / "aa_base.csv"), str(DATA / "aa_cur.csv")])
    err = capsys.readouterr().err
    assert code == 4
    (line,) = err.splitlines()
    assert line.startswith("perfci: internal error: ") and "Traceback" not in err


def test_argparse_usage_and_help_are_still_their_own_exits(capsys):
    with pytest.raises(SystemExit) as usage:
        cli.main(["compare"])
    assert usage.value.code == 2
    with pytest.raises(SystemExit) as shown:
        cli.main(["compare", "--help"])
    assert shown.value.code == 0


KERNEL_REPO = ROOT / "examples" / "kernel-repo"
EXITS_AT_IMPORT = {
    "exit-0": ("import sys\nsys.exit(0)\n", "(it called sys.exit(0) while importing)"),
    "exit-message": ("raise SystemExit('kernels need a GPU')\n",
                     "(it called sys.exit('kernels need a GPU') while importing)"),
    "pytest-skip": ("import pytest\npytest.skip('no GPU', allow_module_level=True)\n", "(Skipped: no GPU)"),
    "base-exception": ("class Odd(BaseException):\n    pass\nraise Odd('odd')\n", "(Odd: odd)"),
}


def kernel_repo_with(tmp_path: Path, body: str) -> Path:
    """The example kernel repository, with a second kernel module in [tool.perfci] kernels that runs ``body``."""
    repo = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(KERNEL_REPO), str(repo)], check=True)
    (repo / "kernels" / "quit.py").write_text(body)
    pyproject = repo / "pyproject.toml"
    text = pyproject.read_text()
    assert 'kernels = ["kernels.perf"]' in text
    pyproject.write_text(text.replace('kernels = ["kernels.perf"]', 'kernels = ["kernels.perf", "kernels.quit"]'))
    return repo


def perfci_in(repo: Path, *args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "perfci", *map(str, args)], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", list(EXITS_AT_IMPORT))
def test_perfci_run_is_one_line_and_exit_2_when_a_kernel_module_exits_at_import(tmp_path, name):
    body, fragment = EXITS_AT_IMPORT[name]
    repo = kernel_repo_with(tmp_path, body)
    done = perfci_in(repo, "run", "gemm", "--device", "cpu", "--out", tmp_path / "r.csv")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("perfci: error: ") and f"cannot import kernels.quit {fragment}" in line


def test_perfci_nightly_is_not_green_when_a_kernel_module_exits_0_at_import(tmp_path):
    repo = kernel_repo_with(tmp_path, EXITS_AT_IMPORT["exit-0"][0])
    done = perfci_in(repo, "nightly", "gemm", "--out", tmp_path / "n", "--device", "cpu", "--no-canary")
    assert done.returncode == 2, done.stderr
    assert "cannot import kernels.quit (it called sys.exit(0) while importing)" in done.stderr
    verdict = (tmp_path / "n" / "verdict.json").read_text()
    assert '"exit_code": 2' in verdict and (tmp_path / "n" / "summary.md").exists()
