"""One ``perfci bisect`` session: validate, stash, measure, search, restore.

This is the IO edge that ties :mod:`gitops` (where the code is), :mod:`runner`
(what it measures) and :mod:`core` (what that means) together. Measuring happens
in *slots*: the user's own tree (serial mode, after stashing) or one temporary
``git worktree`` per job (``--jobs N``), each with its own GPU.
"""
from __future__ import annotations

import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

from perfci.bisect import gitops
from perfci.bisect.core import (
    BisectResult, Classification, Samples, SearchState, StepRecord, Verdict, check_baselines, choose_next,
    classify, next_repeats, oriented, shift_pct, steps_left, verdict_confidence,
)
from perfci.bisect.commands import BenchSpec, Cache, bench_once, kill_running, run_command
from perfci.errors import PerfciError

GPU_ENV_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


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
    pause: gitops.Pause = field(default=gitops.no_pause, compare=False)  # called at each of gitops.PHASES


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
    mode = gitops.git_run(repo, "ls-tree", bad_sha, "--", relative, check=False).split(" ", 1)[0]
    if mode == "100755":
        return
    if mode:
        raise PerfciError(f"bench command {program} is not executable in {bad_sha[:12]} (mode {mode})")
    raise PerfciError(f"bench command {program} does not exist (not in the tree, not in BAD {bad_sha[:12]})")


def prepare(cfg: BisectConfig):
    """Validate everything that can be checked before touching the repository."""
    repo = gitops.open_repo(cfg.repo_path)
    journal_path = gitops.state_dir(repo) / "journal.json"
    if journal_path.exists():
        raise PerfciError("an earlier perfci bisect did not finish; run 'perfci bisect --abort' "
                          "(restore only) or 'perfci bisect --resume' (restore, then continue)")
    busy = gitops.operation_in_progress(repo)
    if busy:
        raise PerfciError(f"cannot bisect now: {busy}")
    good = gitops.resolve(repo, cfg.good, "GOOD")
    bad = gitops.resolve(repo, cfg.bad, "BAD")
    if good == bad:
        raise PerfciError(f"GOOD and BAD are the same commit {good[:12]}: nothing to bisect")
    if not gitops.is_ancestor(repo, good, bad):
        raise PerfciError(f"GOOD {cfg.good} ({good[:12]}) is not an ancestor of BAD {cfg.bad} ({bad[:12]})")
    commits = gitops.commit_range(repo, good, bad, cfg.first_parent)
    if not commits:
        raise PerfciError(f"the range {cfg.good}..{cfg.bad} is empty")
    _check_bench_command(repo, cfg.bench.command, bad)
    if cfg.jobs == 1:
        hazards = gitops.ignored_paths_in_history(repo, good, bad)
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

    def evaluate(self, slot: Slot, sha: str, good: Samples, bad: Samples) -> StepRecord:
        """Measure until good or bad, doubling the samples while unsure, then skip."""
        o = self.cfg.higher_is_better
        good_o, bad_o = _oriented(good, o), _oriented(bad, o)
        attempts = self.cfg.repeats
        while True:
            samples, reason = self.samples(slot, sha, attempts)
            if not samples.attempts:
                c = Classification(Verdict.SKIP, reason=reason)
                break
            c = classify(_oriented(samples, o), good_o, bad_o)
            if c.verdict == Verdict.SKIP and reason:
                c = Classification(Verdict.SKIP, reason=f"{c.reason}: {reason}")
            if c.verdict != Verdict.UNSURE:
                break
            attempts = next_repeats(samples.attempts, self.cfg.max_repeats)
            if not attempts:
                c = Classification(Verdict.SKIP, c.position, c.p_value,
                                   f"still unsure after {samples.attempts} runs ({c.reason})")
                break
        return StepRecord(sha, self.order[sha], self.subjects.get(sha, ""), samples, c, c.reason)


# --------------------------------------------------------------------------- the search


def _search(cfg, repo, slots: list[Slot], good: str, bad: str, commits: list[str], cache: Cache,
            progress: Progress, mark: Callable[[str, Verdict], None]) -> BisectResult:
    order = {good: 0, **{sha: i + 1 for i, sha in enumerate(commits)}}
    subjects = {sha: s for sha, s in _subjects(repo, good, bad).items()}
    measurer = Measurer(cfg, cache, order, subjects)
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


