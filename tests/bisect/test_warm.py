"""``perfci bisect --suite``: a team's case measured from a warm worker per commit, as a team runs it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bisect.synth import git
from tests.e2e.test_kernel_repo import five_commits, team_repo, tool


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, str]:
    repo = team_repo(tmp_path_factory.mktemp("warm"))
    plant, _ = five_commits(repo)
    return repo, plant


def state(repo: Path) -> tuple[str, ...]:
    return (git(repo, "status", "--porcelain", "--untracked-files=all"), git(repo, "stash", "list"),
            git(repo, "rev-parse", "HEAD"), git(repo, "worktree", "list", "--porcelain"))


@pytest.mark.parametrize("words, said", [
    (["--suite", "gemm"], "--suite needs --case"),
    (["--suite", "gemm", "--case", "gemmlab", "--", "./bench.sh"], "drop the bench command"),
    (["--suite", "gemm", "--case", "gemmlab", "--csv-column", "median_us"], "drop --metric"),
    (["--suite", "gemm", "--case", "no_such_kernel"], "no case of suite 'gemm' matches it"),
    (["--suite", "no_such_suite", "--case", "gemmlab"], "no_such_suite"),
])
def test_bad_suite_options_are_one_line_and_exit_2(repo, words, said):
    path, _ = repo
    before = state(path)
    proc = tool(path, "bisect", "HEAD~5", "HEAD", *words)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert state(path) == before


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_bisect_with_warm_workers_names_the_planted_commit_and_leaves_the_tree(repo):
    path, plant = repo
    before = state(path)
    proc = tool(path, "bisect", "HEAD~5", "HEAD", "--suite", "gemm", "--case", "gemmlab_matmul",
                "--device", "cpu", "--repeats", "3", "--iters", "20", "--min-effect", "50", "--budget", "400",
                "--format", "json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["status"] == "culprit"
    assert report["culprit"]["sha"] == plant
    assert state(path) == before
