"""perfci.config and ``perfci config``: [tool.perfci] or perfci.toml, found from the working directory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfci.cli import main
from perfci.config import load_config, parse_config
from perfci.errors import PerfciError

ROOT = Path(__file__).resolve().parents[1]

FULL = """\
[project]
name = "team-kernels"

[tool.perfci]
suites = "bench/suites"
kernels = ["teamk.gemm", "teamk.decode"]
baselines = "bench/baselines"
history = "../perf-history"
noise_profiles = { sm_90 = "bench/h200.json", gfx942 = "bench/mi300x.json" }
build = "pip install -e . --no-deps"
"""


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    for rel, text in files.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text)
    return top


def test_pyproject_tool_perfci_is_found_from_a_subfolder_with_paths_from_its_folder(tmp_path):
    top = repo(tmp_path, {"pyproject.toml": FULL, "src/teamk/gemm.py": ""})
    config = load_config(top / "src" / "teamk")
    assert config.root == top.resolve() and config.file == (top / "pyproject.toml").resolve()
    assert config.suites == top.resolve() / "bench" / "suites"
    assert config.kernels == ("teamk.gemm", "teamk.decode")
    assert config.history == tmp_path.resolve() / "perf-history"
    assert config.noise_profiles == {"sm_90": top.resolve() / "bench/h200.json",
                                     "gfx942": top.resolve() / "bench/mi300x.json"}
    assert config.build == "pip install -e . --no-deps"
    assert config.origin("suites") == "pyproject.toml: tool.perfci.suites"


def test_build_timeout_is_seconds_1800_unless_set(tmp_path):
    assert parse_config({}, tmp_path / "perfci.toml").build_timeout == 1800.0
    config = parse_config({"build": "make", "build_timeout": 90}, tmp_path / "perfci.toml")
    assert config.build_timeout == 90.0 and config.origin("build_timeout") == "perfci.toml: build_timeout"
    assert parse_config({"build_timeout": 2.5}, tmp_path / "perfci.toml").build_timeout == 2.5


def test_perfci_toml_holds_the_keys_at_its_top_and_unset_keys_are_defaults(tmp_path):
    top = repo(tmp_path, {"perfci.toml": 'kernels = ["k.backends"]\n', "pyproject.toml": '[project]\nname = "x"\n'})
    config = load_config(top)
    assert config.file == (top / "perfci.toml").resolve() and config.kernels == ("k.backends",)
    assert config.suites == top.resolve() / "suites" and config.origin("suites") == "default"
    assert config.origin("kernels") == "perfci.toml: kernels"
    assert config.history is None and config.build is None and config.noise_profiles == {}


def test_the_search_stops_at_the_repository_top(tmp_path):
    # A [tool.perfci] above the repository is another project's: not this one's.
    (tmp_path / "pyproject.toml").write_text(FULL)
    top = repo(tmp_path, {"src/x.py": ""})
    assert load_config(top / "src").file is None


def test_no_configuration_means_the_defaults(tmp_path):
    top = repo(tmp_path, {"kernels/__init__.py": "", "suites/s.toml": ""})
    config = load_config(top / "suites")
    assert config.file is None and config.kernels == ()
    assert config.root == top.resolve() and config.suites == top.resolve() / "suites"
    # A checkout laid out as perfci's own measures its own kernels/backends.py.
    (top / "kernels" / "backends.py").write_text("BACKENDS = []\n")
    config = load_config(top)
    assert config.kernels == ("kernels.backends",) and config.origin("kernels").startswith("default")


@pytest.mark.parametrize("table, fragment", [
    ({"suite": "s"}, "unknown key(s) suite; allowed: suites, kernels, baselines, history, noise_profiles, build, "
                      "build_timeout, compile_accept"),
    ({"kernels": "teamk.gemm"}, "'kernels' must be a list of module names, got 'teamk.gemm'"),
    ({"kernels": ["teamk/gemm.py"]}, "'kernels': 'teamk/gemm.py' is not a module name"),
    ({"suites": 3}, "'suites' must be a folder (string), got 3"),
    ({"build": ""}, "'build' must be a shell command (string)"),
    ({"build_timeout": 0}, "'build_timeout' must be a positive number of seconds (a build still going then is "
                           "stopped, a failed build), got 0"),
    ({"build_timeout": "30m"}, "'build_timeout' must be a positive number of seconds"),
    ({"build_timeout": True}, "'build_timeout' must be a positive number of seconds"),
    ({"build_timeout": float("inf")}, "'build_timeout' must be a positive number of seconds"),
    ({"noise_profiles": {"sm_90": 1}}, "'noise_profiles' must be a table of arch = profile file"),
    ({"noise_profiles": "h200.json"}, "'noise_profiles' must be a table"),
    ({"compile_accept": {"arch": "sm_90"}}, "'compile_accept' must be a list of tables"),
    ({"compile_accept": [{"arch": "sm_90", "case": "k", "reason": "r"}]}, "entry 1: give at least one bound"),
    ({"compile_accept": [{"arch": "sm_90", "case": "k", "reason": "r", "spills": -1}]},
     "entry 1: 'spills' must be an integer >= 0, got -1"),
    ({"compile_accept": [{"arch": "sm_90", "case": "k", "reason": "r", "vgprs": 9}]},
     "entry 1: unknown key(s) vgprs"),
])
def test_a_wrong_key_or_type_is_one_line(tmp_path, table, fragment):
    with pytest.raises(PerfciError) as err:
        parse_config(table, tmp_path / "pyproject.toml")
    assert err.value.message.startswith(f"{tmp_path / 'pyproject.toml'} [tool.perfci]: ")
    assert fragment in err.value.message and "\n" not in err.value.message


def test_two_configurations_in_one_folder_and_broken_toml_are_refused(tmp_path):
    both = repo(tmp_path, {"perfci.toml": "", "pyproject.toml": "[tool.perfci]\n"})
    with pytest.raises(PerfciError, match="both perfci.toml and pyproject.toml"):
        load_config(both)
    broken = repo(tmp_path / "b", {"pyproject.toml": "[tool.perfci]\nsuites = \n"})
    with pytest.raises(PerfciError, match="pyproject.toml: not valid TOML"):
        load_config(broken)


def run_cli(argv, cwd, monkeypatch, capsys):
    monkeypatch.chdir(cwd)
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_perfci_config_prints_each_value_and_where_it_came_from(tmp_path, monkeypatch, capsys):
    top = repo(tmp_path, {"pyproject.toml": FULL})
    code, out, err = run_cli(["config", "--no-kernels"], top / ".git", monkeypatch, capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"project root: {top.resolve()}"
    assert lines[1] == f"read from:    {top.resolve() / 'pyproject.toml'} [tool.perfci]"
    suites = next(line for line in lines if line.strip().startswith("suites"))
    assert str(top.resolve() / "bench/suites") in suites and suites.endswith("[pyproject.toml: tool.perfci.suites]")
    assert any("gfx942 = " in line and "sm_90 = " in line for line in lines)
    code, out, _ = run_cli(["config", "--no-kernels", "--format", "json", str(top)], tmp_path, monkeypatch, capsys)
    data = json.loads(out)
    assert data["values"]["kernels"] == ["teamk.gemm", "teamk.decode"]
    assert data["origins"]["build"] == "pyproject.toml: tool.perfci.build"


def test_perfci_config_in_perfcis_own_checkout_lists_its_kernels_shadowing_the_installed_copy(monkeypatch, capsys):
    code, out, _ = run_cli(["config"], ROOT, monkeypatch, capsys)
    assert code == 0
    assert "  kernels         kernels.backends" in out
    for name in ("matmul_tiled", "splitk_decode", "gemv", "matmul_persistent", "torch_matmul"):
        assert any(line.split()[:2] == [name, "kernels.backends"] and "(shadows perfci_kernels.backends)" in line
                   for line in out.splitlines()), name


@pytest.mark.parametrize("files, fragment", [
    ({"pyproject.toml": "[tool.perfci]\nkernels = 'x'\n"}, "'kernels' must be a list"),
    ({"perfci.toml": "suites = ['a', 'b']\n"}, "'suites' must be a folder"),
    ({"pyproject.toml": "[tool.perfci]\nbuild_timeout = -5\n"}, "'build_timeout' must be a positive number of "
                                                                "seconds"),
    ({"perfci.toml": 'kernels = ["no_such_team_module"]\n'}, "cannot import no_such_team_module (ModuleNotFoundError"),
])
def test_perfci_config_refuses_a_configuration_in_one_line_exit_2(tmp_path, monkeypatch, capsys, files, fragment):
    top = repo(tmp_path, files)
    code, out, err = run_cli(["config"], top, monkeypatch, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("perfci: error: ") and fragment in err


def test_a_suite_name_resolves_in_the_configured_folder_then_the_built_ins(tmp_path, monkeypatch):
    from perfci.suites import load_suite

    suite = ('name = "{n}"\ndevices = ["cpu"]\n[[cases]]\nkernel = "torch:matmul"\nM = 4\nN = 8\nK = 16\n'
             'dtype = "fp32"\n')
    top = repo(tmp_path, {"perfci.toml": 'suites = "bench"\n', "bench/mine.toml": suite.format(n="mine"),
                          "bench/smoke.toml": suite.format(n="my-smoke")})
    monkeypatch.chdir(top)
    assert load_suite("mine").name == "mine"
    assert load_suite("smoke").name == "my-smoke"  # the project's own file comes first
    assert load_suite("decode").name == "decode"  # then perfci's built-ins
    with pytest.raises(PerfciError, match=r"unknown suite 'nope'; suites in .*bench: mine, smoke; built-in suites"):
        load_suite("nope")


# --------------------------------------------------------------------------- a PATH that cannot be read


def perfci_config(*args: object, cwd: Path) -> "subprocess.CompletedProcess":
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "perfci", "config", "--no-kernels", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("what, fragment", [
    ("missing", "no/such/path: no such file"),
    ("/dev/zero", "/dev/zero: is a character device, not a configuration file"),
    ("fifo-pyproject", "pyproject.toml: is a pipe (FIFO), not a configuration file"),
    ("fifo-pyproject-in-folder", "pyproject.toml: is a pipe (FIFO), not a configuration file"),
    ("devzero-perfci-toml-in-folder", "perfci.toml: is a character device (a symbolic link to /dev/zero)"),
    ("dangling-perfci-toml-in-folder", "perfci.toml: a symbolic link to"),
])
def test_perfci_config_of_a_path_it_cannot_read_is_one_line_exit_2_not_the_defaults(tmp_path, what, fragment):
    (tmp_path / ".git").mkdir()  # the search for a configuration stops here
    arg: object = tmp_path
    if what == "missing":
        arg = tmp_path / "no" / "such" / "path"
    elif what == "/dev/zero":
        arg = what
    elif what == "fifo-pyproject":
        os.mkfifo(tmp_path / "pyproject.toml")
        arg = tmp_path / "pyproject.toml"
    elif what == "fifo-pyproject-in-folder":
        os.mkfifo(tmp_path / "pyproject.toml")
    elif what == "devzero-perfci-toml-in-folder":
        (tmp_path / "perfci.toml").symlink_to("/dev/zero")
    else:
        (tmp_path / "perfci.toml").symlink_to(tmp_path / "gone.toml")
    done = perfci_config(arg, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("perfci: error: ") and fragment in line
    assert done.stdout == ""


def test_perfci_config_from_a_folder_with_a_fifo_pyproject_is_not_the_defaults(tmp_path):
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / "pyproject.toml")
    done = perfci_config(cwd=tmp_path)
    assert done.returncode == 2 and "pyproject.toml: is a pipe (FIFO)" in done.stderr


def test_a_build_timeout_past_a_float_s_range_is_one_line_not_a_crash(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.perfci]\nbuild_timeout = 1" + "0" * 400 + "\n")
    with pytest.raises(PerfciError, match="build_timeout"):
        load_config(tmp_path)
