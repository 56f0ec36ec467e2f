"""One ``perfci confirm`` session: two worktrees, a build in each, rounds of ABBA / BAAB bench runs.

The IO edge of confirmation: git worktrees (the user's tree, index and branch
are never touched), processes, files. What the numbers mean is decided by
:mod:`perfci.confirm.analysis` at the looks :mod:`perfci.confirm.stopping` sets.

A round runs the bench at BASE, CUR, CUR, BASE, or CUR, BASE, BASE, CUR (one of
each in every pair of rounds, :func:`round_orders`): a drift that is linear
across the round (a clock sagging, a host warming up) hits both sides alike, the
round, as a block, absorbs what is shared by its four runs, and whatever favours
a run position falls on both sides alike.
"""
from __future__ import annotations

import os
import random
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol

from perfci import git, gitsession
from perfci.benchcmd import BenchSpec, Deadline, bench_once, ran_out, run_command
from perfci.config import load_config
from perfci.confirm import DEFAULT_BUDGET_S
from perfci.confirm.analysis import Round
from perfci.confirm.flips import with_config_flips
from perfci.confirm.reference import reference_keys
from perfci.confirm.stopping import StoppingRule, look, pending
from perfci.errors import PerfciError
from perfci.measure.sides import SideRun, SuiteSpec, WarmSides, below_top, first_rows
from perfci.results import read_results
from perfci.verdict import FAILED_STATUSES


ABBA = ("base", "cur", "cur", "base")
BAAB = ("cur", "base", "base", "cur")
RUNS_PER_ROUND = 4


def round_orders(seed: str) -> Iterator[tuple[str, ...]]:
    """ABBA and BAAB, one of each in every pair of rounds, which one first drawn at random (seeded).

    ABBA alone gives BASE run positions 1 and 4 of every round, always. On a 2-vCPU CI runner,
    loaded by a job of its own rhythm, those positions ran +2.9% and +5.3% against -1.9% and -6.3%
    for 2 and 3: an A/A pair read -8.2% over 80 rounds, and a confirm session called an A/A change
    `improved` -13.9%. Balanced, each side gets each position equally often; drawn at random, no
    period of the machine's can line up with one side (alternating would let a period of 8 runs).
    """
    rng = random.Random(seed)
    while True:
        pair = [ABBA, BAAB]
        rng.shuffle(pair)
        yield from pair
JOURNAL = "confirm-journal.json"
Key = tuple[str, ...]
METRIC_KEY: Key = ("metric",)


@dataclass(frozen=True)
class ConfirmConfig:
    repo_path: Path
    base: str
    cur: str
    bench: BenchSpec
    results_path: str | None = None  # BENCH_CMD writes a perfci results CSV here (relative to the tree)
    higher_is_better: bool = False
    min_rounds: int = 5
    max_rounds: int | None = None  # an optional cap; the budget and the answers end a session
    budget_s: float | None = DEFAULT_BUDGET_S
    min_effect_pct: float = 1.0
    alpha: float = 0.05
    reference: str | None = None  # a --filter expression: the cases declared untouched; None: each on its own
    arguments: dict = field(default_factory=dict)
    suite: SuiteSpec | None = None  # --suite: warm workers measure these cases (perfci.measure.sides)


@dataclass(frozen=True)
class Side:
    name: str  # base | cur
    ref: str
    sha: str
    path: Path


