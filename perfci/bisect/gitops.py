"""The git edge of ``perfci bisect``: refs, ranges, stash, journal, worktrees.

The user's working tree is the one thing bisect must never lose. The rules this
module keeps:
  * everything (tracked, staged, untracked) goes into one stash whose message
    names this session, and the stash's sha goes into a journal on disk before
    the first checkout;
  * the stash is applied back by its sha with ``--index``, the result is checked
    against the stash's trees, and only then is the stash dropped;
  * ``git clean`` is never run, and ignored files are never touched.
"""
from __future__ import annotations

import json
import shutil
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from perfci.files import atomic_write_text
from perfci.errors import PerfciError

JOURNAL_DIR = "perfci-bisect"
STASH_PREFIX = "perfci-bisect: "


def open_repo(path: Path):
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise PerfciError(f"{path} is not inside a git repository") from None
    if repo.bare:
        raise PerfciError(f"{repo.git_dir} is a bare repository; run perfci bisect in a working tree")
    return repo


def state_dir(repo) -> Path:
    """``.git/perfci-bisect`` of the main repository (shared by its worktrees)."""
    return Path(repo.common_dir) / JOURNAL_DIR


def git_run(repo, *args: str, check: bool = True) -> str:
    """``git <args>`` in the repo's tree; a failure becomes a one-line PerfciError."""
    import git

    try:
        return repo.git.execute(["git", *args], with_extended_output=False)
    except git.GitCommandError as err:
        if not check:
            return ""
        detail = (err.stderr or "").strip().replace("\n", " ").removeprefix("stderr: ").strip(" '")
        raise PerfciError(f"git {' '.join(args[:3])} failed: {detail[:300]}") from None


def resolve(repo, ref: str, role: str) -> str:
    import git

    try:
        return repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")
    except git.GitCommandError:
        raise PerfciError(f"{role} {ref!r} is not a commit in {repo.working_tree_dir}") from None


def is_ancestor(repo, older: str, newer: str) -> bool:
    import git

    try:
        repo.git.merge_base("--is-ancestor", older, newer)
        return True
    except git.GitCommandError:
        return False


def commit_range(repo, good: str, bad: str, first_parent: bool) -> list[str]:
    """Candidates oldest first: commits after GOOD up to and including BAD."""
    args = ["rev-list", "--reverse", "--topo-order"]
    args += ["--first-parent"] if first_parent else ["--ancestry-path"]
    out = git_run(repo, *args, f"{good}..{bad}")
    return [line for line in out.splitlines() if line]


def operation_in_progress(repo) -> str | None:
    """Why bisect must not start now, or None: never stack on a half-done git operation."""
    git_dir = Path(repo.git_dir)
    markers = {
        "rebase-merge": "a rebase is in progress (git rebase --continue or --abort first)",
        "rebase-apply": "a rebase or git am is in progress (finish or --abort it first)",
        "MERGE_HEAD": "a merge is in progress (commit or git merge --abort first)",
        "CHERRY_PICK_HEAD": "a cherry-pick is in progress (git cherry-pick --continue or --abort first)",
        "REVERT_HEAD": "a revert is in progress (git revert --continue or --abort first)",
        "BISECT_LOG": "a git bisect is already running (git bisect reset first)",
    }
    for name, why in markers.items():
        if (git_dir / name).exists():
            return why
    return None


def current_position(repo) -> tuple[str | None, str]:
    """(branch name or None when detached, HEAD sha)."""
    head = git_run(repo, "rev-parse", "HEAD")
    branch = git_run(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False) or None
    return branch, head


