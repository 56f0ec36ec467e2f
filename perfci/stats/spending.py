"""Alpha spending: what share of a test's error each look of a sequential decision may spend, and where the looks are.

A decision that looks at its data several times and stops at the first look
that answers has one chance of being wrong at every look. Giving look ``k`` a
share of alpha, shares that sum to at most 1 over every look that can come,
keeps the chance that any look's interval missed within alpha, however the
decision stops (Bonferroni over the looks, which needs no model of how the
looks' statistics correlate). Two shares, one for each kind of decision:

* **open-ended** (:func:`open_share`): ``1 / (k (k + 1))``, which sums to 1
  over k = 1, 2, ... (it telescopes: ``1/k - 1/(k + 1)``), so a decision with
  no known last look may go on as long as its time allows. ``perfci bisect``'s
  decisions, and ``perfci confirm`` without an end.
* **planned** (:func:`planned_share`): with a last look ``K`` known before the
  first is spent, look ``k`` gets ``(1/k) / (1 + 1/2 + ... + 1/K)``. The early
  looks, where an easy case is decided, still get more, but the late ones are
  not starved as they are by ``1/(k (k + 1))`` (look 13 of 14 gets 1/42 of
  alpha instead of 1/182). ``perfci confirm`` once its budget sets the end.

The looks come at round counts growing geometrically (:func:`geometric_looks`):
each ``growth`` times the last, at least one more, so the k-th look's narrower
share is paid for with more rounds (the interval narrows as ``1/sqrt(rounds)``),
and a long decision is not charged a look every round.
"""
from __future__ import annotations

import math
from typing import Iterator


def open_share(k: int, of: float = 1.0) -> float:
    """``of / (k (k + 1))``: look ``k``'s part (1-based) of ``of`` when the looks have no end; sums to ``of``."""
    return of / (k * (k + 1))


def planned_share(k: int, looks: int) -> float:
    """``(1/k) / (1 + 1/2 + ... + 1/looks)``: look ``k``'s share of alpha (1-based) with ``looks`` looks in all;
    sums to 1 over them. A ``k`` past the last look takes the last look's share."""
    return (1.0 / min(k, looks)) / sum(1.0 / i for i in range(1, looks + 1))


def geometric_looks(first: int, growth: float, end: int | None = None) -> Iterator[int]:
    """The round counts of the looks: ``first``, then each ``max(n + 1, ceil(n * growth))``.

    With an ``end``, the looks before it and then ``end`` itself (a last look where
    the rounds stop, whatever the growth); without, endless.
    """
    n = first
    while end is None or n < end:
        yield n
        n = max(n + 1, math.ceil(n * growth))
    if end is not None:
        yield end