@dataclass
class Rounds:
    """Every run so far, in order: per round, four (side, {case: value}) runs, None for a failed run.

    Kept per run, not per case, because a run's drift is shared by all its cases:
    the analysis lines the cases up by run to take it out.
    """

    runs: list[list[tuple[str, dict[Key, float] | None]]] = field(default_factory=list)
    bench_runs: int = 0
    seconds: float = 0.0
    rows: dict = field(default_factory=dict)  # --suite: side -> {case: ResultRow} of its first ok run
    # The bench's own failures (never the budget's end): side -> case -> the last one's reason, and
    # side -> the last run that measured no case at all.
    failed: dict = field(default_factory=lambda: {"base": {}, "cur": {}})
    run_failed: dict = field(default_factory=dict)

    def broken(self) -> dict[Key, str]:
        """case -> why, for each case measured on one side and never on the other, where that other side's
        runs failed on their own (a crash, the correctness check, a hang past the case's limit)."""
        ok = {side: {k for r in self.runs for s, v in r if s == side and v for k in v} for side in ("base", "cur")}
        out: dict[Key, str] = {}
        for key in sorted(ok["base"] ^ ok["cur"]):
            side, other = ("cur", "base") if key in ok["base"] else ("base", "cur")
            why = self.failed[side].get(key) or self.run_failed.get(side)
            if why:
                out[key] = f"fails at {side.upper()}, measured at {other.upper()}: {why}"
        return out

    @property
    def completed(self) -> int:
        return sum(1 for r in self.runs if len(r) == RUNS_PER_ROUND)

    def cases(self) -> dict[Key, list]:
        """{case: [Round(base=(its two runs, in order), cur=(its two)), ...]} for the analysis."""
        keys = list(dict.fromkeys(k for r in self.runs for _, values in r if values for k in values))
        out: dict[Key, list] = {}
        for key in keys:
            out[key] = [Round(base=tuple((v or {}).get(key) for side, v in r if side == "base"),
                              cur=tuple((v or {}).get(key) for side, v in r if side == "cur"))
                        for r in self.runs if len(r) == RUNS_PER_ROUND]
        return out


class Progress(Protocol):
    def note(self, text: str) -> None: ...


# --------------------------------------------------------------------------- the session


def run(cfg: ConfirmConfig, progress: Progress,
        decide: Callable[[Rounds, bool, int | None], tuple[object | None, bool, str]]
        ) -> tuple[object, Rounds, tuple[Side, Side]]:
    """Measure both revisions in rounds until ``decide`` says to stop.

    ``decide(rounds, force, rounds_left) -> (judgement or None, stop, why)`` is
    called after every round; ``force`` asks for a judgement now (the budget ran
    out), ``rounds_left`` is how many more rounds the budget allows at the cost
    per round so far (None: no budget).
    """
    repo = git.open_repo(cfg.repo_path)
    journal_path = git.state_dir(repo) / JOURNAL
    if journal_path.exists():
        raise PerfciError("an earlier perfci confirm did not finish; run 'perfci confirm --abort' to remove "
                          "its worktrees")
    base_sha = git.resolve(repo, cfg.base, "BASE")
    cur_sha = git.resolve(repo, cfg.cur, "CUR")
    if base_sha == cur_sha:
        raise PerfciError(f"BASE {cfg.base} and CUR {cfg.cur} are the same commit {base_sha[:12]}: "
                          f"nothing to confirm")
    branch, head = git.current_position(repo)
    journal = gitsession.Journal(journal_path, f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}", "worktrees",
                             branch, head, arguments=cfg.arguments)
    journal.save()
    try:
        base_path, cur_path = gitsession.add_worktrees(repo, 2, base_sha, journal)
        git.checkout_in(cur_path, cur_sha)
        sides = (Side("base", cfg.base, base_sha, base_path), Side("cur", cfg.cur, cur_sha, cur_path))
        # Builds are bounded by --build-timeout, not by --budget: the budget is the rounds' (a
        # project whose build takes longer than the rounds would otherwise never be confirmed).
        for side in sides:
            _build(cfg, side)
        if cfg.suite is None:
            deadline = _budget_deadline(cfg)
            judgement, rounds = _rounds(cfg, sides, progress, decide,
                                        lambda side, _keys: _measure(cfg, side, deadline))
        else:
            with WarmSides(cfg.suite, progress.note) as warm:
                warm.open_all([(side.name, side.path) for side in sides])
                deadline = _budget_deadline(cfg)  # from here: a wait for the GPU's lock is not the rounds' time
                judgement, rounds = _rounds(cfg, sides, progress, decide,
                                            lambda side, keys: _measure_warm(warm, side, keys, deadline),
                                            lambda: first_rows(warm.first, cfg.suite.suite),
                                            lambda: warm.renew([(side.name, side.path) for side in sides]))
            rounds.rows = first_rows(warm.first, cfg.suite.suite)
            judgement = with_config_flips(judgement, rounds.rows)
        return judgement, rounds, sides
    finally:
        gitsession.restore_tree(repo, journal)  # worktrees mode: removes them, then the journal