def ignored_paths_in_history(repo, good: str, bad: str) -> list[str]:
    """Ignored files in the user's tree that some commit in range tracks.

    ``git checkout`` treats ignored files as expendable and overwrites them
    without a word; the stash does not hold them, so they would be lost.
    """
    ignored = git_run(repo, "ls-files", "--others", "--ignored", "--exclude-standard", "-z").split("\0")
    ignored = [p for p in ignored if p]
    if not ignored:
        return []
    tracked = set(git_run(repo, "ls-tree", "-r", "--name-only", "-z", good).split("\0"))
    tracked |= set(git_run(repo, "log", "--format=", "--name-only", "-z", f"{good}..{bad}").replace("\n", "\0").split("\0"))
    return sorted(p for p in ignored if p in tracked)


# --------------------------------------------------------------------------- signals


@contextmanager
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


# The phases where a signal must still leave the user's tree intact, in the
# order a bisect reaches them.
PHASES = ("stash", "checkout", "build", "bench", "restore")

# Called with the phase's name as the session enters it. The fault tests pass
# one that signals the process there; a real bisect goes straight through.
Pause = Callable[[str], None]


def no_pause(phase: str) -> None:  # noqa: ARG001
    """The default :data:`Pause`: nothing happens between phases."""


# --------------------------------------------------------------------------- journal


@dataclass
class Journal:
    """What a killed bisect needs to put the user's repository back. Saved atomically."""

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
            raise PerfciError(f"cannot read the bisect journal {path}: {err}") from None


# --------------------------------------------------------------------------- stash


def stash_entries(repo) -> list[tuple[str, str, str]]:
    """(ref like stash@{0}, sha, message) for every stash entry."""
    out = git_run(repo, "stash", "list", "--format=%gd%x00%H%x00%gs", check=False)
    rows = []
    for line in out.splitlines():
        parts = line.split("\0")
        if len(parts) == 3:
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def stash_push(repo, journal: Journal, pause: Pause = no_pause) -> str | None:
    """Stash tracked, staged and untracked changes; return the stash's sha (None if clean)."""
    before = {sha for _, sha, _ in stash_entries(repo)}
    journal.update(phase="stashing")
    git_run(repo, "stash", "push", "--include-untracked", "-m", journal.stash_message)
    pause("stash")
    for _, sha, message in stash_entries(repo):
        if sha not in before and message.endswith(journal.stash_message):
            return sha
    return None


def find_own_stash(repo, journal: Journal) -> str | None:
    if journal.stash_sha:
        return journal.stash_sha
    for _, sha, message in stash_entries(repo):
        if message.endswith(journal.stash_message):
            return sha
    return None


def tree_matches_stash(repo, stash_sha: str) -> bool:
    """Do the index, the tracked files and the untracked files equal what was stashed?"""
    import git

    try:
        index_tree = repo.git.execute(["git", "write-tree"])
        if index_tree != repo.git.rev_parse(f"{stash_sha}^2^{{tree}}"):
            return False
        if repo.git.diff("--name-only", stash_sha, "--"):
            return False
        try:
            untracked = repo.git.ls_tree("-r", "-z", f"{stash_sha}^3").split("\0")
        except git.GitCommandError:
            return True  # no third parent: nothing untracked was stashed
        root = Path(repo.working_tree_dir)
        for row in filter(None, untracked):
            meta, name = row.split("\t", 1)
            blob = meta.split()[2]
            path = root / name
            if not path.is_file() and not path.is_symlink():
                return False
            if repo.git.hash_object("--", str(path)) != blob:
                return False
        return True
    except git.GitCommandError:
        return False


def displace_bisect_leftovers(repo, stash_sha: str) -> list[str]:
    """Move untracked files the bisect created out of the user's tree.

    Every untracked, non-ignored file of the user's went into the stash, so any
    such file now was written by a build or a bench (``--out r.csv``). One that
    the stash also holds would block the stash from coming back; any other would
    be a file the user never had. They go to .git/perfci-bisect/displaced/ (moved,
    never deleted) so the tree comes back exactly as it was.
    """
    root = Path(repo.working_tree_dir)
    listing = git_run(repo, "ls-files", "--others", "--exclude-standard", "-z", check=False)
    leftovers = [rel for rel in listing.split("\0") if rel]
    destination = state_dir(repo) / "displaced" / stash_sha[:12]
    for rel in leftovers:
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(root / rel), str(target))
    return leftovers


