"""Everything perfci does with git: refs, ranges, checkouts, stash entries, locks, the measured SHA.

One way to reach git: GitPython, which perfci depends on. Its ``execute`` runs
the ``git`` binary, so a command here is exactly the command a user would type,
and its :class:`git.GitCommandError` carries git's own stderr for a one-line
message. Two entry points cover almost every call: :func:`run` on an open
repository (a failure is a :class:`PerfciError`, or ``""`` with ``check=False``)
and :func:`query` on a path that may not be a repository at all (``None`` on any
failure, never an exception). GitPython is imported inside the functions, so
``import perfci.git`` stays cheap and works where GitPython is missing.

A session that borrows the user's repository (a bisect, a confirm) keeps its
journal, stash and worktrees through :mod:`perfci.gitsession`, built on this.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator

from perfci.errors import PerfciError
from perfci.files import atomic_write_text

# Journals, caches and displaced files of bisect and confirm, in the common git dir
# (shared by the repository's worktrees). Named after bisect, which made it first:
# a rename would lose the journal of a session killed before the upgrade.
JOURNAL_DIR = "perfci-bisect"
DIRTY = "-dirty"  # what checkout_sha appends when tracked files differ from HEAD
QUERY_TIMEOUT_S = 60


def open_repo(path: Path):
    import git  # lazy: gitpython

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


def run(repo, *args: str, check: bool = True) -> str:
    """``git <args>`` in the repo's tree; a failure becomes a one-line PerfciError."""
    import git  # lazy: gitpython

    try:
        return repo.git.execute(["git", *args], with_extended_output=False)
    except git.GitCommandError as err:
        if not check:
            return ""
        detail = (err.stderr or "").strip().replace("\n", " ").removeprefix("stderr: ").strip(" '")
        raise PerfciError(f"git {' '.join(args[:3])} failed: {detail[:300]}") from None


def query(path: Path | str, *args: str) -> str | None:
    """``git -C path ARGS`` stdout, stripped; None when it fails (not a repository, no git, a timeout)."""
    try:
        import git  # lazy: gitpython
    except ImportError:
        return None
    try:
        # -C, not git.Git(path): GitPython runs in the current directory when its
        # working_dir does not exist, and would answer for the wrong repository.
        out = git.Git().execute(["git", "-C", str(path), *args], kill_after_timeout=QUERY_TIMEOUT_S)
    except (git.GitError, OSError, ValueError):  # ValueError: a NUL byte in an argument
        return None
    return out.strip()