def decider(cfg: ConfirmConfig) -> Callable[[Rounds, bool, int | None], tuple[object | None, bool, str]]:
    """The ``decide`` of :func:`run`: judgements only at the rule's looks, each at its share of alpha.

    See :class:`perfci.confirm.stopping.StoppingRule`. ``--reference`` is matched
    against the cases the rounds measured (with ``--suite``, as the suite declares them).
    """
    rule = StoppingRule(cfg.min_rounds, cfg.max_rounds, alpha=cfg.alpha, min_effect_pct=cfg.min_effect_pct)
    specs = {c.key: c for c in cfg.suite.cases} if cfg.suite is not None else None
    plan: list[StoppingRule] = []  # the looks the budget allows, fixed at the first look
    latest: list = []  # the last look's analysis: the cases it decided stay decided

    def decide(rounds: Rounds, force: bool, rounds_left: int | None) -> tuple[object | None, bool, str]:
        cases = rounds.cases()
        broken = rounds.broken()
        if not plan and (force or rounds.completed >= rule.min_rounds):
            plan.append(rule if rounds_left is None else rule.planned(rounds.completed, rounds_left))
        reference = reference_keys(cfg.reference, cases, specs) if cfg.reference else None
        seen = look(cases, plan[0] if plan else rule, higher_is_better=cfg.higher_is_better, force=force,
                    rounds_left=rounds_left, reference=reference, earlier=latest[-1] if latest else None,
                    first_rows=rounds.rows, broken=broken)
        if seen.confirmation is not None:
            latest[:] = [seen.confirmation]
        return seen.confirmation, seen.stop, seen.reason

    return decide


def abort(repo_path: Path) -> gitsession.Journal:
    """Remove the worktrees of a confirm that was killed."""
    repo = git.open_repo(repo_path)
    path = git.state_dir(repo) / JOURNAL
    if not path.exists():
        raise PerfciError("no unfinished perfci confirm here: nothing to abort")
    journal = gitsession.Journal.load(path)
    gitsession.restore_tree(repo, journal)
    return journal


def configured_build(repo_path: Path) -> str | None:
    """``[tool.perfci] build`` of the project at ``repo_path``, as a command for a worktree's top.

    Each revision is built in its own worktree; a project whose root lies below
    the repository's top is built there (``cd ROOT && BUILD``).
    """
    config = load_config(repo_path)
    if config.build is None:
        return None
    below = below_top(config.root)
    return f"cd {shlex.quote(below)} && {config.build}" if below else config.build


def _build(cfg: ConfirmConfig, side: Side) -> None:
    if not cfg.bench.build:
        return
    built = run_command(cfg.bench.build, side.path, _env(side), cfg.bench.build_timeout)
    if built.cut_off:
        raise PerfciError(built.failure_reason(f"the build {cfg.bench.build!r} at {side.name} {side.ref} "
                                                  f"({side.sha[:12]})", "--build-timeout"))
    if not built.ok:
        raise PerfciError(f"--build failed at {side.name} {side.ref} ({side.sha[:12]}): "
                          f"{built.failure_reason('build')}")


def _env(side: Side) -> dict[str, str]:
    return dict(os.environ, PERFCI_CONFIRM_SIDE=side.name, PERFCI_CONFIRM_COMMIT=side.sha)


