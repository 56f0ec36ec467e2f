"""The search of ``perfci bisect``: measure commits in slots, classify them, narrow the range.

:func:`search` is every decision a bisect makes after validation, and measures
only through a :class:`Measurer` (builds and bench runs in a :class:`Slot`, through
the cache). :mod:`perfci.bisect.session` wraps it in the git edge: the stash or
the worktrees, the journal, ``git bisect`` marks, and the restore.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Protocol, Sequence

from perfci import git, gitsession
from perfci.benchcmd import BenchSpec, bench_once, kill_running, run_command
from perfci.bisect.cache import Cache
from perfci.bisect.core import (
    BaselineCheck, BisectResult, Classification, Samples, SearchState, StepRecord, Verdict, check_baselines,
    choose_next, classify, confirm_repeats, endpoint_repeats, next_repeats, oriented, settle, shift_pct,
    steps_left, verdict_confidence,
)
from perfci.errors import PerfciError


# The phases where a signal must still leave the user's tree intact, in the order a
# bisect reaches them: "stash" and "restore" inside perfci.git, the others in Measurer.
PHASES = ("stash", "checkout", "build", "bench", "restore")


@dataclass(frozen=True)
class BisectConfig:
    repo_path: Path
    good: str
    bad: str
    bench: BenchSpec
    higher_is_better: bool = False
    repeats: int = 5
    max_repeats: int = 20
    min_effect_pct: float = 2.0
    first_parent: bool = False
    jobs: int = 1
    gpus: tuple[str, ...] | None = None
    arguments: dict = field(default_factory=dict)  # the CLI's options, kept for --resume
    pause: gitsession.Pause = field(default=gitsession.no_pause, compare=False)  # called at each of PHASES


class Progress(Protocol):
    def note(self, text: str) -> None: ...

    def step(self, record: StepRecord, state: SearchState, commits_total: int, eta_s: float | None) -> None: ...


@dataclass
class Slot:
    """A place to build and bench one commit at a time."""

    path: Path
    env: dict
    move_to: Callable[[str], None]
    current: str | None = None


# --------------------------------------------------------------------------- measuring


def _oriented(samples: Samples, higher_is_better: bool) -> Samples:
    """The same runs with the metric made lower-is-better, as :mod:`core`'s decisions want it."""
    return Samples(tuple(oriented(v, higher_is_better) for v in samples.values), samples.failures)


class Measurer:
    """Measures commits in slots, through the cache, counting the bench runs it really makes."""

    def __init__(self, cfg: BisectConfig, cache: Cache, commit_order: dict[str, int], subjects: dict[str, str]):
        self.cfg = cfg
        self.cache = cache
        self.order = commit_order
        self.subjects = subjects
        self.bench_runs = 0
        self._count_lock = threading.Lock()

    def samples(self, slot: Slot, sha: str, attempts: int) -> tuple[Samples, str]:
        """At least ``attempts`` runs of ``sha`` (cached ones count); returns (samples, failure reason)."""
        key = self.cfg.bench.cache_key(sha)
        build_error = self.cache.build_failed(key)
        if build_error:
            return Samples(), build_error
        have = self.cache.get(key)
        if have.attempts >= attempts:
            return have, ""
        if slot.current != sha:
            slot.move_to(sha)
            slot.current = sha
            self.cfg.pause("checkout")
            if self.cfg.bench.build:
                self.cfg.pause("build")
                built = run_command(self.cfg.bench.build, slot.path, slot.env)
                if not built.ok:
                    reason = built.failure_reason("build")
                    self.cache.put(key, sha, have, build_error=reason)
                    return Samples(), reason
        env = dict(slot.env, PERFCI_BISECT_COMMIT=sha)
        reason = ""
        new_values: list[float] = []
        failures = 0
        for _ in range(attempts - have.attempts):
            self.cfg.pause("bench")
            outcome = bench_once(self.cfg.bench, slot.path, env)
            with self._count_lock:
                self.bench_runs += 1
            if outcome.value is None:
                failures += 1
                reason = outcome.reason
            else:
                new_values.append(outcome.value)
        total = have.plus(Samples(tuple(new_values), failures))
        self.cache.put(key, sha, total)
        return total, reason

    def evaluate(self, slot: Slot, sha: str, good: Samples, bad: Samples) -> tuple[StepRecord, int]:
        """Measure until good or bad, doubling the samples while unsure, then skip.

        Returns the record and 0, or, when the commit is like neither endpoint and
        they can still grow (:func:`~perfci.bisect.core.endpoint_repeats`), the record
        so far and the runs each endpoint should have before it is classified again.
        """
        o = self.cfg.higher_is_better
        good_o, bad_o = _oriented(good, o), _oriented(bad, o)
        attempts = self.cfg.repeats
        while True:
            samples, reason = self.samples(slot, sha, attempts)
            if not samples.attempts:
                c = Classification(Verdict.SKIP, reason=reason)
                break
            c = classify(_oriented(samples, o), good_o, bad_o, min_effect_pct=self.cfg.min_effect_pct)
            if c.verdict == Verdict.SKIP and reason:
                c = Classification(Verdict.SKIP, reason=f"{c.reason}: {reason}")
            grow = endpoint_repeats(c, good, bad, self.cfg.max_repeats)
            if grow:
                return StepRecord(sha, self.order[sha], self.subjects.get(sha, ""), samples, c, c.reason), grow
            c = settle(c, good, bad, self.cfg.max_repeats)
            if c.verdict != Verdict.UNSURE:
                break
            attempts = next_repeats(samples.attempts, self.cfg.max_repeats)
            if not attempts:
                c = Classification(Verdict.SKIP, c.position, c.p_value,
                                   f"still unsure after {samples.attempts} runs ({c.reason})")
                break
        return StepRecord(sha, self.order[sha], self.subjects.get(sha, ""), samples, c, c.reason), 0