def toplevel(path: Path | str) -> Path | None:
    top = query(path, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def common_dir(path: Path | str) -> Path | None:
    """The repository's git directory that its worktrees share."""
    found = query(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(found) if found else None


def is_dirty(path: Path | str) -> bool:
    """Do tracked files differ from HEAD? Untracked files do not count, as in :func:`checkout_sha`."""
    return bool(query(path, "status", "--porcelain", "--untracked-files=no"))


def commit_known(path: Path | str | None, sha: str) -> bool:
    """Is ``sha`` (``-dirty`` or not) a commit of the repository at ``path``?"""
    return bool(path and sha) and query(path, "cat-file", "-e", f"{sha.removesuffix(DIRTY)}^{{commit}}") is not None


def untracked_in(repo: Path | str, path: Path) -> str | None:
    """``path`` relative to ``repo``'s checkout when a stash would take it (untracked, not ignored); else None."""
    top = toplevel(repo)
    if top is None:
        return None
    try:
        relative = str(path.resolve().relative_to(top.resolve()))
    except ValueError:
        return None  # outside the checkout
    tracked = query(top, "ls-files", "--error-unmatch", relative) is not None
    ignored = query(top, "check-ignore", "-q", relative) is not None
    return None if tracked or ignored else relative


def checkout_sha(path: str) -> str:
    """SHA of the checkout containing ``path``, ``-dirty`` if tracked files changed; "" when there is none.

    Untracked files do not count: perfci writes result files into the checkout
    and they must not mark every run dirty. Never raises.
    """
    try:
        import git  # lazy: gitpython

        repo = git.Repo(path, search_parent_directories=True)
        sha = repo.head.commit.hexsha
        return sha + DIRTY if repo.is_dirty(untracked_files=False) else sha
    except Exception:  # not a repository, no commit yet, no GitPython: no SHA to report
        return ""


@contextlib.contextmanager
def common_dir_lock(path: Path, name: str, waiting: str) -> Iterator[None]:
    """Hold the file lock ``name`` in the repository's common git dir, saying ``waiting`` if it is taken.

    In the common dir, so a repository and its worktrees share one lock.
    """
    from filelock import FileLock  # lazy: filelock

    common = common_dir(path)
    if common is None:
        raise PerfciError(f"{path}: git cannot find its repository directory")
    lock = FileLock(str(common / name))
    try:
        lock.acquire(timeout=0)
    except TimeoutError:  # filelock.Timeout is a TimeoutError
        print(waiting, file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


# --------------------------------------------------------------------------- refs and ranges


def resolve(repo, ref: str, role: str) -> str:
    found = run(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if not found:
        raise PerfciError(f"{role} {ref!r} is not a commit in {repo.working_tree_dir}")
    return found


def is_ancestor(repo, older: str, newer: str) -> bool:
    import git  # lazy: gitpython

    try:
        repo.git.merge_base("--is-ancestor", older, newer)
        return True
    except git.GitCommandError:
        return False


def commit_range(repo, good: str, bad: str, first_parent: bool) -> list[str]:
    """Candidates oldest first: commits after GOOD up to and including BAD."""
    args = ["rev-list", "--reverse", "--topo-order"]
    args += ["--first-parent"] if first_parent else ["--ancestry-path"]
    out = run(repo, *args, f"{good}..{bad}")
    return [line for line in out.splitlines() if line]


def subjects(repo, good: str, bad: str) -> dict[str, str]:
    """{sha: subject line} of GOOD and every commit after it up to BAD."""
    out = run(repo, "log", "--format=%H%x00%s", f"{good}^!", f"{good}..{bad}")
    found = {}
    for line in out.splitlines():
        sha, _, subject = line.partition("\0")
        found[sha] = subject
    return found


def file_mode(repo, sha: str, path: str) -> str:
    """The mode of ``path`` in commit ``sha`` (``100755`` for an executable), "" when it has none."""
    return run(repo, "ls-tree", sha, "--", path, check=False).split(" ", 1)[0]


def operation_in_progress(repo) -> str | None:
    """Why a session must not start now, or None: never stack on a half-done git operation."""
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
    head = run(repo, "rev-parse", "HEAD")
    branch = run(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False) or None
    return branch, head


def ignored_paths_in_history(repo, good: str, bad: str) -> list[str]:
    """Ignored files in the user's tree that some commit in range tracks.

    ``git checkout`` treats ignored files as expendable and overwrites them
    without a word; the stash does not hold them, so they would be lost.
    """
    ignored = run(repo, "ls-files", "--others", "--ignored", "--exclude-standard", "-z").split("\0")
    ignored = [p for p in ignored if p]
    if not ignored:
        return []
    tracked = set(run(repo, "ls-tree", "-r", "--name-only", "-z", good).split("\0"))
    tracked |= set(run(repo, "log", "--format=", "--name-only", "-z", f"{good}..{bad}").replace("\n", "\0").split("\0"))
    return sorted(p for p in ignored if p in tracked)


def commit_info(repo, sha: str) -> dict:
    out = run(repo, "show", "-s", "--format=%H%x00%s%x00%an <%ae>%x00%aI", sha)
    full, subject, author, date = out.split("\0")
    return {"sha": full, "subject": subject, "author": author, "date": date}


def diff_stat(repo, sha: str) -> str:
    return run(repo, "show", "--stat", "--format=", "--first-parent", sha, check=False).strip("\n")


# --------------------------------------------------------------------------- stash, checkouts, git bisect


def stash_entries(repo) -> list[tuple[str, str, str]]:
    """(ref like stash@{0}, sha, message) for every stash entry."""
    out = run(repo, "stash", "list", "--format=%gd%x00%H%x00%gs", check=False)
    rows = []
    for line in out.splitlines():
        parts = line.split("\0")
        if len(parts) == 3:
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def checkout(repo, sha: str) -> None:
    # -f is safe here: the user's changes are in the stash, so anything in the
    # way is a build product of the previous commit.
    run(repo, "checkout", "-q", "-f", "--detach", sha)


def return_to(repo, branch: str | None, head: str) -> None:
    if branch:
        run(repo, "checkout", "-q", "-f", branch)
    else:
        run(repo, "checkout", "-q", "-f", "--detach", head)


def bisect_start(repo, bad: str, good: str, first_parent: bool) -> None:
    """``git bisect start`` without a checkout: the session moves the tree itself."""
    run(repo, "bisect", "start", "--no-checkout", *(["--first-parent"] if first_parent else []), bad, good)


def bisect_mark(repo, sha: str, word: str) -> None:
    """``git bisect good|bad|skip SHA``; git's log is a record, so a refusal is not an error."""
    run(repo, "bisect", word, sha, check=False)


def save_bisect_log(repo) -> str:
    log = run(repo, "bisect", "log", check=False)
    if log:
        atomic_write_text(state_dir(repo) / "bisect.log", log + "\n")
    return log


def bisect_reset(repo, save_log: bool = True) -> None:
    """End git's bisect (with ``--no-checkout`` HEAD and the tree stay as they are)."""
    if (Path(repo.git_dir) / "BISECT_LOG").exists() or (Path(repo.git_dir) / "BISECT_START").exists():
        if save_log:
            save_bisect_log(repo)
        run(repo, "bisect", "reset", check=False)


def checkout_in(worktree: Path, sha: str) -> None:
    import git  # lazy: gitpython

    try:
        git.Repo(worktree).git.checkout("-q", "-f", "--detach", sha)
    except git.GitCommandError as err:
        raise PerfciError(f"checkout of {sha[:12]} in {worktree} failed: {(err.stderr or '').strip()[:200]}") from None


def reuse_worktree(worktree: Path, sha: str) -> None:
    """Put the linked worktree ``worktree`` at ``sha`` as a fresh checkout would be.

    ``checkout -f`` alone keeps untracked and ignored files: one commit's build
    artifacts (a compiled extension, a ``build/`` folder, a results file) would
    be measured with the next commit's code. ``git clean -ffdx`` removes them,
    so this refuses any tree that is not a linked worktree (the user's own
    checkout is never cleaned).
    """
    import git  # lazy: gitpython

    try:
        tree = git.Repo(worktree)
        linked = Path(tree.git_dir).resolve() != Path(tree.common_dir).resolve()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        linked = False
    if not linked:
        raise PerfciError(f"internal: {worktree} is not a linked worktree; refusing to clean it")
    checkout_in(worktree, sha)
    try:
        tree.git.clean("-ffdxq")
    except git.GitCommandError as err:
        raise PerfciError(f"git clean in {worktree} failed: {(err.stderr or '').strip()[:200]}") from None
