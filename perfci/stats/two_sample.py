"""Two samples, base and cur: is one shifted against the other, and by how much (compare, bisect).

Compare passes *log* times, so a shift is a ratio: ``exp(hl) - 1`` is the
relative change of cur against base. Bisect passes its metric as measured and
scales the shift by the earlier commit's median itself.

* **Mann–Whitney U, exact when it can be.** Repeats are few (7 a side), skewed
  and sometimes carry an outlier; a rank test needs no normality. The exact null
  distribution (no ties) is computed once per (n1, n2) and cached, so the
  smallest reachable p-value is exact: 2 / C(14, 7) ≈ 0.00058 for 7 vs 7, which
  is what decides whether Benjamini–Hochberg can ever flag a lone case.
* **Hodges–Lehmann shift with the Moses interval.** The median of all pairwise
  differences is the estimator that goes with the U test, and its distribution-
  free interval comes from the same null distribution, so the test and the
  interval never disagree about what the data show. It is deterministic, which
  a CI gate should be. A seeded bootstrap is here too, for callers that prefer it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Sequence

import numpy as np

from perfci.stats.robust import median

EXACT_MAX_N = 60


@lru_cache(maxsize=256)
def _u_null_pmf(n1: int, n2: int) -> np.ndarray:
    """P(U = u) for u = 0 .. n1*n2 under H0 with no ties.

    Recurrence on the largest observation: it belongs to sample 1 (adding n2 to
    U) with probability n1/(n1+n2), else to sample 2. Kept in probabilities, not
    counts, so it cannot overflow.
    """
    # f[a][b] is the pmf for sizes (a, b); built row by row over a.
    prev = [np.ones(1)] * (n2 + 1)  # a = 0: U is 0 whatever b is
    for a in range(1, n1 + 1):
        cur = [np.zeros(1)] * (n2 + 1)
        cur[0] = np.ones(1)  # b = 0: U is 0
        for b in range(1, n2 + 1):
            size = a * b + 1
            pmf = np.zeros(size)
            p1 = a / (a + b)
            # largest from sample 1: U(a, b) = U(a-1, b) + b
            left = prev[b]
            pmf[b:b + left.size] += p1 * left
            # largest from sample 2: U(a, b) = U(a, b-1)
            down = cur[b - 1]
            pmf[:down.size] += (1 - p1) * down
            cur[b] = pmf
        prev = cur
    return prev[n2]


@lru_cache(maxsize=256)
def _u_null_cdf(n1: int, n2: int) -> np.ndarray:
    return np.cumsum(_u_null_pmf(n1, n2))


@lru_cache(maxsize=256)
def _u_null_sf(n1: int, n2: int) -> np.ndarray:
    """P(U >= u), summed from the top so tiny tail probabilities stay exact."""
    return np.cumsum(_u_null_pmf(n1, n2)[::-1])[::-1]


def min_pvalue(n1: int, n2: int) -> float:
    """The smallest two-sided MWU p-value reachable with n1 and n2 samples."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


@dataclass(frozen=True)
class MWU:
    u: float  # number of (cur > base) pairs, ties counting one half
    p_value: float
    method: str  # "exact" | "normal"


ALTERNATIVES = ("two-sided", "less", "greater")


