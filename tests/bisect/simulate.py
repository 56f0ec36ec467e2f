"""Whole bisects in-process: the session's own decisions over a simulated bench.

:func:`perfci.bisect.search.search` is every decision a bisect makes (the
adaptive baselines, the search, the doubling, going back to the endpoints); it
measures only through a :class:`~perfci.bisect.search.Measurer`. Here that
measurer draws each run from the same model as ``synth.py``'s ``bench.py``
(``level * (1 + N(0, noise))``, planted outliers at given runs of given commits,
random outliers at a rate) instead of checking out and running anything, so a
thousand bisects take seconds. No git, no files, no processes.

Used by ``tests/bisect/test_outliers.py`` and ``benchmarks/bisect_outliers.py``; the
outliers to plant come from :func:`tests.bisect.synth.endpoint_outliers`.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from perfci.bisect.core import Samples
from perfci.bisect.search import BisectConfig, Measurer, Slot, search

from tests.bisect.synth import SIM_GOOD as GOOD  # c00 is GOOD, c01 .. cNN the range, the last one BAD


@dataclass
class SimBench:
    """``synth.py``'s bench, in-process: one value per call, seeded by ``rng``."""

    levels: Mapping[str, float]
    rng: random.Random
    noise: float = 0.01
    planted: Mapping[str, Mapping[int, float]] = field(default_factory=dict)  # sha -> {run index: factor}
    outlier_rate: float = 0.0
    outlier_size: float = 0.3
    outlier_sign: int = 1  # +1 slower, -1 faster, 0 either
    runs: Counter = field(default_factory=Counter)

    def run(self, sha: str) -> float:
        index = self.runs[sha]
        self.runs[sha] += 1
        value = self.levels[sha] * (1.0 + self.rng.gauss(0.0, self.noise))
        factor = self.planted.get(sha, {}).get(index)
        if factor is not None:
            value *= factor
        elif self.outlier_rate and self.rng.random() < self.outlier_rate:
            sign = self.outlier_sign or self.rng.choice((1, -1))
            value *= 1.0 + sign * self.outlier_size
        return value


class SimMeasurer(Measurer):
    """A Measurer whose runs come from a :class:`SimBench`; cached runs count, as in the real one."""

    def __init__(self, cfg: BisectConfig, bench: SimBench, order: dict[str, int]):
        super().__init__(cfg, cache=None, commit_order=order, subjects={})
        self.bench = bench
        self.have: dict[str, Samples] = {}

    def samples(self, slot: Slot, sha: str, attempts: int) -> tuple[Samples, str]:
        have = self.have.get(sha, Samples())
        new = tuple(self.bench.run(sha) for _ in range(max(0, attempts - have.attempts)))
        self.bench_runs += len(new)
        self.have[sha] = have.plus(Samples(new))
        return self.have[sha], ""


class _Quiet:
    def note(self, text: str) -> None:
        pass

    def step(self, record, state, commits_total, eta_s) -> None:
        pass


@dataclass(frozen=True)
class Trial:
    status: str  # "culprit" | "no-difference" | "swapped" | "all-skipped"
    found: int | None  # the named commit's number (1 .. n_commits), when one was named
    culprit: int  # the planted one
    bench_runs: int
    endpoint_runs: int  # of those, at GOOD and BAD

    @property
    def right(self) -> bool:
        return self.status == "culprit" and self.found == self.culprit

    @property
    def wrong(self) -> bool:
        return self.status == "culprit" and self.found != self.culprit


def bisect(n_commits: int, culprit: int, step: float, rng: random.Random, *, noise: float = 0.01,
           planted: Mapping[str, Mapping[int, float]] | None = None, outlier_rate: float = 0.0,
           outlier_size: float = 0.3, outlier_sign: int = 1, repeats: int = 5, max_repeats: int = 20,
           min_effect_pct: float = 2.0, jobs: int = 1) -> Trial:
    """One bisect of ``c00`` (GOOD) .. ``cNN`` (BAD) with the step planted at commit ``culprit`` (1-based)."""
    commits = [f"c{i:02d}" for i in range(1, n_commits + 1)]
    levels = {GOOD: 10.0, **{sha: 10.0 * (1.0 + step) if i >= culprit else 10.0
                             for i, sha in enumerate(commits, start=1)}}
    bench = SimBench(levels, rng, noise, planted or {}, outlier_rate, outlier_size, outlier_sign)
    cfg = BisectConfig(Path("."), GOOD, commits[-1], bench=None, repeats=repeats, max_repeats=max_repeats,
                       min_effect_pct=min_effect_pct, jobs=jobs)
    order = {GOOD: 0, **{sha: i for i, sha in enumerate(commits, start=1)}}
    measurer = SimMeasurer(cfg, bench, order)
    slots = [Slot(Path("."), {}, lambda sha: None) for _ in range(jobs)]
    out = search(cfg, slots, GOOD, commits[-1], commits, measurer, _Quiet(), lambda verdicts: None)
    endpoint_runs = bench.runs[GOOD] + bench.runs[commits[-1]]
    if not out.check.real:
        return Trial("swapped" if out.check.swapped else "no-difference", None, culprit, measurer.bench_runs,
                     endpoint_runs)
    found = out.state.culprit
    if found is None:
        return Trial("all-skipped", None, culprit, measurer.bench_runs, endpoint_runs)
    return Trial("culprit", order[found], culprit, measurer.bench_runs, endpoint_runs)