def _search_with(cfg, repo, slots, good, bad, commits, measurer: Measurer, progress, mark, pool) -> BisectResult:
    started = time.monotonic()
    good_s, bad_s = _measure_baselines(cfg, slots, good, bad, measurer, pool)
    o = cfg.higher_is_better
    check = check_baselines(_oriented(good_s, o), _oriented(bad_s, o), cfg.min_effect_pct)
    good_rec = StepRecord(good, 0, measurer.subjects.get(good, ""), good_s, Classification(Verdict.GOOD))
    bad_rec = StepRecord(bad, len(commits), measurer.subjects.get(bad, ""), bad_s, Classification(Verdict.BAD))
    common = dict(good=good_rec, bad=bad_rec, commits_total=len(commits), baseline=check,
                  metric=cfg.bench.metric.description, higher_is_better=o)
    if not check.real:
        return BisectResult(status="swapped" if check.swapped else "no-difference", message=check.message,
                            bench_runs=measurer.bench_runs, **common)
    progress.note(f"baselines ({cfg.repeats} runs each, {len(commits) - 1} commits between): {check.message}")
    state, steps = _search_loop(slots, commits, good_s, bad_s, measurer, progress, mark, pool,
                                baseline_seconds=time.monotonic() - started)
    return _result(repo, state, steps, good_s, bad_s, measurer.bench_runs, common)


def _measure_baselines(cfg, slots, good, bad, measurer: Measurer, pool) -> tuple[Samples, Samples]:
    """GOOD's and BAD's samples, at once when there are two slots; no metric at either is an error.

    No progress line comes before the baselines stand: a bench that prints no
    metric must end in exactly one error line.
    """
    baseline_jobs = [(measurer.samples, (slots[0], good, cfg.repeats)),
                     (measurer.samples, (slots[1 % len(slots)], bad, cfg.repeats))]
    (good_s, good_why), (bad_s, bad_why) = _run_parallel(pool, baseline_jobs)
    for name, sha, samples, why in (("GOOD", good, good_s, good_why), ("BAD", bad, bad_s, bad_why)):
        if len(samples.values) < 2:
            raise PerfciError(f"no metric ({cfg.bench.metric.description}) from the bench at {name} {sha[:12]}: "
                              f"{why or 'every run failed'}")
    return good_s, bad_s


def _search_loop(slots, commits, good_s: Samples, bad_s: Samples, measurer: Measurer, progress, mark, pool,
                 baseline_seconds: float) -> tuple[SearchState, list[StepRecord]]:
    """Measure ``len(slots)`` commits a round until the first bad one is pinned or everything left is skipped."""
    state = SearchState(tuple(commits), {commits[-1]: Verdict.BAD})
    steps: list[StepRecord] = []
    # The baselines count as the first round, so the first ETA is not a guess from nothing.
    round_seconds: list[float] = [baseline_seconds]
    while True:
        batch = choose_next(state, len(slots))
        if not batch:
            return state, steps
        t0 = time.monotonic()
        records = _run_parallel(pool, [(measurer.evaluate, (slots[i], sha, good_s, bad_s))
                                       for i, sha in enumerate(batch)])
        round_seconds.append(time.monotonic() - t0)
        for record in records:
            verdict = record.classification.verdict
            state = state.with_verdict(record.sha, verdict)
            mark(record.sha, verdict)
            steps.append(record)
            per_round = sum(round_seconds) / len(round_seconds)
            progress.step(record, state, len(commits), steps_left(state, len(slots)) * per_round)


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
    info = gitops.commit_info(repo, culprit_sha)
    return BisectResult(status="culprit", message=f"first bad commit: {culprit_sha[:12]} {info['subject']}",
                        steps=tuple(steps), culprit=info, culprit_diffstat=gitops.diff_stat(repo, culprit_sha),
                        step_interval=step_interval, culprit_interval=shift_pct(before.values, after.values),
                        confidence=confidence, bench_runs=bench_runs, **common)


def _samples_of(steps: Sequence[StepRecord], sha: str) -> Samples:
    for record in reversed(steps):
        if record.sha == sha:
            return record.samples
    raise KeyError(sha)


