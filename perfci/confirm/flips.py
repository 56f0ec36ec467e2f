"""A confirm session's config flips: a case whose two sides launched different configs of one source. Pure.

Each side of a ``--suite`` session autotunes once and keeps its choice for the
session (:mod:`perfci.measure.sides`), so the rounds measure code, not the
autotuner's race. But when two configs are close, BASE's process may have
chosen one and CUR's the other: every round then compares the two choices, and
a session of identical code reads as a steady change (on the H200, an autotuned
GEMM of a docs-only commit read `improved` -1.7% and, on another night,
`regressed` +1.8% after 12 rounds). The sides' first runs record what they
launched; when the kernels' source is the same and the config is not, the case
is ``config-flip`` (:func:`perfci.compare.flips.find_flip`, the rule compare uses),
neither regressed nor unchanged, with both configs and their times.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from perfci.compare.flips import find_flip, flip_reason
from perfci.confirm.analysis import Confirmation, verdict_counts
from perfci.model import ResultRow
from perfci.verdict import TESTED, Verdict

Key = tuple[str, ...]


def with_config_flips(judgement: Confirmation, rows: Mapping[str, Mapping[Key, ResultRow]]) -> Confirmation:
    """``judgement`` with each judged case whose sides' first runs are a flip made ``config-flip``."""
    base, cur = rows.get("base", {}), rows.get("cur", {})
    cases = []
    for case in judgement.cases:
        flip = None
        if case.verdict in TESTED and case.key in base and case.key in cur:
            flip = find_flip((base[case.key],), (cur[case.key],), Verdict(case.verdict))
        cases.append(case if flip is None else replace(case, verdict=Verdict.CONFIG_FLIP, reason=flip_reason(flip)))
    if all(a is b for a, b in zip(cases, judgement.cases)):
        return judgement
    return replace(judgement, cases=tuple(cases), counts=verdict_counts(cases))