def _rounds(cfg: ConfirmConfig, sides: tuple[Side, Side], progress: Progress,
            decide: Callable[[Rounds, bool, int | None], tuple[object, bool, str]],
            measure: Callable[[Side, frozenset | None], SideRun],
            rows: Callable[[], dict] | None = None,
            renew: Callable[[], None] = lambda: None) -> tuple[object, Rounds]:
    """Rounds until ``decide`` stops them. With ``--suite`` and no ``--reference``, the rounds after a
    look measure only the cases it left undecided: a decided case keeps its decision (``earlier`` in
    :func:`decider`), and a run of two cases costs the warm worker less than one of seven. ``rows``:
    each side's first runs as rows (``--suite``), read into ``rounds.rows`` after the first round and
    again until every case has a row on both sides, so each look can tell a config flip. ``renew``
    is called before every round after the first: with ``--suite``, each round's runs then come from
    new workers (:meth:`perfci.measure.sides.WarmSides.renew`), so the rounds, the unit of every
    interval, are independent processes, not children of one parent per side."""
    by_name = {side.name: side for side in sides}
    rounds = Rounds()
    started = time.monotonic()
    worked = {"base": 0, "cur": 0}
    last_failure = {"base": "", "cur": ""}  # the bench's own failures
    stopped = {"base": "", "cur": ""}  # a run the budget's end stopped, or left unstarted
    orders = round_orders(f"{by_name['base'].sha} {by_name['cur'].sha}")
    wanted: frozenset | None = None  # None: every case
    first_s = 0.0  # the first round's seconds: its one-time costs (compile, autotune) are not every round's
    while True:
        if rounds.runs:
            renew()
        this_round: list[tuple[str, dict[Key, float] | None]] = []
        rounds.runs.append(this_round)
        for name in next(orders):
            run = measure(by_name[name], wanted)
            rounds.bench_runs += 1
            rounds.failed[name].update({k: why for k, why in run.failed.items() if not _stopped_by_budget(cfg, why)})
            why = run.why_not
            if why:
                (stopped if _stopped_by_budget(cfg, why) else last_failure)[name] = why
                if not _stopped_by_budget(cfg, why):
                    rounds.run_failed[name] = why
                progress.note(f"bench failed at {name.upper()}: {why}")
                this_round.append((name, None))
            else:
                worked[name] += 1
                this_round.append((name, dict(run.values)))
        rounds.seconds = time.monotonic() - started
        if rounds.completed == 1:
            _refuse_when_neither_side_ran(worked, last_failure, stopped)
        if rows is not None and not _every_case_rowed(rounds):
            rounds.rows = rows()
        first_s = first_s or rounds.seconds
        per_round, left = rounds_left(cfg.budget_s, rounds.seconds, rounds.completed, first_s)
        broken = rounds.broken()
        # Every case broken: nothing left to measure, the answer is now (a forced look).
        all_broken = bool(broken) and set(rounds.cases()) <= set(broken)
        judgement, stop, why = decide(rounds, left == 0 or all_broken, left)
        if all_broken:
            why = f"every case broken ({len(broken)}): nothing left to measure"
        if judgement is not None and cfg.suite is not None and not cfg.reference:
            wanted = pending(judgement) or wanted
        if broken and cfg.suite is not None and not cfg.reference:  # a broken case is not measured again
            wanted = (wanted if wanted is not None else frozenset(c.key for c in cfg.suite.cases)) - set(broken)
        budget = "" if left is None else f", ~{left} more in the {cfg.budget_s:g} s budget"
        progress.note(f"round {rounds.completed}: {rounds.bench_runs} bench runs, {rounds.seconds:.0f} s "
                      f"({per_round:.1f} s a round{budget}); {why}")
        if stop or left == 0:
            return judgement, rounds


