"""One sample: a location of paired differences with its interval and p-value against 0 (confirm, bisect).

Confirm passes per-round paired log differences to :func:`t_interval` and
:func:`signed_rank` (perfci/confirm/analysis.py says which it uses when), the
pooled compare a prediction-interval estimate to :func:`t_estimate`, bisect its
rounds to :func:`trimmed_mean_interval`.

* **Student's t, or the signed-rank test with its Walsh interval.** Confirm's
  per-round differences are few (5-20) and ABBA makes them symmetric: the mean
  is efficient when they are near normal, the Hodges-Lehmann location when a
  round or two land far off.
* **The trimmed mean** where whole rounds now and then land far off and there
  are too few of them for ranks to help (see its docstring).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Location:
    """A one-sample location (a mean of paired differences) with its two-sided interval."""

    estimate: float
    low: float
    high: float
    n: int
    spread: float  # the standard error the interval is built on (0 for a constant sample)


def trimmed_mean_interval(values: Sequence[float], confidence: float, trim: float = 0.2) -> Location:
    """The ``trim``-trimmed mean of ``values`` with Tukey and McLaughlin's interval.

    For paired differences whose runs now and then land far off (a process
    descheduled, a state change between two runs of one round): the trimmed
    mean leaves the worst ``trim`` of each tail out of the estimate and the
    winsorized variance out of its error, so one wild round cannot swamp ten
    good ones, as it does a plain t-interval, and small samples still get an
    interval (below five values nothing is trimmed: the plain t-interval).
    The interval is ``tm +- t(1 - alpha/2, n - 2g - 1) * s_w / ((1 - 2g/n) sqrt n)``,
    g = floor(trim * n) values cut from each end; it assumes the differences are
    symmetric about their centre, which a design that runs each side in both
    orders gives (ABBA, lo m m hi / hi m m lo).

    Raises:
        ValueError: fewer than two values (no spread to build an interval on).
    """
    from scipy import special  # lazy: scipy

    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n < 2:
        raise ValueError("trimmed_mean_interval needs at least two values")
    g = int(math.floor(trim * n))
    if n - 2 * g < 2:
        g = (n - 2) // 2
    kept = x[g:n - g]
    estimate = float(kept.mean())
    winsorized = np.clip(x, x[g], x[n - 1 - g])
    sd_w = float(winsorized.std(ddof=1))
    se = sd_w / ((1.0 - 2.0 * g / n) * math.sqrt(n))
    if se == 0.0:  # every value equal: a deterministic metric, the value is the value
        return Location(estimate, estimate, estimate, n, 0.0)
    df = n - 2 * g - 1
    half = float(special.stdtrit(df, 0.5 + confidence / 2.0)) * se
    return Location(estimate, estimate - half, estimate + half, n, se)


@dataclass(frozen=True)
class Estimate:
    """A location with its interval and two-sided p-value against 0."""
    estimate: float
    low: float
    high: float
    p_value: float
    confident: bool  # False: too few values for the level (the interval is their range)


ONE_SAMPLE_METHODS = ("t", "wilcoxon")


def t_interval(d: Sequence[float], confidence: float) -> Estimate:
    """Mean of ``d`` with Student's t interval and the one-sample t-test."""
    from scipy import special  # here, not at the top: compare imports this module and needs no scipy

    x = np.asarray(d, dtype=float)
    n = x.size
    if n < 2:
        raise ValueError("t_interval needs at least two values")
    mean = float(x.mean())
    se = float(x.std(ddof=1)) / math.sqrt(n)
    if se == 0.0:  # a deterministic metric: the value is the value
        return Estimate(mean, mean, mean, 1.0 if mean == 0.0 else 0.0, True)
    half = float(special.stdtrit(n - 1, 0.5 + confidence / 2.0)) * se
    p = float(2.0 * special.stdtr(n - 1, -abs(mean) / se))
    return Estimate(mean, mean - half, mean + half, min(1.0, p), True)


@lru_cache(maxsize=128)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t), t = 0 .. n(n+1)/2, under H0: rank i enters T+ with probability 1/2,
    so the pmf of n averages that of n-1 and the same shifted by n."""
    pmf = np.ones(1)
    for i in range(1, n + 1):
        nxt = np.zeros(pmf.size + i)
        nxt[:pmf.size] += 0.5 * pmf
        nxt[i:] += 0.5 * pmf
        pmf = nxt
    return np.cumsum(pmf)


def signed_rank(d: Sequence[float], confidence: float) -> Estimate:
    """Hodges-Lehmann location (median of the Walsh averages) with its exact interval,
    and the two-sided Wilcoxon signed-rank p-value against 0: exact without zeros
    or tied ``|d|``, else the normal approximation (zeros dropped, ties corrected)."""
    from scipy import special  # lazy: scipy
    from scipy.stats import rankdata  # lazy: scipy

    x = np.asarray(d, dtype=float)
    n = x.size
    if n < 1:
        raise ValueError("signed_rank needs at least one value")
    i, j = np.triu_indices(n)
    walsh = np.sort((x[i] + x[j]) / 2.0)
    cdf = _signed_rank_cdf(n)
    k = int(np.searchsorted(cdf, (1.0 - confidence) / 2.0, side="right"))  # cdf[k-1] <= alpha/2
    nz = x[x != 0.0]
    absd = np.abs(nz)
    t_plus = float(rankdata(absd)[nz > 0].sum())
    if nz.size == 0:
        p = 1.0
    elif nz.size == n and np.unique(absd).size == n:
        t = int(round(t_plus))  # T+ is symmetric about n(n+1)/4: P(T+ >= t) = P(T+ <= n(n+1)/2 - t)
        p = min(1.0, 2.0 * min(float(cdf[t]), float(cdf[n * (n + 1) // 2 - t])))
    else:
        m = nz.size
        _, counts = np.unique(absd, return_counts=True)
        var = m * (m + 1) * (2 * m + 1) / 24.0 - float(np.sum(counts**3 - counts)) / 48.0
        z = (abs(t_plus - m * (m + 1) / 4.0) - 0.5) / math.sqrt(var) if var > 0 else 0.0
        p = float(min(1.0, 2.0 * special.ndtr(-max(z, 0.0))))
    est = float(np.median(walsh))
    if k < 1:
        return Estimate(est, float(walsh[0]), float(walsh[-1]), p, False)
    return Estimate(est, float(walsh[k - 1]), float(walsh[walsh.size - k]), p, True)


def one_sample(d: Sequence[float], confidence: float, method: str = "t") -> Estimate:
    """:func:`t_interval` (``"t"``) or :func:`signed_rank` (``"wilcoxon"``) of ``d`` against 0."""
    if method not in ONE_SAMPLE_METHODS:
        raise ValueError(f"method must be one of {', '.join(ONE_SAMPLE_METHODS)}, not {method!r}")
    return t_interval(d, confidence) if method == "t" else signed_rank(d, confidence)


def t_estimate(estimate: float, se: float, df: float, confidence: float) -> Estimate:
    """An estimate with standard error ``se`` on ``df`` degrees of freedom: its two-sided
    Student's t p-value against 0 and its ``confidence`` interval."""
    from scipy import stats as sps  # lazy: scipy

    p = float(2.0 * sps.t.sf(abs(estimate / se), df))
    crit = float(sps.t.ppf(1.0 - (1.0 - confidence) / 2.0, df))
    return Estimate(estimate, estimate - crit * se, estimate + crit * se, p, True)
