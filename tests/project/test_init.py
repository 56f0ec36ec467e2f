"""``perfci init``: a team's repository set up in one command; the workflows it writes keep perfci's rules."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfci.config import load_config
from perfci.project.init import InitOptions, template, workflow_text
from perfci.suites import load_suite

ROOT = Path(__file__).resolve().parents[2]


def init(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfci", "init", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def files(root: Path) -> dict[str, bytes]:
    """Every file of the repository but git's own, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] != ".git"}


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path / "team")], check=True)
    return tmp_path / "team"


def test_init_writes_the_table_a_suite_the_baselines_and_two_workflows_then_keeps_them(repo):
    (repo / "pyproject.toml").write_text('[project]\nname = "teamk"\nversion = "1"\n')
    proc = init(repo, "--kernel", "teamk.gemm:matmul", "--device", "h200=h200", "--device", "gfx942=mi300x")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:7] == [
        "perfci init: added [tool.perfci] to pyproject.toml",
        "perfci init: wrote bench/suites/gemm.toml (suite gemm)",
        "perfci init: wrote bench/baselines/README.md (baselines folder)",
        "perfci init: wrote .github/workflows/perfci-nightly.yml (workflow)",
        "perfci init: wrote .github/workflows/perfci-pr.yml (workflow)",
        "perfci init: wrote .github/workflows/perfci-triage.yml (workflow)",
        "perfci init: wrote .github/workflows/perfci-stale.yml (workflow)",
    ]
    assert (repo / "pyproject.toml").read_text().startswith('[project]\nname = "teamk"\nversion = "1"\n\n[tool.perfci]\n')
    config = load_config(repo)
    assert (config.file, config.suites, config.baselines) == (repo / "pyproject.toml", repo / "bench" / "suites",
                                                              repo / "bench" / "baselines")
    assert config.history == (repo.parent / "perf-history").resolve() and config.build is None
    suite = (repo / "bench" / "suites" / "gemm.toml").read_text()
    assert 'kernel = "teamk.gemm:matmul"' in suite and 'name = "gemm"' in suite

    before = files(repo)
    again = init(repo, "--kernel", "other:fn", "--suite", "gemm")
    assert again.returncode == 0, again.stderr
    assert files(repo) == before  # idempotent: nothing rewritten, nothing added
    assert again.stdout.splitlines()[0] == f"perfci init: kept {repo / 'pyproject.toml'} (its [tool.perfci] is in force)"
    assert all(line.startswith("perfci init: kept ") for line in again.stdout.splitlines()[:5])


def test_the_starter_suite_loads_and_names_the_kernel(repo):
    proc = init(repo, "--kernel", "torch.nn.functional:linear", "--cpu", "--no-workflows")
    assert proc.returncode == 0, proc.stderr
    assert not (repo / ".github").exists()
    assert (repo / "pyproject.toml").read_text().startswith("[tool.perfci]\n")  # created with the table alone
    loaded = load_suite("gemm", repo)
    assert {c.kernel for c in loaded.cases} == {"torch.nn.functional:linear"} and loaded.devices[0] == "cpu"
    assert {(c.m, c.n, c.k, c.dtype) for c in loaded.cases} == {(16, 16, 32, "fp32")}


def test_a_configured_project_gets_its_suite_in_its_own_folders(repo):
    (repo / "perfci.toml").write_text('suites = "perf/suites"\nbaselines = "perf/base"\n')
    proc = init(repo, "--suite", "decode", "--no-workflows")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "perf" / "suites" / "decode.toml").is_file() and (repo / "perf" / "base" / "README.md").is_file()
    assert not (repo / "pyproject.toml").exists()
    assert "first name your kernel in the suite" in proc.stdout  # the placeholder torch:matmul is said


@pytest.mark.parametrize("args, expect", [
    (["--device", "h200"], "--device h200: give LABEL=RUNNER"),
    (["--device", "h2.00=h200"], "a device label is a letter"),
    (["--device", "a=x", "--device", "a=y"], "a device label given twice"),
    (["--suite", "x.toml"], "a suite name is letters"),
    (["--kernel", "not a kernel"], "give a kernel name your modules register, or an import path"),
    (["--bench", "pytest bench/"], "must write its results at {out}"),
    (["--kernels-module", "a-b"], "not a module name"),
    (["--bench", "pytest --perfci-out {out} ${{ github.event.head_commit.message }}"],
     "--bench: contains '${{', which GitHub Actions would expand"),
    (["--build", "make ${{github.head_ref}}"], "--build: contains '${{', which GitHub Actions would expand"),
])
def test_an_option_init_cannot_use_is_one_line_and_exit_2(repo, args, expect):
    proc = init(repo, *args)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("perfci: error: ") and expect in line
    assert files(repo) == {}  # nothing written


