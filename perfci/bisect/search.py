"""The search of ``perfci bisect``: paired rounds in slots, sequential decisions, a narrowing bracket.

:func:`search` is every decision a bisect makes after validation, and measures
only through a :class:`Measurer`, which runs rounds in :class:`Slot` s (real
ones in :mod:`perfci.bisect.trees`; ``tests/bisect/simulate.py`` has simulated
ones). What the rounds mean is :mod:`perfci.bisect.rules`' business; what the
verdicts add up to, :func:`perfci.bisect.core.conclude`'s.

The order of a bisect:
  1. GOOD against BAD, paired rounds until the step is resolved (or the budget
     ends); not a slowdown past ``--min-effect``: stop, exit 3.
  2. Probes: a commit m inside the bracket (lo, hi), decided by rounds of
     ``lo m m hi`` in one slot, good or bad once its interval leaves 0, unsure
     when its budget ends first. With ``--jobs N``, N probes at once, one slot each.
  3. Once lo and hi are adjacent: the culprit check, lo against hi in paired
     rounds (in every slot), until the step's interval is wholly past
     ``--min-effect`` or the budget ends.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from perfci import gitsession
from perfci.benchcmd import BenchSpec, RunOutcome, kill_running, ran_out
from perfci.bisect import probes, rules
from perfci.bisect.cache import Cache
from perfci.bisect.core import (CommitVerdict, PairCheck, Samples, SearchState, StepRecord, choose_next,
                                raw_interval, steps_left)
from perfci.bisect.probes import ProbeStatus
from perfci.bisect.rules import StepStatus
from perfci.errors import PerfciError
from perfci.stats import trimmed_mean_interval
from perfci.measure.sides import SuiteSpec

# The phases where a signal must still leave the user's repository intact, in the order a
# bisect reaches them: "checkout" and "build" in perfci.bisect.trees, "bench" in Measurer,
# "restore" in perfci.bisect.session.
PHASES = ("checkout", "build", "bench", "restore")


@dataclass(frozen=True)
class BisectConfig:
    repo_path: Path
    good: str
    bad: str
    bench: BenchSpec | None
    higher_is_better: bool = False
    min_effect_pct: float = 2.0
    budget_s: float = 300.0  # per decision
    total_budget_s: float | None = None  # the whole bisect
    min_rounds: int = 3
    alpha: float = 0.01
    first_parent: bool = False
    jobs: int = 1
    gpus: tuple[str, ...] | None = None
    suite: SuiteSpec | None = None  # --suite: each commit measured by a warm worker (perfci.measure.sides)
    arguments: dict = field(default_factory=dict)  # the CLI's options, kept for --resume
    pause: gitsession.Pause = field(default=gitsession.no_pause, compare=False)  # called at each of PHASES

    @property
    def total_budget_name(self) -> str:
        """--total-budget as its Deadline names it (and a run it stopped says it)."""
        return f"--total-budget {self.total_budget_s:g} s"

    @property
    def rule(self) -> rules.SequentialRule:
        return rules.SequentialRule(alpha=self.alpha, min_rounds=self.min_rounds)


class Slot(Protocol):
    """Where rounds run: its own checkouts (and GPU); pairing never crosses slots."""

    name: str

    def prepare(self, shas: Sequence[str]) -> dict[str, str]: ...  # {sha: why it cannot run}

    def run(self, sha: str) -> RunOutcome: ...

    def new_round(self, shas: Sequence[str]) -> None: ...  # the round's runs share no process with the last's


class Progress(Protocol):
    def note(self, text: str) -> None: ...

    def step(self, record: StepRecord, state: SearchState, commits_total: int, eta_s: float | None) -> None: ...


@dataclass(frozen=True)
class PairOutcome:
    decision: rules.StepDecision
    check: PairCheck
    contrasts: tuple[float, ...] = ()  # the per-round d the decision was taken on
    run_sd: float | None = None  # one run's scatter in these rounds (:func:`rules.run_scatter`)


@dataclass(frozen=True)
class ProbeOutcome:
    verdict: CommitVerdict
    record: StepRecord
    lean: float | None = None  # the position its runs sat at, when unsure


def run_parallel(pool, jobs: list[tuple[Callable, tuple]]) -> list:
    if pool is None or len(jobs) == 1:
        return [fn(*args) for fn, args in jobs]
    futures = [pool.submit(fn, *args) for fn, args in jobs]
    return [f.result() for f in futures]


# --------------------------------------------------------------------------- measuring


class OutOfTime(Exception):
    """A run that --total-budget's end stopped or left unstarted: its round is neither kept nor cached, and
    the decision ends undecided for time (a commit is never skipped, nor refused on a rerun, for it)."""


class Measurer:
    """Runs rounds in slots, through the cache, and takes each decision on them as they come in.

    ``clock`` is injectable so that a simulated bench can spend simulated time.
    """

    def __init__(self, cfg: BisectConfig, cache: Cache, order: Mapping[str, int], subjects: Mapping[str, str],
                 clock: Callable[[], float] = time.monotonic):
        self.cfg = cfg
        self.cache = cache
        self.order = order
        self.subjects = subjects
        self.clock = clock
        self.bench_runs = 0
        self._samples: dict[str, Samples] = {}
        self._reasons: dict[str, str] = {}
        self._lock = threading.Lock()

    def samples(self, sha: str) -> Samples:
        with self._lock:
            return self._samples.get(sha, Samples())

    def _key(self, *parts: str) -> str:
        text = ":".join(parts)
        return self.cfg.bench.cache_key(text) if self.cfg.bench is not None else text

    def _remember(self, rnd: rules.Round, roles: Mapping[str, str]) -> None:
        with self._lock:
            for role, value in rnd:
                sha = roles[role]
                ok = rules.badness(value, self.cfg.higher_is_better) is not None
                add = Samples((value,), 0) if ok else Samples((), 1)
                self._samples[sha] = self._samples.get(sha, Samples()).plus(add)

    def run_round(self, slot: Slot, roles: Mapping[str, str], order: Sequence[str]) -> rules.Round:
        """One round: the bench once per role, in ``order``, back to back, from new processes."""
        slot.new_round([roles[role] for role in dict.fromkeys(order)])
        out = []
        for role in order:
            sha = roles[role]
            self.cfg.pause("bench")
            outcome = slot.run(sha)
            value = outcome.value
            if value is None and self.out_of_time(outcome.reason):
                raise OutOfTime(outcome.reason)
            with self._lock:
                self.bench_runs += 1
                if value is None:
                    self._reasons[sha] = outcome.reason
                elif rules.badness(value, self.cfg.higher_is_better) is None:
                    self._reasons[sha] = f"the metric is {value:g}: paired ratios need a positive number"
            out.append((role, value))
        rnd = tuple(out)
        self._remember(rnd, roles)
        return rnd

    def reason(self, sha: str) -> str:
        with self._lock:
            return self._reasons.get(sha, "")

    def out_of_time(self, why: str) -> bool:
        """Whether a failure's reason is --total-budget's end (the Deadline's words), not the commit's."""
        return self.cfg.total_budget_s is not None and ran_out(self.cfg.total_budget_name) in why

    def late(self, cannot: Mapping[str, str]) -> str:
        """Of a round's build failures (``prepare``), the one --total-budget's end stopped, if any."""
        return next((why for why in cannot.values() if self.out_of_time(why)), "")

    # ------------------------------------------------------------------ pairs

    def measure_pair(self, slots: Sequence[Slot], pool, a: str, b: str, kind: str, budget_s: float) -> PairOutcome:
        """``a`` against ``b`` in paired rounds, one per slot at a time, until ``kind``'s rule answers.

        ``kind`` is "endpoints" (:func:`rules.decide_endpoints`) or "culprit"
        (:func:`rules.decide_culprit`). The rounds of a pair are kept in the
        cache under (a, b) whatever the kind: the culprit check of a one-commit
        range starts from the endpoints' rounds.
        """
        cfg, rule = self.cfg, self.cfg.rule
        decide = rules.decide_endpoints if kind == "endpoints" else rules.decide_culprit
        roles = {"a": a, "b": b}
        key = self._key("pair", a, b)
        rounds, cached_seconds = self.cache.rounds(key)
        for rnd in rounds:
            self._remember(rnd, roles)
        contrasts: list[float] = []
        for i, rnd in enumerate(rounds):  # replay: the same looks, so the same verdict, without a run
            c = rules.pair_contrast(rnd, cfg.higher_is_better)
            if c is None:
                continue
            contrasts.append(c)
            for lk in (rules.early_look(rounds[:i + 1], rule, cfg.higher_is_better), rules.look(contrasts, rule)):
                decision = decide(lk, cfg.min_effect_pct)
                if decision.status != StepStatus.OPEN:
                    return self._pair_outcome(decision, rounds, contrasts, cached_seconds, kind)
        cannot = {}
        for slot_failures in run_parallel(pool, [(slot.prepare, ([a, b],)) for slot in slots]):
            cannot.update(slot_failures)
        late = self.late(cannot)  # a build --total-budget's end stopped: not the commit's failure
        if cannot and not late:
            sha, why = next(iter(cannot.items()))
            return self._cannot_measure(kind, sha, why, a, rounds, contrasts, cached_seconds)
        started = self.clock()
        decision = rules.StepDecision(StepStatus.OPEN, None)
        while True:
            spent = cached_seconds + self.clock() - started
            if (late or spent >= budget_s) and len(contrasts) >= rule.min_rounds:
                decision = decide(rules.look(contrasts, rule, force=True, since=len(contrasts)),
                                  cfg.min_effect_pct, final=True)
                break
            if late:
                decision = rules.StepDecision(StepStatus.UNRESOLVED, None, f"not decided: {late}")
                break
            first = len(rounds)
            try:
                batch = run_parallel(pool, [(self.run_round, (slot, roles, rules.pair_order(first + j)))
                                            for j, slot in enumerate(slots)])
            except OutOfTime as stop:
                late = str(stop)
                continue
            since = len(contrasts)
            for rnd in batch:
                rounds.append(rnd)
                c = rules.pair_contrast(rnd, cfg.higher_is_better)
                if c is not None:
                    contrasts.append(c)
            for role, sha in roles.items():
                if rules.unmeasurable(*rules.failures(rounds, role)):
                    self.cache.put_rounds(key, kind, rounds, cached_seconds + self.clock() - started)
                    return self._cannot_measure(kind, sha, self.reason(sha) or "its runs failed", a, rounds,
                                                contrasts, cached_seconds + self.clock() - started)
            early = rules.early_look(rounds, rule, cfg.higher_is_better)
            lk = rules.look(contrasts, rule, since=since)
            if lk is not None or early is not None:
                self.cache.put_rounds(key, kind, rounds, cached_seconds + self.clock() - started)
            decision = decide(early, cfg.min_effect_pct) if early is not None else rules.StepDecision(
                StepStatus.OPEN, None)
            if decision.status == StepStatus.OPEN:
                decision = decide(lk, cfg.min_effect_pct)
            if decision.status != StepStatus.OPEN:
                break
        seconds = cached_seconds + self.clock() - started
        self.cache.put_rounds(key, kind, rounds, seconds)
        return self._pair_outcome(decision, rounds, contrasts, seconds, kind)

    def _cannot_measure(self, kind, sha, why, a, rounds, contrasts, seconds) -> PairOutcome:
        if kind == "endpoints":
            name = "GOOD" if sha == a else "BAD"
            metric = self.cfg.bench.metric.description if self.cfg.bench is not None else "the metric"
            raise PerfciError(f"no metric ({metric}) from the bench at {name} {sha[:12]}: {why}")
        decision = rules.StepDecision(StepStatus.UNRESOLVED, None, f"{sha[:12]} cannot be measured: {why}")
        return self._pair_outcome(decision, rounds, contrasts, seconds, kind)

    def _pair_outcome(self, decision: rules.StepDecision, rounds, contrasts, seconds: float, kind: str) -> PairOutcome:
        lk = decision.look
        interval = None
        needed = None
        if lk is not None:
            interval = raw_interval(lk.estimate, lk.low, lk.high, self.cfg.higher_is_better, 1.0 - lk.level)
            if decision.status == StepStatus.UNRESOLVED:
                margin = lk.estimate - rules.log_of_pct(self.cfg.min_effect_pct)
                needed = rules.rounds_needed(contrasts, margin, self.cfg.rule)
        check = PairCheck(decision.status.value, decision.message, interval, len(contrasts),
                          len(rounds) - len(contrasts), seconds, needed)
        return PairOutcome(decision, check, tuple(contrasts), rules.run_scatter(rounds, self.cfg.higher_is_better))

    # ------------------------------------------------------------------ probes

    def measure_probe(self, slot: Slot, lo: str, m: str, hi: str, budget_s: float,
                      scale: probes.ProbeScale) -> ProbeOutcome:
        """Is ``m`` like ``lo`` or like ``hi``? Rounds of ``lo m m hi`` in ``slot`` until the rule answers.

        ``scale`` holds the lo -> hi step (a badness log) the two answers stand apart by
        (see :func:`probes.decide_probe`) and what a clear round needs (:func:`probes.clear_probe`).
        """
        cfg, rule = self.cfg, self.cfg.rule
        floor = rules.log_of_pct(cfg.min_effect_pct)
        roles = {"lo": lo, "m": m, "hi": hi}
        key = self._key("probe", lo, m, hi)
        rounds, cached_seconds = self.cache.rounds(key)
        for rnd in rounds:
            self._remember(rnd, roles)
        contrasts: list[tuple[float, float]] = []
        for i, rnd in enumerate(rounds):  # replay: the same decisions, so the same verdict, without a run
            c = rules.probe_contrast(rnd, cfg.higher_is_better)
            if c is None:
                continue
            contrasts.append(c)
            decision = self._probe_decision(rounds[:i + 1], contrasts, scale)
            if decision.status != ProbeStatus.OPEN:
                return self._probe_outcome(decision, m, lo, hi, i + 1, cached_seconds, "")
        cannot = slot.prepare([lo, m, hi])
        late = self.late(cannot)
        if cannot and not late:
            sha, why = (m, cannot[m]) if m in cannot else next(iter(cannot.items()))
            return self._skip(m, lo, hi, why if sha == m else f"bracket commit {sha[:12]} cannot run: {why}",
                              len(rounds), cached_seconds)
        started = self.clock()
        while True:
            spent = cached_seconds + self.clock() - started
            if (late or spent >= budget_s) and len(contrasts) >= rule.min_rounds:
                decision = probes.decide_probe(contrasts, rule, scale.step, floor, final=True)
                break
            if late:
                decision = probes.ProbeDecision(ProbeStatus.UNSURE, message=f"not decided: {late}")
                break
            try:
                rnd = self.run_round(slot, roles, rules.probe_order(len(rounds)))
            except OutOfTime as stop:
                late = str(stop)
                continue
            rounds.append(rnd)
            c = rules.probe_contrast(rnd, cfg.higher_is_better)
            if c is not None:
                contrasts.append(c)
            for role, sha in roles.items():
                if rules.unmeasurable(*rules.failures(rounds, role)):
                    seconds = cached_seconds + self.clock() - started
                    self.cache.put_rounds(key, "probe", rounds, seconds)
                    why = self.reason(sha) or "its runs failed"
                    return self._skip(m, lo, hi, why if sha == m else f"bracket commit {sha[:12]} failed: {why}",
                                      len(rounds), seconds)
            if c is None:
                continue
            decision = self._probe_decision(rounds, contrasts, scale)
            if len(rounds) % 8 == 0:  # now and then, so a kill loses little
                self.cache.put_rounds(key, "probe", rounds, cached_seconds + self.clock() - started)
            if decision.status != ProbeStatus.OPEN:
                break
        seconds = cached_seconds + self.clock() - started
        self.cache.put_rounds(key, "probe", rounds, seconds)
        return self._probe_outcome(decision, m, lo, hi, len(rounds), seconds, "")

    def _probe_decision(self, rounds: Sequence[rules.Round], contrasts: Sequence[tuple[float, float]],
                        scale: probes.ProbeScale) -> probes.ProbeDecision:
        """The ratio test; before it may stop (``min_rounds``), a clear round may answer."""
        cfg, rule = self.cfg, self.cfg.rule
        decision = probes.decide_probe(contrasts, rule, scale.step, rules.log_of_pct(cfg.min_effect_pct))
        if decision.status == ProbeStatus.OPEN and len(contrasts) < rule.min_rounds:
            clear = probes.clear_probe(rounds, scale, rule, cfg.higher_is_better)
            if clear is not None:
                return replace(clear, interval=decision.interval)
        return decision

    def _skip(self, m, lo, hi, why, rounds, seconds) -> ProbeOutcome:
        record = StepRecord(m, self.order[m], self.subjects.get(m, ""), self.samples(m), CommitVerdict.SKIP,
                            rounds=rounds, against=(self.order[lo], self.order[hi]), seconds=seconds, reason=why)
        return ProbeOutcome(CommitVerdict.SKIP, record)

    def _probe_outcome(self, decision: probes.ProbeDecision, m, lo, hi, rounds, seconds, why) -> ProbeOutcome:
        verdict = {ProbeStatus.GOOD: CommitVerdict.GOOD,
                   ProbeStatus.BAD: CommitVerdict.BAD}.get(decision.status, CommitVerdict.UNSURE)
        loc = decision.interval
        interval = None
        if loc is not None:
            # m against the midpoint of lo and hi: t / 2 per round, as a raw change
            interval = raw_interval(loc.estimate / 2, loc.low / 2, loc.high / 2, self.cfg.higher_is_better, 0.95)
        record = StepRecord(m, self.order[m], self.subjects.get(m, ""), self.samples(m), verdict,
                            position=decision.position, interval=interval, rounds=rounds,
                            against=(self.order[lo], self.order[hi]), seconds=seconds,
                            reason=why or decision.message)
        return ProbeOutcome(verdict, record, decision.position if verdict == CommitVerdict.UNSURE else None)


# --------------------------------------------------------------------------- the search


@dataclass(frozen=True)
class Outcome:
    """What measuring decided, before git is asked about the culprit."""

    baseline: PairOutcome
    state: SearchState | None = None  # None when the search never ran
    steps: tuple[StepRecord, ...] = ()  # probes, in the order decided
    culprit_check: PairOutcome | None = None
    leans: Mapping[str, float] = field(default_factory=dict)
    stopped: str = ""  # why the search stopped before its end, if it did
    seconds: float = 0.0


def probe_scale(cfg: BisectConfig, baseline: PairOutcome) -> probes.ProbeScale:
    """What probes are read against, from the GOOD -> BAD rounds (:class:`probes.ProbeScale`).

    The step (a badness log) a probe's two answers stand apart by:
    3/4 of the estimate, and no more than the low end of its 80% interval: an
    estimate read where a sequential interval stopped runs high, and a step
    assumed too large makes a wrong call likelier (:func:`probes.probe_step`),
    one too small only costs rounds. Never below ``--min-effect``.
    """
    floor = rules.log_of_pct(cfg.min_effect_pct)
    lk = baseline.decision.look
    if lk is None:
        return probes.ProbeScale(floor)
    low80 = trimmed_mean_interval(baseline.contrasts, 0.8).low if len(baseline.contrasts) >= 2 else lk.estimate
    return probes.ProbeScale(max(floor, min(0.75 * lk.estimate, low80)), lk.estimate, baseline.run_sd)


def search(cfg: BisectConfig, slots: Sequence[Slot], good: str, bad: str, commits: Sequence[str],
           measurer: Measurer, progress: Progress, pool=None) -> Outcome:
    """The endpoints, the probes, the culprit check: every decision of a bisect, measuring through ``measurer``."""
    clock = measurer.clock
    started = clock()

    def budget() -> float:
        if cfg.total_budget_s is None:
            return cfg.budget_s
        return max(0.0, min(cfg.budget_s, cfg.total_budget_s - (clock() - started)))

    baseline = measurer.measure_pair(slots, pool, good, bad, "endpoints", budget())
    if baseline.decision.status != StepStatus.REAL:
        return Outcome(baseline, seconds=clock() - started)
    progress.note(f"{len(commits) - 1} commits between GOOD and BAD: {baseline.decision.message}")
    scale = probe_scale(cfg, baseline)
    commits = tuple(commits)
    state = SearchState(commits, {commits[-1]: CommitVerdict.BAD})
    steps: list[StepRecord] = []
    leans: dict[str, float] = {}
    stopped = ""
    round_seconds: list[float] = [baseline.check.seconds]
    while True:
        if cfg.total_budget_s is not None and budget() <= 0.0:
            stopped = f"the total budget (--total-budget {cfg.total_budget_s:g} s) ran out"
            break
        batch = choose_next(state, len(slots))
        if not batch:
            break
        lo, hi = state.bounds
        lo_sha = good if lo < 0 else commits[lo]
        hi_sha = commits[hi]
        t0 = clock()
        allowed = budget()
        outcomes = run_parallel(pool, [(measurer.measure_probe, (slots[j], lo_sha, m, hi_sha, allowed, scale))
                                       for j, m in enumerate(batch)])
        round_seconds.append(clock() - t0)
        for out in outcomes:
            state = state.with_verdict(out.record.sha, out.verdict)
            steps.append(out.record)
            if out.lean is not None:
                leans[out.record.sha] = out.lean
        per_round = sum(round_seconds) / len(round_seconds)
        for out in outcomes:
            progress.step(out.record, state, len(commits), steps_left(state, len(slots)) * per_round)
        verdicts = {out.verdict for out in outcomes}
        out_of_time = cfg.total_budget_s is not None and budget() <= 0.0  # said at the loop's top
        if CommitVerdict.UNSURE in verdicts and not verdicts & {CommitVerdict.GOOD, CommitVerdict.BAD} and not out_of_time:
            # A probe that its budget could not decide says the step is too small for this
            # machine's noise at this budget; its neighbours are as hard, so probing them
            # one by one would spend a budget each for the same answer. (A skipped commit,
            # one that cannot run, is stepped over instead, as git bisect skip does.)
            stopped = "a probe stayed unsure within its budget, and the commits beside it would as well"
            break
    culprit_check = None
    if state.adjacent and not state.contradictions and not stopped:
        lo, hi = state.bounds
        lo_sha = good if lo < 0 else commits[lo]
        culprit_check = measurer.measure_pair(slots, pool, lo_sha, commits[hi], "culprit", budget())
        progress.note(f"culprit check, #{lo + 1} -> #{hi + 1} {commits[hi][:12]}: {culprit_check.decision.status.value}"
                      f", {culprit_check.decision.message}")
    return Outcome(baseline, state, tuple(steps), culprit_check, leans, stopped, clock() - started)


def search_in_slots(cfg: BisectConfig, slots: Sequence[Slot], good: str, bad: str, commits: Sequence[str],
                    measurer: Measurer, progress: Progress) -> Outcome:
    """:func:`search` with a thread per slot; an interrupt kills the benches the threads started."""
    pool = ThreadPoolExecutor(max_workers=len(slots)) if len(slots) > 1 else None
    try:
        return search(cfg, slots, good, bad, commits, measurer, progress, pool)
    except BaseException:
        kill_running()  # worker threads' benches would outlive the session otherwise
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
