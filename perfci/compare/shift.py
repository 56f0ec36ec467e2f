"""Tonight's suite-wide shift at each case, fitted so that one kernel's own change is not taken as the suite's.

Pure numbers. The pooled compare (:mod:`perfci.compare.pooled`) takes tonight's
shift out of every case before judging it: a night whose clocks ran lower, or
whose launches ran faster, moves every case and is no case's own change. Fitted
over every case with a Huber weight (:func:`perfci.history.nights.mode_offsets`),
a change to one kernel's code leaks into that shift: on the H200's decode suite,
+3% planted on torch_matmul (32 of 84 cases) lost 1.1% of itself to it, and +3%
on the 16 longest cases (splitk_decode) 1.0%, since the longest cases pin the
intercept of ``a + b/us``. So for each kernel's cases (variants included):

* a **biweight** (:func:`perfci.stats.biweight_coefficients`) on residuals
  scaled by each case's own night-to-night spread finds the suite's mode: a
  kernel that moved by itself (3% where its nights move 0.7%) gets no weight, instead of pushing every other kernel's residuals
  the other way;
* then each kernel's shift is refitted from there on the **other** kernels'
  cases only, so its own change stays in its residuals whatever its size or
  its durations (the biweight alone lets the longest cases set the intercept);
* a kernel with fewer than ``min_cases`` others, but at least ``min_others``
  (``PooledOptions.min_others_level``, 3), takes the others' level alone (a
  biweight location): too few cases for the whole design, yet the suite's fit over every case would
  carry its own change (a team's suite of 3-4 kernels of 2-3 cases, drawn from
  the H200's stored nights: +3% on split-K seen as +1.4% and flagged in 47-57%
  of its cases at K = 3-4 with the suite's fit, 65-70% with the others' level;
  ``benchmarks/history_validation.py --only team-suites``);
* a kernel with fewer others than that keeps the suite's fit.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from perfci import stats
from perfci.compare.prior import kernel_of
from perfci.history.nights import SHORT_US, mode_offsets

def tonight_offsets(devs: Sequence[float], exps: Sequence[float], log_us: Sequence[float],
                    kernels: Sequence[str], scales: Sequence[float], how: str, min_cases: int,
                    exclude_own_kernel: bool = True, min_others: int = 3) -> np.ndarray:
    """Tonight's suite-wide shift at each case (log).

    DEVS, EXPS, LOG_US as :func:`perfci.history.nights.mode_offsets` takes
    them; KERNELS the cases' kernel labels; SCALES each case's spread of a night
    (log), what a residual is measured in. ``how`` ``median``: compare's common
    mode, over every case. ``exclude_own_kernel`` False: the Huber fit over every
    case, as the history nights' shifts are fitted. ``min_others``: the fewest other kernels' cases
    whose level alone stands for a kernel's shift when they are too few for the fit.
    """
    d, e, u = (np.asarray(x, dtype=float) for x in (devs, exps, log_us))
    if how == "median" or not exclude_own_kernel:
        return mode_offsets(d, e, u, how, min_cases)
    if d.size < min_cases:
        return np.zeros(d.size)
    s = np.maximum(np.asarray(scales, dtype=float), 1e-4)
    x = stats.shift_design(e, u, min_cases, SHORT_US)
    # The suite's mode first: the fit of every case, a kernel that moved by itself left out by the biweight.
    suite = stats.biweight_coefficients(x, d, s, stats.huber_coefficients(x, d))
    groups = np.array([kernel_of(k) for k in kernels])
    out = x @ suite
    for g in sorted(set(groups.tolist())):
        mine, rest = groups == g, groups != g
        if np.sum(rest) >= min_cases:
            out[mine] = x[mine] @ stats.biweight_coefficients(x[rest], d[rest], s[rest], suite)
        elif np.sum(rest) >= min_others:
            level = np.ones((int(np.sum(rest)), 1))
            start = np.array([float(np.mean(x[rest] @ suite))])  # from the suite's mode, as the full refit
            out[mine] = stats.biweight_coefficients(level, d[rest], s[rest], start)[0]
    return out