def restore_stash(repo, stash_sha: str) -> str | None:
    """Apply the stash by sha with its index, verify, then drop it. Returns a warning or None."""
    import git

    recover = (f"your changes are safe in stash {stash_sha[:12]}; get them back with: "
               f"git stash apply --index {stash_sha}")
    displace_bisect_leftovers(repo, stash_sha)
    if not tree_matches_stash(repo, stash_sha):
        try:
            repo.git.stash("apply", "--index", stash_sha)
        except git.GitCommandError as err:
            reason = (err.stderr or "").strip().splitlines()[-1:] or ["apply failed"]
            return f"could not re-apply your changes ({reason[0].strip()[:160]}); {recover}"
        if not tree_matches_stash(repo, stash_sha):
            return f"your changes were re-applied but do not match what was stashed; {recover}"
    for ref, sha, _ in stash_entries(repo):
        if sha == stash_sha:
            git_run(repo, "stash", "drop", ref)
            break
    return None


# --------------------------------------------------------------------------- tree moves


def checkout(repo, sha: str) -> None:
    # -f is safe here: the user's changes are in the stash, so anything in the
    # way is a build product of the previous commit.
    git_run(repo, "checkout", "-q", "-f", "--detach", sha)


def return_to(repo, branch: str | None, head: str) -> None:
    if branch:
        git_run(repo, "checkout", "-q", "-f", branch)
    else:
        git_run(repo, "checkout", "-q", "-f", "--detach", head)


def save_bisect_log(repo) -> str:
    log = git_run(repo, "bisect", "log", check=False)
    if log:
        atomic_write_text(state_dir(repo) / "bisect.log", log + "\n")
    return log


def bisect_reset(repo) -> None:
    if (Path(repo.git_dir) / "BISECT_LOG").exists() or (Path(repo.git_dir) / "BISECT_START").exists():
        save_bisect_log(repo)
        git_run(repo, "bisect", "reset", check=False)


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
            bisect_reset(repo)
        moved = current_position(repo) != (journal.original_branch, journal.original_head)
        if moved:
            if tree_is_ours or stash_sha is not None:
                return_to(repo, journal.original_branch, journal.original_head)
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
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="perfci-bisect-"))
    paths = [base / f"wt{i}" for i in range(count)]
    journal.update(worktrees=tuple(str(p) for p in paths))
    for path in paths:
        git_run(repo, "worktree", "add", "-q", "--detach", str(path), start)
    return paths


def remove_worktrees(repo, paths) -> None:
    parents = set()
    for raw in paths:
        path = Path(raw)
        parents.add(path.parent)
        if path.exists():
            git_run(repo, "worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(path, ignore_errors=True)  # a temp dir of ours, never the user's tree
    git_run(repo, "worktree", "prune", check=False)
    for parent in parents:
        if parent.name.startswith("perfci-bisect-"):
            shutil.rmtree(parent, ignore_errors=True)


def checkout_in(worktree: Path, sha: str) -> None:
    import git

    try:
        git.Repo(worktree).git.checkout("-q", "-f", "--detach", sha)
    except git.GitCommandError as err:
        raise PerfciError(f"checkout of {sha[:12]} in {worktree} failed: {(err.stderr or '').strip()[:200]}") from None


# --------------------------------------------------------------------------- reporting facts


def commit_info(repo, sha: str) -> dict:
    out = git_run(repo, "show", "-s", "--format=%H%x00%s%x00%an <%ae>%x00%aI", sha)
    full, subject, author, date = out.split("\0")
    return {"sha": full, "subject": subject, "author": author, "date": date}


def diff_stat(repo, sha: str) -> str:
    return git_run(repo, "show", "--stat", "--format=", "--first-parent", sha, check=False).strip("\n")
