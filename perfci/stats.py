"""Pure statistics for ``perfci compare``, its pooled form, ``perfci confirm`` and ``perfci bisect``.

No files, no printing, no globals that change. Compare passes *log* times, so a
shift is a ratio: ``exp(hl) - 1`` is the relative change of cur against base.
Bisect passes its metric as measured and scales the shift by the earlier
commit's median itself. Confirm passes per-round paired log differences to the
one-sample tests (:func:`t_interval`, :func:`signed_rank`); the pooled compare
a prediction-interval estimate to :func:`t_estimate`.

Why these choices:

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
* **One sample: Student's t, or the signed-rank test with its Walsh interval.**
  Confirm's per-round differences are few (5-20) and ABBA makes them
  symmetric; perfci/confirm/analysis.py says which it uses when.
* **Benjamini–Hochberg written out** (a dozen lines) because
  ``scipy.stats.false_discovery_control`` needs scipy >= 1.11 and the project
  allows 1.10; a test checks the two agree.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

# Above this many samples a side the exact table grows slowly to build and the
# normal approximation (with tie correction) is already accurate.
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


def median(values: np.ndarray | Sequence[float]) -> float:
    """``np.median`` of a small 1-D sample: the same number, without numpy's per-call cost.

    compare takes about sixteen medians of 7 to 49 values per case; ``np.median``
    spends ~10 us on each in checks and dispatch, which made the per-case work of a
    100k-case compare most of a minute. Sorting a Python list is exact and cheap at
    these sizes. A NaN is left to numpy (NaN); an empty sample is a ValueError.
    """
    v = sorted(values.tolist() if isinstance(values, np.ndarray) else values)
    n = len(v)
    if n == 0:
        raise ValueError("median of an empty sample")
    if math.isnan(sum(v)):  # a NaN (which sorted() leaves anywhere), or inf and -inf: numpy's rules
        return float(np.median(np.asarray(v, dtype=float)))
    mid = n // 2
    # (a + b) / 2.0 is exactly numpy's mean of the two middle values.
    return float(v[mid]) if n % 2 else (v[mid - 1] + v[mid]) / 2.0


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
    from scipy import special

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


def robust_spread(log_samples: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: a standard deviation that one wild value cannot move."""
    x = np.asarray(log_samples, dtype=float)
    if x.size < 2:
        return 0.0
    return 1.4826 * median(np.abs(x - median(x)))


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


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """BH-adjusted p-values (q-values): reject where q <= alpha controls the FDR at alpha.

    NaN entries (cases without a test) are passed through and do not count
    towards the number of hypotheses.
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    mask = ~np.isnan(p)
    m = int(mask.sum())
    if m == 0:
        return out
    pv = p[mask]
    order = np.argsort(pv)
    ranked = pv[order] * m / np.arange(1, m + 1)
    # q_(i) = min over j >= i of p_(j) m / j: a running minimum from the top.
    q_sorted = np.minimum.accumulate(ranked[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(q_sorted, 1.0)
    out[mask] = q
    return out


@dataclass(frozen=True)
class CommonMode:
    """A suite-wide shift, split into what the core clock explains and what it does not.

    ``log ratio ≈ memory + clock_exponent * clock`` for every case: ``memory``
    is the shift of memory-bound cases (exponent 0), ``memory + clock`` that of
    compute-bound ones (exponent 1). Without clock telemetry a run-level clock
    swing shows up as ``clock``; with it, ``clock`` should be near zero.
    """

    memory: float = 0.0  # log shift of cases the core clock does not drive
    clock: float = 0.0  # extra log shift of fully clock-driven cases
    overall: float = 0.0  # median log ratio of the whole suite
    n_cases: int = 0
    method: str = "none"  # "split" | "pooled" | "none"

    def at(self, clock_exponent: float) -> float:
        return self.memory + clock_exponent * self.clock


def common_mode(log_ratios: Sequence[float], clock_exponents: Sequence[float], *,
                min_cases: int = 6, min_per_class: int = 4) -> CommonMode:
    """Robust suite-wide shift: medians, so a handful of real regressions cannot move it.

    Compute-bound (exponent >= 0.9) and memory-bound (<= 0.1) cases each get a
    median when each class has ``min_per_class`` cases; otherwise one pooled
    median; with fewer than ``min_cases`` cases nothing is estimated, because a
    median of three cases is one of those cases and would hide its regression.
    """
    r = np.asarray(log_ratios, dtype=float)
    s = np.asarray(clock_exponents, dtype=float)
    n = r.size
    if n < min_cases:
        return CommonMode(n_cases=n, overall=float(np.median(r)) if n else 0.0, method="none")
    overall = float(np.median(r))
    comp, mem = r[s >= 0.9], r[s <= 0.1]
    if comp.size >= min_per_class and mem.size >= min_per_class:
        m_mem = float(np.median(mem))
        return CommonMode(memory=m_mem, clock=float(np.median(comp)) - m_mem,
                          overall=overall, n_cases=n, method="split")
    return CommonMode(memory=overall, clock=0.0, overall=overall, n_cases=n, method="pooled")


# --------------------------------------------------------------------------- one sample


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
    from scipy import special
    from scipy.stats import rankdata

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
    from scipy import stats as sps

    p = float(2.0 * sps.t.sf(abs(estimate / se), df))
    crit = float(sps.t.ppf(1.0 - (1.0 - confidence) / 2.0, df))
    return Estimate(estimate, estimate - crit * se, estimate + crit * se, p, True)


def _norm_ppf(q: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)