def _subjects(repo, good: str, bad: str) -> dict[str, str]:
    out = gitops.git_run(repo, "log", "--format=%H%x00%s", f"{good}^!", f"{good}..{bad}")
    subjects = {}
    for line in out.splitlines():
        sha, _, subject = line.partition("\0")
        subjects[sha] = subject
    return subjects


# --------------------------------------------------------------------------- entry points


def run(cfg: BisectConfig, progress: Progress) -> BisectResult:
    """Bisect, and leave the user's repository exactly as it was, whatever happens."""
    repo, journal_path, good, bad, commits = prepare(cfg)
    branch, head = gitops.current_position(repo)
    session_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    mode = "worktrees" if cfg.jobs > 1 else "tree"
    journal = gitops.Journal(journal_path, session_id, mode, branch, head, arguments=cfg.arguments)
    journal.save()
    cache = Cache(gitops.state_dir(repo) / "cache.json")
    warnings: list[str] = []
    try:
        if mode == "worktrees":
            result = _run_in_worktrees(cfg, repo, journal, good, bad, commits, cache, progress)
        else:
            result = _run_in_tree(cfg, repo, journal, good, bad, commits, cache, progress)
    finally:
        warnings = gitops.restore_tree(repo, journal, cfg.pause)
        for warning in warnings:
            progress.note(f"warning: {warning}")
    if warnings:
        from dataclasses import replace

        result = replace(result, warnings=tuple(warnings))
    return result


def _run_in_tree(cfg, repo, journal, good, bad, commits, cache, progress) -> BisectResult:
    with gitops.deferred_signals():
        stash_sha = gitops.stash_push(repo, journal, cfg.pause)
        journal.update(stash_sha=stash_sha, phase="stashed")
    journal.update(bisect_started=True, phase="measuring")
    start = ["bisect", "start", "--no-checkout"] + (["--first-parent"] if cfg.first_parent else [])
    gitops.git_run(repo, *start, bad, good)

    def mark(sha: str, verdict: Verdict) -> None:
        word = {Verdict.GOOD: "good", Verdict.BAD: "bad"}.get(verdict, "skip")
        gitops.git_run(repo, "bisect", word, sha, check=False)

    slot = Slot(Path(repo.working_tree_dir), _slot_env(cfg.gpus[0] if cfg.gpus else None),
                lambda sha: gitops.checkout(repo, sha))
    result = _search(cfg, repo, [slot], good, bad, commits, cache, progress, mark)
    from dataclasses import replace

    return replace(result, bisect_log=gitops.save_bisect_log(repo))


def _run_in_worktrees(cfg, repo, journal, good, bad, commits, cache, progress) -> BisectResult:
    gpus = _gpu_list(cfg)
    if gpus is not None and len(gpus) < cfg.jobs:
        raise PerfciError(f"--jobs {cfg.jobs} needs {cfg.jobs} GPUs but only {len(gpus)} are visible "
                          f"({','.join(gpus)}); pass --gpus or lower --jobs")
    journal.update(phase="measuring")
    paths = gitops.add_worktrees(repo, cfg.jobs, good, journal)
    slots = []
    for i, path in enumerate(paths):
        slots.append(Slot(path, _slot_env(gpus[i] if gpus else None),
                          lambda sha, p=path: gitops.checkout_in(p, sha)))
    if gpus:
        progress.note(f"{cfg.jobs} worktrees under {paths[0].parent}, GPUs {','.join(gpus[:cfg.jobs])}")

    def mark(sha: str, verdict: Verdict) -> None:
        pass  # the journal and the cache are the log here; git bisect state is per-tree

    return _search(cfg, repo, slots, good, bad, commits, cache, progress, mark)


def abort(repo_path: Path, pause: gitops.Pause = gitops.no_pause) -> tuple[gitops.Journal, list[str]]:
    """Restore the repository of a session that was killed; returns its journal and warnings."""
    repo = gitops.open_repo(repo_path)
    journal_path = gitops.state_dir(repo) / "journal.json"
    if not journal_path.exists():
        raise PerfciError("no unfinished perfci bisect here: nothing to abort or resume")
    journal = gitops.Journal.load(journal_path)
    warnings = gitops.restore_tree(repo, journal, pause)
    return journal, warnings
