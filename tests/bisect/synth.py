"""Synthetic git histories with a planted slowdown, for the bisect tests and benchmark.

``make_history`` builds a linear history of ``n_commits`` after an initial GOOD
commit. ``bench.py`` (tracked, executable) prints a time: the value in
``base.txt`` times a gaussian factor of ``1 + N(0, BENCH_NOISE)``. The culprit
commit multiplies ``base.txt`` by ``1 + step``. Every bench invocation appends a
line to ``$BENCH_COUNTER`` when set, so tests can count runs from outside. With
``$BENCH_SEED_FILE`` set (the tests' default), the noise is seeded by the run's
index in the session, so a test's outcome does not change from one CI run to
the next.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BENCH = """#!{python}
import os, random
from pathlib import Path
here = Path(__file__).resolve().parent
base = float((here / "base.txt").read_text())
noise = float(os.environ.get("BENCH_NOISE", "0.01"))
counter = os.environ.get("BENCH_COUNTER")
if counter:
    with open(counter, "a") as fh:
        fh.write(os.environ.get("PERFCI_BISECT_COMMIT", "?") + "\\n")
if (here / "broken.txt").exists():
    raise SystemExit("this commit's bench is broken")
seed_file = os.environ.get("BENCH_SEED_FILE")
if seed_file:  # tests: the n-th run of a session draws the n-th seed, so a failure replays
    seeds = Path(seed_file)
    n = int(seeds.read_text() or 0) if seeds.exists() else 0
    seeds.write_text(str(n + 1))
    random.seed(n)
print("warming up 3 iterations")
print(f"time: {{base * (1.0 + random.gauss(0.0, noise)):.6f}} ms")
"""

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Synth Author", "GIT_AUTHOR_EMAIL": "synth@example.com",
    "GIT_COMMITTER_NAME": "Synth Author", "GIT_COMMITTER_EMAIL": "synth@example.com",
}


@dataclass(frozen=True)
class History:
    path: Path
    good: str
    bad: str
    culprit: str
    commits: tuple[str, ...]  # after GOOD, oldest first; the last is BAD


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, **GIT_ENV)
    out = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def make_history(path: Path, n_commits: int, culprit_index: int, step: float = 0.05,
                 broken: tuple[int, ...] = (), legacy_until: int | None = None) -> History:
    """Build the repo. ``culprit_index`` counts from 1 (the first commit after GOOD).

    ``broken`` commits have a bench that exits 1; ``legacy_until`` keeps a tracked
    ``legacy.txt`` from GOOD up to that commit, so the user's untracked file of
    the same name collides with old checkouts.
    """
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "commit.gpgsign", "false")
    (path / "bench.py").write_text(BENCH.format(python=sys.executable))
    (path / "bench.py").chmod(0o755)
    (path / "base.txt").write_text("10.0\n")
    (path / "notes.txt").write_text("notes\n")
    (path / "staged.txt").write_text("staged\n")
    (path / ".gitignore").write_text("build/\n")
    (path / "log.txt").write_text("commit 0\n")
    if legacy_until:
        (path / "legacy.txt").write_text("old tracked legacy\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "GOOD: initial kernels")
    good = git(path, "rev-parse", "HEAD")
    commits = []
    for i in range(1, n_commits + 1):
        with open(path / "log.txt", "a") as fh:
            fh.write(f"commit {i}\n")
        subject = f"refactor step {i}"
        if i == culprit_index:
            (path / "base.txt").write_text(f"{10.0 * (1.0 + step):.6f}\n")
            subject = f"shrink BLOCK_K in step {i}"
        if i in broken:
            (path / "broken.txt").write_text("x\n")
        elif (path / "broken.txt").exists():
            (path / "broken.txt").unlink()
        if legacy_until and i == legacy_until:
            (path / "legacy.txt").unlink()
        git(path, "add", "-A")
        git(path, "commit", "-qm", subject)
        commits.append(git(path, "rev-parse", "HEAD"))
    return History(path, good, commits[-1], commits[culprit_index - 1], tuple(commits))


def dirty_the_tree(path: Path) -> None:
    """Modified, staged, partly staged, untracked, ignored, and an untracked file tracked in the past."""
    (path / "notes.txt").write_text("notes\nunstaged edit\n")
    (path / "staged.txt").write_text("staged\nstaged edit\n")
    git(path, "add", "staged.txt")
    (path / "staged.txt").write_text("staged\nstaged edit\nthen an unstaged edit on top\n")
    (path / "scratch.txt").write_text("my untracked notes\n")
    (path / "legacy.txt").write_text("my NEW untracked legacy, not the old tracked one\n")
    (path / "build").mkdir(exist_ok=True)
    (path / "build" / "out.bin").write_bytes(b"\x00ignored build output\xff")


def snapshot(path: Path) -> dict:
    """Everything the user could notice: status, diffs, HEAD, branch, stashes, every file's bytes."""
    files = {}
    for file in sorted(path.rglob("*")):
        rel = file.relative_to(path)
        if rel.parts[0] == ".git" or not file.is_file():
            continue
        files[str(rel)] = file.read_bytes()
    return {
        "status": git(path, "status", "--porcelain=v2", "--branch", "--untracked-files=all", "--ignored"),
        "diff": git(path, "diff"),
        "diff_cached": git(path, "diff", "--cached"),
        "head": git(path, "rev-parse", "HEAD"),
        "branch": git(path, "symbolic-ref", "HEAD"),
        "stash": git(path, "stash", "list"),
        "worktrees": git(path, "worktree", "list", "--porcelain"),
        "files": files,
    }