# --------------------------------------------------------------------------- the search


def _search(cfg, repo, slots: list[Slot], good: str, bad: str, commits: list[str], cache: Cache,
            progress: Progress, mark: Callable[[Sequence[tuple[str, Verdict]]], None]) -> BisectResult:
    order = {good: 0, **{sha: i + 1 for i, sha in enumerate(commits)}}
    measurer = Measurer(cfg, cache, order, git.subjects(repo, good, bad))
    pool = ThreadPoolExecutor(max_workers=len(slots)) if len(slots) > 1 else None
    try:
        return _search_with(cfg, repo, slots, good, bad, commits, measurer, progress, mark, pool)
    except BaseException:
        kill_running()  # worker threads' benches would outlive the session otherwise
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _run_parallel(pool, jobs: list[tuple[Callable, tuple]]):
    if pool is None:
        return [fn(*args) for fn, args in jobs]
    futures = [pool.submit(fn, *args) for fn, args in jobs]
    return [f.result() for f in futures]


@dataclass(frozen=True)
class Outcome:
    """What measuring decided, before git is asked about the culprit.

    ``good`` and ``bad`` are the endpoints' samples as they ended (the baselines
    stage, a commit that doubted them and naming BAD itself may have added runs); ``check`` is the
    baseline check on those samples. ``state`` is None when the search never ran.
    """

    check: BaselineCheck
    good: Samples
    bad: Samples
    state: SearchState | None
    steps: tuple[StepRecord, ...] = ()


def search(cfg: BisectConfig, slots: Sequence[Slot], good: str, bad: str, commits: Sequence[str],
           measurer: Measurer, progress: Progress, mark: Callable[[Sequence[tuple[str, Verdict]]], None],
           pool=None) -> Outcome:
    """The baselines, then the search: every decision of a bisect, with measuring left to ``measurer``.

    Nothing here touches git but ``measurer`` (through the slots) and ``mark``;
    ``tests/bisect/simulate.py`` drives it with simulated runs (``benchmarks/bisect_outliers.py``).
    """
    started = time.monotonic()
    good_s, bad_s, check = _measure_baselines(cfg, slots, good, bad, measurer, pool, progress)
    if not check.real:
        return Outcome(check, good_s, bad_s, None)
    progress.note(f"baselines ({len(commits) - 1} commits between): {check.message}")
    return _search_loop(cfg, slots, good, bad, list(commits), good_s, bad_s, check, measurer, progress, mark, pool,
                        baseline_seconds=time.monotonic() - started)


