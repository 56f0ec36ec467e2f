"""One ``perfci bisect`` session: validate, make the worktrees, search, record, restore.

This is the IO edge that ties :mod:`perfci.git` (where the code is) to
:mod:`search` (what to measure, and what the numbers mean). Every commit runs in
a temporary ``git worktree`` (:mod:`perfci.bisect.trees`), whatever ``--jobs``
is, so runs of GOOD, BAD and the probed commits can alternate within seconds:
the user's tree, index, stash, HEAD and branch are never touched, and an
uncommitted change stays where it is (the bench measures committed code).
"""
from __future__ import annotations

import os
import shutil
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from perfci import git, gitsession
from perfci.benchcmd import Deadline, run_command
from perfci.bisect.cache import Cache
from perfci.bisect.core import BisectResult, CommitVerdict, StepRecord
from perfci.bisect.result import to_result
from perfci.bisect.search import BisectConfig, Measurer, Progress, search_in_slots
from perfci.bisect.trees import TREES_PER_SLOT, GitSlot, SlotTrees, WarmSlot, Worktrees
from perfci.errors import PerfciError
from perfci.files import atomic_write_text
from perfci.measure.sides import WarmSides

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
    if os.path.isabs(program):
        local = Path(program)
        if not local.is_file():
            raise PerfciError(f"bench command {program} does not exist")
        if not os.access(local, os.X_OK):
            raise PerfciError(f"bench command {program} is not executable (chmod +x {program})")
        return
    # A relative path runs in each commit's checkout: what counts is the file in the commits.
    relative = os.path.normpath(program)
    mode = git.file_mode(repo, bad_sha, relative)
    if mode == "100755":
        return
    if mode:
        raise PerfciError(f"bench command {program} is not executable in {bad_sha[:12]} (mode {mode})")
    local = root / program
    if local.is_file():
        if not os.access(local, os.X_OK):
            raise PerfciError(f"bench command {program} is not executable (chmod +x {program})")
        raise PerfciError(f"bench command {program} is not committed in BAD {bad_sha[:12]}: bisect runs each "
                          f"commit's own files, so commit it (or give an absolute path)")
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
    if cfg.suite is None:
        _check_bench_command(repo, cfg.bench.command, bad)
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
    gpus = _gpu_list(cfg)
    if cfg.jobs > 1 and gpus is not None and len(gpus) < cfg.jobs:
        raise PerfciError(f"--jobs {cfg.jobs} needs {cfg.jobs} GPUs but only {len(gpus)} are visible "
                          f"({','.join(gpus)}); pass --gpus or lower --jobs")
    branch, head = git.current_position(repo)
    session_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    journal = gitsession.Journal(journal_path, session_id, "worktrees", branch, head, arguments=cfg.arguments)
    journal.save()
    notes = []
    if git.is_dirty(repo.working_tree_dir) or git.run(repo, "ls-files", "--others", "--exclude-standard",
                                                       check=False):
        # In the report, not on stderr: a bench with no metric must still end in one error line.
        notes.append("your uncommitted changes stay as they are in your tree: the bench measures the "
                     "committed code of each commit")
    try:
        result = _bisect(cfg, repo, journal, good, bad, commits, gpus, progress)
    finally:
        warnings = _restore(repo, journal, cfg.pause)
        for warning in warnings:
            progress.note(f"warning: {warning}")
    return replace(result, notes=tuple(notes) + result.notes, warnings=tuple(warnings))


def _restore(repo, journal: gitsession.Journal, pause: gitsession.Pause) -> list[str]:
    """Remove the worktrees and the journal; a signal in the "restore" phase waits until that is done."""
    interrupted = False
    try:
        with gitsession.deferred_signals():
            pause("restore")
    except KeyboardInterrupt:
        interrupted = True
    warnings = gitsession.restore_tree(repo, journal)
    if interrupted:
        raise KeyboardInterrupt
    return warnings


