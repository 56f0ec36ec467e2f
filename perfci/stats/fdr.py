"""Many cases at once: Benjamini–Hochberg q-values, so a suite of 80 cases is not 80 chances of a false alarm.

The false discovery rate, not the family-wise error: a suite gate wants most of
what it flags to be real, and a family-wise correction (Bonferroni) would ask
each of 80 cases for a p-value 80 times smaller, more than 7 repeats a side can
ever give (:func:`perfci.stats.min_pvalue`). **Written out** (a
dozen lines) because ``scipy.stats.false_discovery_control`` needs scipy >= 1.11
and the project allows 1.10; a test checks the two agree.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


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
