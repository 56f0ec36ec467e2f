"""Whole bisects in-process: the session's own decisions over a simulated, drifting machine.

:func:`perfci.bisect.search.search` is every decision a bisect makes; it
measures only through slots. Here a slot's runs come from a :class:`Machine`
instead of a checkout and a process: a machine whose speed jumps between states
(x0.85, x1, x1.2 by default) that last seconds, with a little scatter per run
and now and then a run far off, on a simulated clock that each run advances by
its own duration. That is the behaviour of the project's 2-core CI machines
(runs of the same two commits, alternating, read 26.8/28.6, 36.4/29.7,
28.6/40.4 ms), so a thousand bisects take seconds and draw the same drift as a
real one. No git, no files, no processes.

Used by ``tests/bisect/test_drift.py``, ``test_outliers.py`` and
``benchmarks/bisect_outliers.py``.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from perfci.benchcmd import RunOutcome
from perfci.bisect.cache import Cache
from perfci.bisect.search import BisectConfig, Measurer, Outcome, search
from tests.bisect.synth import (
    SIM_GOOD as GOOD,  # c00 is GOOD, c01 .. cNN the range, the last one BAD
)


@dataclass
class Machine:
    """A machine's speed over simulated time: states of random length, scatter, outlier runs.

    ``value(level)`` is one run of a bench whose undisturbed time is ``level``
    (in ms); the clock advances by the run's time plus ``overhead_s`` (process start).
    """

    rng: random.Random
    states: Sequence[float] = (0.85, 1.0, 1.2)
    dwell_s: float = 2.0  # mean length of a state
    noise: float = 0.015  # gaussian scatter of one run
    outlier_rate: float = 0.03
    outlier_size: tuple[float, float] = (0.3, 1.0)  # an outlier run is this much off (uniform)
    outlier_sign: int = 1  # +1 slower, -1 faster, 0 either
    overhead_s: float = 0.03
    speed: float = 1.0  # a slot's own factor: another GPU
    clock: float = 0.0
    _state: float = 1.0
    _switch_at: float = 0.0

    def __post_init__(self):
        self._state = self.rng.choice(self.states)
        self._switch_at = self.rng.expovariate(1.0 / self.dwell_s) if self.dwell_s > 0 else float("inf")

    def value(self, level: float) -> float:
        while self.clock >= self._switch_at:
            self._state = self.rng.choice(self.states)
            self._switch_at += self.rng.expovariate(1.0 / self.dwell_s)
        v = level * self.speed * self._state * (1.0 + self.rng.gauss(0.0, self.noise))
        if self.outlier_rate and self.rng.random() < self.outlier_rate:
            sign = self.outlier_sign or self.rng.choice((1, -1))
            v *= max(0.05, 1.0 + sign * self.rng.uniform(*self.outlier_size))
        self.clock += v / 1000.0 + self.overhead_s
        return v


@dataclass
class SimSlot:
    """A slot whose runs come from its own :class:`Machine`; ``planted`` multiplies given runs of given commits."""

    name: str
    machine: Machine
    levels: Mapping[str, float]
    planted: Mapping[str, Mapping[int, float]] = field(default_factory=dict)  # sha -> {run index: factor}
    broken: frozenset = frozenset()
    runs: Counter = field(default_factory=Counter)  # shared by a bisect's slots: run indices per commit
    # Each worker process's own offset (a log sd), drawn per commit and process: what a process's
    # layout and state give every run it serves. ``renew``: ``new_round`` starts new processes, as
    # perfci's slots do; False keeps one process per commit for the session (the old warm workers).
    process_sd: float = 0.0
    renew: bool = True
    _offsets: dict = field(default_factory=dict)
    _generation: int = 0

    def new_round(self, shas: Sequence[str]) -> None:
        if self.renew:
            self._generation += 1

    def prepare(self, shas: Sequence[str]) -> dict[str, str]:
        return {sha: "build exited 1: broken" for sha in shas if sha in self.broken}

    def run(self, sha: str) -> RunOutcome:
        index = self.runs[sha]
        self.runs[sha] += 1
        value = self.machine.value(self.levels[sha])
        if self.process_sd:
            key = (sha, self._generation)
            if key not in self._offsets:
                self._offsets[key] = math.exp(self.machine.rng.gauss(0.0, self.process_sd))
            value *= self._offsets[key]
        factor = self.planted.get(sha, {}).get(index)
        return RunOutcome(value * factor if factor is not None else value)


class _Quiet:
    def note(self, text: str) -> None:
        pass

    def step(self, record, state, commits_total, eta_s) -> None:
        pass


@dataclass(frozen=True)
class Trial:
    status: str  # "culprit" | "undecided" | "all-skipped" | "no-difference" | "swapped"
    found: int | None  # the named commit's number (1 .. n_commits), when one was named
    culprit: int  # the planted one
    bench_runs: int
    endpoint_runs: int  # of those, at GOOD and BAD
    candidates: tuple[int, ...] = ()  # the range reported when undecided
    seconds: float = 0.0  # simulated

    @property
    def right(self) -> bool:
        return self.status == "culprit" and self.found == self.culprit

    @property
    def wrong(self) -> bool:
        return self.status == "culprit" and self.found != self.culprit

    @property
    def range_holds_culprit(self) -> bool:
        return self.culprit in self.candidates


def history(n_commits: int, culprit: int, step: float, base: float = 30.0,
            extra_steps: Mapping[int, float] | None = None) -> tuple[list[str], dict[str, float]]:
    """``c01 .. cNN`` and each commit's undisturbed time: ``step`` from ``culprit`` (1-based) on."""
    commits = [f"c{i:02d}" for i in range(1, n_commits + 1)]
    levels = {GOOD: base}
    for i, sha in enumerate(commits, start=1):
        level = base * (1.0 + step) if i >= culprit else base
        for at, extra in (extra_steps or {}).items():
            if i >= at:
                level *= 1.0 + extra
        levels[sha] = level
    return commits, levels


