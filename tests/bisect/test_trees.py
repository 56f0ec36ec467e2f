"""A slot's worktrees: one reused for another commit is as clean as a fresh checkout of it."""
from __future__ import annotations

import shutil
import time

import pytest

from perfci import git as perfci_git
from perfci import gitsession
from perfci.benchcmd import BenchSpec, Deadline
from perfci.benchmetric import MetricSpec
from perfci.bisect.cache import Cache
from perfci.bisect.trees import SlotTrees, Worktrees
from perfci.errors import PerfciError
from tests.bisect.synth import git, make_history

# What a commit's build leaves: a log in an ignored folder (the history's .gitignore has build/),
# an untracked file, and a nested repository (a fetched dependency, which only -ff removes),
# each named after the commit.
BUILD = ("sha=$(git rev-parse HEAD) && mkdir -p build && echo $sha >> build/log && echo x > artifact-$sha.bin && "
         "git init -q vendor-$sha")


@pytest.fixture
def slot(tmp_path):
    history = make_history(tmp_path / "repo", 3, 2)
    repo = perfci_git.open_repo(history.path)
    journal = gitsession.Journal(tmp_path / "journal.json", "test", "worktrees", "main", history.bad)
    worktrees = Worktrees(repo, journal, gitsession.no_pause)
    trees = SlotTrees(worktrees, "slot0", BenchSpec(("true",), BUILD, MetricSpec()), {}, Cache(None),
                      capacity=1)
    yield history, trees
    gitsession.remove_worktrees(repo, journal.worktrees)


def test_a_reused_tree_loses_the_last_commit_s_untracked_and_ignored_files(slot):
    history, trees = slot
    first, second = history.commits[0], history.commits[2]
    assert trees.prepare([first]) == {}
    path = trees.path(first)
    assert (path / "build" / "log").read_text().split() == [first]
    assert (path / f"artifact-{first}.bin").exists() and (path / f"vendor-{first}" / ".git").is_dir()

    assert trees.prepare([second]) == {}  # capacity 1: the same folder, moved to the next commit and rebuilt
    assert trees.path(second) == path and git(path, "rev-parse", "HEAD") == second
    assert (path / "build" / "log").read_text().split() == [second]  # the first build's output is gone
    assert not (path / f"artifact-{first}.bin").exists()
    assert not (path / f"vendor-{first}").exists()
    assert (path / f"artifact-{second}.bin").exists()


@pytest.mark.parametrize("limit, deadline, reason", [
    (1.0, None, "build did not finish in 1 s (--build-timeout)"),
    (60.0, 0.5, "build stopped after 0.5s: the --total-budget 9 s ran out"),
])
def test_a_build_cut_off_is_a_failed_build_not_kept_in_the_cache(tmp_path, limit, deadline, reason):
    history = make_history(tmp_path / "repo", 2, 1)
    repo = perfci_git.open_repo(history.path)
    journal = gitsession.Journal(tmp_path / "journal.json", "test", "worktrees", "main", history.bad)
    spec = BenchSpec(("true",), "sleep 30", MetricSpec(), build_timeout=limit)
    end = None if deadline is None else Deadline(time.monotonic() + deadline, "--total-budget 9 s")
    cache = Cache(None)
    trees = SlotTrees(Worktrees(repo, journal, gitsession.no_pause), "slot0", spec, {}, cache, deadline=end)
    try:
        started = time.monotonic()
        assert trees.prepare([history.good]) == {history.good: reason}  # the commit is skipped, as a failed build
        assert time.monotonic() - started < 15.0  # not the build's 30 s
        # Not remembered: the cache's key holds no limit, so a larger one builds the commit again.
        assert cache.build_failed(spec.cache_key(history.good)) is None
        # Within the session it is: a bracket commit's next probe does not wait for the build again.
        again = time.monotonic()
        assert trees.prepare([history.good]) == {history.good: reason}
        assert time.monotonic() - again < 1.0
    finally:
        gitsession.remove_worktrees(repo, journal.worktrees)


def test_the_user_s_own_tree_is_never_cleaned(slot):
    history, _ = slot
    (history.path / "mine.txt").write_text("my untracked notes\n")
    with pytest.raises(PerfciError, match="not a linked worktree"):
        perfci_git.reuse_worktree(history.path, history.commits[0])
    assert (history.path / "mine.txt").exists() and git(history.path, "rev-parse", "HEAD") == history.bad


def test_a_worktree_left_locked_by_a_kill_while_git_added_it_is_removed(tmp_path):
    history = make_history(tmp_path / "repo", 2, 1)
    repo = perfci_git.open_repo(history.path)
    base = tmp_path / "perfci-bisect-x"
    kept, emptied = base / "wt0", base / "wt1"
    for path in (kept, emptied):
        git(history.path, "worktree", "add", "-q", "--detach", str(path), history.good)
        git(history.path, "worktree", "lock", "--reason", "initializing", str(path))
    shutil.rmtree(emptied)  # killed before git wrote its files
    gitsession.remove_worktrees(repo, [str(kept), str(emptied)])
    assert git(history.path, "worktree", "list").count("\n") == 0
    assert not base.exists()


def test_a_warm_slot_starts_no_worker_once_the_total_budget_has_run_out():
    from types import SimpleNamespace

    from perfci.bisect.trees import WarmSlot

    class NoWorker:
        def open(self, *args):
            raise AssertionError("a warm worker was started past the budget")

        measure = open

    past = Deadline(time.monotonic() - 1.0, "--total-budget 9 s")
    slot = WarmSlot("slot0", SimpleNamespace(deadline=past, path=lambda sha: Path(".")), NoWorker())
    outcome = slot.run("a" * 40)
    assert outcome.value is None and outcome.reason == "not run: the --total-budget 9 s ran out"
