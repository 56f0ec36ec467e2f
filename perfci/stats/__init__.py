"""perfci's statistics, pure: numbers in, numbers out, for compare, its pooled form, confirm, bisect, history.

No files, no printing, no globals that change, no other perfci module. Each
module says what it computes and why that estimator:

* :mod:`perfci.stats.two_sample`: is cur shifted against base, and by how
  much: Mann–Whitney U (exact when it can be), the Hodges–Lehmann shift with
  its Moses interval, a seeded bootstrap (compare, bisect).
* :mod:`perfci.stats.one_sample`: a location of paired differences against 0:
  Student's t, the signed-rank test with its Walsh interval, the trimmed mean
  (confirm, bisect, the pooled compare's prediction interval).
* :mod:`perfci.stats.fdr`: Benjamini–Hochberg q-values across a suite's cases.
* :mod:`perfci.stats.robust`: the MAD spread, compare's common mode, and the
  Huber and biweight regressions of a run's suite-wide shift (history, the
  pooled compare).
* :mod:`perfci.stats.prior`: a few nights' variance moderated towards a prior
  learned from many cases, limma's empirical Bayes (the pooled compare).
* :mod:`perfci.stats.proportion`: the Wilson interval of a proportion of a few
  nights (the canary's rates).
* :mod:`perfci.stats.spending`: the share of alpha each look of a sequential
  decision spends, and the looks' round counts (bisect, confirm).

Callers import from here (``from perfci import stats``; ``stats.mann_whitney``).
scipy is imported inside the functions that need it: compare imports this
package and needs no scipy.
"""
from __future__ import annotations

from perfci.stats.fdr import benjamini_hochberg
from perfci.stats.one_sample import (ONE_SAMPLE_METHODS, Estimate, Location, one_sample, signed_rank, t_estimate,
                                     t_interval, trimmed_mean_interval)
from perfci.stats.prior import limma_fit, moderated_variance, pooled_upper_bound, trigamma_inverse
from perfci.stats.proportion import wilson
from perfci.stats.robust import (BIWEIGHT_C, HUBER_C, MAD_TO_SD, CommonMode, biweight_coefficients, common_mode,
                                 huber_coefficients, huber_fit, mad_spread, median, robust_spread,
                                 shift_design)
from perfci.stats.spending import geometric_looks, open_share, planned_share
from perfci.stats.two_sample import (ALTERNATIVES, EXACT_MAX_N, MWU, Shift, bootstrap_shift, hodges_lehmann,
                                     mann_whitney, min_pvalue)

__all__ = [
    "ALTERNATIVES", "BIWEIGHT_C", "EXACT_MAX_N", "HUBER_C", "MAD_TO_SD", "MWU", "ONE_SAMPLE_METHODS", "CommonMode",
    "Estimate", "Location", "Shift", "benjamini_hochberg", "biweight_coefficients", "bootstrap_shift",
    "common_mode", "geometric_looks", "hodges_lehmann", "huber_coefficients", "huber_fit", "limma_fit",
    "mad_spread", "mann_whitney", "median", "min_pvalue", "moderated_variance", "one_sample", "open_share", "pooled_upper_bound",
    "planned_share", "robust_spread", "shift_design", "signed_rank", "t_estimate", "t_interval",
    "trigamma_inverse", "trimmed_mean_interval", "wilson",
]
