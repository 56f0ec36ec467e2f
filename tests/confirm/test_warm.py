"""``perfci confirm --suite``: each revision measured by its own warm worker, kernels from its worktree.

On the CPU (Triton interpreter); a small repository holding a copy of kernels/
and a two-case suite, committed twice.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bisect.synth import git, snapshot

ROOT = Path(__file__).resolve().parents[2]
SUITE = """\
name = "tiny"
devices = ["cpu", "cuda"]
dtype = "fp32"

[[cases]]
kernel = "torch_matmul"
M = 16
N = 16
K = 32

[[cases]]
kernel = "gemv"
M = 1
N = 16
K = 32
"""


def confirm(repo: Path, *args: str, timeout: float = 600):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "perfci", "confirm", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def repo(tmp_path):
    """BASE, then CUR: a change that touches no kernel."""
    path = tmp_path / "repo"
    path.mkdir()
    shutil.copytree(ROOT / "kernels", path / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    (path / "suites").mkdir()
    (path / "suites" / "tiny.toml").write_text(SUITE)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    (path / "README").write_text("an unrelated change\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "cur")
    return path


@pytest.mark.slow  # a live confirm of 3 rounds: 30-100 s
def test_identical_kernels_are_not_confirmed_slower_and_the_tree_is_untouched(repo):
    """Two commits with the same kernels, measured live: not confirmed slower, 3 ABBA rounds, tree untouched.

    --min-effect 25: a torch op's time on this shared CPU swings by up to +-25% from run to run;
    the default 1% would make the verdict a claim about the machine's load, not about confirm.
    """
    before = snapshot(repo)
    proc = confirm(repo, "HEAD~1", "--suite", "suites/tiny.toml", "--device", "cpu", "--min-rounds", "3",
                   "--max-rounds", "3", "--min-effect", "25", "--filter", "kernel=torch_matmul", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (case,) = report["cases"]
    assert (case["kernel"], case["shape"], case["dtype"]) == ("torch_matmul", "16x16x32", "fp32")
    assert case["verdict"] != "regressed" and case["rounds"] == 3
    assert report["summary"]["bench_runs"] == 12  # 3 rounds of BASE, CUR, CUR, BASE
    assert snapshot(repo) == before
    assert git(repo, "worktree", "list").count("\n") == 0


@pytest.mark.slow  # a live confirm of 3 rounds: 30-100 s
def test_each_revision_is_measured_with_its_own_kernels(repo):
    # CUR's GEMV returns twice the product: its correctness check fails there and only there,
    # which it could not if the worker imported kernels/ from anywhere but CUR's worktree.
    gemv = repo / "kernels" / "gemv.py"
    text = gemv.read_text()
    assert "c = tl.sum(acc, axis=1)" in text
    gemv.write_text(text.replace("c = tl.sum(acc, axis=1)", "c = 2.0 * tl.sum(acc, axis=1)"))
    git(repo, "commit", "-qam", "break the gemv")
    proc = confirm(repo, "HEAD~1", "--suite", "suites/tiny.toml", "--device", "cpu", "--min-rounds", "3",
                   "--max-rounds", "3", "--filter", "kernel=gemv")
    # broken at CUR (exit 1) with the check's own words, after one round: never "too few rounds"
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    broken = [line for line in proc.stdout.splitlines() if line.startswith("broken: gemv")]
    assert len(broken) == 1 and "fails at CUR, measured at BASE: fail" in broken[0], proc.stdout
    assert "round 1:" in proc.stderr and "round 2:" not in proc.stderr
    assert git(repo, "worktree", "list").count("\n") == 0


@pytest.mark.parametrize("args, message", [
    (["HEAD~1", "--suite", "suites/tiny.toml", "--", "./bench.sh"], "drop the bench command"),
    (["HEAD~1", "--suite", "nope.toml"], "does not exist"),
    (["HEAD~1", "--suite", "suites/tiny.toml", "--filter", "kernel=nothing"], "matches"),
    (["HEAD~1", "--suite", "suites/tiny.toml", "--reference", "kernel=cublas"], "matches none of the 2"),
    (["HEAD~1", "--filter", "M<=16", "--", "./bench.sh"], "select a --suite's cases"),
    (["HEAD~1"], "name a suite"),
])
def test_bad_input_is_one_line_and_exit_2(repo, args, message):
    proc = confirm(repo, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert git(repo, "worktree", "list").count("\n") == 0


@pytest.mark.slow  # a live confirm of 3 rounds: 30-100 s
@pytest.mark.timeout(600)
def test_a_regressed_case_is_explained_from_each_side_s_first_run(repo):
    # CUR's GEMV walks K five more times (loads multiplied by zero): slower, still right.
    gemv = repo / "kernels" / "gemv.py"
    loop_end = "    c = tl.sum(acc, axis=1)\n"
    waste = ("    for _ in range(0, 5 * tl.cdiv(K, BLOCK_K)):\n"
             "        waste = tl.load(b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :] * stride_bk,\n"
             "                        mask=n_mask[:, None] & (offs_k[None, :] < K), other=0.0).to(tl.float32)\n"
             "        acc += 0.0 * waste\n\n")
    gemv.write_text(gemv.read_text().replace(loop_end, waste + loop_end))
    git(repo, "commit", "-qam", "gemv: walk K again")
    # Up to 6 rounds: each round's workers are new processes, whose spread is in the interval, and on a
    # loaded 2-core CI machine three rounds of it left this 6x step undecided once (exit 0).
    proc = confirm(repo, "HEAD~1", "--suite", "suites/tiny.toml", "--device", "cpu", "--min-rounds", "3",
                   "--max-rounds", "6", "--min-effect", "50", "--repeats", "1", "--filter", "kernel=gemv",
                   "--format", "json")
    assert proc.returncode == 1, proc.stderr
    (case,) = json.loads(proc.stdout)["cases"]
    assert case["verdict"] == "regressed"
    # The interpreter compiles nothing, but records each kernel's launch and source: the source changed.
    assert case["explain"]["reading"].startswith("the kernel's source changed, its launch did not")
    assert case["explain"]["base"]["triton"] == case["explain"]["cur"]["triton"] != ""


def test_explain_reads_the_recorded_resources_of_both_sides():
    # Real H200 rows (2026-12-01): the large-M tile at 4 warps spills.
    from types import SimpleNamespace

    from perfci.confirm.analysis import CaseConfirmation, Confirmation, SuiteShift
    from perfci.confirm.render import render_json, render_markdown, render_table
    from perfci.results import read_results

    data = ROOT / "tests" / "data" / "compare"
    key = ("matmul_tiled", "4096x4096x4096", "bf16")
    rows = {"base": read_results(data / "h200_3case_base.csv").by_key(),
            "cur": read_results(data / "h200_3case_spill_w4.csv").by_key()}
    case = CaseConfirmation(key, "regressed", "interval above the floor", ratio=5.01, ci_low=4.9, ci_high=5.1, rounds=5)
    conf = Confirmation((case,), SuiteShift("n/a", "common mode off"), {"regressed": 1}, 5, 0.05, 0.95, 1.0, "t",
                        False)
    rounds = SimpleNamespace(rows=rows, bench_runs=20, seconds=60.0)
    sides = (SimpleNamespace(ref="base", sha="a" * 40), SimpleNamespace(ref="cur", sha="b" * 40))
    reading = "config changed (num_warps 8 -> 4); spills 0 -> 188, occupancy 8 -> 4"
    assert json.loads(render_json(conf, rounds, sides, None))["cases"][0]["explain"]["reading"] == reading
    assert f"explain matmul_tiled 4096x4096x4096 bf16: {reading}" in render_table(conf, rounds, sides, None)
    assert "| **spills** | 0 | 188 |" in render_markdown(conf, rounds, sides, None)

