"""A variance from few nights, moderated towards a prior learned from many cases (empirical Bayes, limma's).

The pooled compare judges a case against its last K nights; with K = 2 or 3 its
own between-night variance has 1 or 2 degrees of freedom, too unsteady to test
80 cases with. limma's answer (Smyth 2004, the moderated t of microarray
analysis, which has the same shape: many features, few replicates) is to
shrink each variance towards a prior ``s0^2`` worth ``d0`` degrees of freedom:
``s~^2 = (d0 s0^2 + d s^2) / (d0 + d)``, with ``d0 + d`` degrees of freedom for
its t-test. The prior's location and weight are fitted from the cases'
variances themselves (:func:`limma_fit`): a suite whose cases agree on their
noise earns a heavy prior, one whose cases disagree a light one. Which cases a
prior is learned from, and what floors it, is the pooled compare's policy
(perfci/compare/prior.py); the arithmetic is here.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton, as limma's trigammaInverse)."""
    from scipy import special  # scipy: heavy, and only the pooled compare needs it

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def limma_fit(dfs: Sequence[float], variances: Sequence[float], log_durations: Sequence[float],
              cap: float) -> tuple[float, float, float]:
    """limma's prior over cases with DFS degrees of freedom (each >= 1) and VARIANCES: ``(d0, intercept, slope)``.

    ``log s0^2 = intercept + slope * log duration``: the log variance's trend
    on LOG_DURATIONS (log us) when they spread over more than a factor 1.6 and
    there are 4+ cases, else a constant. ``d0`` from the scatter of the log
    variances about it beyond what their own degrees of freedom explain
    (infinite when they scatter no more: every case alike), at most CAP.
    """
    from scipy import special  # scipy: heavy, and only the pooled compare needs it

    d = np.asarray(dfs, dtype=float)
    s2 = np.maximum(variances, 1e-10)
    x = np.asarray(log_durations)
    e = np.log(s2) - special.digamma(d / 2.0) + np.log(d / 2.0)
    slope = 0.0
    if np.ptp(x) > 0.5 and d.size >= 4:  # durations spread over more than a factor 1.6: fit the trend
        slope, intercept = np.polyfit(x, e, 1)
    intercept = float(np.mean(e - slope * x))
    resid = e - intercept - slope * x
    evar = float(np.var(resid, ddof=2 if slope else 1)) - float(np.mean(special.polygamma(1, d / 2.0)))
    d0 = 2.0 * trigamma_inverse(evar) if evar > 0 else math.inf
    d0 = min(d0, cap)
    shift = float(special.digamma(d0 / 2.0) - math.log(d0 / 2.0))
    return d0, intercept + shift, float(slope)


def moderated_variance(var: float, df: int, prior_var: float, prior_df: float,
                       own_bound: float | None) -> tuple[float, float]:
    """(s~^2, its degrees of freedom): VAR on DF degrees of freedom shrunk towards PRIOR_VAR worth PRIOR_DF.

    OWN_BOUND (e.g. 0.95): never below that lower confidence bound of VAR itself
    (chi-square with DF degrees of freedom), so a prior may steady a case but
    not overrule what its own nights showed. None: no bound.
    """
    s2 = prior_var if math.isinf(prior_df) else (prior_df * prior_var + df * var) / (prior_df + df)
    if own_bound is not None and df >= 1:
        from scipy import stats as sps  # scipy: heavy, and only the pooled compare needs it

        s2 = max(s2, df * var / float(sps.chi2.ppf(own_bound, df)))
    return s2, prior_df + df


def pooled_upper_bound(series: Sequence[tuple[float, float]], level: float) -> float | None:
    """The upper LEVEL confidence bound of a variance pooled over SERIES, or None.

    SERIES: (variance, degrees of freedom) of each independent series; the pooled
    variance ``sum(d s^2) / sum(d)`` on ``sum(d)`` degrees of freedom, bounded by
    chi-square: ``sum(d) s^2 / chi2.ppf(1 - level, sum(d))``. None without any.
    """
    from scipy import stats as sps  # scipy: heavy, and only the pooled compare needs it

    df = float(sum(d for _, d in series))
    if df <= 0:
        return None
    pooled = sum(v * d for v, d in series) / df
    return df * pooled / float(sps.chi2.ppf(1.0 - level, df))

