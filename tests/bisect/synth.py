"""Synthetic git histories with a planted slowdown, for the bisect tests and benchmark.

``make_history`` builds a linear history of ``n_commits`` after an initial GOOD
commit. ``bench.py`` (tracked, executable) prints a time: the value in
``base.txt`` times a gaussian factor of ``1 + N(0, BENCH_NOISE)``. The culprit
commit multiplies ``base.txt`` by ``1 + step``. Every bench invocation appends a
line to ``$BENCH_COUNTER`` when set, so tests can count runs from outside. With
``$BENCH_SEED_FILE`` set (the tests' default), the noise is seeded by the run's
index in the session, so a test's outcome does not change from one CI run to
the next (``$BENCH_SEED_BASE`` gives a benchmark's trials different streams).

Outliers, for the tests and ``benchmarks/bisect_outliers.py``:
``$BENCH_OUTLIER_AT`` is ``SHA:K:FACTOR[,...]``: the K-th run (from 0) at commit
SHA is multiplied by FACTOR (the run's index at its commit is counted in
``$BENCH_COUNTER``, which must be set). ``$BENCH_OUTLIER_RATE`` makes any other
run an outlier with that probability, ``$BENCH_OUTLIER_SIZE`` off (default 0.3),
upwards, downwards or either (``$BENCH_OUTLIER_SIGN`` +1, -1 or 0; default +1).
:mod:`tests.bisect.simulate` draws the same runs in-process.
"""
from __future__ import annotations

import os
import random
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
commit = os.environ.get("PERFCI_BISECT_COMMIT", "?")
index = 0  # this run's index at its commit
if counter:
    if os.path.exists(counter):
        with open(counter) as fh:
            index = sum(1 for line in fh if line.strip() == commit)
    with open(counter, "a") as fh:
        fh.write(commit + "\\n")
if (here / "broken.txt").exists():
    raise SystemExit("this commit's bench is broken")
seed_file = os.environ.get("BENCH_SEED_FILE")
if seed_file:  # tests: the n-th run of a session draws the n-th seed, so a failure replays
    seeds = Path(seed_file)
    n = int(seeds.read_text() or 0) if seeds.exists() else 0
    seeds.write_text(str(n + 1))
    base_seed = os.environ.get("BENCH_SEED_BASE")
    random.seed(n if base_seed is None else f"{{base_seed}}:{{n}}")
value = base * (1.0 + random.gauss(0.0, noise))
planted = {{}}
for item in filter(None, os.environ.get("BENCH_OUTLIER_AT", "").split(",")):
    sha, k, factor = item.split(":")
    planted[(sha, int(k))] = float(factor)
rate = float(os.environ.get("BENCH_OUTLIER_RATE", "0"))
if (commit, index) in planted:
    value *= planted[(commit, index)]
elif rate and random.random() < rate:
    sign = int(os.environ.get("BENCH_OUTLIER_SIGN", "1")) or random.choice((1, -1))
    value *= 1.0 + sign * float(os.environ.get("BENCH_OUTLIER_SIZE", "0.3"))
print("warming up 3 iterations")
print(f"time: {{value:.6f}} ms")
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


SIM_GOOD = "c00"  # how tests/bisect/simulate.py names GOOD; the range is c01 .. cNN, the last one BAD


def endpoint_outliers(rng: random.Random, n_commits: int, count: int = 1, size: float = 0.3,
                      direction: str = "toward", repeats: int = 5, at: str = "both") -> dict[str, dict[int, float]]:
    """``count`` outliers at each endpoint (``at``: both, good or bad), at random runs among its first ``repeats``.

    ``toward``: GOOD's are slower and BAD's faster (each towards the other endpoint,
    the direction that hides a step from the rank test); ``away``: the opposite;
    ``random``: either, per outlier. Keys are the simulation's commit names (``c00``
    GOOD, ``cNN`` BAD); ``benchmarks/bisect_outliers.py`` maps them to shas for
    ``$BENCH_OUTLIER_AT``.
    """
    bad = f"c{n_commits:02d}"
    planted: dict[str, dict[int, float]] = {}
    for sha, toward in ((SIM_GOOD, +1), (bad, -1)):
        if at not in ("both", "good" if sha == SIM_GOOD else "bad"):
            continue
        runs = rng.sample(range(repeats), count)
        signs = {"toward": [toward] * count, "away": [-toward] * count,
                 "random": [rng.choice((1, -1)) for _ in range(count)]}[direction]
        planted[sha] = {k: 1.0 + sign * size for k, sign in zip(runs, signs)}
    return planted