def test_a_pyproject_that_would_break_is_left_alone(repo):
    (repo / "pyproject.toml").write_text('tool = 1\n')  # a key that a [tool.perfci] table cannot join
    proc = init(repo, "--no-workflows")
    assert proc.returncode == 2 and "adding [tool.perfci] would make it invalid TOML" in proc.stderr
    assert (repo / "pyproject.toml").read_text() == "tool = 1\n"


def test_a_crlf_pyproject_keeps_its_line_endings_and_gains_the_table_in_them(repo):
    before = b'[project]\r\nname = "teamk"\r\nversion = "1"\r\n'
    (repo / "pyproject.toml").write_bytes(before)
    proc = init(repo, "--no-workflows")
    assert proc.returncode == 0, proc.stderr
    after = (repo / "pyproject.toml").read_bytes()
    assert after.startswith(before + b"\r\n[tool.perfci]\r\n")
    assert after.count(b"\n") == after.count(b"\r\n")  # not one bare LF
    assert load_config(repo).suites == repo / "bench" / "suites"


def test_a_symlinked_pyproject_stays_a_link_and_its_target_gains_the_table(repo, tmp_path):
    shared = tmp_path / "shared" / "pyproject.toml"
    shared.parent.mkdir()
    shared.write_text('[project]\nname = "teamk"\n')
    (repo / "pyproject.toml").symlink_to(shared)
    proc = init(repo, "--no-workflows")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "pyproject.toml").is_symlink() and (repo / "pyproject.toml").resolve() == shared
    assert shared.read_text().startswith('[project]\nname = "teamk"\n\n[tool.perfci]\n')
    assert [p.name for p in shared.parent.iterdir()] == ["pyproject.toml"]  # no temporary file left


# --------------------------------------------------------------------------- the workflows it writes

DEVICE_SETS = {
    "one": (("gpu", "gpu"),),
    "three": (("gfx942", "mi300x"), ("gfx950", "mi355x"), ("h200", "h200")),
    "two on one runner kind": (("h100", "hopper"), ("h200", "hopper")),
}


def rendered(tmp_path: Path, devices, bench: str = "") -> dict[str, Path]:
    opts = InitOptions(kernel="teamk.gemm:matmul", devices=devices, bench=bench, perfci_spec="perfci==0.1.0")
    out = {}
    for name, target in (("nightly.yml", "perfci-nightly.yml"), ("pr.yml", "perfci-pr.yml"),
                         ("triage.yml", "perfci-triage.yml"), ("stale.yml", "perfci-stale.yml")):
        path = tmp_path / ".github" / "workflows" / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(workflow_text(template(name), opts))
        out[name] = path
    return out


@pytest.mark.parametrize("devices", list(DEVICE_SETS.values()), ids=list(DEVICE_SETS))
@pytest.mark.parametrize("bench", ["", "pytest bench/ -q --perfci-out {out} && echo \"$HOME\" '$(x)' \\\"{y}"])
def test_the_workflows_keep_the_rules_perfci_s_own_keep(tmp_path, devices, bench):
    from tests.test_workflows import job_instances, labels, load, problems

    paths = rendered(tmp_path, devices, bench)
    for path in paths.values():
        assert problems(path) == [], path.name
    nightly = load(paths["nightly.yml"])
    assert nightly["env"]["BENCH"] == bench  # a value, never part of a script
    jobs = job_instances(nightly["jobs"]["nightly"])
    seen = {}
    for combo, job in jobs:
        device, runner = combo["device"], combo["label"]
        seen[device] = runner
        assert labels(job["runs-on"]) == ["self-hosted", "linux", runner]
        assert job["concurrency"]["group"] == f"perfci-gpu-{runner}-0"
        assert {f"confirmed_{device}", f"close_{device}"} <= set(nightly["jobs"]["nightly"]["outputs"])
    assert seen == dict(devices)  # every device once, on its own runners
    pr = load(paths["pr.yml"])
    runners = list(dict.fromkeys(r for _, r in devices))
    assert pr["on"]["workflow_dispatch"]["inputs"]["gpu"]["options"] == runners
    assert pr["jobs"]["request"]["steps"][0]["env"]["GPU"] == runners[0]


def test_zizmor_finds_nothing_in_the_workflows_init_writes(tmp_path):
    from tests.test_workflows import _where, zizmor_findings

    for devices in DEVICE_SETS.values():
        folder = tmp_path / "-".join(label for label, _ in devices)
        rendered(folder, devices, "pytest bench/ --perfci-out {out}")
        for persona in ("regular", "pedantic"):
            findings = zizmor_findings("--persona", persona, str(folder / ".github" / "workflows"))
            assert findings == [], _where(findings)
