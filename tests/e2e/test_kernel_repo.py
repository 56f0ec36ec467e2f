"""A kernel team's repository, end to end: examples/kernel-repo as a git repository of its own.

perfci is the installed tool (the ``perfci`` console script; nothing of perfci's
checkout is on the repository's path). The team's package is named ``kernels``,
like perfci's own folder, and is the one measured. Five commits follow the
first night; the third makes the team's GEMM walk K eight more times with a zero
multiplier (slower, still correct). The second night must be red, confirm must
call the case regressed, and bisect must name that third commit, with the
team's tree, index, stash and worktrees as they were. Once with ``perfci run``
measuring the suite, once with the team's pytest bench as the night's source.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bisect.synth import git

# Two whole nights each, confirmed and bisected in the interpreter: 5-8 minutes each on a quiet 2-core
# machine, most of it bisect's paired rounds of 5-s bench runs (17 minutes at a load of 6).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kernel-repo"
LOOP_END = "    c = acc.to(c_ptr.dtype.element_ty)\n"
PLANT = """\
    for k0 in range(0, 8 * K, BLOCK_K):  # walk K eight more times, multiplied by zero
        k = (k0 % K) + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += 0.0 * tl.dot(a, b)
"""
# Quick confirm and bisect for the interpreter: the plant is a ~5x step, and this machine's
# runs drift by up to +-25%, so only a change past 25% (confirm) or 50% (bisect) counts.
# --budget 400: a loaded 2-core host takes 8 s a bench run, and bisect's default 120 s a
# decision left a probe at GOOD's level unsure (its interval from 3 rounds was too wide).
NIGHT = ["--device", "cpu", "--confirm-args", "--min-rounds 3 --max-rounds 3 --repeats 1 --min-effect 25",
         "--bisect-args", "--min-rounds 2 --min-effect 50 --budget 400", "--budget", "3600"]
RUN_BENCH = ["--bench-args", "--repeats 1 --iters 60"]
PYTEST_BENCH = f"{shlex.quote(sys.executable)} -m pytest bench/ -q -p no:cacheprovider --perfci-device cpu --perfci-out {{out}}"


def tool(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """``perfci ARGS`` in the team's repository, as the team runs it."""
    exe = shutil.which("perfci")
    argv = [exe] if exe else [sys.executable, "-m", "perfci"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PERFCI_DEBUG")}
    return subprocess.run([*argv, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=3000)


def team_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "gemmlab"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "gemmlab: a tiled Triton GEMM and its nightly suite")
    return repo


def commit(repo: Path, message: str, path: str, text: str) -> str:
    (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def five_commits(repo: Path) -> tuple[str, str]:
    """Five commits after the first night; the third is the plant. (plant sha, tonight's sha)"""
    gemm = (repo / "kernels" / "gemm.py").read_text()
    assert LOOP_END in gemm
    commit(repo, "docs: usage", "USAGE.md", "perfci run gemm\n")
    commit(repo, "docs: shapes", "USAGE.md", "perfci run gemm\nsmall shapes only\n")
    plant = commit(repo, "gemm: walk K again", "kernels/gemm.py", gemm.replace(LOOP_END, PLANT + LOOP_END))
    commit(repo, "docs: the nightly", "USAGE.md", "perfci nightly gemm\n")
    tonight = commit(repo, "docs: baselines", "USAGE.md", "perfci nightly gemm\nbaselines: bench/baselines\n")
    return plant, tonight


def team_state(repo: Path) -> dict[str, str]:
    """What a night must leave as it found it (HEAD, branch, tree, index, stash, worktrees)."""
    return {"head": git(repo, "rev-parse", "HEAD"), "branch": git(repo, "branch", "--show-current"),
            "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
            "index": git(repo, "diff", "--cached"), "stash": git(repo, "stash", "list"),
            "stash_top": git(repo, "rev-parse", "stash@{0}"), "worktrees": git(repo, "worktree", "list"),
            "scratch": (repo / "scratch.txt").read_text()}


def leave_work_in_progress(repo: Path) -> None:
    """A stash, a staged edit and an untracked file, none of them touching the kernel."""
    (repo / "USAGE.md").write_text("work in progress, stashed\n")
    git(repo, "stash", "push", "-q", "-m", "team: an idea for later")
    (repo / "README.md").write_text((repo / "README.md").read_text() + "\nA staged edit.\n")
    git(repo, "add", "README.md")
    (repo / "scratch.txt").write_text("untracked notes\n")


def check_red_night(repo: Path, out: Path, proc: subprocess.CompletedProcess, plant: str, tonight: str,
                    bisected: bool = True) -> dict:
    import json

    assert proc.returncode == 1, proc.stderr[-4000:]
    v = json.loads((out / "verdict.json").read_text())
    assert v["sha"] == tonight and v["exit_code"] == 1 and v["suite"] == "gemm"
    assert [c["kernel"] for c in v["cases"]] == ["gemmlab_matmul"]
    assert [(c["kernel"], c["verdict"]) for c in v["confirmed"]] == [("gemmlab_matmul", "regressed")]
    assert v["confirmed_regression"] is True
    issue = (out / "issue.md").read_text()
    if not bisected:
        assert v["culprit"] is None
        return v
    assert v["culprit"]["sha"] == plant and v["culprit"]["subject"] == "gemm: walk K again"
    assert "kernels/gemm.py" in v["culprit"]["diffstat"]
    assert plant in issue and "gemm: walk K again" in issue
    rows = (out / "run.csv").read_text()
    assert ",ok," in rows  # the slow kernel still passed its correctness gate
    return v


def test_the_team_s_own_kernel_through_perfci_run(tmp_path):
    repo = team_repo(tmp_path)
    config = tool(repo, "config")
    assert config.returncode == 0, config.stderr
    assert any(line.split() == ["gemmlab_matmul", "kernels.perf"] for line in config.stdout.splitlines())
    first = tool(repo, "nightly", "gemm", "--out", str(tmp_path / "n1"), *NIGHT, *RUN_BENCH)
    assert first.returncode == 0, first.stderr[-4000:]
    assert "recorded as the baseline" in first.stdout
    assert (tmp_path / "gemmlab-perf-history" / "cpu" / "runs").is_dir()  # [tool.perfci] history, per device

    plant, tonight = five_commits(repo)
    leave_work_in_progress(repo)
    before = team_state(repo)
    proc = tool(repo, "nightly", "gemm", "--out", str(tmp_path / "n2"), *NIGHT, *RUN_BENCH)
    check_red_night(repo, tmp_path / "n2", proc, plant, tonight)
    assert team_state(repo) == before


def test_the_team_s_pytest_bench_as_the_night_s_source(tmp_path):
    # Confirmed with the team's pytest bench; not bisected (--no-bisect): bisect over a bench command
    # is the warm-worker night's above and tests/nightly's, and here it cost CI 9 minutes.
    repo = team_repo(tmp_path)
    first = tool(repo, "nightly", "gemm", "--bench", PYTEST_BENCH, "--out", str(tmp_path / "n1"), *NIGHT)
    assert first.returncode == 0, first.stderr[-4000:]
    plant, tonight = five_commits(repo)
    leave_work_in_progress(repo)
    before = team_state(repo)
    proc = tool(repo, "nightly", "gemm", "--bench", PYTEST_BENCH, "--out", str(tmp_path / "n2"), *NIGHT,
                "--no-bisect")
    v = check_red_night(repo, tmp_path / "n2", proc, plant, tonight, bisected=False)
    assert v["stages"][0]["detail"].startswith("--bench ")
    assert team_state(repo) == before