def _search_with(cfg, repo, slots, good, bad, commits, measurer: Measurer, progress, mark, pool) -> BisectResult:
    out = search(cfg, slots, good, bad, commits, measurer, progress, mark, pool)
    o = cfg.higher_is_better
    good_rec = StepRecord(good, 0, measurer.subjects.get(good, ""), out.good, Classification(Verdict.GOOD))
    bad_rec = StepRecord(bad, len(commits), measurer.subjects.get(bad, ""), out.bad, Classification(Verdict.BAD))
    common = dict(good=good_rec, bad=bad_rec, commits_total=len(commits), baseline=out.check,
                  metric=cfg.bench.metric.description, higher_is_better=o)
    if not out.check.real:
        return BisectResult(status="swapped" if out.check.swapped else "no-difference", message=out.check.message,
                            steps=out.steps, bench_runs=measurer.bench_runs, **common)
    return _result(repo, out.state, list(out.steps), out.good, out.bad, measurer.bench_runs, common)


def _measure_endpoints(cfg, slots, good, bad, measurer: Measurer, pool, attempts: int) -> tuple[Samples, Samples]:
    """GOOD's and BAD's samples, at once when there are two slots; no metric at either is an error."""
    baseline_jobs = [(measurer.samples, (slots[0], good, attempts)),
                     (measurer.samples, (slots[1 % len(slots)], bad, attempts))]
    (good_s, good_why), (bad_s, bad_why) = _run_parallel(pool, baseline_jobs)
    for name, sha, samples, why in (("GOOD", good, good_s, good_why), ("BAD", bad, bad_s, bad_why)):
        if len(samples.values) < 2:
            raise PerfciError(f"no metric ({cfg.bench.metric.description}) from the bench at {name} {sha[:12]}: "
                              f"{why or 'every run failed'}")
    return good_s, bad_s


def _measure_baselines(cfg, slots, good, bad, measurer: Measurer, pool, progress,
                       attempts: int | None = None) -> tuple[Samples, Samples, BaselineCheck]:
    """GOOD's and BAD's samples, ``attempts`` each (``--repeats``), doubled while the check asks for more.

    No progress line comes before the baselines stand: a bench that prints no
    metric must end in exactly one error line.
    """
    o = cfg.higher_is_better
    attempts = attempts or cfg.repeats
    while True:
        good_s, bad_s = _measure_endpoints(cfg, slots, good, bad, measurer, pool, attempts)
        check = check_baselines(_oriented(good_s, o), _oriented(bad_s, o), cfg.min_effect_pct,
                                max_repeats=cfg.max_repeats)
        if not check.more:
            return good_s, bad_s, check
        progress.note(f"baselines: {check.message}")
        attempts = check.more


