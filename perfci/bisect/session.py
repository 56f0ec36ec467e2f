"""One ``perfci bisect`` session: validate, stash, measure, search, restore.

This is the IO edge that ties :mod:`perfci.git` (where the code is) to
:mod:`search` (what to measure next, and what the numbers mean). Measuring happens
in *slots*: the user's own tree (serial mode, after stashing) or one temporary
``git worktree`` per job (``--jobs N``), each with its own GPU.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from perfci import git, gitsession
from perfci.benchcmd import run_command
from perfci.bisect.cache import Cache
from perfci.bisect.core import BisectResult, Verdict
from perfci.bisect.search import BisectConfig, Progress, Slot, _search
from perfci.errors import PerfciError

GPU_ENV_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


# --------------------------------------------------------------------------- validation


def _check_bench_command(repo, command: Sequence[str], bad_sha: str) -> None:
    if not command:
        raise PerfciError("no bench command: put it after '--', e.g. perfci bisect v1 HEAD -- ./bench.sh")
    if len(command) == 1 and any(c.isspace() for c in command[0]):
        return  # a shell line; the shell reports what it cannot find, as a failed run
    program = command[0]
    root = Path(repo.working_tree_dir)
    if "/" not in program:
        if shutil.which(program) is None:
            raise PerfciError(f"bench command {program!r} is not on PATH")
        return
    local = (root / program).resolve() if not os.path.isabs(program) else Path(program)
    if local.is_file():
        if not os.access(local, os.X_OK):
            raise PerfciError(f"bench command {program} is not executable (chmod +x {program})")
        return
    # The script may exist only in the commits being bisected, not in the user's tree.
    relative = os.path.normpath(program)
    mode = git.file_mode(repo, bad_sha, relative)
    if mode == "100755":
        return
    if mode:
        raise PerfciError(f"bench command {program} is not executable in {bad_sha[:12]} (mode {mode})")
    raise PerfciError(f"bench command {program} does not exist (not in the tree, not in BAD {bad_sha[:12]})")


def prepare(cfg: BisectConfig):
    """Validate everything that can be checked before touching the repository."""
    repo = git.open_repo(cfg.repo_path)
    journal_path = git.state_dir(repo) / "journal.json"
    if journal_path.exists():
        raise PerfciError("an earlier perfci bisect did not finish; run 'perfci bisect --abort' "
                          "(restore only) or 'perfci bisect --resume' (restore, then continue)")
    busy = git.operation_in_progress(repo)
    if busy:
        raise PerfciError(f"cannot bisect now: {busy}")
    good = git.resolve(repo, cfg.good, "GOOD")
    bad = git.resolve(repo, cfg.bad, "BAD")
    if good == bad:
        raise PerfciError(f"GOOD and BAD are the same commit {good[:12]}: nothing to bisect")
    if not git.is_ancestor(repo, good, bad):
        raise PerfciError(f"GOOD {cfg.good} ({good[:12]}) is not an ancestor of BAD {cfg.bad} ({bad[:12]})")
    commits = git.commit_range(repo, good, bad, cfg.first_parent)
    if not commits:
        raise PerfciError(f"the range {cfg.good}..{cfg.bad} is empty")
    _check_bench_command(repo, cfg.bench.command, bad)
    if cfg.jobs == 1:
        hazards = git.ignored_paths_in_history(repo, good, bad)
        if hazards:
            raise PerfciError(f"ignored file {hazards[0]} is tracked in the range and checkout would overwrite it; "
                              "move it away, or use --jobs 2 (separate worktrees never touch your tree)")
    return repo, journal_path, good, bad, commits


def _gpu_list(cfg: BisectConfig) -> list[str] | None:
    if cfg.gpus:
        return list(cfg.gpus)
    for var in GPU_ENV_VARS:
        value = os.environ.get(var)
        if value:
            return [v.strip() for v in value.split(",") if v.strip()]
    if shutil.which("nvidia-smi"):
        try:
            result = run_command(["nvidia-smi", "-L"], Path.cwd(), timeout=20)
            count = sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))
            if count:
                return [str(i) for i in range(count)]
        except OSError:
            pass
    return None


def _slot_env(gpu: str | None) -> dict:
    env = dict(os.environ)
    if gpu is not None:
        for var in GPU_ENV_VARS:
            env[var] = gpu
    return env


# --------------------------------------------------------------------------- entry points


def run(cfg: BisectConfig, progress: Progress) -> BisectResult:
    """Bisect, and leave the user's repository exactly as it was, whatever happens."""
    repo, journal_path, good, bad, commits = prepare(cfg)
    branch, head = git.current_position(repo)
    session_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    mode = "worktrees" if cfg.jobs > 1 else "tree"
    journal = gitsession.Journal(journal_path, session_id, mode, branch, head, arguments=cfg.arguments)
    journal.save()
    cache = Cache(git.state_dir(repo) / "cache.json")
    warnings: list[str] = []
    try:
        if mode == "worktrees":
            result = _run_in_worktrees(cfg, repo, journal, good, bad, commits, cache, progress)
        else:
            result = _run_in_tree(cfg, repo, journal, good, bad, commits, cache, progress)
    finally:
        warnings = gitsession.restore_tree(repo, journal, cfg.pause)
        for warning in warnings:
            progress.note(f"warning: {warning}")
    if warnings:
        result = replace(result, warnings=tuple(warnings))
    return result


