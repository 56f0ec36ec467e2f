"""A session in the user's repository (a bisect, a confirm): its journal, the stash, the worktrees, the restore.

The user's working tree is the one thing a session must never lose. The rules
kept here:
  * everything (tracked, staged, untracked) goes into one stash whose message
    names the session, and the stash's sha goes into a journal on disk before
    the first checkout;
  * the stash is applied back by its sha with ``--index``, the result is checked
    against the stash's trees, and only then is the stash dropped;
  * ``git clean`` is never run, and ignored files are never touched.
Every git command goes through :mod:`perfci.git`.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from perfci import git
from perfci.errors import PerfciError
from perfci.files import atomic_write_text

STASH_PREFIX = "perfci-bisect: "

# Called with a phase's name as a session enters it ("stash" and "restore" here).
# The fault tests pass one that signals the process there; a real session goes straight through.
Pause = Callable[[str], None]


@contextlib.contextmanager
def deferred_signals():
    """Hold SIGINT/SIGTERM until the block ends, then raise KeyboardInterrupt.

    Used around the stash and the restore, where stopping half way is what would
    lose work. Only the main thread may install handlers; elsewhere this is a no-op.
    """
    received: list[int] = []

    def remember(signum, frame):  # noqa: ARG001
        received.append(signum)

    try:
        previous = {s: signal.signal(s, remember) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:
        raise KeyboardInterrupt


def no_pause(phase: str) -> None:  # noqa: ARG001
    """The default :data:`Pause`: nothing happens between phases."""


# --------------------------------------------------------------------------- journal


@dataclass
class Journal:
    """What a killed session needs to put the user's repository back. Saved atomically."""

    path: Path
    session_id: str
    mode: str  # "tree" (user's tree, with stash) or "worktrees"
    original_branch: str | None
    original_head: str
    phase: str = "starting"
    stash_sha: str | None = None
    bisect_started: bool = False
    worktrees: tuple[str, ...] = ()
    arguments: dict | None = None

    @property
    def stash_message(self) -> str:
        return STASH_PREFIX + self.session_id

    def save(self) -> None:
        data = {k: v for k, v in self.__dict__.items() if k != "path"}
        data["worktrees"] = list(self.worktrees)
        atomic_write_text(self.path, json.dumps(data, indent=1))

    def update(self, **changes) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
        self.save()

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path) -> "Journal":
        try:
            data = json.loads(path.read_text())
            data["worktrees"] = tuple(data.get("worktrees", ()))
            return cls(path=path, **data)
        except (OSError, ValueError, TypeError) as err:
            raise PerfciError(f"cannot read the journal {path}: {err}") from None


# --------------------------------------------------------------------------- stash and restore


def stash_push(repo, journal: Journal, pause: Pause = no_pause) -> str | None:
    """Stash tracked, staged and untracked changes; return the stash's sha (None if clean)."""
    before = {sha for _, sha, _ in git.stash_entries(repo)}
    journal.update(phase="stashing")
    git.run(repo, "stash", "push", "--include-untracked", "-m", journal.stash_message)
    pause("stash")
    for _, sha, message in git.stash_entries(repo):
        if sha not in before and message.endswith(journal.stash_message):
            return sha
    return None


def find_own_stash(repo, journal: Journal) -> str | None:
    if journal.stash_sha:
        return journal.stash_sha
    for _, sha, message in git.stash_entries(repo):
        if message.endswith(journal.stash_message):
            return sha
    return None


def tree_matches_stash(repo, stash_sha: str) -> bool:
    """Do the index, the tracked files and the untracked files equal what was stashed?"""
    try:
        if git.run(repo, "write-tree") != git.run(repo, "rev-parse", f"{stash_sha}^2^{{tree}}"):
            return False
        if git.run(repo, "diff", "--name-only", stash_sha, "--"):
            return False
        if not git.run(repo, "rev-parse", "--verify", "--quiet", f"{stash_sha}^3", check=False):
            return True  # no third parent: nothing untracked was stashed
        root = Path(repo.working_tree_dir)
        for row in filter(None, git.run(repo, "ls-tree", "-r", "-z", f"{stash_sha}^3").split("\0")):
            meta, name = row.split("\t", 1)
            blob = meta.split()[2]
            path = root / name
            if not path.is_file() and not path.is_symlink():
                return False
            if git.run(repo, "hash-object", "--", str(path)) != blob:
                return False
        return True
    except PerfciError:
        return False