def _slots(cfg, worktrees: Worktrees, cache: Cache, gpus, progress, stack: ExitStack, deadline) -> list:
    """A slot per ``--jobs``: bench runs in its trees, or (``--suite``) warm workers there, on its GPU."""
    slots = []
    for i in range(cfg.jobs):
        gpu = gpus[i] if gpus and (cfg.jobs > 1 or cfg.gpus) else None
        env = _slot_env(gpu)
        if cfg.suite is None:
            trees = SlotTrees(worktrees, f"slot{i}", cfg.bench, env, cache, deadline=deadline)
            slots.append(GitSlot(f"slot{i}", trees, env))
            continue
        gpu_env = {var: gpu for var in GPU_ENV_VARS} if gpu is not None else {}
        sides = stack.enter_context(WarmSides(cfg.suite, progress.note, capacity=TREES_PER_SLOT, env=gpu_env))
        trees = SlotTrees(worktrees, f"slot{i}", cfg.bench, env, cache, deadline=deadline, on_move=sides.close)
        slots.append(WarmSlot(f"slot{i}", trees, sides))
    return slots


def _bisect(cfg, repo, journal, good, bad, commits, gpus, progress) -> BisectResult:
    journal.update(phase="measuring")
    cache = Cache(git.state_dir(repo) / "cache.json")
    worktrees = Worktrees(repo, journal, cfg.pause)
    deadline = None if cfg.total_budget_s is None else \
        Deadline.after(cfg.total_budget_s, cfg.total_budget_name)
    order = {good: 0, **{sha: i + 1 for i, sha in enumerate(commits)}}
    measurer = Measurer(cfg, cache, order, git.subjects(repo, good, bad))
    with ExitStack() as stack:  # the warm workers stop before the worktrees they run in are removed
        slots = _slots(cfg, worktrees, cache, gpus, progress, stack, deadline)
        if cfg.jobs > 1:
            where = f", GPUs {','.join(gpus[:cfg.jobs])}" if gpus else ""
            progress.note(f"{cfg.jobs} slots, each with its own worktrees under the system temp folder{where}")
        out = search_in_slots(cfg, slots, good, bad, commits, measurer, progress)

    def describe(sha: str) -> tuple[dict, str]:
        return git.commit_info(repo, sha), git.diff_stat(repo, sha)

    result = to_result(cfg, out, good, bad, commits, measurer, describe)
    if out.state is not None:
        try:
            log = _replay_marks(repo, worktrees, good, bad, cfg.first_parent, result.steps, result)
        except PerfciError as err:  # git's log is a record: without it the answer still stands
            progress.note(f"warning: git bisect log not written: {err.message}")
            return replace(result, notes=(*result.notes, f"git bisect log not written: {err.message}"))
        result = replace(result, bisect_log=log)
    return result


def _replay_marks(repo, worktrees: Worktrees, good: str, bad: str, first_parent: bool,
                  steps: Sequence[StepRecord], result: BisectResult) -> str:
    """``git bisect`` told every verdict, in a worktree with no files, so its log tells the same story.

    The log is saved to ``.git/perfci-bisect/bisect.log``. A worktree of its
    own (``--no-checkout``, removed with the others) keeps git's bisect state
    out of the user's tree. When the bracket closed but the culprit's own step
    was not confirmed, git's "first bad commit" line is followed by perfci's
    word that it is not the answer.
    """
    path = worktrees.add(good, "log", checkout=False)
    tree = git.open_repo(path)
    git.bisect_start(tree, bad, good, first_parent)
    for record in steps:
        word = {CommitVerdict.GOOD: "good", CommitVerdict.BAD: "bad"}.get(record.verdict, "skip")
        git.bisect_mark(tree, record.sha, word)
    log = git.run(tree, "bisect", "log", check=False)
    git.run(tree, "bisect", "reset", check=False)
    if result.status != "culprit" and "# first bad commit:" in log:
        log += f"\n# perfci: not confirmed ({result.status}, exit {result.exit_code}): {result.message}"
    if log:
        atomic_write_text(git.state_dir(repo) / "bisect.log", log + "\n")
    return log


def abort(repo_path: Path, pause: gitsession.Pause = gitsession.no_pause) -> tuple[gitsession.Journal, list[str]]:
    """Restore the repository of a session that was killed; returns its journal and warnings."""
    repo = git.open_repo(repo_path)
    journal_path = git.state_dir(repo) / "journal.json"
    if not journal_path.exists():
        raise PerfciError("no unfinished perfci bisect here: nothing to abort or resume")
    journal = gitsession.Journal.load(journal_path)
    warnings = gitsession.restore_tree(repo, journal, pause)
    return journal, warnings
