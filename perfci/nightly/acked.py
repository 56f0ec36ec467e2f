"""Whether an acknowledged case moved again: tonight against the nights since it was acknowledged.

An ``acknowledged`` record says the team knows the case regressed and is on
it. The nightly still judges and confirms the case against its old pooled
baseline, so it reads regressed every night until the fix lands; that is not
news. News is the case moving again. So each acknowledged case is judged a
second time, against its own nights from the acknowledged commit on: its pooled
baseline restarts there, as an ``expected`` record's does
(:mod:`perfci.compare.restart`, through :func:`perfci.compare.pooled.build_baseline`):

* the restart is the first stored night at the record's commit; tonight, when
  tonight is at it; else the first night measured at or after the record's
  time (a commit no stored night was measured at);
* two or more nights since: the pooled test against them;
* one night since: compare's one-run test against that night (only a change
  beyond the profile's one-run floor is ``regressed``);
* none (tonight is the new level's first): nothing to judge against: not moved.

A case *moved* when that judgement is ``regressed`` or ``improved``.
verdict.json lists them (``acknowledged_moved``); the nightly workflow comments
on the open issue for a night whose only confirmed regressions are of
acknowledged cases only when one moved.

:func:`moved_since_ack` is pure (tables in, words out); :func:`judge_acknowledged`
reads the store.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable, Mapping, Sequence

from perfci.compare.comparison import CompareOptions
from perfci.compare.noise import NoiseProfile, profile_for_arch
from perfci.compare.pooled import PooledOptions, build_baseline, judge
from perfci.errors import PerfciError, internal_error_line
from perfci.compare.store import others_than_tonight
from perfci.history.model import History, parse_timestamp
from perfci.history.triage import TriageRecord, TriageState, restart_index
from perfci.model import ResultTable, column_mode
from perfci.nightly.triaged import NOT_JUDGED, CaseTriage, Key


@dataclass(frozen=True)
class StoredNight:
    """What the restart needs of one stored night (oldest first): its suite, table, commit and time."""

    suite: str
    table: ResultTable
    sha: str
    when: datetime


def restart_at(t: CaseTriage, nights: Sequence[StoredNight], cur_sha: str) -> int:
    """The index of the first of NIGHTS that counts as since the acknowledgement (``len(nights)``: none does)."""
    record = TriageRecord(t.record or " ".join(t.key), t.sha, TriageState.ACKNOWLEDGED, t.who, t.when, t.reason)
    at = restart_index(record, [n.sha for n in nights], cur_sha)
    if at is not None:
        return at
    acked = parse_timestamp(t.when, f"triage record of {' '.join(t.key)}", "'when'")  # a naive time is UTC, as the store's
    return next((i for i, n in enumerate(nights) if n.when >= acked), len(nights))


def moved_since_ack(triage: Sequence[CaseTriage], nights: Sequence[StoredNight], cur: ResultTable,
                    cur_suite: str, cur_sha: str, arch: str, profile: NoiseProfile,
                    pool_nights: int) -> tuple[CaseTriage, ...]:
    """TRIAGE with each acknowledged case's word against its nights since the acknowledgement filled in."""
    acked = [t for t in triage if t.state == TriageState.ACKNOWLEDGED.value]
    if not acked:
        return tuple(triage)
    restarts: Mapping[Key, tuple[int, str]] = {
        t.key: (restart_at(t, nights, cur_sha), f"acknowledged at {t.sha[:12]} by {t.who}") for t in acked}
    baseline = build_baseline([(n.suite, n.table) for n in nights], profile, PooledOptions(nights=pool_nights),
                              arch, restarts)
    judged = {c.key: c for c in judge(baseline, cur, cur_suite, arch, profile, CompareOptions(),
                                      PooledOptions(nights=pool_nights)).cases}
    out = []
    for t in triage:
        c = judged.get(t.key) if t.state == TriageState.ACKNOWLEDGED.value else None
        out.append(t if c is None else replace(t, since_ack=str(c.verdict), since_ack_ratio=c.ratio,
                                               since_ack_why=c.reason))
    return tuple(out)


def not_judged(triage: Sequence[CaseTriage], why: str) -> tuple[CaseTriage, ...]:
    """Every acknowledged case marked :data:`NOT_JUDGED`, with why."""
    return tuple(replace(t, since_ack=NOT_JUDGED, since_ack_why=why)
                 if t.state == TriageState.ACKNOWLEDGED.value else t for t in triage)


# --------------------------------------------------------------------------- the IO edge


def judge_acknowledged(history: History, table: ResultTable, cells: Sequence[Mapping[str, str]],
                       triage: Sequence[CaseTriage], profile: NoiseProfile | None,
                       pool_nights: int) -> tuple[CaseTriage, ...]:
    """:func:`moved_since_ack` over the loaded store's nights (tonight's own run left out) and tonight's
    table, read once by the night."""
    if not any(t.state == TriageState.ACKNOWLEDGED.value for t in triage):
        return tuple(triage)
    nights = [StoredNight(r.info.suite, r.table, r.info.git_sha, r.info.when)
              for r in others_than_tonight(history, table, cells)]
    arch = history.manifest.arch
    return moved_since_ack(triage, nights, table, column_mode(cells, "suite"), column_mode(cells, "git_sha"), arch,
                           profile or profile_for_arch(arch), pool_nights)


def judged_or_said(load_history: Callable[[], History], table: ResultTable,
                   cells: Sequence[Mapping[str, str]], triage: Sequence[CaseTriage], profile: NoiseProfile | None,
                   pool_nights: int) -> tuple[tuple[CaseTriage, ...], tuple[str, ...]]:
    """:func:`judge_acknowledged`, or, when it fails, every acknowledged case :data:`NOT_JUDGED` and a warning.

    A report step: it never costs the night its verdict, and a failure reads as
    moved, so the workflow still comments rather than going quiet.
    """
    try:
        if not any(t.state == TriageState.ACKNOWLEDGED.value for t in triage):
            return tuple(triage), ()
        return judge_acknowledged(load_history(), table, cells, triage, profile, pool_nights), ()
    except Exception as err:  # noqa: BLE001 - see above
        why = err.message if isinstance(err, PerfciError) else internal_error_line(err)
        return not_judged(triage, why), (f"acknowledged cases not judged against their nights since: {why}",)
