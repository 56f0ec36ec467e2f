"""Which suites of a store stopped reporting: no night for more than N days (pure).

A runner that goes down raises nothing by itself: no night, no verdict, no
issue. ``perfci history stale`` says, per store (one device each) and suite,
when its last night was and whether that is longer ago than N days
(``[tool.perfci] stale_days``, default 2).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Iterable, Sequence

from perfci.escape import md_code, md_text, term_text


@dataclass(frozen=True)
class SuiteAge:
    store: str
    device: str
    suite: str
    last: str  # ISO time of its newest night
    last_sha: str
    age_days: float
    stale: bool


def suite_ages(store: str, device: str, nights: Iterable[tuple[str, datetime, str, str]], now: datetime,
               days: int, skip_runs: Iterable[str] = ()) -> list[SuiteAge]:
    """Each suite's newest night among NIGHTS (run id, when, suite, sha), and whether it is older than DAYS."""
    skip = set(skip_runs)
    newest: dict[str, tuple[datetime, str]] = {}
    for run_id, when, suite, sha in nights:
        if run_id in skip:
            continue
        if suite not in newest or when >= newest[suite][0]:
            newest[suite] = (when, sha)
    out = []
    for suite, (when, sha) in sorted(newest.items()):
        age = (now - when).total_seconds() / 86400.0
        out.append(SuiteAge(store, device, suite, when.isoformat(timespec="seconds"), sha, round(age, 2), age > days))
    return out


def render_table(ages: Sequence[SuiteAge], days: int) -> str:
    if not ages:
        return "no night in any store yet\n"
    lines = [f"{'device':<24} {'suite':<16} {'last night':<26} {'age':>8}  state (stale after {days} day(s))"]
    for a in ages:
        lines.append(f"{a.device[:24]:<24} {a.suite[:16]:<16} {a.last:<26} {a.age_days:>7.1f}d  "
                     + ("STALE: no night since" if a.stale else "ok") + f"  ({a.store})")
    return "\n".join(term_text(line) for line in lines) + "\n"


def render_markdown(ages: Sequence[SuiteAge], days: int) -> str:
    """The table for a job summary (``>> $GITHUB_STEP_SUMMARY``): device names and store paths are the
    stores' text, suites and commits the runs', so each cell is escaped (perfci.escape)."""
    if not ages:
        return "no night in any store yet\n"
    lines = [f"| device | suite | last night | its commit | days since | state (stale after {days} day(s)) | store |",
             "|---|---|---|---|---:|---|---|"]
    for a in ages:
        lines.append(f"| {md_text(a.device)} | {md_code(a.suite, table=True)} | {md_text(a.last)} | "
                     f"{md_code(a.last_sha[:12] or '-', table=True)} | {a.age_days:.1f} | "
                     f"{'**STALE**: no night since' if a.stale else 'ok'} | {md_code(a.store, table=True)} |")
    return "\n".join(lines) + "\n"


def render_json(ages: Sequence[SuiteAge], days: int) -> str:
    return json.dumps({"format": "perfci-history-stale", "schema": 1, "stale_days": days,
                       "suites": [asdict(a) for a in ages], "stale": [asdict(a) for a in ages if a.stale]},
                      indent=2) + "\n"