def _search_loop(cfg, slots, good: str, bad: str, commits: list[str], good_s: Samples, bad_s: Samples,
                 check: BaselineCheck, measurer: Measurer, progress, mark, pool, baseline_seconds: float) -> Outcome:
    """Measure ``len(slots)`` commits a round until the first bad one is pinned or everything left is skipped.

    The endpoints are measured again (more runs of both) when a commit is like
    neither of them, and before BAD itself is named the culprit. Every verdict
    given so far rested on their old samples, so all of them are judged again
    (from their cached runs, measuring more only where a commit is now unsure)
    before the search goes on; if GOOD -> BAD no longer holds, the search stops
    there. ``mark`` gets every verdict so far, in the order the commits were
    first measured, after each round.
    """
    judged: dict[str, StepRecord] = {}  # every measured commit's current record, in the order first measured
    state = _state(commits, judged)
    # The baselines count as the first round, so the first ETA is not a guess from nothing.
    round_seconds: list[float] = [baseline_seconds]

    def measure_endpoints_again(runs: int, why: str) -> bool:
        nonlocal good_s, bad_s, check
        progress.note(f"{why}: measuring GOOD and BAD {runs} times each")
        good_s, bad_s, check = _measure_baselines(cfg, slots, good, bad, measurer, pool, progress, runs)
        if not check.real:
            check = replace(check, message=f"measured again, GOOD and BAD no longer differ enough: {check.message}")
            return False
        progress.note(f"endpoints now: {check.message}")
        return True

    while True:
        batch = choose_next(state, len(slots))
        todo = list(batch)
        if not batch:
            runs = confirm_repeats(state, good_s, bad_s, cfg.repeats, cfg.max_repeats)
            if not runs:
                return Outcome(check, good_s, bad_s, state, tuple(judged.values()))
            if not measure_endpoints_again(runs, "the first bad commit would be BAD itself"):
                return Outcome(check, good_s, bad_s, state, tuple(judged.values()))
            todo = list(judged)
        t0 = time.monotonic()
        before = {sha: r.classification.verdict for sha, r in judged.items()}
        while todo:
            evaluated = []
            for i in range(0, len(todo), len(slots)):
                chunk = todo[i:i + len(slots)]
                evaluated += _run_parallel(pool, [(measurer.evaluate, (slots[j], sha, good_s, bad_s))
                                                  for j, sha in enumerate(chunk)])
            for record, grow in evaluated:
                if not grow:
                    judged[record.sha] = record
            doubting = [(record, grow) for record, grow in evaluated if grow]
            if not doubting:
                break
            first = doubting[0][0]
            if not measure_endpoints_again(max(g for _, g in doubting), f"#{first.order} {first.sha[:12]} is like "
                                           f"neither endpoint ({first.classification.reason})"):
                return Outcome(check, good_s, bad_s, _state(commits, judged), tuple(judged.values()))
            todo = list(dict.fromkeys([record.sha for record, _ in doubting] + list(judged)))
        round_seconds.append(time.monotonic() - t0)
        state = _state(commits, judged)
        mark([(sha, r.classification.verdict) for sha, r in judged.items()])
        for sha, was in before.items():
            now = judged[sha].classification.verdict
            if now != was:
                progress.note(f"#{judged[sha].order} {sha[:12]} judged again against the new endpoints: "
                              f"{was.value} -> {now.value}")
        per_round = sum(round_seconds) / len(round_seconds)
        for sha in batch:
            if sha in judged:
                progress.step(judged[sha], state, len(commits), steps_left(state, len(slots)) * per_round)


def _state(commits: Sequence[str], judged: dict[str, StepRecord]) -> SearchState:
    verdicts = {sha: r.classification.verdict for sha, r in judged.items()}
    return SearchState(tuple(commits), {commits[-1]: Verdict.BAD, **verdicts})


def _result(repo, state: SearchState, steps: list[StepRecord], good_s: Samples, bad_s: Samples,
            bench_runs: int, common: dict) -> BisectResult:
    """The culprit and its step, or the candidate set when every commit in it was skipped.

    Intervals are of the raw metric, so a throughput's change keeps its natural sign.
    """
    step_interval = shift_pct(good_s.values, bad_s.values)
    confidence = verdict_confidence([s.classification for s in steps])
    culprit_sha = state.culprit
    if culprit_sha is None:
        candidates = state.candidates
        message = (f"every commit between the last good and the first bad one was skipped; the slowdown is in "
                   f"one of {len(candidates)} commits: {' '.join(c[:12] for c in candidates)}")
        return BisectResult(status="all-skipped", message=message, steps=tuple(steps), candidates=candidates,
                            step_interval=step_interval, confidence=confidence, bench_runs=bench_runs, **common)
    lo, _ = state.bounds
    before = good_s if lo < 0 else _samples_of(steps, state.commits[lo])
    after = bad_s if culprit_sha == state.commits[-1] else _samples_of(steps, culprit_sha)
    info = git.commit_info(repo, culprit_sha)
    return BisectResult(status="culprit", message=f"first bad commit: {culprit_sha[:12]} {info['subject']}",
                        steps=tuple(steps), culprit=info, culprit_diffstat=git.diff_stat(repo, culprit_sha),
                        step_interval=step_interval, culprit_interval=shift_pct(before.values, after.values),
                        confidence=confidence, bench_runs=bench_runs, **common)


def _samples_of(steps: Sequence[StepRecord], sha: str) -> Samples:
    for record in reversed(steps):
        if record.sha == sha:
            return record.samples
    raise KeyError(sha)
