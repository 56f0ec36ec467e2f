"""Cases whose pooled baseline restarted at an accepted change, while they have fewer than two nights since.

An ``expected`` triage record (:mod:`perfci.history.triage`) at commit S cuts
the nights before S out of its cases' pools (:func:`perfci.compare.pooled.build_baseline`).
Until two nights from S on exist, a case is judged as the nightly judges
against a store's one night: compare's one-run test against that night, with
``unchanged`` only within +-1% (the pooled compare's least margin), the rest
inside the floor ``inconclusive``, for confirm. With no night since S yet,
tonight is the new level's first: nothing to judge it against, and it is not
judged against the level the team left behind.

Pure: rows in, compare's :class:`~perfci.compare.comparison.CaseComparison` out.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from perfci.compare.comparison import CaseComparison, CompareOptions
from perfci.compare.noise import NoiseProfile
from perfci.compare.verdicts import compare
from perfci.model import ResultRow, ResultTable
from perfci.verdict import Verdict

ONE_NIGHT_UNCHANGED_WITHIN_PCT = 1.0  # as the nightly's compare against a store's one night


def judge_since_restart(rows: Sequence[tuple[ResultRow, object]], why: Mapping[tuple[str, str, str], str],
                        cur_path: str, arch: str, profile: NoiseProfile,
                        options: CompareOptions) -> list[CaseComparison]:
    """ROWS: (tonight's ok row, its pool since the restart: None or fewer than two nights)."""
    out: list[CaseComparison] = []
    one = [(row, pool) for row, pool in rows if pool is not None]
    for row, pool in rows:
        if pool is None:
            out.append(CaseComparison(kernel=row.kernel, shape=row.shape, dtype=row.dtype, verdict=Verdict.ADDED,
                                      reason=f"the first night since its baseline restarted ({why[row.key]}): "
                                             f"nothing to judge it against yet",
                                      cur_us=row.median_us, weight=row.weight, cur_status=row.status))
    if not one:
        return out
    within = ONE_NIGHT_UNCHANGED_WITHIN_PCT if options.unchanged_within_pct is None \
        else min(options.unchanged_within_pct, ONE_NIGHT_UNCHANGED_WITHIN_PCT)
    opts = replace(options, unchanged_within_pct=within, arch=options.arch or arch or None)
    base = ResultTable("the night since the restart", "perfci", tuple(pool.row for _, pool in one))  # type: ignore[attr-defined]
    cur = ResultTable(cur_path, "perfci", tuple(row for row, _ in one))
    judged = compare(base, cur, profile, opts)
    for c in judged.cases:
        out.append(replace(c, reason=f"{c.reason}; against its one night since its baseline restarted "
                                     f"({why[c.key]})"))
    return out


def notes(restarted: Mapping[tuple[str, str, str], str], cur: ResultTable) -> list[str]:
    """One line per distinct restart that tonight's cases are under."""
    counts: dict[str, int] = {}
    for row in cur.rows:
        if row.key in restarted:
            counts[restarted[row.key]] = counts.get(restarted[row.key], 0) + 1
    return [f"{n} case(s) pooled only from the nights since their baseline restarted ({why}); the nights "
            f"before are not pooled" for why, n in sorted(counts.items())]
