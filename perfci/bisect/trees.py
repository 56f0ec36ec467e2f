"""Where ``perfci bisect`` runs each commit: temporary worktrees, one commit each, built once.

Runs of different commits must alternate within seconds (that is what pairs
them, see :mod:`perfci.bisect.rules`), so every commit a round needs has its
own checkout, ready to run: a ``git worktree`` under one temporary folder,
built once with ``--build``. Each slot (``--jobs``) has its own trees, so
two slots never run in one folder at once (a bench that writes ``--out r.csv``
would read the other's). A slot keeps at most :data:`TREES_PER_SLOT`; the least
recently used one is checked out again for the next commit, cleaned of every
untracked and ignored file the last one's build and bench left (``git clean
-ffdx``, in that temporary worktree only), and rebuilt.

Every tree is written into the session's journal *before* git creates it, so
``perfci bisect --abort`` after a kill removes it; the user's own tree, index,
HEAD and stash are never touched.
"""
from __future__ import annotations

import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from perfci import git, gitsession
from perfci.benchcmd import BenchSpec, Deadline, RunOutcome, bench_once, run_command
from perfci.bisect.cache import Cache
from perfci.errors import PerfciError
from perfci.measure.sides import WarmSides

# lo, m and hi of a probe round, and one more so the commit just left behind (the old
# bracket end) is often still there when the search comes back to it.
TREES_PER_SLOT = 4
TREE_PREFIX = "perfci-bisect-"  # gitsession.remove_worktrees removes folders named so


class Worktrees:
    """The session's worktrees: created under one temp folder, each in the journal before it exists."""

    def __init__(self, repo, journal: gitsession.Journal, pause: gitsession.Pause):
        self.repo = repo
        self.journal = journal
        self.pause = pause
        self.base: Path | None = None
        self._lock = threading.Lock()  # journal writes and git's worktree bookkeeping, one at a time
        self._count = 0

    def add(self, sha: str, name: str, checkout: bool = True) -> Path:
        with self._lock:
            self._count += 1
            with gitsession.deferred_signals():  # the folder is in the journal before an interrupt is let in
                if self.base is None:
                    self.base = Path(tempfile.mkdtemp(prefix=TREE_PREFIX))
                path = self.base / f"{name}-{self._count}"
                self.journal.update(worktrees=(*self.journal.worktrees, str(path)))
            extra = () if checkout else ("--no-checkout",)
            git.run(self.repo, "worktree", "add", "-q", "--detach", *extra, str(path), sha)
        return path

    def move(self, path: Path, sha: str) -> None:
        with self._lock:
            git.reuse_worktree(path, sha)


@dataclass
class _Tree:
    path: Path
    built: bool = False


class SlotTrees:
    """One slot's trees: ``prepare`` makes a round's commits ready, ``path`` says where each is."""

    def __init__(self, worktrees: Worktrees, name: str, bench: BenchSpec, env: dict, cache: Cache,
                 capacity: int = TREES_PER_SLOT, deadline: Deadline | None = None,
                 on_move: Callable[[str], None] = lambda sha: None):
        self.on_move = on_move  # told the commit whose tree is about to be checked out to another
        self.worktrees = worktrees
        self.deadline = deadline  # --total-budget's end: a run in flight then is stopped
        self.name = name
        self.bench = bench
        self.env = env
        self.cache = cache
        self.capacity = capacity
        self._trees: OrderedDict[str, _Tree] = OrderedDict()  # sha -> tree, least recently used first
        self._cut_off: dict[str, str] = {}  # cache key -> why: builds stopped at their limit, this session only

    def prepare(self, shas: Sequence[str]) -> dict[str, str]:
        """Check out and build every commit of ``shas``; returns {sha: why it cannot run} for those that cannot."""
        if len(set(shas)) > self.capacity:
            raise PerfciError(f"internal: a round of {len(set(shas))} commits in {self.capacity} trees")
        failed: dict[str, str] = {}
        for sha in shas:
            key = self.bench.cache_key(sha)
            known = self.cache.build_failed(key) or self._cut_off.get(key)
            if known:
                failed[sha] = known
                continue
            tree = self._tree_for(sha, keep=shas)
            if not tree.built and self.bench.build:
                self.worktrees.pause("build")
                built = run_command(self.bench.build, tree.path, self.env, self.bench.build_timeout,
                                    self.deadline)
                if not built.ok:
                    reason = built.failure_reason("build", "--build-timeout")
                    # A build cut off is not kept: the cache's key holds no limit, so a rerun
                    # with a larger --build-timeout or budget builds the commit again.
                    if not built.cut_off:
                        self.cache.put_build_failure(key, sha, reason)
                    else:  # but not tried again in this session: a bracket's next probe would wait as long
                        self._cut_off[key] = reason
                    failed[sha] = reason
                    continue
            tree.built = True
        return failed

    def _tree_for(self, sha: str, keep: Sequence[str]) -> _Tree:
        tree = self._trees.get(sha)
        if tree is not None:
            self._trees.move_to_end(sha)
            return tree
        if len(self._trees) < self.capacity:
            tree = _Tree(self.worktrees.add(sha, self.name))
        else:
            old = next(s for s in self._trees if s not in keep)
            tree = self._trees.pop(old)
            self.on_move(old)
            self.worktrees.move(tree.path, sha)
            tree.built = False
        self.worktrees.pause("checkout")
        self._trees[sha] = tree
        return tree

    def path(self, sha: str) -> Path:
        return self._trees[sha].path


@dataclass
class GitSlot:
    """A slot of real runs: its trees, and its environment (its GPU)."""

    name: str
    trees: SlotTrees
    env: dict

    def prepare(self, shas: Sequence[str]) -> dict[str, str]:
        return self.trees.prepare(shas)

    def new_round(self, shas: Sequence[str]) -> None:
        """Nothing to do: every run of a bench command is a process of its own."""

    def run(self, sha: str) -> RunOutcome:
        return bench_once(self.trees.bench, self.trees.path(sha), dict(self.env, PERFCI_BISECT_COMMIT=sha),
                          self.trees.deadline)


@dataclass
class WarmSlot:
    """A slot whose runs are a warm worker's (``perfci bisect --suite``): one side per commit in its trees.

    A commit's worker starts at its first run, in the commit's tree after its
    build, and closes when the tree moves to another commit (``SlotTrees.on_move``).
    """

    name: str
    trees: SlotTrees
    sides: WarmSides

    def prepare(self, shas: Sequence[str]) -> dict[str, str]:
        return self.trees.prepare(shas)

    def new_round(self, shas: Sequence[str]) -> None:
        """Each commit's runs in the coming round from a new worker, started together (``WarmSides.renew``):
        rounds, the unit of every decision, are then independent processes."""
        if self.trees.deadline is not None and self.trees.deadline.left() <= 0:
            self.sides.renew()  # no worker started for a round the total budget will not run
            return
        self.sides.renew([(sha, self.trees.path(sha)) for sha in shas])

    def run(self, sha: str) -> RunOutcome:
        deadline = self.trees.deadline
        if deadline is not None and deadline.left() <= 0:  # no worker started (torch, the kernels) for nothing
            return RunOutcome(None, f"not run: {deadline.ran_out}")
        try:
            self.sides.open(sha, self.trees.path(sha))
        except PerfciError as err:
            return RunOutcome(None, f"the warm worker did not start: {err.message}")
        run = self.sides.measure(sha, deadline=self.trees.deadline)
        if not run.values:
            return RunOutcome(None, run.why_not)
        return RunOutcome(next(iter(run.values.values())))