def rounds_left(budget_s: float | None, seconds: float, completed: int, first_s: float) -> tuple[float, int | None]:
    """(seconds a round, rounds the budget still allows; None: no budget) after ``completed`` rounds.

    The first round pays what later ones do not (each side's first compile and autotune: 84 s of
    a 100 s budget on the H200, where later rounds took 10-15 s), so a round's price is that of the
    rounds after it; after the first alone it is unknown, and a second round is started whenever
    any budget is left to learn it."""
    per_round = (seconds - first_s) / (completed - 1) if completed > 1 else seconds
    if budget_s is None:
        return per_round, None
    if budget_s - seconds <= 0:
        return per_round, 0
    if completed == 1:
        return per_round, max(1, int((budget_s - seconds) // per_round))
    return per_round, max(0, int((budget_s - seconds) // max(per_round, 1e-9)))


def _budget_deadline(cfg: ConfirmConfig) -> Deadline | None:
    """--budget's end, for the run in flight then; counted from the rounds' start, as ``_rounds`` counts it."""
    return None if cfg.budget_s is None else Deadline.after(cfg.budget_s, _budget_name(cfg))


def _budget_name(cfg: ConfirmConfig) -> str:
    return f"--budget {cfg.budget_s:g} s"


def _stopped_by_budget(cfg: ConfirmConfig, why: str) -> bool:
    """Whether a failed run's reason is the budget's end (the Deadline's words), not the bench's own failure."""
    return cfg.budget_s is not None and ran_out(_budget_name(cfg)) in why


def _every_case_rowed(rounds: Rounds) -> bool:
    """Both sides have a first-run row of every case measured so far (a case that failed its first run
    gets its row from a later one)."""
    keys = set(rounds.cases())
    return bool(rounds.rows) and all(keys <= set(rounds.rows.get(side, {})) for side in ("base", "cur"))


def _refuse_when_neither_side_ran(worked: dict[str, int], why: dict[str, str], stopped: dict[str, str]) -> None:
    """A bench that fails on both sides measured nothing: there is no comparison to judge.

    Judged after the first round (two runs a side). A side whose every run failed
    while the other measured is not refused here: its cases are ``broken``
    (:meth:`Rounds.broken`), a verdict with its reason that fails the gate. A side
    that failed only once the budget had run out (``stopped``) is not known to be
    broken: with the other side measured its cases are inconclusive (the forced
    look); with neither, there is nothing to judge, and that is said.
    """
    if worked["base"] or worked["cur"]:
        return
    if not any(why.values()):
        raise PerfciError(f"the budget ran out before either side was measured ({stopped['cur'] or stopped['base']}): "
                          f"nothing to judge; give confirm a longer --budget")
    if why["base"] and why["cur"]:
        raise PerfciError(f"the bench failed at both BASE and CUR: {why['cur']}")
    failed = "cur" if why["cur"] else "base"
    raise PerfciError(f"the bench failed at {failed.upper()}, and the budget ran out at the other side before it "
                      f"measured anything: {why[failed]}")


def _measure_warm(warm: WarmSides, side: Side, keys: frozenset | None,
                  deadline: Deadline | None = None) -> SideRun:
    cases = None if keys is None else [c for c in warm.spec.cases if c.key in keys]
    return warm.measure(side.name, cases, deadline)


def _measure(cfg: ConfirmConfig, side: Side, deadline: Deadline | None = None) -> SideRun:
    """One bench run on one side: {case: value}, or why there is none; with ``--results``, each case
    the results file has with a failed status, and why (its status and message).

    A run still going at its timeout, or at ``deadline`` (the budget's end), is
    stopped with its whole process group: a failed run, whatever it wrote.
    """
    env = _env(side)
    if cfg.results_path is None:
        outcome = bench_once(cfg.bench, side.path, env, deadline)
        if outcome.value is None:
            return SideRun({}, outcome.reason)
        if not (outcome.value > 0 and outcome.value < float("inf")):
            return SideRun({}, f"the metric must be a positive number, got {outcome.value:g}")
        return SideRun({METRIC_KEY: outcome.value})
    results = side.path / cfg.results_path
    results.unlink(missing_ok=True)  # ours (a worktree): a stale file must not stand in for this run
    if deadline is not None and deadline.left() <= 0:
        return SideRun({}, f"not run: {deadline.ran_out}")
    try:
        done = run_command(cfg.bench.argv, side.path, env, cfg.bench.timeout, deadline)
    except OSError as err:
        return SideRun({}, f"bench could not start: {err.strerror or err}")
    if done.returncode is None:  # what a killed run wrote is not a measurement
        return SideRun({}, done.failure_reason("bench"))
    if not done.ok and not results.exists():
        return SideRun({}, done.failure_reason("bench"))
    if not results.exists():
        return SideRun({}, f"the bench wrote no results file {cfg.results_path}")
    try:
        table = read_results(results)
    except PerfciError as err:
        return SideRun({}, str(err))
    values = {row.key: float(row.median_us) for row in table.rows if row.status == "ok" and row.median_us}
    failed = {row.key: f"{row.status} {row.message}".strip() for row in table.rows if row.status in FAILED_STATUSES}
    if not values:
        return SideRun({}, f"{cfg.results_path} has no case with a time", failed)
    return SideRun(values, "", failed)