def displace_leftovers(repo, stash_sha: str) -> list[str]:
    """Move untracked files the session created out of the user's tree.

    Every untracked, non-ignored file of the user's went into the stash, so any
    such file now was written by a build or a bench (``--out r.csv``). One that
    the stash also holds would block the stash from coming back; any other would
    be a file the user never had. They go to .git/perfci-bisect/displaced/ (moved,
    never deleted) so the tree comes back exactly as it was.
    """
    root = Path(repo.working_tree_dir)
    listing = git.run(repo, "ls-files", "--others", "--exclude-standard", "-z", check=False)
    leftovers = [rel for rel in listing.split("\0") if rel]
    destination = git.state_dir(repo) / "displaced" / stash_sha[:12]
    for rel in leftovers:
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(root / rel), str(target))
    return leftovers


def restore_stash(repo, stash_sha: str) -> str | None:
    """Apply the stash by sha with its index, verify, then drop it. Returns a warning or None."""
    recover = (f"your changes are safe in stash {stash_sha[:12]}; get them back with: "
               f"git stash apply --index {stash_sha}")
    displace_leftovers(repo, stash_sha)
    if not tree_matches_stash(repo, stash_sha):
        try:
            git.run(repo, "stash", "apply", "--index", stash_sha)
        except PerfciError as err:
            return f"could not re-apply your changes ({err.message[:200]}); {recover}"
        if not tree_matches_stash(repo, stash_sha):
            return f"your changes were re-applied but do not match what was stashed; {recover}"
    for ref, sha, _ in git.stash_entries(repo):
        if sha == stash_sha:
            git.run(repo, "stash", "drop", ref)
            break
    return None


def restore_tree(repo, journal: Journal, pause: Pause = no_pause) -> list[str]:
    """Put the user's repository back as the journal says it was. Returns warnings."""
    warnings: list[str] = []
    with deferred_signals():
        if journal.mode == "worktrees":
            remove_worktrees(repo, journal.worktrees)
            journal.delete()
            return warnings
        # Before "stashed" no checkout has happened, so the tree is still the user's own.
        tree_is_ours = journal.phase not in ("starting", "stashing")
        stash_sha = find_own_stash(repo, journal)
        if tree_is_ours:
            journal.update(phase="restoring")
        if journal.bisect_started:
            git.bisect_reset(repo)
        moved = git.current_position(repo) != (journal.original_branch, journal.original_head)
        if moved:
            if tree_is_ours or stash_sha is not None:
                git.return_to(repo, journal.original_branch, journal.original_head)
            else:
                warnings.append("HEAD is not where bisect started, but bisect never moved it; left as it is")
        pause("restore")
        if stash_sha:
            problem = restore_stash(repo, stash_sha)
            if problem:
                warnings.append(problem)
        journal.delete()
    return warnings


# --------------------------------------------------------------------------- worktrees


def add_worktrees(repo, count: int, start: str, journal: Journal) -> list[Path]:
    with deferred_signals():  # the folder is in the journal before an interrupt is let in
        base = Path(tempfile.mkdtemp(prefix="perfci-bisect-"))
        paths = [base / f"wt{i}" for i in range(count)]
        journal.update(worktrees=tuple(str(p) for p in paths))
    for path in paths:
        git.run(repo, "worktree", "add", "-q", "--detach", str(path), start)
    return paths


def remove_worktrees(repo, paths) -> None:
    parents = set()
    for raw in paths:
        path = Path(raw)
        parents.add(path.parent)
        # A worktree git was still adding when perfci was killed is locked ("initializing"),
        # and neither `remove --force` nor `prune` touches a locked one.
        git.run(repo, "worktree", "unlock", str(path), check=False)
        if path.exists():
            git.run(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
            shutil.rmtree(path, ignore_errors=True)  # a temp dir of ours, never the user's tree
    git.run(repo, "worktree", "prune", check=False)
    for parent in parents:
        if parent.name.startswith("perfci-bisect-"):
            shutil.rmtree(parent, ignore_errors=True)
