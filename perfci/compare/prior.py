"""The prior of each case's between-night variance in the pooled compare (:mod:`perfci.compare.pooled`).

Pure numbers in and out. A case with K nights has K-1 degrees of freedom of its
own: with two or three nights in the store that variance is too unsteady to
test 80 cases with, so it is shrunk towards a prior, empirical Bayes as limma
does it (Smyth 2004): ``s~^2 = (d0 s0^2 + d s^2) / (d0 + d)``. The arithmetic
is :mod:`perfci.stats.prior`'s; which cases a prior is learned from is this module's.

Where the prior is learned decides what it can hide. Learned from the whole
suite, it says "a night moves a case by about 0.5%", and a split-K case whose
process moves it by 3% is shrunk to that and called regressed on the night it
moves (H200 decode, two nights in the store: 9 of 84 cases, all split-K,
+2.2..+3.6%). So the prior is a **family**'s, the cases of one kernel label
(``splitk_decode[m_fast=1]``, ``torch_matmul``: one code path, one launch
pattern, one way of being disturbed):

* a family with ``min_family_cases`` cases learns its own prior (limma within
  the family, log variance on log duration when its durations spread);
* a smaller one takes its kernel's (the label without its variant) when that is
  big enough, else the suite's, and never less than the noise profile's
  one-run spread (``floor / (1.25 * 2.576 * sqrt 2)``, 1.2% on the H200), worth
  ``profile_prior_nights``, or than the suite's own bound where that is lower
  (``suite_floor``): the profile is the whole device's, split-K's 3% included,
  and a team's suite of three kernels whose nights agree within 0.3% was held
  to it, with two stored nights every interval ±4.4% and every case of an
  unchanged night sent to confirm. The bound is the upper 95% confidence bound
  of the suite's between-night variance pooled over its kernels, each kernel
  counted as **one** series of K-1 degrees of freedom (its cases share each
  night's process and clocks, so they are not independent), cases whose nights
  launched two configs left out (an autotuner's race, not noise): four kernels at
  K = 2 give 4 degrees of freedom, a bound 2.4 times the pooled spread (three:
  2.9 times). A noisy
  kernel raises the pool, and with it the bound; the bound is the kernels'
  pooled variance, though, so enough quiet kernels pull it below the profile
  with a noisy one among them (docs/history.md);
* the prior's weight is capped at ``max_prior_nights``: the cases of a family
  share each night, so 16 cases over 3 nights are not 32 independent degrees of
  freedom about the next night (a process that slows every split-K case by 2%
  moves them together);
* and the moderated variance never falls below the lower ``own_bound`` (95%)
  confidence bound of the case's own: a prior may steady a case, not overrule
  what its own nights showed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from perfci import stats
from perfci.compare.noise import NoiseProfile

# A profile's floor is 1.25 x the q99 of |log ratio| of two runs: one run's spread is floor / (1.25 * 2.576 * sqrt 2).
FLOOR_TO_SD = 1.25 * 2.5758 * math.sqrt(2.0)


@dataclass(frozen=True)
class PriorOptions:
    """How the prior is learned (the pooled compare's :class:`perfci.compare.pooled.PooledOptions` carries one)."""

    scope: str = "family"  # family (kernel label, then kernel, then suite) | suite (one prior for every case)
    min_family_cases: int = 8  # cases a family needs to learn its own prior
    min_prior_cases: int = 8  # cases the suite needs; fewer: the profile's
    profile_prior_nights: float = 2.0  # d0 when the prior is the profile's
    max_prior_nights: float = 8.0  # cap on d0 (the suite scope's old value: 1e4)
    own_bound: float | None = 0.95  # never below this lower confidence bound of the case's own variance; None: off
    # The least a small family's prior may be: the profile's one-run spread, or the suite's own upper bound
    # (at this level, each kernel one series) where that is lower; None: the profile's always.
    suite_floor: float | None = 0.95


@dataclass(frozen=True)
class Prior:
    d0: float  # weight of the prior, in degrees of freedom (inf: every case alike)
    intercept: float  # log s0^2 = intercept + slope * log(base us)
    slope: float
    source: str  # "family" | "kernel" | "suite" | "profile" | "suite bound" (the suite's own nights, bounded)
    group: str = ""  # the family or kernel it was learned from; "" for the suite and the profile

    def s0sq(self, base_us: float) -> float:
        return math.exp(self.intercept + self.slope * math.log(base_us))


@dataclass(frozen=True)
class CaseVariance:
    """What a case's pool needs from the prior: its count of nights, their variance and center (log us)."""

    k: int
    var: float
    center: float
    flipped: bool = False  # its nights launched two configs (an autotuner's race): its spread is not noise


def family(kernel: str) -> str:
    """A case's family: its kernel label, variant included."""
    return kernel


def kernel_of(kernel: str) -> str:
    """The kernel a family belongs to: the label without its ``[variant]``."""
    return kernel.split("[", 1)[0]


def profile_prior(profile: NoiseProfile, opts: PriorOptions) -> Prior:
    """The noise profile's one-run floor read as a spread, worth ``profile_prior_nights``."""
    # floor_for adds floor_us / base_us; read as a spread that is a + b / base_us; log-linear is
    # close enough over one suite, so take the relative part only.
    sd = profile.floor_for(None, False) / 100.0 / FLOOR_TO_SD
    return Prior(opts.profile_prior_nights, math.log(sd * sd), 0.0, "profile")


def limma_prior(cases: Sequence[CaseVariance], source: str, group: str, cap: float) -> Prior:
    """limma's fit of the prior over CASES (each with k >= 2): log variance on log duration, d0 from the scatter
    (:func:`perfci.stats.limma_fit`)."""
    d0, intercept, slope = stats.limma_fit([c.k - 1 for c in cases], [c.var for c in cases],
                                           [c.center for c in cases], cap)
    return Prior(d0, intercept, slope, source, group)


def suite_bound(cases: Mapping[tuple[str, str, str], CaseVariance], level: float) -> float | None:
    """The upper LEVEL bound of the suite's between-night variance, each kernel one series of K-1 degrees of freedom.

    A kernel's variance is its cases' pooled (they share its nights); its degrees
    of freedom are its longest case's K-1, not the sum over its cases. A case whose
    nights launched two configs is left out: its nights moved with an autotuner's
    choice (compare calls it ``config-flip``), and one such case of 4% would hold
    every quiet kernel of the suite to the profile.
    """
    kernels: dict[str, list[CaseVariance]] = {}
    for key, c in cases.items():
        if c.k >= 2 and not c.flipped:
            kernels.setdefault(kernel_of(key[0]), []).append(c)
    series = [(sum((c.k - 1) * c.var for c in cs) / sum(c.k - 1 for c in cs), float(max(c.k for c in cs) - 1))
              for cs in kernels.values()]
    return stats.pooled_upper_bound(series, level)


def floor_prior(cases: Mapping[tuple[str, str, str], CaseVariance], profile: NoiseProfile,
                opts: PriorOptions) -> Prior:
    """The least a small family's prior may be: the profile's one-run spread, or the suite's bound where lower."""
    prof = profile_prior(profile, opts)
    bound = None if opts.suite_floor is None else suite_bound(cases, opts.suite_floor)
    if bound is None or bound >= prof.s0sq(1.0):
        return prof
    return Prior(prof.d0, math.log(max(bound, 1e-12)), 0.0, "suite bound")


def suite_prior(cases: Sequence[CaseVariance], floor: Prior, opts: PriorOptions) -> Prior:
    """One prior for every case: from the suite when it has enough cases, else FLOOR (:func:`floor_prior`)."""
    usable = [c for c in cases if c.k >= 2]
    if len(usable) < opts.min_prior_cases:
        return floor
    return limma_prior(usable, "suite", "", opts.max_prior_nights)


def _at_least(prior: Prior, floor: Prior) -> Callable[[float], Prior]:
    """PRIOR's weight, its location raised to FLOOR's where it lies below (per case duration)."""
    def at(base_us: float) -> Prior:
        lifted = max(prior.s0sq(base_us), floor.s0sq(base_us))
        return Prior(min(prior.d0, floor.d0), math.log(lifted), 0.0, prior.source, prior.group)
    return at


def case_priors(cases: Mapping[tuple[str, str, str], CaseVariance], profile: NoiseProfile,
                opts: PriorOptions) -> dict[tuple[str, str, str], Prior]:
    """The prior each case is moderated towards (see the module docstring)."""
    usable = {key: c for key, c in cases.items() if c.k >= 2}
    floor = floor_prior(usable, profile, opts)
    suite = suite_prior(list(usable.values()), floor, opts)
    if opts.scope == "suite":
        return {key: suite for key in cases}
    groups: dict[tuple[str, str], list[CaseVariance]] = {}
    for key, c in usable.items():
        groups.setdefault(("family", family(key[0])), []).append(c)
        groups.setdefault(("kernel", kernel_of(key[0])), []).append(c)
    learned = {g: limma_prior(v, g[0], g[1], opts.max_prior_nights) for g, v in groups.items()
               if len(v) >= opts.min_family_cases}
    small = _at_least(suite, floor)
    out = {}
    for key, c in cases.items():
        prior = learned.get(("family", family(key[0]))) or learned.get(("kernel", kernel_of(key[0])))
        out[key] = prior if prior is not None else small(math.exp(c.center))
    return out


def moderated_var(c: CaseVariance, prior: Prior, opts: PriorOptions) -> tuple[float, float]:
    """(s~^2, its degrees of freedom) of case C under PRIOR (:func:`perfci.stats.moderated_variance`)."""
    return stats.moderated_variance(c.var, c.k - 1, prior.s0sq(math.exp(c.center)), prior.d0, opts.own_bound)