def _run_in_tree(cfg, repo, journal, good, bad, commits, cache, progress) -> BisectResult:
    with gitsession.deferred_signals():
        stash_sha = gitsession.stash_push(repo, journal, cfg.pause)
        journal.update(stash_sha=stash_sha, phase="stashed")
    journal.update(bisect_started=True, phase="measuring")
    git.bisect_start(repo, bad, good, cfg.first_parent)

    mark = GitMarks(repo, cfg.first_parent, good, bad)
    slot = Slot(Path(repo.working_tree_dir), _slot_env(cfg.gpus[0] if cfg.gpus else None),
                lambda sha: git.checkout(repo, sha))
    result = _search(cfg, repo, [slot], good, bad, commits, cache, progress, mark)
    return replace(result, bisect_log=git.save_bisect_log(repo))


class GitMarks:
    """Tells ``git bisect`` (see :func:`perfci.git.bisect_start`) every verdict, so its log tells the same story.

    Called after each round with every verdict so far. When one given earlier
    changed (the endpoints were measured again and it was judged again), git's
    bisect is started afresh and told the verdicts as they now stand: with
    ``--no-checkout``, ``git bisect reset`` leaves HEAD and the tree alone.
    """

    def __init__(self, repo, first_parent: bool, good: str, bad: str):
        self.repo, self.first_parent, self.good, self.bad = repo, first_parent, good, bad
        self.marked: list[tuple[str, Verdict]] = []

    def __call__(self, verdicts: Sequence[tuple[str, Verdict]]) -> None:
        verdicts = list(verdicts)
        if verdicts[:len(self.marked)] != self.marked:
            git.bisect_reset(self.repo, save_log=False)
            git.bisect_start(self.repo, self.bad, self.good, self.first_parent)
            self.marked = []
        for sha, verdict in verdicts[len(self.marked):]:
            word = {Verdict.GOOD: "good", Verdict.BAD: "bad"}.get(verdict, "skip")
            git.bisect_mark(self.repo, sha, word)
        self.marked = verdicts


def _run_in_worktrees(cfg, repo, journal, good, bad, commits, cache, progress) -> BisectResult:
    gpus = _gpu_list(cfg)
    if gpus is not None and len(gpus) < cfg.jobs:
        raise PerfciError(f"--jobs {cfg.jobs} needs {cfg.jobs} GPUs but only {len(gpus)} are visible "
                          f"({','.join(gpus)}); pass --gpus or lower --jobs")
    journal.update(phase="measuring")
    paths = gitsession.add_worktrees(repo, cfg.jobs, good, journal)
    slots = []
    for i, path in enumerate(paths):
        slots.append(Slot(path, _slot_env(gpus[i] if gpus else None),
                          lambda sha, p=path: git.checkout_in(p, sha)))
    if gpus:
        progress.note(f"{cfg.jobs} worktrees under {paths[0].parent}, GPUs {','.join(gpus[:cfg.jobs])}")

    def mark(verdicts: Sequence[tuple[str, Verdict]]) -> None:
        pass  # the journal and the cache are the log here; git bisect state is per-tree

    return _search(cfg, repo, slots, good, bad, commits, cache, progress, mark)


def abort(repo_path: Path, pause: gitsession.Pause = gitsession.no_pause) -> tuple[gitsession.Journal, list[str]]:
    """Restore the repository of a session that was killed; returns its journal and warnings."""
    repo = git.open_repo(repo_path)
    journal_path = git.state_dir(repo) / "journal.json"
    if not journal_path.exists():
        raise PerfciError("no unfinished perfci bisect here: nothing to abort or resume")
    journal = gitsession.Journal.load(journal_path)
    warnings = gitsession.restore_tree(repo, journal, pause)
    return journal, warnings