def run_search(commits: Sequence[str], levels: Mapping[str, float], machines: Sequence[Machine], *,
               planted=None, broken: Sequence[str] = (), process_sd: float = 0.0, renew: bool = True,
               **config) -> tuple[Outcome, Measurer, Counter]:
    """:func:`search` over simulated slots, one per machine; ``config`` goes to :class:`BisectConfig`."""
    cfg = BisectConfig(Path("."), GOOD, commits[-1], bench=None, jobs=len(machines), **config)
    order = {GOOD: 0, **{sha: i for i, sha in enumerate(commits, start=1)}}
    runs: Counter = Counter()
    slots = [SimSlot(f"slot{i}", m, levels, planted or {}, frozenset(broken), runs, process_sd, renew)
             for i, m in enumerate(machines)]
    # The slots run one after another here; their clocks stand for parallel time.
    measurer = Measurer(cfg, Cache(None), order, {}, clock=lambda: max(m.clock for m in machines))
    out = search(cfg, slots, GOOD, commits[-1], commits, measurer, _Quiet())
    return out, measurer, runs


def bisect(n_commits: int, culprit: int, step: float, rng: random.Random, *, machine: dict | None = None,
           planted: Mapping[str, Mapping[int, float]] | None = None, jobs: int = 1, min_effect_pct: float = 2.0,
           budget_s: float = 300.0, extra_steps: Mapping[int, float] | None = None, **legacy) -> Trial:
    """One bisect of ``c00`` (GOOD) .. ``cNN`` (BAD) with the step planted at commit ``culprit`` (1-based).

    ``machine`` holds :class:`Machine` parameters (states, dwell_s, noise,
    outlier_rate, ...). ``legacy`` takes the options of the unpaired bisect's
    simulation: ``noise``, ``outlier_rate``, ``outlier_size`` (a fixed size) and
    ``outlier_sign`` map onto a machine without states; ``repeats`` and
    ``max_repeats`` are gone and ignored.
    """
    params = dict(machine or {})
    if "noise" in legacy:
        params.setdefault("noise", legacy["noise"])
        params.setdefault("states", (1.0,))
        params.setdefault("outlier_rate", legacy.get("outlier_rate", 0.0))
        size = legacy.get("outlier_size", 0.3)
        params.setdefault("outlier_size", (size, size))
        params.setdefault("outlier_sign", legacy.get("outlier_sign", 1))
    commits, levels = history(n_commits, culprit, step, extra_steps=extra_steps)
    machines = [Machine(random.Random(rng.random()), speed=1.0 + 0.1 * i, **params) for i in range(jobs)]
    out, measurer, runs = run_search(commits, levels, machines, planted=planted, min_effect_pct=min_effect_pct,
                                     budget_s=budget_s)
    endpoint_runs = runs[GOOD] + runs[commits[-1]]
    number = {sha: i for i, sha in enumerate(commits, start=1)}
    seconds = out.seconds
    if out.state is None:
        status = {"swapped": "swapped", "unresolved": "undecided"}.get(out.baseline.decision.status.value,
                                                                      "no-difference")
        candidates = tuple(range(1, n_commits + 1)) if status == "undecided" else ()
        return Trial(status, None, culprit, measurer.bench_runs, endpoint_runs, candidates, seconds)
    from perfci.bisect.core import CommitVerdict, conclude

    skipped = tuple(r.sha for r in out.steps if r.verdict == CommitVerdict.SKIP)
    c = conclude(out.state, out.culprit_check.check if out.culprit_check else None, skipped, out.leans, out.stopped)
    found = number[c.culprit] if c.culprit else None
    return Trial(c.status, found, culprit, measurer.bench_runs, endpoint_runs,
                 tuple(number[s] for s in c.candidates), seconds)
