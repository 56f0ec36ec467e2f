"""Robust location, spread and regression: estimates that a few cases or repeats that really moved cannot drag.

A suite's cases share one night's conditions (clocks, launches, a neighbour),
and a handful of them carry a real change; every estimate here must see the
many and ignore the few. So medians and the median absolute deviation rather
than means and standard deviations, and iteratively reweighted least squares
(IRLS) with weights that fall off with the residual:

* **The MAD spread** (:func:`mad_spread`, :func:`robust_spread`): 1.4826 x the
  median absolute deviation is the standard deviation under normal noise, and
  one repeat far off moves it by one rank, not by its distance.
* **The common mode** (:func:`common_mode`): compare's suite-wide shift, medians
  split into compute- and memory-bound cases.
* **The shift regression** (:func:`shift_design`, :func:`huber_coefficients`,
  :func:`biweight_coefficients`): a run's shift at each case as
  ``a (+ c*exponent) (+ b/us)``. Huber's weight (from the median, scale the
  residuals' MAD) keeps the cases that moved in the fit at a bounded weight;
  Tukey's biweight (residuals in each case's own spread) gives a case that
  moved by itself no weight at all, which the pooled compare needs so a
  kernel's own change is not taken as the suite's (perfci/compare/shift.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

MAD_TO_SD = 1.4826  # 1 / the normal's 75% quantile: the MAD of normal noise times this is its sd
HUBER_C = 1.345  # Huber's constant: 95% efficiency under normal noise
BIWEIGHT_C = 4.685  # Tukey's constant: 95% efficiency under normal noise


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


def mad_spread(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation of VALUES from their median: their standard deviation under
    normal noise, which a few values far off cannot move (one value moves it by at most one rank)."""
    x = np.asarray(values, dtype=float)
    return MAD_TO_SD * median(np.abs(x - median(x)))


def robust_spread(log_samples: Sequence[float]) -> float:
    """:func:`mad_spread` of a sample of log times (0 below two values): a standard deviation that one wild
    repeat cannot move."""
    x = np.asarray(log_samples, dtype=float)
    if x.size < 2:
        return 0.0
    return mad_spread(x)


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


# --------------------------------------------------------------------------- the shift regression


def shift_design(exps: Sequence[float], log_us: Sequence[float], min_cases: int, short_us: float) -> np.ndarray:
    """The columns a run's shift is fitted on: 1 (+ exponent) (+ 1/us, scaled to 1).

    The exponent (a case's clock exponent) when the suite has >= 4 compute-bound
    (>= 0.9) and >= 4 memory-bound (<= 0.1) cases: a clock swing moves only the
    former. 1/us when ``min_cases`` cases run under SHORT_US and durations span
    a factor 3: a run's launches move short kernels by a roughly fixed *time*,
    which a single fraction would leave in them as their own noise.
    """
    e = np.asarray(exps, dtype=float)
    inv = np.exp(-np.asarray(log_us, dtype=float))
    cols = [np.ones(e.size)]
    if np.sum(e >= 0.9) >= 4 and np.sum(e <= 0.1) >= 4:
        cols.append(e)
    if np.sum(inv >= 1.0 / short_us) >= min_cases and inv.max() >= 3.0 * inv.min():
        cols.append(inv / inv.max())
    return np.column_stack(cols)


def huber_coefficients(x: np.ndarray, y: np.ndarray, c: float = HUBER_C, rounds: int = 50) -> np.ndarray:
    """Huber regression of Y on the columns of X (IRLS from the median of Y; the first column the intercept).

    Residuals are scaled by their own MAD spread each round; a case past ``c``
    of it gets weight ``c*sd/|residual|``, so a few cases that really moved
    cannot pull the fit far, yet every case keeps some say (the fit is unique
    and starts anywhere).
    """
    beta = np.zeros(x.shape[1])
    beta[0] = float(np.median(y))
    for _ in range(rounds):
        r = y - x @ beta
        sd = mad_spread(r)
        if sd <= 1e-12:
            break
        w = np.minimum(1.0, c * sd / np.maximum(np.abs(r), 1e-300))
        sw = np.sqrt(w)
        new = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)[0]
        done = float(np.max(np.abs(new - beta))) < 1e-10
        beta = new
        if done:
            break
    return beta


def huber_fit(x: np.ndarray, y: np.ndarray, c: float = HUBER_C, rounds: int = 50) -> np.ndarray:
    """The fitted values of :func:`huber_coefficients`."""
    return x @ huber_coefficients(x, y, c, rounds)


def biweight_coefficients(x: np.ndarray, y: np.ndarray, scale: np.ndarray, start: np.ndarray,
                          rounds: int = 50) -> np.ndarray:
    """Tukey biweight regression of Y on X from START, residuals in units of SCALE (IRLS).

    A case whose residual is past ``BIWEIGHT_C`` of its own scale gets no
    weight: unlike Huber's, a case that moved by itself stops pulling the fit
    at all. The fit has local minima, so it starts from a sound one (a Huber
    fit). Falls back to START when fewer cases than coefficients keep a weight.
    """
    beta = np.asarray(start, dtype=float)
    for _ in range(rounds):
        z = (y - x @ beta) / scale
        w = np.where(np.abs(z) < BIWEIGHT_C, (1.0 - (z / BIWEIGHT_C) ** 2) ** 2, 0.0) / scale ** 2
        if np.sum(w > 0) < x.shape[1] + 1:
            return np.asarray(start, dtype=float)
        sw = np.sqrt(w)
        new = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)[0]
        done = float(np.max(np.abs(new - beta))) < 1e-10
        beta = new
        if done:
            break
    return beta