def mann_whitney(base: Sequence[float], cur: Sequence[float], alternative: str = "two-sided") -> MWU:
    """Mann–Whitney U test of ``cur`` against ``base``.

    Args:
        base, cur: samples (any monotone transform gives the same answer).
        alternative: "two-sided"; "greater": cur tends to be larger than base
            (for times, slower); "less": cur tends to be smaller. The same
            convention as ``scipy.stats.mannwhitneyu(cur, base, alternative=...)``.
    Returns:
        U counts pairs where cur is larger, so U > n1*n2/2 means cur is slower.
        Exact p-value when there are no ties and both sides are small; otherwise
        the normal approximation with tie and continuity corrections.
    Raises:
        ValueError: a side is empty or ``alternative`` is unknown (caller bugs,
            never reported as a result).
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {', '.join(ALTERNATIVES)}, not {alternative!r}")
    x = np.asarray(base, dtype=float)
    y = np.asarray(cur, dtype=float)
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney needs at least one sample a side")
    diff = y[:, None] - x[None, :]
    u = float(np.sum(diff > 0) + 0.5 * np.sum(diff == 0))
    pooled = np.concatenate([x, y])
    has_ties = np.unique(pooled).size < pooled.size
    if not has_ties and max(n1, n2) <= EXACT_MAX_N:
        ui = int(round(u))
        lower = float(_u_null_cdf(n1, n2)[ui])  # P(U <= u): cur this small or smaller
        upper = float(_u_null_sf(n1, n2)[ui])  # P(U >= u): cur this large or larger
        p = {"less": lower, "greater": upper}.get(alternative, 2.0 * min(lower, upper))
        return MWU(u, min(1.0, p), "exact")
    mean = n1 * n2 / 2.0
    _, counts = np.unique(pooled, return_counts=True)
    n = n1 + n2
    tie_term = float(np.sum(counts**3 - counts)) / (n * (n - 1))
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:  # every value equal: no evidence of any shift
        return MWU(u, 1.0, "normal")
    # The continuity correction moves U half a step towards the null mean.
    if alternative == "greater":
        p = 0.5 * math.erfc((u - mean - 0.5) / math.sqrt(var) / math.sqrt(2.0))
    elif alternative == "less":
        p = 0.5 * math.erfc((mean - u - 0.5) / math.sqrt(var) / math.sqrt(2.0))
    else:
        z = (abs(u - mean) - 0.5) / math.sqrt(var)
        p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return MWU(u, float(min(1.0, p)), "normal")


@dataclass(frozen=True)
class Shift:
    estimate: float  # Hodges–Lehmann shift of cur - base (log scale)
    low: float
    high: float
    confident: bool  # False when the samples are too few for the requested level


def hodges_lehmann(base: Sequence[float], cur: Sequence[float], confidence: float = 0.95) -> Shift:
    """Hodges–Lehmann shift ``cur - base`` with its Moses confidence interval.

    The interval is [D(k), D(mn+1-k)] of the sorted pairwise differences, k the
    largest index with P(U <= k-1) <= alpha/2 under the exact null (normal
    approximation for large samples). With too few samples for the level, the
    interval is the full range of differences and ``confident`` is False.
    """
    x = np.asarray(base, dtype=float)
    y = np.asarray(cur, dtype=float)
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        raise ValueError("hodges_lehmann needs at least one sample a side")
    d = np.sort((y[:, None] - x[None, :]).ravel())
    mn = d.size
    est = median(d)
    half_alpha = (1.0 - confidence) / 2.0
    if max(n1, n2) <= EXACT_MAX_N:
        cdf = _u_null_cdf(n1, n2)
        # cdf[k-1] <= half_alpha  <=>  k-1 <= last index still under half_alpha
        k = int(np.searchsorted(cdf, half_alpha, side="right"))
    else:
        z = _norm_ppf(1.0 - half_alpha)
        k = int(math.floor(mn / 2.0 - z * math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)))
    if k < 1:
        return Shift(est, float(d[0]), float(d[-1]), False)
    return Shift(est, float(d[k - 1]), float(d[mn - k]), True)


def bootstrap_shift(base: Sequence[float], cur: Sequence[float], *, confidence: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> Shift:
    """Percentile bootstrap of the difference of medians ``median(cur) - median(base)``.

    Seeded so two calls on the same data agree; an alternative to
    :func:`hodges_lehmann` for callers that want it.
    """
    x = np.asarray(base, dtype=float)
    y = np.asarray(cur, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("bootstrap_shift needs at least one sample a side")
    rng = np.random.default_rng(seed)
    bx = np.median(x[rng.integers(0, x.size, (resamples, x.size))], axis=1)
    by = np.median(y[rng.integers(0, y.size, (resamples, y.size))], axis=1)
    diffs = by - bx
    a = (1.0 - confidence) / 2.0
    return Shift(float(np.median(y) - np.median(x)), float(np.quantile(diffs, a)),
                 float(np.quantile(diffs, 1.0 - a)), min(x.size, y.size) >= 3)


def _norm_ppf(q: float) -> float:
    return NormalDist().inv_cdf(q)
