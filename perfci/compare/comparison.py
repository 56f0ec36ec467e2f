"""What ``perfci compare`` returns: its options and the frozen Comparison, case by case.

Data only, besides :func:`summarize` and :func:`missing_cases`:
:mod:`perfci.compare.verdicts` and :mod:`perfci.compare.pooled` fill these in,
:mod:`perfci.compare.render` and the command line read them. The verdicts'
words, their order and the suite shift are :mod:`perfci.verdict`'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from perfci.compare.noise import NoiseProfile
from perfci.verdict import CASE_VERDICTS, DISTURBED, DisturbedRule, SuiteShift, Verdict, missing, worst_first

VERDICTS = CASE_VERDICTS  # worst first: the order of the summary's counts


@dataclass(frozen=True)
class CompareOptions:
    alpha: float = 0.05  # false discovery rate across the suite
    confidence: float = 0.95  # level of each case's interval
    min_effect_pct: float | None = None  # overrides the profile's floor for every case
    # ``unchanged`` only inside ±this (percent); None: inside the floor. The nightly's compare
    # against one stored night passes 1%: a +3% change inside a 5% one-run floor is not "unchanged"
    # there, it is what confirm is for.
    unchanged_within_pct: float | None = None
    clock_normalize: bool = True
    common_mode: bool = True
    use_floor: bool = True
    fdr: bool = True  # Benjamini–Hochberg; off only for ablations
    arch: str | None = None  # overrides the arch read from the files
    min_common_mode_cases: int = 6
    # A run whose repeats of a case spread this much (robust sd of log time, in
    # percent) while the other run's are `disturbed_ratio` times tighter was
    # disturbed during that case: no regressed/improved verdict rests on it
    # (perfci.verdict.DisturbedRule). None turns the guard off (ablations).
    disturbed_spread_pct: float | None = DISTURBED.spread_pct
    disturbed_ratio: float = DISTURBED.ratio

    @property
    def disturbed(self) -> DisturbedRule:
        return DisturbedRule(self.disturbed_spread_pct, self.disturbed_ratio)


@dataclass(frozen=True)
class Explanation:
    """Why a case moved, as far as the two runs recorded it (:mod:`perfci.compare.explain`)."""

    cause: str  # config | registers | shared | launch | code | power | device | software | vendor | unknown
    reading: str  # one line: what changed, and what that points at
    sides: tuple[tuple[str, str, str], ...] = ()  # (what, base, cur): config, resources, clocks, versions


@dataclass(frozen=True)
class FlipConfig:
    """One config a case launched, where, and how fast it ran there (:mod:`perfci.compare.flips`)."""

    config: str  # "rowdot_kernel BLOCK_N=32 num_warps=2", kernels joined by " + "
    seen_in: str  # "base", "cur" or "base, cur"; with the count of runs when more than one
    median_us: float | None  # the median of those runs' medians


@dataclass(frozen=True)
class ConfigFlip:
    """A case whose launched config changed while its kernel source did not: the times
    were the autotuner's choice, not the code's. ``was``: the verdict the times alone gave."""

    configs: tuple[FlipConfig, ...]
    was: Verdict
    pin: str  # how to pin the config, so the next runs measure one


@dataclass(frozen=True, slots=True)  # slots: one per case, a million in a large compare
class CaseComparison:
    kernel: str
    shape: str
    dtype: str
    verdict: Verdict | str  # a Verdict; "" only while being built
    reason: str = ""
    base_us: float | None = None  # medians of the repeats, raw time
    cur_us: float | None = None
    # cur/base of the medians (>1 slower) as measured: not what the interval is about, and shown only
    # labelled raw (a user read "+12.4% [+9.6%, +12.3%]" when it stood beside the judged interval)
    raw_ratio: float | None = None
    ratio: float | None = None  # the estimate judged: clock-normalized, common mode removed (HL; pooled: nights)
    ci_low: float | None = None  # interval of ratio: ci_low <= ratio <= ci_high
    ci_high: float | None = None
    p_value: float | None = None  # MWU, None when not tested
    q_value: float | None = None  # after Benjamini–Hochberg
    floor_pct: float | None = None
    n_base: int = 0
    n_cur: int = 0
    clock_exponent: float | None = None
    clock_normalized: bool = False
    # cycles | time | "time, levels in cycles": the repeats were judged in time
    # because their clocks did not explain their spread; each run's median clock still counted
    clock_space: str = ""
    weight: float = 1.0
    base_status: str = ""
    cur_status: str = ""
    spread_base_pct: float | None = None  # robust sd of the repeats (judged space), percent
    spread_cur_pct: float | None = None
    disturbed: str = ""  # "base" or "cur": that run scattered, so no regressed/improved verdict
    tflops: float | None = None  # cur's throughput, and its share of the device's roofline
    roofline_pct: float | None = None
    explain: Explanation | None = None  # regressed / improved cases, when the runs' rows are at hand
    flip: ConfigFlip | None = None  # config-flip cases: the configs each side launched

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kernel, self.shape, self.dtype)

    def severity_key(self) -> tuple:
        """Sort key for "worst first": verdict, then the largest judged slowdown, then the name."""
        return worst_first(self.verdict, self.ratio or self.raw_ratio, self.key)


@dataclass(frozen=True)
class Summary:
    counts: dict[str, int]
    n_compared: int
    geomean_raw_ratio: float | None  # of the raw cur/base ratios
    geomean_ratio: float | None  # of the judged estimates
    weighted_speedup: float | None  # Σw / Σ(w/s), w = weight·base time, s = base/cur
    worst: tuple[tuple[str, str, str], ...]  # regressed/broken cases, worst first


@dataclass(frozen=True)
class Comparison:
    base_path: str
    cur_path: str
    arch: str
    profile: NoiseProfile
    options: CompareOptions
    cases: tuple[CaseComparison, ...]
    suite: SuiteShift
    summary: Summary
    threshold_only: bool
    notes: tuple[str, ...] = field(default_factory=tuple)
    # (what, base, cur) of each run: sha, date, device, driver, runtime, torch, triton
    identity: tuple[tuple[str, str, str], ...] = ()

    @property
    def regressed(self) -> bool:
        return (any(c.verdict in (Verdict.REGRESSED, Verdict.BROKEN) for c in self.cases)
                or self.suite.verdict == Verdict.REGRESSED)

    @property
    def inconclusive(self) -> bool:
        """Something the runs could not decide: an inconclusive case or shift, or a config flip
        (the times compare an autotuner's choices, not the code: --strict exits 3 on it too)."""
        return (any(c.verdict in (Verdict.INCONCLUSIVE, Verdict.CONFIG_FLIP) for c in self.cases)
                or self.suite.verdict == Verdict.INCONCLUSIVE)


def summarize(cases: Sequence[CaseComparison]) -> Summary:
    """Counts, geomeans, the time-weighted speedup and the worst cases of a judged suite."""
    counts = {v: 0 for v in VERDICTS}
    for c in cases:
        counts[c.verdict] += 1
    timed = [c for c in cases if c.raw_ratio is not None]
    geo = math.exp(float(np.mean([math.log(c.raw_ratio) for c in timed]))) if timed else None
    adj = [c.ratio for c in timed if c.ratio is not None]
    geo_adj = math.exp(float(np.mean(np.log(adj)))) if adj else None
    # Σw / Σ(w/s) with w = weight·base and s = base/cur is Σ weight·base / Σ weight·cur:
    # the speedup of the weighted total time, which a few big cases dominate on purpose.
    num = sum(c.weight * c.base_us for c in timed)
    den = sum(c.weight * c.cur_us for c in timed)
    speedup = num / den if timed and den > 0 else None
    worst = tuple(c.key for c in cases if c.verdict in (Verdict.BROKEN, Verdict.REGRESSED))
    return Summary(counts, len(timed), geo, geo_adj, speedup, worst)


def missing_cases(result: Comparison) -> list[tuple[str, str, str]]:
    """Cases measured (ok) in BASE that CUR lacks or skipped: a half-missing run is not a clean one.

    compare's and the pytest plugin's rule of :func:`perfci.verdict.missing`."""
    return missing(result.cases, count_skipped=True, require_base_ok=True)
