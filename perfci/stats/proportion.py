"""A proportion of a few trials with its interval: how often the nightly canary's detector was right.

The canary counts nights: a false alarm of compare on an unchanged twin, a find
of a planted slowdown. After 3 nights 0 of 3 is the honest answer, and the
textbook (Wald) interval ``p +- z sqrt(p(1-p)/n)`` says [0%, 0%] there. The
**Wilson score interval** inverts the score test instead: it never collapses
at 0 or n hits, stays inside [0, 1], and covers close to its level from a few
trials on (Brown, Cai and DasGupta 2001 recommend it for small n). scipy
computes it.
"""
from __future__ import annotations


def wilson(hits: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval of hits/n (scipy's), sound at 0 and n hits and at a few trials; (None, None) at n = 0."""
    if n <= 0:
        return None, None
    from scipy.stats import binomtest  # scipy: heavy, and only the canary's rates need it

    ci = binomtest(hits, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)
