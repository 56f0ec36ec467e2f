""".github/workflows/compile-matrix.yml: its step scripts, run here with a stand-in for `perfci`.

The ratchet step fails the job on a worse case (exit 1) and on bad input; the
upgrade step turns a worse case under the newer Triton into a warning, passes
on bad input's exit code, and does nothing when the pinned Triton is the newest.
(tests/test_workflows.py checks the hardening rules and zizmor on every workflow.)
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "compile-matrix.yml"
FAKE = """#!/bin/sh
echo "$@" >> "$CALLS"
echo "| table of $* |"
exit "$FAKE_RC"
"""


def _job() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text())
    return doc["jobs"]["compile"]


def _script(name: str) -> str:
    return next(s["run"] for s in _job()["steps"] if s.get("name") == name)


@pytest.fixture
def step(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "perfci").write_text(FAKE)
    (bin_dir / "perfci").chmod(0o755)
    summary, calls = tmp_path / "summary.md", tmp_path / "calls"
    summary.touch()
    calls.touch()

    def run(name: str, **env: str) -> subprocess.CompletedProcess:
        base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GITHUB_STEP_SUMMARY": str(summary), "CALLS": str(calls),
                "SUITE": "decode", "ARCHES": "gfx942,gfx950,sm_90", "PINNED": "3.9.0", "WANTED": "",
                "FAKE_RC": "0"}
        script = tmp_path / "step.sh"
        script.write_text(_script(name))
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              env={**base, **env}, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    run.summary, run.calls = summary, calls
    return run


@pytest.mark.parametrize("rc, step_rc, says", [("0", 0, ""), ("1", 1, "::error::"), ("2", 2, "")])
def test_the_ratchet_fails_the_job_on_a_worse_case(step, rc, step_rc, says):
    done = step("the pinned triton against baselines/compile", FAKE_RC=rc)
    assert done.returncode == step_rc and (says in done.stdout)
    assert step.calls.read_text().split() == ["compile", "decode", "--arch", "gfx942,gfx950,sm_90", "--baseline",
                                              "baselines/compile/", "--out", "resources/", "--format", "markdown"]
    assert "| table of compile decode" in step.summary.read_text()


@pytest.mark.parametrize("rc, step_rc, says", [("0", 0, ""), ("1", 0, "::warning::triton 3.10.0"), ("2", 2, "")])
def test_the_upgrade_diff_warns_and_passes_bad_input_on(step, rc, step_rc, says):
    done = step("the newest triton against the pinned one", WANTED="3.10.0", FAKE_RC=rc)
    assert done.returncode == step_rc and says in done.stdout
    assert "--against-triton 3.10.0" in step.calls.read_text()


def test_no_upgrade_to_diff_when_the_pinned_triton_is_the_newest(step):
    done = step("the newest triton against the pinned one", WANTED="3.9.0")
    assert done.returncode == 0 and step.calls.read_text() == ""
    assert "triton 3.9.0 is the newest on PyPI" in step.summary.read_text()


def test_the_job_only_reads_and_covers_both_suites():
    job = _job()
    assert job["permissions"] == {"contents": "read"} and job["runs-on"] == "ubuntu-latest"
    assert job["strategy"]["matrix"]["suite"] == ["decode", "prefill"]
    assert (ROOT / "baselines" / "compile" / "decode-gfx950.json").exists()
    assert (ROOT / "baselines" / "compile" / "prefill-sm_90.json").exists()


def test_a_pull_request_installs_only_what_pyproject_pins():
    """A step that installs a Triton pyproject.toml does not pin (the newest on PyPI, --against-triton)
    never runs on pull_request; the install step itself takes the pinned extra."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert "pull_request" in doc[True]  # `on:` reads as True in YAML 1.1
    steps = _job()["steps"]
    unpinned = [s for s in steps if "--against-triton" in s.get("run", "") or "pip index" in s.get("run", "")]
    assert unpinned and all(s.get("if") == "github.event_name != 'pull_request'" for s in unpinned)
    install = next(s["run"] for s in steps if s.get("name") == "install perfci and the pinned triton")
    installs = [line for line in install.splitlines() if "pip install" in line]
    assert installs and all("torch==2.13.0" in line or line.endswith("-c .ci/constraints.txt -e '.[cpu]'") for line in installs)
